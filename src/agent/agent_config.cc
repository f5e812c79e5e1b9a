#include "agent/agent_config.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <optional>
#include <set>

#include "agent/http_agent_channel.h"

namespace egs::agent {

namespace {

common::Result<std::int64_t> ParseInt(const std::string& flag, const std::string& text,
                                      std::int64_t lo, std::int64_t hi) {
  std::int64_t v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size()) {
    return common::InvalidArgumentError(fmt::format("{}: \"{}\" is not an integer", flag, text));
  }
  if (v < lo || v > hi) {
    return common::InvalidArgumentError(fmt::format("{}: {} is outside [{}, {}]", flag, v, lo, hi));
  }
  return v;
}

common::Result<common::Duration> ParseDurationFlag(const std::string& flag, const std::string& text,
                                                   common::Duration lo, common::Duration hi) {
  auto d = ParseAgentDuration(text);
  if (!d.ok()) return d.error().WithContext(flag);
  if (*d < lo || *d > hi) {
    // Bounds as the flag is written (100ms, not 100000us).
    auto text_of = [](common::Duration b) {
      const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(b);
      if (b < common::Seconds(1) && b == ms) return fmt::format("{}ms", ms.count());
      return common::FormatDuration(b);
    };
    return common::InvalidArgumentError(
        fmt::format("{}: {} is outside [{}, {}]", flag, text, text_of(lo), text_of(hi)));
  }
  return d;
}

common::Result<std::string> ReadTokenFile(const std::string& path) {
  // A directory opens and reads as an empty file.
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    return common::InvalidArgumentError(fmt::format("--token-file: {} is a directory", path));
  }
  std::ifstream in(path);
  if (!in) return common::InvalidArgumentError(fmt::format("--token-file: cannot read {}", path));
  std::string token;
  std::getline(in, token);
  while (!token.empty() && (token.back() == '\r' || token.back() == ' ')) token.pop_back();
  if (token.empty()) {
    return common::InvalidArgumentError(fmt::format("--token-file: {} is empty", path));
  }
  return token;
}

// egsd's nodes are named like Kubernetes Nodes: a DNS-1123 subdomain (lower case letters, digits,
// '-' and '.', at most 253). Another name is never found, and one holding a space or '?' broke
// the request line.
bool IsNodeName(const std::string& s) {
  if (s.empty() || s.size() > 253) return false;
  std::size_t begin = 0;
  for (;;) {
    const std::size_t dot = s.find('.', begin);
    const std::string label = s.substr(begin, dot == std::string::npos ? dot : dot - begin);
    if (label.empty() || label.size() > 63 || label.front() == '-' || label.back() == '-') {
      return false;
    }
    for (char ch : label) {
      if (!((ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '-')) return false;
    }
    if (dot == std::string::npos) return true;
    begin = dot + 1;
  }
}

}  // namespace

std::string AgentUsage() {
  return R"(usage: egs-agent --server URL (--token TOKEN | --token-file FILE) [flags]

Reads the node's GPUs through NVML (libnvidia-ml.so.1, loaded at run time) and reports
inventory and telemetry to egsd every interval.

  --server URL            egsd, http(s)://host[:port] (required)
  --token TOKEN           the node token (role node, user system:node:<node>)
  --token-file FILE       read the node token from FILE instead
  --node NAME             the node's name in egsd (default: the host name)
  --interval DURATION     sampling and reporting interval, 100ms..1h (default 10s)
  --nvml-path PATH        the NVML library (default libnvidia-ml.so.1)
  --synthetic             report made-up telemetry (demos; no NVML needed)
  --synthetic-gpus N      GPUs of the synthetic node, 0..64 (default 8)
  --once                  read once, deliver, exit (non-zero if egsd did not take it)
  --buffer-samples N      samples kept while egsd is unreachable (default 20000)
  --backoff-max DURATION  longest wait between retries, 1s..1h (default 60s)
  --timeout DURATION      HTTP timeout, 100ms..5m (default 10s)
  --seed N                seed of the retry jitter and synthetic readings (default: from the
                          node's name, so that synthetic nodes differ)
  --log-level LEVEL       trace, debug, info, warn, error (default info)
)";
}

