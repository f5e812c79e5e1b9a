// AgentConfig: egs-agent's command line. ParseAgentFlags turns argv into a checked config;
// every bad flag is an InvalidArgument naming the flag and the reason, and nothing runs. A flag
// given twice, an empty value and a flag where a value belongs are bad flags.
//
//   --server URL          egsd, http(s)://host[:port] (required)
//   --token TOKEN | --token-file FILE   the node token (exactly one; the file's first line)
//   --node NAME           the node's name in egsd, a DNS-1123 subdomain (default: the host name)
//   --interval DURATION   sampling and reporting interval, 100ms..1h (default 10s)
//   --nvml-path PATH      the NVML library (default libnvidia-ml.so.1, found the dlopen way)
//   --synthetic           made-up telemetry for demos instead of NVML
//   --synthetic-gpus N    GPUs of the synthetic node, 0..64 (default 8; only with --synthetic)
//   --once                read once, deliver, exit (non-zero if egsd did not take it)
//   --buffer-samples N    samples kept while egsd is unreachable, >= 1 (default 20000)
//   --backoff-max DURATION  longest wait between retries (default 60s)
//   --timeout DURATION    HTTP timeout (default 10s)
//   --seed N              seed of the retry jitter and synthetic readings (default: from the
//                         node's name, so that synthetic nodes differ)
//   --log-level LEVEL     trace, debug, info, warn, error (default info)
//   --help
//
// Thread-safety: pure functions (ReadTokenFile reads a file).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "common/time.h"

namespace egs::agent {

struct AgentConfig {
  std::string server;
  std::string token;
  std::string node;
  common::Duration interval = common::Seconds(10);
  std::string nvml_path;  // empty: kNvmlLibraryName
  bool synthetic = false;
  int synthetic_gpus = 8;
  bool once = false;
  std::size_t buffer_samples = 20000;
  common::Duration backoff_max = common::Seconds(60);
  common::Duration timeout = common::Seconds(10);
  std::uint64_t seed = 1;
  bool seed_given = false;  // else egs-agent seeds from the node's name (each node its own)
  std::string log_level = "info";
  bool help = false;
};

// The usage text printed by --help.
std::string AgentUsage();

// Parses `args` (without the program name). `default_node` is used when --node is absent
// (main passes the host name). InvalidArgument naming the flag for anything wrong.
common::Result<AgentConfig> ParseAgentFlags(const std::vector<std::string>& args,
                                            const std::string& default_node);

// "1s", "500ms", "2m", "1h"; InvalidArgument otherwise.
common::Result<common::Duration> ParseAgentDuration(const std::string& text);

}  // namespace egs::agent
