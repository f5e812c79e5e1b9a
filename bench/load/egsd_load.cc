// egsd-load: a loopback load client for a running egsd. It measures, end to end over HTTP with
// keep-alive connections, what issue 5 asks of the service:
//
//   create  durable creates of GPRs (each acknowledged only after its commit): rate, latency
//   get     GET of one GPR: rate, latency
//   list    GET of a namespace holding --list-size GPRs: rate, latency
//   quote   POST .../quotes with the queue at --queued requests: latency
//
// Creates: the first --mixed have random priorities and land anywhere in the queue (re-planning
// what is behind them); the rest have the lowest priority and are appended at the tail.
// Before measuring it fills every pool of the fleet with long "filler" requests, so that the
// created requests queue (and are planned into the future) instead of starting: the quote is
// then computed against a queue of --queued requests, as in the scheduling-core benchmark.
// The requests follow the scheduling-core benchmark's mix (bench/scheduler_bench.cc): 60 % of
// 1-4 GPUs on one node, 25 % one whole node, 15 % 2-16 whole nodes, durations 1-48 h,
// priorities 0-999, over the fleet's shapes.
//
// Usage: egsd-load --server http://127.0.0.1:PORT --token T [--queued 10000] [--mixed 2000]
//                  [--list-size 1000]
//                  [--connections 8] [--seconds 5] [--quotes 2000] [--namespace bench]
//                  [--list-namespace bench-list] [--seed 1]
// The namespaces must be workspaces with room for the requests (see bench/load/run.sh, which
// makes a fleet, starts egsd and runs this). Prints one Markdown table; exit 1 on any error.
#include <fmt/format.h>
#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "common/clock.h"
#include "common/rng.h"

namespace {

using egs::common::RealClock;
using nlohmann::json;

constexpr char kApi[] = "/apis/egs.dev/v1alpha1";

struct Options {
  std::string server;
  std::string token;
  int queued = 10000;
  int mixed = 2000;
  int list_size = 1000;
  int connections = 8;
  double seconds = 5;
  int quotes = 2000;
  std::string ns = "bench";
  std::string list_ns = "bench-list";
  std::uint64_t seed = 1;
};

[[noreturn]] void Die(const std::string& message) {
  std::fprintf(stderr, "egsd-load: %s\n", message.c_str());
  std::exit(1);
}

Options ParseArgs(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "--help" || flag == "-h") {
      std::printf(
          "usage: egsd-load --server URL --token T [--queued N] [--mixed N] [--list-size N] "
          "[--connections N] [--seconds S] [--quotes N] [--namespace NS] [--list-namespace NS] "
          "[--seed N]\n");
      std::exit(0);
    }
    if (i + 1 >= argc) Die(flag + ": needs a value");
    const std::string value = argv[++i];
    auto number = [&](long min, long max) {
      char* end = nullptr;
      const long n = std::strtol(value.c_str(), &end, 10);
      if (end == value.c_str() || *end != '\0' || n < min || n > max) {
        Die(fmt::format("{}: must be an integer in {}..{}, got \"{}\"", flag, min, max, value));
      }
      return n;
    };
    if (flag == "--server") {
      o.server = value;
    } else if (flag == "--token") {
      o.token = value;
    } else if (flag == "--queued") {
      o.queued = static_cast<int>(number(0, 1000000));
    } else if (flag == "--mixed") {
      o.mixed = static_cast<int>(number(0, 1000000));
    } else if (flag == "--list-size") {
      o.list_size = static_cast<int>(number(1, 1000000));
    } else if (flag == "--connections") {
      o.connections = static_cast<int>(number(1, 256));
    } else if (flag == "--seconds") {
      o.seconds = static_cast<double>(number(1, 3600));
    } else if (flag == "--quotes") {
      o.quotes = static_cast<int>(number(1, 1000000));
    } else if (flag == "--namespace") {
      o.ns = value;
    } else if (flag == "--list-namespace") {
      o.list_ns = value;
    } else if (flag == "--seed") {
      o.seed = static_cast<std::uint64_t>(number(0, 1L << 30));
    } else {
      Die(flag + ": unknown flag");
    }
  }
  if (o.server.empty()) Die("--server: required");
  if (o.token.empty()) Die("--token: required");
  if (o.list_size > o.queued) Die("--list-size: must be <= --queued");
  return o;
}

