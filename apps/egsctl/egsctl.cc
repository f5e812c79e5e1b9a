#include "egsctl/egsctl.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "egsctl/cli_time.h"
#include "egsctl/command.h"
#include "egsctl/yaml_json.h"

namespace egs::egsctl {
namespace {

std::vector<FlagSpec> GlobalFlags() {
  return {
      {"server", 0, true, "API server URL (default: config, else http://127.0.0.1:8080)"},
      {"token", 0, true, "bearer token"},
      {"certificate-authority", 0, true, "https: PEM file of CA certificates to trust"},
      {"insecure-skip-tls-verify", 0, false, "https: do not verify the server's certificate"},
      {"config", 0, true, "config file (default $EGSCTL_CONFIG or ~/.egs/config.yaml)"},
      {"namespace", 'n', true, "namespace (workspace) for namespaced kinds"},
      {"all-namespaces", 'A', false, "list across every namespace"},
      {"output", 'o', true, "table|wide|json|yaml|name"},
      {"timeout", 0, true, "timeout of each call, or how long a watch runs (e.g. 30s, 5m)"},
      {"help", 'h', false, "show help"},
  };
}

const std::vector<Command>& AllCommands() {
  static const std::vector<Command> kCommands = [] {
    std::vector<Command> all;
    for (auto part : {ReadCommands(), WriteCommands(), ActionCommands(), AdminCommands()}) {
      all.insert(all.end(), part.begin(), part.end());
    }
    return all;
  }();
  return kCommands;
}

std::string FlagLine(const FlagSpec& f) {
  std::string names = f.short_name ? fmt::format("-{}, --{}", f.short_name, f.name)
                                   : fmt::format("    --{}", f.name);
  if (f.takes_value) names += " VALUE";
  return fmt::format("  {:<28} {}\n", names, f.help);
}

std::string HelpText() {
  std::string s =
      "egsctl controls EGS, the GPU provisioning control plane, through egsd's REST API.\n\n"
      "Commands:\n";
  for (const Command& c : AllCommands()) s += fmt::format("  {:<22} {}\n", c.name, c.summary);
  s += "\nResource types (NAME / SHORT):\n";
  for (const Resource& r : AllResources()) {
    std::string shorts;
    for (const auto& n : r.short_names) shorts += (shorts.empty() ? "" : ",") + n;
    s += fmt::format("  {:<22} {:<8} {}\n", r.plural, shorts.empty() ? "-" : shorts,
                     r.namespaced ? "namespaced" : "cluster-scoped");
  }
  s += "\nGlobal flags:\n";
  for (const FlagSpec& f : GlobalFlags()) s += FlagLine(f);
  s += "\nSettings precedence: flag > environment (EGSCTL_SERVER, EGSCTL_TOKEN, EGSCTL_NAMESPACE)\n"
       "> config file ({server, token, namespace}) > defaults.\n"
       "\nExit codes:\n"
       "  0  success\n"
       "  1  error from the server, or not found\n"
       "  2  usage error (unknown command or flag, missing argument, bad file); nothing is sent\n"
       "  3  cannot connect to the server, or timeout\n"
       "  4  unauthorized or forbidden\n"
       "\nUse \"egsctl COMMAND --help\" for a command's flags.\n";
  return s;
}

std::string CommandHelp(const Command& c) {
  std::string s = fmt::format("{}\n\nUsage: {}\n", c.summary, c.usage);
  if (!c.details.empty()) s += "\n" + c.details;
  if (!c.flags.empty()) {
    s += "\nFlags:\n";
    for (const FlagSpec& f : c.flags) s += FlagLine(f);
  }
  s += "\nGlobal flags:\n";
  for (const FlagSpec& f : GlobalFlags()) s += FlagLine(f);
  return s;
}

// The command named by the leading positionals ("token create" before "token").
const Command* FindCommand(const std::vector<std::string>& words, std::size_t& used) {
  for (std::size_t n : {2, 1}) {
    if (words.size() < n) continue;
    std::string name = words[0];
    if (n == 2) name += " " + words[1];
    for (const Command& c : AllCommands()) {
      if (c.name == name) {
        used = n;
        return &c;
      }
    }
  }
  return nullptr;
}

int UsageError(std::ostream& err, const common::Status& s, const std::string& hint) {
  err << "error: " << s.message() << "\n" << hint << "\n";
  return kExitUsage;
}

// Fills the context's settings from the global flags, environment and config file. A config file
// named by --config must exist, except for `config set-*`, which creates it.
common::Status Configure(Context& ctx, const Command& command) {
  const ParsedArgs& a = ctx.args;
  // An empty --server, --token or --namespace would silently fall back to the next source.
  for (const char* flag : {"server", "token", "namespace", "config"}) {
    if (auto v = a.Get(flag); v && v->empty()) {
      return common::InvalidArgumentError(fmt::format("--{}: empty value", flag));
    }
  }
  ctx.config_path = ConfigPath(a.Get("config"), ctx.env);
  const bool must_exist = a.Has("config") && !command.name.starts_with("config set-");
  EGS_ASSIGN_OR_RETURN(ctx.config, LoadConfigFile(ctx.config_path, must_exist));
  ctx.settings =
      ResolveSettings(a.Get("server"), a.Get("token"), a.Get("namespace"), ctx.env, ctx.config);
  ctx.namespace_given = a.Has("namespace");
  ctx.all_namespaces = a.GetBool("all-namespaces");
  if (auto o = a.Get("output")) {
    EGS_ASSIGN_OR_RETURN(ctx.format, ParseOutputFormat(*o));
    ctx.output_given = true;
  }
  if (auto t = a.Get("timeout")) {
    auto parsed = ParseDuration(*t);
    if (!parsed.ok()) return parsed.error().WithContext("--timeout");
    const common::Duration d = *parsed;
    if (d.count() <= 0) return common::InvalidArgumentError("--timeout must be positive");
    ctx.timeout = d;
  }
  return common::OkStatus();
}

}  // namespace

int ExitCodeFor(const common::Status& s) {
  switch (s.code()) {
    case common::StatusCode::kOk:
      return kExitOk;
    case common::StatusCode::kInvalidArgument:
      return kExitUsage;
    case common::StatusCode::kUnavailable:
    case common::StatusCode::kDeadlineExceeded:
      return kExitUnavailable;
    case common::StatusCode::kUnauthenticated:
    case common::StatusCode::kPermissionDenied:
      return kExitUnauthorized;
    default:
      return kExitError;
  }
}

void PrintError(std::ostream& err, const common::Status& s) {
  const std::string& m = s.message();
  bool verbatim = m.rfind("Error from server", 0) == 0 || m.rfind("Unable to", 0) == 0;
  err << (verbatim ? "" : "error: ") << m << "\n";
}

common::Result<ApiClient*> Context::Client() {
  if (!client_) {
    ClientOptions options;
    options.server = settings.server;
    options.token = settings.token;
    options.ca_file = args.Get("certificate-authority").value_or(config.certificate_authority);
    options.insecure_skip_tls_verify =
        args.GetBool("insecure-skip-tls-verify") || config.insecure_skip_tls_verify;
    if (timeout) options.timeout = *timeout;
    EGS_ASSIGN_OR_RETURN(client_, ApiClient::Create(std::move(options), clock));
  }
  return client_.get();
}

common::Time Context::ServerNow() const {
  const common::Time now = clock.Now();
  if (!client_) return now;
  return now + client_->server_clock_offset().value_or(common::Duration(0));
}

void Context::Report(const common::Status& s) {
  if (s.ok()) return;
  PrintError(err, s);
  if (reported_exit == 0) reported_exit = ExitCodeFor(s);
}

common::Result<std::string> Positional(const Context& ctx, std::size_t i, const char* what) {
  if (i >= ctx.positionals.size() || ctx.positionals[i].empty()) {
    return common::InvalidArgumentError(fmt::format("missing {}", what));
  }
  return ctx.positionals[i];
}

common::Status ExpectPositionals(const Context& ctx, std::size_t n, const char* what) {
  if (ctx.positionals.size() < n)
    return common::InvalidArgumentError(fmt::format("missing {}", what));
  if (ctx.positionals.size() > n) {
    return common::InvalidArgumentError(
        fmt::format("unexpected argument \"{}\"", ctx.positionals[n]));
  }
  return common::OkStatus();
}

const std::string& Namespace(const Context& ctx) { return ctx.settings.ns; }

common::Result<std::vector<SourcedObject>> ReadManifests(Context& ctx) {
  std::vector<std::string> sources = ctx.args.GetList("filename");
  if (sources.empty())
    return common::InvalidArgumentError("must specify -f FILE (or -f - for stdin)");
  std::vector<SourcedObject> docs;
  auto add = [&](const std::string& text, const std::string& name) -> common::Status {
    EGS_ASSIGN_OR_RETURN(auto parsed, ParseDocuments(text, name));
    std::size_t index = 0;
    for (auto& d : ExpandLists(std::move(parsed))) {
      docs.push_back({std::move(d), fmt::format("{}, object {}", name, ++index)});
    }
    return common::OkStatus();
  };
  for (const std::string& src : sources) {
    if (src == "-") {
      std::stringstream text;
      text << ctx.in.rdbuf();
      EGS_RETURN_IF_ERROR(add(text.str(), "<stdin>"));
      continue;
    }
    std::error_code ec;
    std::vector<std::string> files;
    if (std::filesystem::is_directory(src, ec)) {
      for (const auto& e : std::filesystem::directory_iterator(src, ec)) {
        auto ext = e.path().extension().string();
        if (ext == ".yaml" || ext == ".yml" || ext == ".json") files.push_back(e.path().string());
      }
      std::sort(files.begin(), files.end());
    } else if (std::filesystem::exists(src, ec)) {
      files.push_back(src);
    } else {
      return common::InvalidArgumentError(fmt::format("the path \"{}\" does not exist", src));
    }
    for (const std::string& f : files) {
      std::ifstream in(f, std::ios::binary);
      if (!in) return common::InvalidArgumentError(fmt::format("cannot read \"{}\"", f));
      std::stringstream text;
      text << in.rdbuf();
      EGS_RETURN_IF_ERROR(add(text.str(), f));
    }
  }
  if (docs.empty()) return common::InvalidArgumentError("no objects passed to the command");
  return docs;
}

int RunEgsctl(std::vector<std::string> args, std::ostream& out, std::ostream& err,
              common::Clock& clock, const Environment& env, std::istream& in) {
  const std::string kGlobalHint = "See 'egsctl --help' for usage.";
  // 1. Find the command from the words before its own flags.
  std::vector<FlagSpec> global = GlobalFlags();
  std::vector<std::string> words = LeadingPositionals(args, global);
  std::size_t used = 0;
  const Command* command = FindCommand(words, used);
  if (command == nullptr) {
    if (words.empty() || words[0] == "help") {
      auto parsed = ParseArgs(args, global);
      bool help = words.empty() ? parsed.ok() && parsed->GetBool("help") : true;
      if (help) {
        out << HelpText();
        return kExitOk;
      }
      if (!parsed.ok()) return UsageError(err, parsed.error(), kGlobalHint);
      return UsageError(err, common::InvalidArgumentError("missing command"), kGlobalHint);
    }
    std::string name = words[0];
    if (name == "token" || name == "config") {
      // A command group: name its subcommands.
      std::string subcommands;
      for (const Command& c : AllCommands()) {
        if (c.name.starts_with(name + " ")) {
          subcommands += fmt::format("\n  {:<22} {}", c.name, c.summary);
        }
      }
      const std::string what = words.size() > 1
                                   ? fmt::format("unknown command \"{} {}\"", name, words[1])
                                   : fmt::format("\"{}\" needs a subcommand", name);
      return UsageError(
          err, common::InvalidArgumentError(what),
          fmt::format("Usage: egsctl {} SUBCOMMAND [flags], one of:{}", name, subcommands));
    }
    return UsageError(err,
                      common::InvalidArgumentError(fmt::format("unknown command \"{}\"", name)),
                      kGlobalHint);
  }
  // 2. Parse every flag against the global and command flags.
  std::vector<FlagSpec> specs = global;
  specs.insert(specs.end(), command->flags.begin(), command->flags.end());
  std::string hint = fmt::format("Usage: {}", command->usage);
  auto parsed = ParseArgs(args, specs);
  if (!parsed.ok()) return UsageError(err, parsed.error(), hint);
  if (parsed->GetBool("help")) {
    out << CommandHelp(*command);
    return kExitOk;
  }
  Context ctx(out, err, in, clock, env);
  ctx.args = std::move(*parsed);
  ctx.positionals.assign(ctx.args.positionals.begin() + static_cast<long>(used),
                         ctx.args.positionals.end());
  if (auto s = Configure(ctx, *command); !s.ok()) return UsageError(err, s, hint);
  // 3. Run.
  common::Status s = command->run(ctx);
  if (!s.ok()) {
    if (s.code() == common::StatusCode::kInvalidArgument) return UsageError(err, s, hint);
    PrintError(err, s);
    return ExitCodeFor(s);
  }
  return ctx.reported_exit;
}

int RunEgsctl(std::vector<std::string> args, std::ostream& out, std::ostream& err,
              common::Clock& clock) {
  Environment env;
  for (const char* name :
       {"HOME", "EGSCTL_CONFIG", "EGSCTL_SERVER", "EGSCTL_TOKEN", "EGSCTL_NAMESPACE"}) {
    if (const char* v = std::getenv(name)) env[name] = v;
  }
  return RunEgsctl(std::move(args), out, err, clock, env, std::cin);
}

}  // namespace egs::egsctl
