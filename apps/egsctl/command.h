// What every egsctl command gets (Context) and how commands are declared (Command). Internal to
// egsctl_lib: egsctl.cc dispatches, the *_commands.cc files implement.
//
// Thread-safety: one Context per run, used by one thread.
#pragma once

#include <iosfwd>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/status.h"
#include "egsctl/api_client.h"
#include "egsctl/args.h"
#include "egsctl/config.h"
#include "egsctl/printer.h"
#include "egsctl/resources.h"

namespace egs::egsctl {

struct Context {
  Context(std::ostream& o, std::ostream& e, std::istream& i, common::Clock& c,
          const Environment& en)
      : out(o), err(e), in(i), clock(c), env(en) {}

  std::ostream& out;
  std::ostream& err;
  std::istream& in;
  common::Clock& clock;
  const Environment& env;

  ParsedArgs args;                       // every flag
  std::vector<std::string> positionals;  // after the command words
  std::string config_path;
  ConfigFile config;
  Settings settings;
  OutputFormat format = OutputFormat::kTable;
  bool output_given = false;
  bool all_namespaces = false;
  bool namespace_given = false;
  std::optional<common::Duration> timeout;

  // The API client, created on first use. InvalidArgument for a malformed server URL.
  common::Result<ApiClient*> Client();
  // The server's time now, as far as its answers so far tell (ApiClient::server_clock_offset);
  // `clock`'s before any: what ages of the server's timestamps are counted from.
  common::Time ServerNow() const;

  // Prints a failure now (for commands that go on with their next object) and remembers the exit
  // code of the first one.
  void Report(const common::Status& s);
  int reported_exit = 0;

 private:
  std::unique_ptr<ApiClient> client_;
};

struct Command {
  std::string name;   // "get", or "token create" for a subcommand
  std::string usage;  // "egsctl get KIND [NAME...] [flags]"
  std::string summary;
  std::vector<FlagSpec> flags;
  common::Status (*run)(Context& ctx);
  std::string details = "";  // more paragraphs for "egsctl COMMAND --help"; "" for none
};

// Writes a status the way egsctl prints errors: the server's and connection errors verbatim,
// egsctl's own as "error: ...".
void PrintError(std::ostream& err, const common::Status& s);

// Commands by file.
std::vector<Command> ReadCommands();    // get, describe, watch
std::vector<Command> WriteCommands();   // apply, create, delete
std::vector<Command> ActionCommands();  // quote, approve, reject, release, extend, explain, ...
std::vector<Command> AdminCommands();   // token *, config *, version

// Helpers shared by commands.
// The positional at `i`, or InvalidArgument "missing NAME" (`what` names it).
common::Result<std::string> Positional(const Context& ctx, std::size_t i, const char* what);
// InvalidArgument unless exactly `n` positionals were given (`what` names them).
common::Status ExpectPositionals(const Context& ctx, std::size_t n, const char* what);
// The namespace a namespaced call uses: -n, else the configured one.
const std::string& Namespace(const Context& ctx);
// One object of the -f sources and where it came from: "pods.yaml, object 2".
struct SourcedObject {
  nlohmann::json object;
  std::string where;
};
// Reads every document of the -f sources (files, directories, or "-" for stdin), expanding Lists.
// InvalidArgument for a missing or unreadable path or malformed content.
common::Result<std::vector<SourcedObject>> ReadManifests(Context& ctx);

}  // namespace egs::egsctl