std::unique_ptr<httplib::Client> Connect(const Options& o) {
  auto c = std::make_unique<httplib::Client>(o.server);
  c->set_bearer_token_auth(o.token);
  c->set_keep_alive(true);
  c->set_tcp_nodelay(true);  // else Nagle holds a POST body until the header segment is ACKed
  c->set_connection_timeout(10, 0);
  c->set_read_timeout(120, 0);
  c->set_write_timeout(120, 0);
  return c;
}

json Check(const httplib::Result& r, int want, const std::string& what) {
  if (!r) Die(fmt::format("{}: {}", what, httplib::to_string(r.error())));
  if (r->status != want) Die(fmt::format("{}: HTTP {}: {}", what, r->status, r->body));
  return json::parse(r->body, nullptr, false);
}

// As Check, without parsing the body: the timed read loops measure the server, and the client
// shares its cores (the body of the first call of each loop is parsed and checked before).
void CheckStatus(const httplib::Result& r, int want, const std::string& what) {
  if (!r) Die(fmt::format("{}: {}", what, httplib::to_string(r.error())));
  if (r->status != want) Die(fmt::format("{}: HTTP {}: {}", what, r->status, r->body));
  if (r->body.empty()) Die(fmt::format("{}: empty body", what));
}

// Latencies in microseconds.
struct Samples {
  std::vector<double> us;
  double Percentile(double p) {
    if (us.empty()) return 0;
    std::sort(us.begin(), us.end());
    std::size_t i = static_cast<std::size_t>(p / 100.0 * static_cast<double>(us.size() - 1));
    return us[i];
  }
};

struct Row {
  std::string name;
  std::size_t count = 0;
  double seconds = 0;
  double p50_ms = 0;
  double p99_ms = 0;
  double max_ms = 0;
  std::string note;
};

Row Summarize(std::string name, Samples& s, double seconds, std::string note) {
  Row r;
  r.name = std::move(name);
  r.count = s.us.size();
  r.seconds = seconds;
  r.p50_ms = s.Percentile(50) / 1000;
  r.p99_ms = s.Percentile(99) / 1000;
  r.max_ms = s.Percentile(100) / 1000;
  r.note = std::move(note);
  return r;
}

struct Pool {
  std::string cluster;
  std::string shape;
  int nodes = 0;
  int gpus_per_node = 0;
};

std::vector<Pool> DiscoverPools(httplib::Client& c) {
  json nodes = Check(c.Get(fmt::format("{}/nodes", kApi)), 200, "list nodes");
  std::map<std::pair<std::string, std::string>, Pool> pools;
  for (const json& n : nodes["items"]) {
    const json& spec = n["spec"];
    Pool& p = pools[{spec.value("cluster", ""), spec.value("shape", "")}];
    p.cluster = spec.value("cluster", "");
    p.shape = spec.value("shape", "");
    p.nodes += 1;
    p.gpus_per_node =
        std::max<int>(p.gpus_per_node, static_cast<int>(spec.value("gpus", json::array()).size()));
  }
  std::vector<Pool> out;
  for (auto& [key, p] : pools) out.push_back(p);
  if (out.empty()) Die("the fleet has no nodes");
  return out;
}

json Gpr(const std::string& name, const std::string& shape, const std::string& cluster, int nodes,
         int gpus_per_node, int hours, int priority) {
  json spec = {{"shape", shape},
               {"nodes", nodes},
               {"duration", fmt::format("{}h", hours)},
               {"priority", priority}};
  if (!cluster.empty()) spec["clusters"] = json::array({cluster});
  if (gpus_per_node > 0) spec["gpusPerNode"] = gpus_per_node;
  return {{"apiVersion", "egs.dev/v1alpha1"},
          {"kind", "GPUProvisionRequest"},
          {"metadata", {{"name", name}}},
          {"spec", spec}};
}

