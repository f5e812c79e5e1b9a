// ListWatch against the fake API server: relist on 410, the resourceVersion kept fresh by
// bookmarks, backoff on failures (doubling, capped, reset by a successful list), prompt Stop.
#include "k8s/list_watch.h"

#include <gtest/gtest.h>

#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

#include "k8s/testing/fake_kube_api_server.h"

namespace egs::k8s {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

// A real clock that records how long each WaitUntil was asked to wait (ListWatch's pauses).
class RecordingClock final : public common::Clock {
 public:
  common::Time Now() const override { return real_.Now(); }
  void SleepUntil(common::Time t) override { real_.SleepUntil(t); }
  bool WaitUntil(std::condition_variable& cv, std::unique_lock<std::mutex>& lock,
                 common::Time deadline, const std::function<bool()>& cond) override {
    {
      std::lock_guard guard(mu_);
      waits_.push_back(std::chrono::round<std::chrono::milliseconds>(deadline - real_.Now()));
    }
    return real_.WaitUntil(cv, lock, deadline, cond);
  }
  std::vector<std::chrono::milliseconds> waits() const {
    std::lock_guard guard(mu_);
    return waits_;
  }

 private:
  common::RealClock real_;
  mutable std::mutex mu_;
  std::vector<std::chrono::milliseconds> waits_;
};

json Node(const std::string& name) { return {{"kind", "Node"}, {"metadata", {{"name", name}}}}; }

class ListWatchTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(server_.Start().ok());
    server_.SetBookmarkInterval(20ms);
    KubeConfig config;
    config.server = server_.url();
    config.token = "secret";
    auto client = KubeClient::Create(real_, config);
    ASSERT_TRUE(client.ok());
    client_ = std::move(*client);
  }
  void TearDown() override {
    if (lw_) lw_->Stop();
    if (thread_.joinable()) thread_.join();
  }
  void Run(ListWatchOptions options) {
    lw_ = std::make_unique<ListWatch>(clock_, *client_, "/api/v1/nodes", options);
    ListWatchHandlers h;
    h.on_list = [this](const json& items) { Note("list " + std::to_string(items.size())); };
    h.on_event = [this](const std::string& type, const json& o) {
      Note(type + " " + o["metadata"]["name"].get<std::string>());
    };
    h.on_result = [this](const common::Status& s) {
      if (!s.ok()) Note("error " + std::string(common::StatusCodeName(s.code())));
    };
    thread_ = std::thread([this, h] { lw_->Run(h); });
  }
  void Note(std::string s) {
    {
      std::lock_guard lock(mu_);
      seen_.push_back(std::move(s));
    }
    cv_.notify_all();
  }
  // Waits (up to 5 s) until `pred(seen)` holds.
  bool WaitFor(const std::function<bool(const std::vector<std::string>&)>& pred) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, 5s, [&] { return pred(seen_); });
  }
  static std::size_t Count(const std::vector<std::string>& seen, const std::string& s) {
    return static_cast<std::size_t>(std::count(seen.begin(), seen.end(), s));
  }

  common::RealClock real_;
  RecordingClock clock_;
  testing::FakeKubeApiServer server_{real_, "secret"};
  std::unique_ptr<KubeClient> client_;
  std::unique_ptr<ListWatch> lw_;
  std::thread thread_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::string> seen_;
};

TEST_F(ListWatchTest, ListsThenWatchesAndRelistsAfterGone) {
  server_.Put(Node("a"));
  Run({20ms, 100ms, 5s});
  ASSERT_TRUE(WaitFor([](const auto& s) { return Count(s, "list 1") == 1; }));
  server_.Put(Node("b"));
  ASSERT_TRUE(WaitFor([](const auto& s) { return Count(s, "ADDED b") == 1; }));
  EXPECT_EQ(lw_->lists(), 1);
  // Compaction: the watch's resourceVersion is gone; ListWatch relists (both nodes) at once.
  server_.CompactHistory();
  ASSERT_TRUE(WaitFor([](const auto& s) { return Count(s, "list 2") == 1; }));
  EXPECT_EQ(lw_->lists(), 2);
  EXPECT_GE(server_.RequestCount("GET", "/api/v1/nodes"), 2);
  // A 410 is not a failure to back off from.
  EXPECT_TRUE(clock_.waits().empty());
  // And the new watch delivers again.
  server_.Put(Node("c"));
  ASSERT_TRUE(WaitFor([](const auto& s) { return Count(s, "ADDED c") == 1; }));
}