common::Result<common::Duration> ParseAgentDuration(const std::string& text) {
  static const std::map<std::string, common::Duration> kUnits = {
      {"ms", std::chrono::milliseconds(1)},
      {"s", common::Seconds(1)},
      {"m", common::Minutes(1)},
      {"h", common::Hours(1)}};
  std::int64_t n = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
  const std::string unit(end, text.data() + text.size());
  auto it = kUnits.find(unit);
  if (ec != std::errc() || it == kUnits.end() || n < 0) {
    return common::InvalidArgumentError(
        fmt::format("\"{}\" is not a duration such as 500ms, 1s, 2m or 1h", text));
  }
  // n * unit overflowed (undefined) for n beyond about 2.5 million hours.
  if (n > std::numeric_limits<std::int64_t>::max() / it->second.count()) {
    return common::InvalidArgumentError(fmt::format("\"{}\" is out of range", text));
  }
  return n * it->second;
}

common::Result<AgentConfig> ParseAgentFlags(const std::vector<std::string>& args,
                                            const std::string& default_node) {
  AgentConfig c;
  std::optional<std::string> token_file;
  bool has_token = false;
  bool has_node = false;
  bool has_synthetic_gpus = false;
  std::set<std::string> seen;  // a flag given twice was the last one winning, silently
  for (std::size_t i = 0; i < args.size(); ++i) {
    std::string flag = args[i];
    std::optional<std::string> inline_value;
    if (auto eq = flag.find('='); flag.starts_with("--") && eq != std::string::npos) {
      inline_value = flag.substr(eq + 1);
      flag.resize(eq);
    }
    if (flag.starts_with("-") && !seen.insert(flag == "-h" ? "--help" : flag).second) {
      return common::InvalidArgumentError(fmt::format("{}: is given twice", flag));
    }
    // An empty value ("--node=") fell back to the default; a flag where the value belongs
    // ("--token --interval 1s") was taken as the value.
    auto value = [&]() -> common::Result<std::string> {
      if (!inline_value && (i + 1 >= args.size() || args[i + 1].starts_with("--"))) {
        return common::InvalidArgumentError(fmt::format("{}: needs a value", flag));
      }
      std::string v = inline_value ? *inline_value : args[++i];
      if (v.empty()) return common::InvalidArgumentError(fmt::format("{}: is empty", flag));
      return v;
    };
    auto boolean = [&]() -> common::Status {
      if (inline_value) {
        return common::InvalidArgumentError(fmt::format("{}: takes no value", flag));
      }
      return common::OkStatus();
    };
    if (flag == "--help" || flag == "-h") {
      EGS_RETURN_IF_ERROR(boolean());
      c.help = true;
    } else if (flag == "--server") {
      EGS_ASSIGN_OR_RETURN(c.server, value());
    } else if (flag == "--token") {
      EGS_ASSIGN_OR_RETURN(c.token, value());
      has_token = true;
    } else if (flag == "--token-file") {
      EGS_ASSIGN_OR_RETURN(token_file, value());
    } else if (flag == "--node") {
      EGS_ASSIGN_OR_RETURN(c.node, value());
      has_node = true;
    } else if (flag == "--interval") {
      EGS_ASSIGN_OR_RETURN(auto v, value());
      EGS_ASSIGN_OR_RETURN(
          c.interval, ParseDurationFlag(flag, v, std::chrono::milliseconds(100), common::Hours(1)));
    } else if (flag == "--nvml-path") {
      EGS_ASSIGN_OR_RETURN(c.nvml_path, value());
    } else if (flag == "--synthetic") {
      EGS_RETURN_IF_ERROR(boolean());
      c.synthetic = true;
    } else if (flag == "--synthetic-gpus") {
      EGS_ASSIGN_OR_RETURN(auto v, value());
      EGS_ASSIGN_OR_RETURN(auto n, ParseInt(flag, v, 0, 64));
      c.synthetic_gpus = static_cast<int>(n);
      has_synthetic_gpus = true;
    } else if (flag == "--once") {
      EGS_RETURN_IF_ERROR(boolean());
      c.once = true;
    } else if (flag == "--buffer-samples") {
      EGS_ASSIGN_OR_RETURN(auto v, value());
      EGS_ASSIGN_OR_RETURN(auto n, ParseInt(flag, v, 1, 10'000'000));
      c.buffer_samples = static_cast<std::size_t>(n);
    } else if (flag == "--backoff-max") {
      EGS_ASSIGN_OR_RETURN(auto v, value());
      EGS_ASSIGN_OR_RETURN(c.backoff_max,
                           ParseDurationFlag(flag, v, common::Seconds(1), common::Hours(1)));
    } else if (flag == "--timeout") {
      EGS_ASSIGN_OR_RETURN(auto v, value());
      EGS_ASSIGN_OR_RETURN(c.timeout, ParseDurationFlag(flag, v, std::chrono::milliseconds(100),
                                                        common::Minutes(5)));
    } else if (flag == "--seed") {
      EGS_ASSIGN_OR_RETURN(auto v, value());
      EGS_ASSIGN_OR_RETURN(auto n, ParseInt(flag, v, 0, INT64_MAX));
      c.seed = static_cast<std::uint64_t>(n);
      c.seed_given = true;
    } else if (flag == "--log-level") {
      EGS_ASSIGN_OR_RETURN(c.log_level, value());
      if (c.log_level != "trace" && c.log_level != "debug" && c.log_level != "info" &&
          c.log_level != "warn" && c.log_level != "error") {
        return common::InvalidArgumentError(fmt::format(
            "--log-level: \"{}\" is not one of trace, debug, info, warn, error", c.log_level));
      }
    } else {
      return common::InvalidArgumentError(
          fmt::format("unknown flag \"{}\" (see egs-agent --help)", args[i]));
    }
  }
  if (c.help) return c;
  if (c.server.empty()) return common::InvalidArgumentError("--server: is required");
  // Checked here so that a bad URL is a bad flag (exit 1) even when NVML is missing (exit 2).
  EGS_RETURN_IF_ERROR(CheckServerUrl(c.server));
  if (has_token && token_file) {
    return common::InvalidArgumentError("--token and --token-file: give only one");
  }
  if (token_file) {
    EGS_ASSIGN_OR_RETURN(c.token, ReadTokenFile(*token_file));
  } else if (!has_token || c.token.empty()) {
    return common::InvalidArgumentError("--token or --token-file: a node token is required");
  }
  if (!has_node) {
    // As the kubelet names a node after its host: in lower case.
    c.node = default_node;
    std::transform(c.node.begin(), c.node.end(), c.node.begin(),
                   [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
  }
  if (c.node.empty()) {
    return common::InvalidArgumentError("--node: is required (the host name is unknown)");
  }
  if (c.node.find('/') != std::string::npos) {
    return common::InvalidArgumentError(fmt::format(
        "--node: \"{}\" is not a node name (it holds '/')", has_node ? c.node : default_node));
  }
  if (!IsNodeName(c.node)) {
    return common::InvalidArgumentError(fmt::format(
        "--node: \"{}\"{} is not a node name (a DNS-1123 subdomain: lower case letters, digits, "
        "'-' and '.')",
        has_node ? c.node : default_node, has_node ? "" : " (the host name)"));
  }
  if (c.synthetic && !c.nvml_path.empty()) {
    return common::InvalidArgumentError("--synthetic and --nvml-path: give only one");
  }
  if (has_synthetic_gpus && !c.synthetic) {
    return common::InvalidArgumentError("--synthetic-gpus: only with --synthetic");
  }
  return c;
}

}  // namespace egs::agent