// One request spec of the scheduling-core benchmark's mix.
json MixedSpec(egs::common::Rng& rng, const std::vector<Pool>& pools) {
  const Pool& p = pools[static_cast<std::size_t>(
      rng.UniformInt(0, static_cast<std::int64_t>(pools.size()) - 1))];
  const double kind = rng.Uniform();
  int nodes = 1;
  int gpus = 0;
  if (kind < 0.60) {
    gpus = static_cast<int>(rng.UniformInt(1, std::min(4, p.gpus_per_node)));
    if (gpus == p.gpus_per_node) gpus = 0;
  } else if (kind >= 0.85) {
    nodes = static_cast<int>(rng.UniformInt(2, std::min(16, p.nodes)));
  }
  json spec = {{"shape", p.shape},
               {"nodes", nodes},
               {"duration", fmt::format("{}h", rng.UniformInt(1, 48))},
               {"priority", rng.UniformInt(0, 999)}};
  if (gpus > 0) spec["gpusPerNode"] = gpus;
  return spec;
}

// Runs `fn(connection, index)` for indices 0..n-1 over `connections` threads; returns the
// latency of each call and the wall time.
template <typename Fn>
std::pair<Samples, double> RunCount(const Options& o, int n, Fn fn) {
  std::atomic<int> next{0};
  std::mutex mu;
  Samples all;
  RealClock clock;
  const auto start = clock.Now();
  std::vector<std::thread> threads;
  for (int t = 0; t < o.connections; ++t) {
    threads.emplace_back([&] {
      auto c = Connect(o);
      Samples mine;
      RealClock local;
      for (int i = next++; i < n; i = next++) {
        const auto t0 = local.Now();
        fn(*c, i);
        mine.us.push_back(static_cast<double>((local.Now() - t0).count()));
      }
      std::lock_guard lock(mu);
      all.us.insert(all.us.end(), mine.us.begin(), mine.us.end());
    });
  }
  for (auto& t : threads) t.join();
  const double wall = static_cast<double>((clock.Now() - start).count()) / 1e6;
  return {std::move(all), wall};
}

