// egs-agent: reads the node's GPUs through NVML and reports inventory and telemetry to egsd.
// Exit codes (StatusCodeToExit): 0 done (--once) or stopped by SIGINT/SIGTERM; 1 bad flags (or,
// with --once, egsd refused the report as invalid);
// 2 NVML not found or egsd does not know the node; 4 NVML unusable; 7 egsd unreachable
// (--once); 9 the token may not post for this node; 10 the token was refused.
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "agent/agent.h"
#include "agent/agent_config.h"
#include "agent/http_agent_channel.h"
#include "agent/nvml_gpu_source.h"
#include "agent/synthetic_gpu_source.h"
#include "common/clock.h"
#include "common/rng.h"

namespace {

using egs::common::Status;

int Fail(const Status& s) {
  std::fprintf(stderr, "egs-agent: %s\n", s.message().c_str());
  return egs::common::StatusCodeToExit(s.code());
}

std::string HostName() {
  char buf[256] = {};
  if (gethostname(buf, sizeof buf - 1) != 0) return "";
  return buf;
}

egs::common::Result<std::unique_ptr<egs::agent::GpuSource>> MakeSource(
    const egs::agent::AgentConfig& config, egs::common::Rng& rng) {
  if (config.synthetic) {
    return std::unique_ptr<egs::agent::GpuSource>(
        std::make_unique<egs::agent::SyntheticGpuSource>(config.synthetic_gpus, rng, config.node));
  }
  const std::string path =
      config.nvml_path.empty() ? egs::agent::kNvmlLibraryName : config.nvml_path;
  auto nvml = egs::agent::NvmlGpuSource::Open(path);
  if (!nvml.ok()) {
    return Status(nvml.error().code(),
                  nvml.error().message() +
                      "\nNVML is needed to read the GPUs: install the NVIDIA driver, point "
                      "--nvml-path at libnvidia-ml.so.1, or run with --synthetic for made-up "
                      "telemetry");
  }
  if (!(*nvml)->watches_events()) {
    spdlog::info("NVML offers no XID events on this node: XID counts are not reported");
  }
  return std::unique_ptr<egs::agent::GpuSource>(std::move(*nvml));
}

int Run(const egs::agent::AgentConfig& config) {
  egs::common::RealClock clock;
  // Each node its own readings unless a seed is given (a DaemonSet of synthetic agents sent the
  // same series from every node).
  egs::common::Rng rng(config.seed_given ? config.seed : std::hash<std::string>{}(config.node));
  egs::common::Rng synthetic_rng = rng.Fork();
  // 1. The GPUs.
  auto source = MakeSource(config, synthetic_rng);
  if (!source.ok()) return Fail(source.error());
  // 2. egsd.
  auto channel = egs::agent::HttpAgentChannel::Create({.server = config.server,
                                                       .node = config.node,
                                                       .token = config.token,
                                                       .timeout = config.timeout});
  if (!channel.ok()) return Fail(channel.error());
  // 3. The loop.
  egs::agent::AgentOptions options;
  options.interval = config.interval;
  options.max_buffered_samples = config.buffer_samples;
  options.backoff_max = config.backoff_max;
  egs::agent::Agent agent(options, **source, **channel, clock, rng);
  if (Status s = agent.Start(); !s.ok()) return Fail(s);
  spdlog::info("node {}: {} GPUs, reporting to {} every {} ms", config.node,
               agent.inventory().size(), config.server, config.interval.count() / 1000);
  if (config.once) {
    if (Status s = agent.Once(); !s.ok()) return Fail(s);
    if (agent.stats().samples_rejected > 0) {
      return Fail(egs::common::InvalidArgumentError(
          "egsd refused the report as invalid (see the error above)"));
    }
    std::printf("egs-agent: node %s: delivered %llu samples of %zu GPUs\n", config.node.c_str(),
                static_cast<unsigned long long>(agent.stats().samples_sent),
                agent.inventory().size());
    return 0;
  }
  // Stop signals go to a helper thread (blocked here, before it starts).
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  std::thread([&agent, stop_signals] {
    int sig = 0;
    sigwait(&stop_signals, &sig);
    spdlog::info("signal {}: stopping", sig);
    agent.Stop();
  }).detach();
  if (Status s = agent.Run(); !s.ok()) return Fail(s);
  const auto& st = agent.stats();
  spdlog::info("stopped: {} samples read, {} delivered, {} still buffered, {} dropped",
               st.samples_read, st.samples_sent, agent.buffered_samples(), st.samples_dropped);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::signal(SIGPIPE, SIG_IGN);
  const std::vector<std::string> args(argv + 1, argv + argc);
  auto config = egs::agent::ParseAgentFlags(args, HostName());
  if (!config.ok()) return Fail(config.error());
  if (config->help) {
    std::fputs(egs::agent::AgentUsage().c_str(), stdout);
    return 0;
  }
  auto logger = spdlog::stderr_color_mt("egs-agent");
  spdlog::set_default_logger(logger);
  spdlog::set_level(spdlog::level::from_str(config->log_level));
  spdlog::set_pattern("%Y-%m-%dT%H:%M:%S.%eZ %^%l%$ %v", spdlog::pattern_time_type::utc);
  try {
    return Run(*config);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "egs-agent: unexpected exception: %s\n", e.what());
    return 70;
  }
}
