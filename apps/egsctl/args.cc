#include "egsctl/args.h"

#include <fmt/format.h>

namespace egs::egsctl {
namespace {

const FlagSpec* FindLong(const std::vector<FlagSpec>& specs, std::string_view name) {
  for (const FlagSpec& f : specs) {
    if (f.name == name) return &f;
  }
  return nullptr;
}

const FlagSpec* FindShort(const std::vector<FlagSpec>& specs, char c) {
  for (const FlagSpec& f : specs) {
    if (f.short_name != 0 && f.short_name == c) return &f;
  }
  return nullptr;
}

common::Status CheckBool(const std::string& flag, const std::string& value) {
  if (value == "true" || value == "false") return common::OkStatus();
  return common::InvalidArgumentError(
      fmt::format("invalid value \"{}\" for flag {}: want true or false", value, flag));
}

}  // namespace

std::optional<std::string> ParsedArgs::Get(std::string_view name) const {
  auto it = values_.find(name);
  if (it == values_.end() || it->second.empty()) return std::nullopt;
  return it->second.back();
}

std::vector<std::string> ParsedArgs::GetList(std::string_view name) const {
  std::vector<std::string> out;
  auto it = values_.find(name);
  if (it == values_.end()) return out;
  for (const std::string& v : it->second) {
    std::size_t start = 0;
    while (start <= v.size()) {
      std::size_t comma = v.find(',', start);
      if (comma == std::string::npos) comma = v.size();
      if (comma > start) out.push_back(v.substr(start, comma - start));
      start = comma + 1;
    }
  }
  return out;
}

bool ParsedArgs::GetBool(std::string_view name) const {
  auto v = Get(name);
  return v.has_value() && *v == "true";
}

common::Result<ParsedArgs> ParseArgs(const std::vector<std::string>& args,
                                     const std::vector<FlagSpec>& specs) {
  ParsedArgs out;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--") {
      out.positionals.insert(out.positionals.end(), args.begin() + static_cast<long>(i) + 1,
                             args.end());
      break;
    }
    if (a.size() < 2 || a[0] != '-') {
      out.positionals.push_back(a);  // includes "-" (stdin)
      continue;
    }
    const FlagSpec* spec = nullptr;
    std::optional<std::string> inline_value;
    std::string shown;
    if (a[1] == '-') {
      std::string body = a.substr(2);
      std::size_t eq = body.find('=');
      if (eq != std::string::npos) {
        inline_value = body.substr(eq + 1);
        body.resize(eq);
      }
      spec = FindLong(specs, body);
      shown = "--" + body;
    } else {
      spec = FindShort(specs, a[1]);
      shown = a.substr(0, 2);
      if (a.size() > 2) inline_value = a[2] == '=' ? a.substr(3) : a.substr(2);
    }
    if (spec == nullptr)
      return common::InvalidArgumentError(fmt::format("unknown flag: {}", shown));
    if (!spec->takes_value) {
      std::string v = inline_value.value_or("true");
      EGS_RETURN_IF_ERROR(CheckBool(shown, v));
      out.Add(spec->name, v);
      continue;
    }
    if (!inline_value) {
      if (i + 1 >= args.size()) {
        return common::InvalidArgumentError(fmt::format("flag needs an argument: {}", shown));
      }
      inline_value = args[++i];
    }
    out.Add(spec->name, *inline_value);
  }
  return out;
}

std::vector<std::string> LeadingPositionals(const std::vector<std::string>& args,
                                            const std::vector<FlagSpec>& specs) {
  std::vector<std::string> out;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--") break;
    if (a.size() < 2 || a[0] != '-') {
      out.push_back(a);
      continue;
    }
    const FlagSpec* spec = nullptr;
    bool has_inline = false;
    if (a[1] == '-') {
      std::string body = a.substr(2);
      has_inline = body.find('=') != std::string::npos;
      spec = FindLong(specs, body.substr(0, body.find('=')));
    } else {
      spec = FindShort(specs, a[1]);
      has_inline = a.size() > 2;
    }
    if (spec == nullptr) break;
    if (spec->takes_value && !has_inline) ++i;
  }
  return out;
}

}  // namespace egs::egsctl
