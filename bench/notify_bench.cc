// Webhook notifications (src/notify):
//   BM_NotifyMatchAndDeliver   the dispatcher's own cost per event: read the change feed of a
//                              FakeStore, match each Event against 100 subscriptions in 50
//                              workspaces (2 match per event), build the JSON body, hand it to a
//                              sender that only counts. items_per_second = events/s.
//   BM_NotifyLoopbackPost      one HttpWebhookSender attempt to a cpp-httplib receiver on
//                              127.0.0.1 (a new TCP connection per attempt, as egsd does).
//                              items_per_second = deliveries/s on one worker thread.
//
//   egs-bench --benchmark_filter=BM_Notify
#include <benchmark/benchmark.h>
#include <fmt/format.h>
#include <httplib.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>

#include "api/codec.h"
#include "common/simulated_clock.h"
#include "notify/dispatcher.h"
#include "store/fake_store.h"

namespace egs::notify {
namespace {

class CountingSender final : public WebhookSender {
 public:
  SendOutcome Send(const WebhookRequest& request, common::Duration) override {
    bytes += request.body.size();
    ++sent;
    return {};
  }
  std::size_t bytes = 0;
  std::int64_t sent = 0;
};

void BM_NotifyMatchAndDeliver(benchmark::State& state) {
  constexpr int kEventsPerIteration = 1000;
  store::FakeStore store;
  common::SimulatedClock clock;
  CountingSender sender;
  DispatcherOptions options;
  options.max_queue = 100'000;
  Dispatcher d(store, clock, sender, options);
  if (!d.Restore().ok()) return state.SkipWithError("restore");
  for (int i = 0; i < 100; ++i) {
    const std::string ns = fmt::format("team-{}", i % 50);
    const std::string name = fmt::format("sub-{}", i);
    nlohmann::json j = {{"metadata", {{"name", name}, {"namespace", ns}}},
                        {"spec",
                         {{"url", "http://127.0.0.1:9/hook"},
                          {"format", i % 2 ? "Slack" : "JSON"},
                          {"reasons", {"Active", "Completed", "Progress50"}}}}};
    store::StoredObject o{
        "NotificationSubscription", ns, name, "u" + name, 0, clock.Now(), j.dump()};
    if (!store.Commit({store::WriteOp::Put(o, std::nullopt)}, {}).ok()) return;
  }
  std::int64_t seq = 0;
  for (auto _ : state) {
    state.PauseTiming();
    for (int i = 0; i < kEventsPerIteration; ++i, ++seq) {
      api::EventDoc e;
      e.meta.name = fmt::format("train.{}", seq);
      e.reason = seq % 4 == 0 ? "Queued" : "Active";
      e.message = "nodes ready in the workspace";
      e.involved_object = {"GPUProvisionRequest", fmt::format("team-{}", seq % 50), "train", ""};
      e.first_timestamp = e.last_timestamp = clock.Now();
      store::StoredObject o{"Event", e.involved_object.ns, e.meta.name,          "",
                            0,       clock.Now(),          api::ToJson(e).dump()};
      if (!store.Commit({store::WriteOp::Put(o, std::nullopt)}, {}).ok()) return;
    }
    state.ResumeTiming();
    if (!d.PollOnce().ok()) return state.SkipWithError("poll");
    while (d.DeliverOnce()) {
    }
  }
  state.SetItemsProcessed(state.iterations() * kEventsPerIteration);
  state.counters["deliveries_per_event"] =
      static_cast<double>(sender.sent) /
      static_cast<double>(state.iterations() * kEventsPerIteration);
}
BENCHMARK(BM_NotifyMatchAndDeliver)->Unit(benchmark::kMillisecond);

void BM_NotifyLoopbackPost(benchmark::State& state) {
  httplib::Server server;
  server.Post("/hook", [](const httplib::Request&, httplib::Response& res) {
    res.set_content("ok", "text/plain");
  });
  const int port = server.bind_to_any_port("127.0.0.1");
  std::thread t([&] { server.listen_after_bind(); });
  while (!server.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  HttpWebhookSender sender;
  WebhookRequest request;
  request.url = api::ParseWebhookUrl(fmt::format("http://127.0.0.1:{}/hook", port), "url").value();
  request.body = R"({"text":"[team-a] gpr/train Active: nodes ready in the workspace"})";
  request.delivery_id = "bench";
  request.reason = "Active";
  for (auto _ : state) {
    if (!sender.Send(request, common::Seconds(5)).status.ok()) {
      state.SkipWithError("send failed");
      break;
    }
  }
  state.SetItemsProcessed(state.iterations());
  server.stop();
  t.join();
}
BENCHMARK(BM_NotifyLoopbackPost)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace egs::notify
