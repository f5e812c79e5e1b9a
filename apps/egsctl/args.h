// Command-line flags: `--name value`, `--name=value`, `-n value`, `-nvalue`, boolean flags
// (`-A`, `--all-namespaces`, `--watch=false`), repeated flags, and `--` ending the flags.
// Flags may come before, between or after positional arguments, as with kubectl.
//
// Thread-safety: value types and free functions.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace egs::egsctl {

struct FlagSpec {
  std::string name;     // long name without "--": "namespace"
  char short_name = 0;  // 'n'; 0 for none
  bool takes_value = true;
  std::string help;  // one line for --help
};

class ParsedArgs {
 public:
  std::vector<std::string> positionals;

  bool Has(std::string_view name) const { return values_.count(std::string(name)) > 0; }
  // The last value given for `name`, if any.
  std::optional<std::string> Get(std::string_view name) const;
  // Every value given for `name`, in order; repeated and comma-separated values are split.
  std::vector<std::string> GetList(std::string_view name) const;
  // A boolean flag: true when given without a value or with "true".
  bool GetBool(std::string_view name) const;

  void Add(const std::string& name, std::string value) {
    values_[name].push_back(std::move(value));
  }

 private:
  std::map<std::string, std::vector<std::string>, std::less<>> values_;
};

// Parses `args` (without the program name) against `specs`. InvalidArgument for an unknown flag,
// a missing value, or a bad boolean value.
common::Result<ParsedArgs> ParseArgs(const std::vector<std::string>& args,
                                     const std::vector<FlagSpec>& specs);

// The positional arguments of `args` that come before any unknown flag, skipping the flags of
// `specs` and their values: how the command name is found before its own flags are known.
std::vector<std::string> LeadingPositionals(const std::vector<std::string>& args,
                                            const std::vector<FlagSpec>& specs);

}  // namespace egs::egsctl
