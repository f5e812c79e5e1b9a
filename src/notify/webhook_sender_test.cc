// HttpWebhookSender and a threaded Dispatcher against a real receiver: a cpp-httplib server on
// 127.0.0.1 in the test. Waits are for outcomes (bounded by a generous real-time limit that only
// turns a hang into a failure); nothing asserts how long anything took.
#include "notify/webhook_sender.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <httplib.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "api/codec.h"
#include "common/clock.h"
#include "notify/dispatcher.h"
#include "store/fake_store.h"
#include "testing/loopback_receiver.h"
#include "testing/status_matchers.h"

namespace egs::notify {
namespace {

using ::egs::testing::StatusIs;
using nlohmann::json;
using ::testing::HasSubstr;
using namespace std::chrono_literals;

using Receiver = ::egs::testing::LoopbackReceiver;

WebhookRequest RequestTo(const std::string& url) {
  WebhookRequest r;
  r.url = api::ParseWebhookUrl(url, "url").value();
  r.body = R"({"text":"hello"})";
  r.delivery_id = "sub-1/ev@7";
  r.reason = "Active";
  return r;
}

// A port nobody listens on: served, then stopped (which closes the socket).
int ClosedPort() {
  httplib::Server s;
  int port = s.bind_to_any_port("127.0.0.1");
  std::thread t([&] { s.listen_after_bind(); });
  while (!s.is_running()) std::this_thread::sleep_for(1ms);
  s.stop();
  t.join();
  return port;
}

TEST(HttpWebhookSenderTest, PostsTheBodyWithTheDeliveryHeader) {
  Receiver rx;
  HttpWebhookSender sender;
  SendOutcome out = sender.Send(RequestTo(rx.Url("/hook?team=a")), common::Seconds(5));
  EXPECT_OK(out.status);
  EXPECT_EQ(out.http_status, 200);
  ASSERT_EQ(rx.Bodies("/hook").size(), 1u);
  EXPECT_EQ(rx.Bodies("/hook")[0], R"({"text":"hello"})");
  EXPECT_EQ(rx.DeliveryHeaders()[0], "sub-1/ev@7");
}

TEST(HttpWebhookSenderTest, ServerErrorsAreRetryableAndRefusalsAreNot) {
  Receiver rx;
  rx.Script("/hook", {500, 404});
  HttpWebhookSender sender;
  SendOutcome first = sender.Send(RequestTo(rx.Url("/hook")), common::Seconds(5));
  EXPECT_THAT(first.status, StatusIs(common::StatusCode::kUnavailable));
  EXPECT_EQ(first.http_status, 500);
  EXPECT_TRUE(first.retryable());
  EXPECT_THAT(first.status.message(), HasSubstr("HTTP 500"));
  SendOutcome second = sender.Send(RequestTo(rx.Url("/hook")), common::Seconds(5));
  EXPECT_THAT(second.status, StatusIs(common::StatusCode::kFailedPrecondition));
  EXPECT_FALSE(second.retryable());
}

TEST(HttpWebhookSenderTest, AReceiverThatIsDownIsUnavailable) {
  HttpWebhookSender sender;
  SendOutcome out = sender.Send(
      RequestTo("http://127.0.0.1:" + std::to_string(ClosedPort()) + "/x"), common::Seconds(5));
  EXPECT_THAT(out.status, StatusIs(common::StatusCode::kUnavailable));
  EXPECT_TRUE(out.retryable());
}

TEST(HttpWebhookSenderTest, AHangingReceiverEndsInDeadlineExceeded) {
  Receiver rx;
  HttpWebhookSender sender;
  SendOutcome out = sender.Send(RequestTo(rx.Url("/hang")), std::chrono::milliseconds(200));
  EXPECT_THAT(out.status, StatusIs(common::StatusCode::kDeadlineExceeded));
  EXPECT_TRUE(out.retryable());
}

// ---- The threaded dispatcher against the receiver ----------------------------------------------

class LiveDispatcherTest : public ::testing::Test {
 protected:
  void Start(DispatcherOptions o) {
    o.poll_interval = 10ms;
    o.state_interval = 10ms;
    dispatcher_ = std::make_unique<Dispatcher>(store_, clock_, sender_, o);
    ASSERT_OK(dispatcher_->Restore());
    dispatcher_->Start();
  }
  void TearDown() override {
    if (dispatcher_) dispatcher_->Stop();
  }
  void PutSub(const std::string& name, const std::string& url, const std::string& ns = "team-a") {
    json j = {{"metadata", {{"name", name}, {"namespace", ns}}},
              {"spec", {{"url", url}, {"format", "JSON"}}}};
    ASSERT_OK(store_.Commit({store::WriteOp::Put({"NotificationSubscription", ns, name,
                                                  "uid-" + name, 0, clock_.Now(), j.dump()},
                                                 std::nullopt)},
                            {}));
  }
  void PutEvent(const std::string& reason, const std::string& ns = "team-a") {
    api::EventDoc e;
    e.meta.name = "train." + std::to_string(++events_);
    e.reason = reason;
    e.involved_object = {"GPUProvisionRequest", ns, "train", ""};
    ASSERT_OK(store_.Commit(
        {store::WriteOp::Put({"Event", ns, e.meta.name, "", 0, clock_.Now(), api::ToJson(e).dump()},
                             std::nullopt)},
        {}));
  }
  // Waits (up to 20 s, real time) until `pred` holds on the subscription's status.
  bool WaitStatus(const std::string& name, const std::function<bool(const json&)>& pred) {
    for (int i = 0; i < 2000; ++i) {
      auto st = dispatcher_->StatusJson("team-a", name);
      if (st && pred(*st)) return true;
      std::this_thread::sleep_for(10ms);
    }
    return false;
  }