// Runs `fn(connection)` repeatedly for o.seconds over `connections` threads.
template <typename Fn>
std::pair<Samples, double> RunFor(const Options& o, Fn fn) {
  std::atomic<bool> stop{false};
  std::mutex mu;
  Samples all;
  RealClock clock;
  const auto start = clock.Now();
  std::vector<std::thread> threads;
  for (int t = 0; t < o.connections; ++t) {
    threads.emplace_back([&] {
      auto c = Connect(o);
      Samples mine;
      RealClock local;
      while (!stop.load(std::memory_order_relaxed)) {
        const auto t0 = local.Now();
        fn(*c);
        mine.us.push_back(static_cast<double>((local.Now() - t0).count()));
      }
      std::lock_guard lock(mu);
      all.us.insert(all.us.end(), mine.us.begin(), mine.us.end());
    });
  }
  clock.SleepUntil(start + std::chrono::microseconds(static_cast<std::int64_t>(o.seconds * 1e6)));
  stop = true;
  for (auto& t : threads) t.join();
  const double wall = static_cast<double>((clock.Now() - start).count()) / 1e6;
  return {std::move(all), wall};
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = ParseArgs(argc, argv);
  auto admin = Connect(o);
  const std::vector<Pool> pools = DiscoverPools(*admin);
  int total_nodes = 0;
  for (const Pool& p : pools) total_nodes += p.nodes;
  egs::common::Rng rng(o.seed);
  std::vector<Row> rows;

  // 1. Fill every pool for a long time, so that what follows queues.
  for (std::size_t i = 0; i < pools.size(); ++i) {
    const Pool& p = pools[i];
    Check(admin->Post(
              fmt::format("{}/namespaces/{}/gpuprovisionrequests", kApi, o.ns),
              Gpr(fmt::format("filler-{}", i), p.shape, p.cluster, p.nodes, 0, 2000, 999).dump(),
              "application/json"),
          201, "create filler");
  }

  // 2. Durable creates: list_size into the list namespace, the rest into the main one.
  std::vector<json> bodies;
  bodies.reserve(static_cast<std::size_t>(o.queued));
  for (int i = 0; i < o.queued; ++i) {
    json spec = MixedSpec(rng, pools);
    json body = {{"apiVersion", "egs.dev/v1alpha1"},
                 {"kind", "GPUProvisionRequest"},
                 {"metadata", {{"name", fmt::format("q{}", i)}}},
                 {"spec", spec}};
    bodies.push_back(std::move(body));
  }
  // The first --mixed creates have random priorities (each lands somewhere in the queue and
  // re-plans the requests behind it); the rest have the lowest priority, so each is appended at
  // the queue's tail: that is how the queue reaches --queued in reasonable time.
  const int mixed = std::min(o.mixed, o.queued);
  for (int i = mixed; i < o.queued; ++i)
    bodies[static_cast<std::size_t>(i)]["spec"]["priority"] = 0;
  auto create = [&](int offset) {
    return [&, offset](httplib::Client& c, int i) {
      const int k = offset + i;
      const std::string& ns = k < o.list_size ? o.list_ns : o.ns;
      Check(c.Post(fmt::format("{}/namespaces/{}/gpuprovisionrequests", kApi, ns),
                   bodies[static_cast<std::size_t>(k)].dump(), "application/json"),
            201, "create");
    };
  };
  if (mixed > 0) {
    auto [s, wall] = RunCount(o, mixed, create(0));
    rows.push_back(Summarize("durable create, random priority", s, wall,
                             fmt::format("queue grows 0 -> {}", mixed)));
  }
  if (o.queued > mixed) {
    auto [s, wall] = RunCount(o, o.queued - mixed, create(mixed));
    rows.push_back(Summarize("durable create, appended at the tail", s, wall,
                             fmt::format("queue grows {} -> {}", mixed, o.queued)));
  }
  json q0 =
      Check(admin->Get(fmt::format("{}/namespaces/{}/gpuprovisionrequests/q0", kApi, o.list_ns)),
            200, "get q0");
  if (q0["status"].value("phase", "") != "Queued") {
    Die("q0 is " + q0["status"].value("phase", "") + ", not Queued: the fill did not work");
  }

  // 3. GET one GPR.
  {
    const std::string path =
        fmt::format("{}/namespaces/{}/gpuprovisionrequests/q0", kApi, o.list_ns);
    auto [s, wall] = RunFor(o, [&](httplib::Client& c) { CheckStatus(c.Get(path), 200, "get"); });
    rows.push_back(Summarize("GET one GPR", s, wall, ""));
  }
  // 4. List the namespace with list_size GPRs.
  {
    const std::string path = fmt::format("{}/namespaces/{}/gpuprovisionrequests", kApi, o.list_ns);
    json first = Check(admin->Get(path), 200, "list");
    if (static_cast<int>(first["items"].size()) != o.list_size) {
      Die(fmt::format("list returned {} items, want {}", first["items"].size(), o.list_size));
    }
    auto [s, wall] = RunFor(o, [&](httplib::Client& c) { CheckStatus(c.Get(path), 200, "list"); });
    rows.push_back(Summarize(fmt::format("list {} GPRs", o.list_size), s, wall,
                             fmt::format("{} KiB per response", first.dump().size() / 1024)));
  }
  // 5. Quotes, one at a time, against the full queue.
  {
    std::vector<std::string> specs;
    for (int i = 0; i < o.quotes; ++i)
      specs.push_back(json{{"spec", MixedSpec(rng, pools)}}.dump());
    Options one = o;
    one.connections = 1;
    const std::string path = fmt::format("{}/namespaces/{}/quotes", kApi, o.ns);
    auto [s, wall] = RunCount(one, o.quotes, [&](httplib::Client& c, int i) {
      Check(c.Post(path, specs[static_cast<std::size_t>(i)], "application/json"), 200, "quote");
    });
    rows.push_back(Summarize(
        "quote (1 connection)", s, wall,
        fmt::format("{} queued, {} nodes, {} pools", o.queued, total_nodes, pools.size())));
  }

  std::printf("| scenario | calls | conns | calls/s | p50 ms | p99 ms | max ms | notes |\n");
  std::printf("|---|---:|---:|---:|---:|---:|---:|---|\n");
  for (const Row& r : rows) {
    const int conns = r.name.starts_with("quote") ? 1 : o.connections;
    std::printf("| %s | %zu | %d | %.0f | %.2f | %.2f | %.2f | %s |\n", r.name.c_str(), r.count,
                conns, static_cast<double>(r.count) / r.seconds, r.p50_ms, r.p99_ms, r.max_ms,
                r.note.c_str());
  }
  return 0;
}