TEST_F(ListWatchTest, BookmarksKeepTheResourceVersionAndAnEndedWatchResumesWithoutRelist) {
  Run({20ms, 100ms, 1s});  // each watch request ends after 1 s (server side)
  ASSERT_TRUE(WaitFor([](const auto& s) { return Count(s, "list 0") == 1; }));
  // A change to another kind moves the server's resourceVersion but sends no node event: only a
  // bookmark tells the watcher.
  server_.Put({{"kind", "Namespace"}, {"metadata", {{"name", "elsewhere"}}}});
  const std::string rv =
      server_.Get("Namespace", "", "elsewhere")["metadata"]["resourceVersion"].get<std::string>();
  for (int i = 0; i < 500 && lw_->resource_version() != rv; ++i) std::this_thread::sleep_for(10ms);
  EXPECT_EQ(lw_->resource_version(), rv);
  // The first watch ends after its timeoutSeconds; the next one starts from the bookmark's
  // resourceVersion, without a relist.
  for (int i = 0; i < 300 && server_.RequestCount("WATCH", "/api/v1/nodes") < 2; ++i) {
    std::this_thread::sleep_for(10ms);
  }
  EXPECT_GE(server_.RequestCount("WATCH", "/api/v1/nodes"), 2);
  EXPECT_EQ(lw_->lists(), 1);
  server_.Put(Node("late"));
  ASSERT_TRUE(WaitFor([](const auto& s) { return Count(s, "ADDED late") == 1; }));
}

TEST_F(ListWatchTest, FailuresBackOffDoublingToTheCapAndASuccessResets) {
  server_.FailRequests("GET", "/api/v1/nodes", 503);
  Run({20ms, 80ms, 5s});
  ASSERT_TRUE(WaitFor([](const auto& s) { return Count(s, "error Unavailable") >= 4; }));
  server_.ClearFailures();
  ASSERT_TRUE(WaitFor([](const auto& s) { return Count(s, "list 0") == 1; }));
  const std::vector<std::chrono::milliseconds> waits = clock_.waits();
  ASSERT_GE(waits.size(), 4u);
  // 20, 40, 80, then capped at 80 (the measured remainder may round down by a millisecond).
  auto near = [](std::chrono::milliseconds got, int want) {
    return got.count() >= want - 2 && got.count() <= want;
  };
  EXPECT_TRUE(near(waits[0], 20)) << waits[0].count();
  EXPECT_TRUE(near(waits[1], 40)) << waits[1].count();
  EXPECT_TRUE(near(waits[2], 80)) << waits[2].count();
  EXPECT_TRUE(near(waits[3], 80)) << waits[3].count();
  // After a successful list, a failing watch waits the initial backoff again.
  const std::size_t before = clock_.waits().size();
  server_.SetReachable(false);
  ASSERT_TRUE(WaitFor([](const auto& s) { return Count(s, "error Unavailable") >= 5; }));
  for (int i = 0; i < 300 && clock_.waits().size() <= before; ++i) {
    std::this_thread::sleep_for(5ms);
  }
  ASSERT_GT(clock_.waits().size(), before);
  EXPECT_TRUE(near(clock_.waits()[before], 20)) << clock_.waits()[before].count();
  server_.SetReachable(true);
}

TEST_F(ListWatchTest, StopEndsAPauseAndAWatchPromptly) {
  // A pause of an hour: Stop must not wait for it.
  server_.FailRequests("GET", "/api/v1/nodes", 503);
  Run({std::chrono::hours(1), std::chrono::hours(1), 5s});
  ASSERT_TRUE(WaitFor([](const auto& s) { return Count(s, "error Unavailable") == 1; }));
  lw_->Stop();
  thread_.join();
  EXPECT_TRUE(lw_->stopped());
  // A watch of 5 minutes: Stop cancels it.
  server_.ClearFailures();
  KubeConfig config;
  config.server = server_.url();
  config.token = "secret";
  auto client = KubeClient::Create(real_, config);
  ASSERT_TRUE(client.ok());
  client_ = std::move(*client);
  Run({20ms, 100ms, std::chrono::minutes(5)});
  ASSERT_TRUE(WaitFor([](const auto& s) { return Count(s, "list 0") == 1; }));
  for (int i = 0; i < 300 && server_.RequestCount("WATCH", "/api/v1/nodes") < 1; ++i) {
    std::this_thread::sleep_for(5ms);
  }
  lw_->Stop();
  thread_.join();
  EXPECT_EQ(lw_->lists(), 1);
}

}  // namespace
}  // namespace egs::k8s