  store::FakeStore store_;
  common::RealClock clock_;
  HttpWebhookSender sender_;
  std::unique_ptr<Dispatcher> dispatcher_;
  int events_ = 0;
};

TEST_F(LiveDispatcherTest, RetriesAfterTheReceiverFailsThenSucceeds) {
  Receiver rx;
  rx.Script("/hook", {500, 500});
  DispatcherOptions o;
  o.initial_backoff = 20ms;
  Start(o);
  PutSub("ops", rx.Url("/hook"));
  PutEvent("Active");
  ASSERT_TRUE(rx.WaitFor("/hook", 3));
  ASSERT_TRUE(WaitStatus("ops", [](const json& s) { return s["delivered"] == 1; }));
  auto st = dispatcher_->StatusJson("team-a", "ops");
  EXPECT_EQ((*st)["failures"], 2);
  EXPECT_EQ((*st)["consecutiveFailures"], 0);
  EXPECT_THAT((*st)["lastError"].get<std::string>(), HasSubstr("HTTP 500"));
  // Every attempt carried the same event.
  auto bodies = rx.Bodies("/hook");
  EXPECT_EQ(json::parse(bodies[0])["reason"], "Active");
  EXPECT_EQ(bodies[0], bodies[2]);
}

TEST_F(LiveDispatcherTest, AReceiverThatIsDownBacksOffAndShowsTheError) {
  DispatcherOptions o;
  o.initial_backoff = 10ms;
  o.max_backoff = 1s;
  Start(o);
  PutSub("down", "http://127.0.0.1:" + std::to_string(ClosedPort()) + "/hook");
  PutEvent("Active");
  ASSERT_TRUE(WaitStatus("down", [](const json& s) { return s["failures"] >= 2; }));
  auto st = dispatcher_->StatusJson("team-a", "down");
  EXPECT_EQ((*st)["delivered"], 0);
  EXPECT_EQ((*st)["pending"], 1);  // waiting for its next attempt
  EXPECT_THAT((*st)["lastError"].get<std::string>(), HasSubstr("Connection"));
  EXPECT_THAT((*st)["lastError"].get<std::string>(), HasSubstr("next in"));
  EXPECT_TRUE(st->contains("lastErrorTime"));
  EXPECT_THAT(dispatcher_->MetricsText(),
              HasSubstr("egs_notify_subscription_consecutive_failures{namespace=\"team-a\","
                        "name=\"down\"}"));
}

TEST_F(LiveDispatcherTest, AHangingReceiverHoldsOneWorkerOnlyAndTimesOut) {
  Receiver rx;
  DispatcherOptions o;
  o.workers = 4;            // a namespace may use two of them
  o.attempt_timeout = 30s;  // the hang lasts until the test releases it
  o.max_attempts = 1;
  Start(o);
  PutSub("hangs", rx.Url("/hang"));
  PutSub("fine", rx.Url("/fine"));
  PutEvent("Active");
  ASSERT_TRUE(rx.WaitHanging());
  // While one attempt hangs, writers still commit, the feed is still read, and the other
  // worker still delivers.
  PutEvent("Completed");
  ASSERT_TRUE(rx.WaitFor("/fine", 2));
  EXPECT_GE(dispatcher_->stats().queue_length, 1u);  // the hung attempt is in flight
  rx.Release();
  ASSERT_TRUE(WaitStatus("hangs", [](const json& s) { return s["delivered"] >= 1; }));
}

// One workspace's hanging receivers hold at most half the workers: another workspace's events
// still go out (before, two hanging subscriptions of one workspace took both workers).
TEST_F(LiveDispatcherTest, AWorkspacesHangingReceiversDoNotHoldUpAnotherWorkspace) {
  Receiver rx;
  DispatcherOptions o;
  o.workers = 2;
  o.attempt_timeout = 30s;  // the hangs last until the test releases them
  o.max_attempts = 1;
  Start(o);
  PutSub("hang1", rx.Url("/hang"));
  PutSub("hang2", rx.Url("/hang"));
  PutSub("fine", rx.Url("/fine"), "team-b");
  PutEvent("Active");
  ASSERT_TRUE(rx.WaitHanging());
  PutEvent("Active", "team-b");
  EXPECT_TRUE(rx.WaitFor("/fine", 1));
  rx.Release();
  ASSERT_TRUE(WaitStatus("hang2", [](const json& s) { return s["delivered"] >= 1; }));
}

// A workspace's burst fills only its share of the queue: another workspace's events still get in.
TEST_F(LiveDispatcherTest, AWorkspacesBacklogLeavesRoomForOthers) {
  Receiver rx;
  DispatcherOptions o;
  o.workers = 1;
  o.attempt_timeout = 30s;
  o.max_attempts = 1;
  o.max_queue = 10;
  o.max_queue_per_namespace = 5;
  o.max_queue_per_subscription = 3;
  Start(o);
  PutSub("hang1", rx.Url("/hang"));
  PutSub("hang2", rx.Url("/hang"));
  PutSub("fine", rx.Url("/fine"), "team-b");
  for (int i = 0; i < 8; ++i) PutEvent("Queued");
  ASSERT_TRUE(rx.WaitHanging());
  ASSERT_TRUE(WaitStatus("hang2", [](const json& s) { return s["dropped"] >= 1; }));
  PutEvent("Active", "team-b");
  for (int i = 0; i < 2000 && dispatcher_->stats().queue_length < 6; ++i) {
    std::this_thread::sleep_for(10ms);
  }
  auto fine = dispatcher_->StatusJson("team-b", "fine");
  EXPECT_EQ((*fine)["dropped"], 0);
  auto hung = dispatcher_->StatusJson("team-a", "hang1");
  EXPECT_THAT((*hung)["lastError"].get<std::string>(), HasSubstr("share of the notification"));
  rx.Release();
  EXPECT_TRUE(rx.WaitFor("/fine", 1));
}

TEST_F(LiveDispatcherTest, TheAttemptTimeoutBoundsAHang) {
  Receiver rx;
  DispatcherOptions o;
  o.attempt_timeout = 200ms;
  o.max_attempts = 1;
  Start(o);
  PutSub("hangs", rx.Url("/hang"));
  PutEvent("Active");
  ASSERT_TRUE(WaitStatus("hangs", [](const json& s) { return s["abandoned"] == 1; }));
  auto st = dispatcher_->StatusJson("team-a", "hangs");
  EXPECT_THAT((*st)["lastError"].get<std::string>(), HasSubstr("no answer within 0.2s"));
}

}  // namespace
}  // namespace egs::notify
