// Dispatcher on a FakeStore, a SimulatedClock and a scripted sender, driven step by step
// (PollOnce / DeliverOnce / PersistState on the test's thread): no threads, no sleeps.
#include "notify/dispatcher.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "api/codec.h"
#include "common/simulated_clock.h"
#include "notify/fake_webhook_sender.h"
#include "store/fake_store.h"
#include "testing/status_matchers.h"

namespace egs::notify {
namespace {

using ::egs::testing::IsOk;
using nlohmann::json;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

SendOutcome Fail(common::Status s, int http = 0) {
  SendOutcome o;
  o.status = std::move(s);
  o.http_status = http;
  return o;
}

class DispatcherTest : public ::testing::Test {
 protected:
  DispatcherTest() : clock_(common::FromUnixMicros(1'800'000'000'000'000)) {}

  std::unique_ptr<Dispatcher> Make(DispatcherOptions options = {}) {
    auto d = std::make_unique<Dispatcher>(store_, clock_, sender_, options);
    EXPECT_OK(d->Restore());
    return d;
  }

  // A new subscription, or (with `uid`) a new spec of an existing one.
  std::string PutSub(const std::string& ns, const std::string& name, const std::string& url,
                     std::vector<std::string> reasons = {}, const std::string& format = "JSON",
                     std::string uid = "") {
    if (uid.empty()) uid = "uid-" + name + "-" + std::to_string(++uids_);
    json j = {{"apiVersion", "egs.dev/v1alpha1"},
              {"kind", "NotificationSubscription"},
              {"metadata", {{"name", name}, {"namespace", ns}, {"uid", uid}}},
              {"spec", {{"url", url}, {"format", format}, {"reasons", reasons}}}};
    store::StoredObject o{"NotificationSubscription", ns, name, uid, 0, clock_.Now(), j.dump()};
    EXPECT_OK(store_.Commit({store::WriteOp::Put(o, std::nullopt)}, {}));
    return uid;
  }

  void DeleteSub(const std::string& ns, const std::string& name) {
    EXPECT_OK(store_.Commit(
        {store::WriteOp::Delete("NotificationSubscription", ns, name, std::nullopt)}, {}));
  }

  void PutEvent(const std::string& ns, const std::string& gpr, const std::string& reason,
                const std::string& message = "m", const std::string& type = "Normal") {
    api::EventDoc e;
    e.meta.name = gpr + "." + std::to_string(++events_);
    e.meta.ns = ns;
    e.meta.uid = "ev-" + std::to_string(events_);
    e.type = type;
    e.reason = reason;
    e.message = message;
    e.involved_object = {"GPUProvisionRequest", ns, gpr, ""};
    e.first_timestamp = e.last_timestamp = clock_.Now();
    store::StoredObject o{"Event", ns,           e.meta.name,          e.meta.uid,
                          0,       clock_.Now(), api::ToJson(e).dump()};
    EXPECT_OK(store_.Commit({store::WriteOp::Put(o, std::nullopt)}, {}));
  }

  // Every due attempt, on this thread.
  int DeliverAll(Dispatcher& d) {
    int n = 0;
    while (d.DeliverOnce()) ++n;
    return n;
  }

  // "host reason" of every request sent so far.
  std::vector<std::string> Sent() {
    std::vector<std::string> out;
    for (const WebhookRequest& r : sender_.requests()) {
      out.push_back(r.url.host + " " + r.reason);
    }
    return out;
  }

  store::FakeStore store_;
  common::SimulatedClock clock_;
  FakeWebhookSender sender_;
  int uids_ = 0;
  int events_ = 0;
};

TEST_F(DispatcherTest, DeliversOnlyTheEventsEachSubscriptionAsksFor) {
  auto d = Make();
  PutSub("team-a", "ops", "http://ops.example/hook", {"Active", "Completed"});
  PutSub("team-a", "all", "http://all.example/hook");
  PutSub("team-b", "b", "http://b.example/hook", {"Active"});
  PutEvent("team-a", "train", "Active");
  PutEvent("team-a", "train", "Queued");
  PutEvent("team-b", "eval", "Completed");
  PutEvent("team-b", "eval", "Active");
  PutEvent("team-c", "x", "Active");  // no subscription there
  ASSERT_OK(d->PollOnce());
  EXPECT_EQ(DeliverAll(*d), 4);
  EXPECT_THAT(Sent(), ::testing::UnorderedElementsAre("ops.example Active", "all.example Active",
                                                      "all.example Queued", "b.example Active"));
  auto st = d->StatusJson("team-a", "ops");
  ASSERT_TRUE(st);
  EXPECT_EQ((*st)["delivered"], 1);
  EXPECT_EQ((*st)["failures"], 0);
  EXPECT_TRUE(st->contains("lastSuccessTime"));
  EXPECT_EQ(d->stats().delivered, 4);
}

TEST_F(DispatcherTest, GenericBodyIsTheEventAndSlackBodyIsAnIncomingWebhookMessage) {
  auto d = Make();
  const std::string uid = PutSub("team-a", "generic", "http://g.example/x");
  PutSub("team-a", "slack", "https://hooks.slack.example/services/T/B/X", {}, "Slack");
  PutEvent("team-a", "train", "Progress50", "50% of <4h> done & counting");
  ASSERT_OK(d->PollOnce());
  ASSERT_EQ(DeliverAll(*d), 2);
  auto requests = sender_.requests();
  ASSERT_EQ(requests.size(), 2u);
  const WebhookRequest& g = requests[0].url.host == "g.example" ? requests[0] : requests[1];
  const WebhookRequest& s = requests[0].url.host == "g.example" ? requests[1] : requests[0];
  json gj = json::parse(g.body);
  EXPECT_EQ(gj["kind"], "Notification");
  EXPECT_EQ(gj["reason"], "Progress50");
  EXPECT_EQ(gj["workspace"], "team-a");
  EXPECT_EQ(gj["involvedObject"]["name"], "train");
  EXPECT_EQ(gj["involvedObject"]["kind"], "GPUProvisionRequest");
  EXPECT_EQ(gj["message"], "50% of <4h> done & counting");
  EXPECT_EQ(gj["subscription"]["name"], "generic");
  EXPECT_THAT(gj["deliveryId"].get<std::string>(), ::testing::StartsWith(uid + "/"));
  EXPECT_EQ(gj["deliveryId"], g.delivery_id);
  EXPECT_TRUE(gj["time"].is_string());
  json sj = json::parse(s.body);
  EXPECT_EQ(s.url.scheme, "https");
  EXPECT_EQ(s.url.path, "/services/T/B/X");
  EXPECT_EQ(sj["text"], "[team-a] gpr/train Progress50: 50% of &lt;4h&gt; done &amp; counting");
  ASSERT_TRUE(sj["blocks"].is_array());
  EXPECT_EQ(sj["blocks"][0]["type"], "section");
  EXPECT_EQ(sj["blocks"][0]["text"]["type"], "mrkdwn");
  EXPECT_THAT(sj["blocks"][0]["text"]["text"].get<std::string>(), HasSubstr("*Progress50"));
}

// An alert event's structured fields reach the receiver, not only its message text.
TEST_F(DispatcherTest, AnAlertEventsBodyCarriesItsAlertObject) {
  auto d = Make();
  PutSub("team-a", "alerts", "http://g.example/x");
  const json alert = {{"id", 3},      {"rule", "xid"}, {"severity", "critical"},
                      {"node", "n1"}, {"gpu", 2},      {"value", 79}};
  const json ev = {{"apiVersion", "egs.dev/v1alpha1"},
                   {"kind", "Event"},
                   {"metadata", {{"name", "train.a1"}, {"namespace", "team-a"}}},
                   {"type", "Warning"},
                   {"reason", "AlertRaised"},
                   {"message", "xid 79 on n1 GPU 2"},
                   {"involvedObject",
                    {{"kind", "GPUProvisionRequest"},
                     {"namespace", "team-a"},
                     {"name", "train"},
                     {"uid", "gpr-9"}}},
                   {"alert", alert}};
  store::StoredObject o{"Event", "team-a", "train.a1", "ev-a1", 0, clock_.Now(), ev.dump()};
  ASSERT_OK(store_.Commit({store::WriteOp::Put(o, std::nullopt)}, {}));
  ASSERT_OK(d->PollOnce());
  ASSERT_EQ(DeliverAll(*d), 1);
  const json body = json::parse(sender_.requests().at(0).body);
  EXPECT_EQ(body["alert"], alert);
  EXPECT_EQ(body["involvedObject"]["uid"], "gpr-9");
}

TEST_F(DispatcherTest, RetriesWithExponentialBackoffThenSucceeds) {
  DispatcherOptions o;
  o.initial_backoff = common::Seconds(2);
  auto d = Make(o);
  PutSub("team-a", "ops", "http://ops.example/hook");
  PutEvent("team-a", "train", "Active");
  sender_.Script(Fail(common::UnavailableError("HTTP 500 from receiver"), 500));
  sender_.Script(Fail(common::UnavailableError("HTTP 503 from receiver"), 503));
  ASSERT_OK(d->PollOnce());
  const common::Time t0 = clock_.Now();
  EXPECT_TRUE(d->DeliverOnce());
  EXPECT_FALSE(d->DeliverOnce());  // not due yet
  EXPECT_EQ(d->NextDue(), t0 + common::Seconds(2));
  auto st = d->StatusJson("team-a", "ops");
  EXPECT_EQ((*st)["failures"], 1);
  EXPECT_EQ((*st)["pending"], 1);
  EXPECT_THAT((*st)["lastError"].get<std::string>(), HasSubstr("HTTP 500"));
  clock_.AdvanceBy(common::Seconds(2));
  EXPECT_TRUE(d->DeliverOnce());
  EXPECT_EQ(d->NextDue(), clock_.Now() + common::Seconds(4));  // doubled
  clock_.AdvanceBy(common::Seconds(4));
  EXPECT_TRUE(d->DeliverOnce());
  EXPECT_EQ(d->NextDue(), std::nullopt);
  st = d->StatusJson("team-a", "ops");
  EXPECT_EQ((*st)["delivered"], 1);
  EXPECT_EQ((*st)["failures"], 2);
  EXPECT_EQ((*st)["consecutiveFailures"], 0);
  EXPECT_EQ((*st)["pending"], 0);
  EXPECT_EQ(sender_.requests().size(), 3u);
  // The same delivery id on every attempt, so receivers can de-duplicate.
  EXPECT_EQ(sender_.requests()[0].delivery_id, sender_.requests()[2].delivery_id);
}

TEST_F(DispatcherTest, GivesUpAfterMaxAttemptsAndAtOnceOnARefusal) {
  DispatcherOptions o;
  o.max_attempts = 3;
  o.initial_backoff = common::Seconds(1);
  o.max_backoff = common::Seconds(1);
  auto d = Make(o);
  PutSub("team-a", "down", "http://down.example/hook", {"Active"});
  PutSub("team-a", "refuses", "http://refuses.example/hook", {"Queued"});
  PutEvent("team-a", "train", "Active");
  for (int i = 0; i < 3; ++i) sender_.Script(Fail(common::UnavailableError("connection refused")));
  ASSERT_OK(d->PollOnce());
  for (int i = 0; i < 3; ++i) {
    EXPECT_TRUE(d->DeliverOnce());
    clock_.AdvanceBy(common::Seconds(1));  // capped backoff
  }
  EXPECT_FALSE(d->DeliverOnce());
  auto st = d->StatusJson("team-a", "down");
  EXPECT_EQ((*st)["failures"], 3);
  EXPECT_EQ((*st)["consecutiveFailures"], 3);
  EXPECT_EQ((*st)["abandoned"], 1);
  EXPECT_THAT((*st)["lastError"].get<std::string>(), HasSubstr("gave up after 3 attempts"));

  sender_.Script(Fail(common::FailedPreconditionError("HTTP 404 from receiver"), 404));
  PutEvent("team-a", "train", "Queued");
  ASSERT_OK(d->PollOnce());
  EXPECT_TRUE(d->DeliverOnce());
  EXPECT_EQ(d->NextDue(), std::nullopt);  // not retried
  st = d->StatusJson("team-a", "refuses");
  EXPECT_EQ((*st)["abandoned"], 1);
  EXPECT_EQ((*st)["failures"], 1);
  EXPECT_EQ(d->stats().abandoned, 2);
  EXPECT_THAT(d->MetricsText(), HasSubstr("egs_notify_deliveries_total{result=\"abandoned\"} 2"));
}

TEST_F(DispatcherTest, AFullQueueDropsVisiblyAndCountsIt) {
  DispatcherOptions o;
  o.max_queue = 2;
  auto d = Make(o);
  PutSub("team-a", "ops", "http://ops.example/hook");
  for (int i = 0; i < 5; ++i) PutEvent("team-a", "train", "Progress25");
  ASSERT_OK(d->PollOnce());
  EXPECT_EQ(d->stats().overflow, 3);
  EXPECT_EQ(d->stats().queue_length, 2u);
  auto st = d->StatusJson("team-a", "ops");
  EXPECT_EQ((*st)["dropped"], 3);
  EXPECT_THAT((*st)["lastError"].get<std::string>(), HasSubstr("queue full"));
  EXPECT_THAT(d->MetricsText(), HasSubstr("egs_notify_queue_overflow_total 3\n"));
  EXPECT_EQ(DeliverAll(*d), 2);
}

TEST_F(DispatcherTest, ADeletedSubscriptionGetsNothingMore) {
  auto d = Make();
  PutSub("team-a", "ops", "http://ops.example/hook");
  PutEvent("team-a", "train", "Active");
  DeleteSub("team-a", "ops");
  PutEvent("team-a", "train", "Completed");
  ASSERT_OK(d->PollOnce());  // the delete is read after the first event was queued
  EXPECT_EQ(DeliverAll(*d), 0);
  EXPECT_TRUE(sender_.requests().empty());
  EXPECT_EQ(d->StatusJson("team-a", "ops"), std::nullopt);
  EXPECT_EQ(d->stats().queue_length, 0u);
}

TEST_F(DispatcherTest, HistoryBeforeTheFirstStartIsNotReplayed) {
  PutSub("team-a", "ops", "http://ops.example/hook");
  PutEvent("team-a", "train", "Active");
  auto d = Make();
  PutEvent("team-a", "train", "Completed");
  ASSERT_OK(d->PollOnce());
  EXPECT_EQ(DeliverAll(*d), 1);
  EXPECT_THAT(Sent(), ElementsAre("ops.example Completed"));
}

TEST_F(DispatcherTest, ARestartRedeliversWhatWasNotDeliveredAndKeepsTheStatus) {
  auto d = Make();
  PutSub("team-a", "ops", "http://ops.example/hook");
  PutEvent("team-a", "train", "Active");
  PutEvent("team-a", "train", "Progress25");
  PutEvent("team-a", "train", "Progress50");
  ASSERT_OK(d->PollOnce());
  EXPECT_TRUE(d->DeliverOnce());  // Active delivered; the other two still queued ("crash")
  ASSERT_OK(d->PersistState());
  d.reset();

  auto again = Make();
  PutEvent("team-a", "train", "Progress75");
  ASSERT_OK(again->PollOnce());
  EXPECT_EQ(DeliverAll(*again), 3);
  EXPECT_THAT(Sent(), ElementsAre("ops.example Active", "ops.example Progress25",
                                  "ops.example Progress50", "ops.example Progress75"));
  auto st = again->StatusJson("team-a", "ops");
  EXPECT_EQ((*st)["delivered"], 4);  // 1 before the restart + 3 after
}

TEST_F(DispatcherTest, ASubscriptionWrittenAfterTheCursorDoesNotSeeOlderEventsOnReplay) {
  auto d = Make();
  PutSub("team-a", "old", "http://old.example/hook");
  PutEvent("team-a", "train", "Active");
  ASSERT_OK(d->PollOnce());
  ASSERT_OK(d->PersistState());  // cursor before Active: it is still queued
  d.reset();
  PutSub("team-a", "new", "http://new.example/hook");
  PutEvent("team-a", "train", "Completed");
  auto again = Make();
  ASSERT_OK(again->PollOnce());
  DeliverAll(*again);
  EXPECT_THAT(Sent(), ::testing::UnorderedElementsAre("old.example Active", "old.example Completed",
                                                      "new.example Completed"));
}

// A subscription edited after the cursor (its URL fixed while deliveries were pending) existed
// before it: after a restart the replay delivers the pending events to the new URL.
TEST_F(DispatcherTest, ASubscriptionEditedAfterTheCursorKeepsItsEventsOnReplay) {
  auto d = Make();
  const std::string uid = PutSub("team-a", "ops", "http://dead.example/hook");
  ASSERT_OK(d->PollOnce());
  ASSERT_OK(d->PersistState());
  PutEvent("team-a", "train", "Active");
  ASSERT_OK(d->PollOnce());
  ASSERT_OK(d->PersistState());  // cursor before Active: it is still queued
  PutSub("team-a", "ops", "http://fixed.example/hook", {}, "JSON", uid);
  ASSERT_OK(d->PollOnce());  // seen, but the state is not written again before the crash
  d.reset();
  auto again = Make();
  ASSERT_OK(again->PollOnce());
  DeliverAll(*again);
  EXPECT_THAT(Sent(), ElementsAre("fixed.example Active"));
}

// A subscription whose receiver is down holds the global cursor back; after a restart the
// replay from there does not send a healthy subscription what it already delivered.
TEST_F(DispatcherTest, AReplaySkipsWhatASubscriptionHadDone) {
  auto d = Make();
  PutSub("team-a", "dead", "http://dead.example/hook");
  PutSub("team-a", "ok", "http://ok.example/hook");
  PutEvent("team-a", "train", "Active");
  ASSERT_OK(d->PollOnce());
  sender_.Script(Fail(common::UnavailableError("connection refused")));
  EXPECT_TRUE(d->DeliverOnce());  // dead: fails, retried later
  EXPECT_TRUE(d->DeliverOnce());  // ok: delivered
  ASSERT_OK(d->PersistState());
  d.reset();
  auto again = Make();
  ASSERT_OK(again->PollOnce());
  clock_.AdvanceBy(common::Minutes(1));
  DeliverAll(*again);
  EXPECT_THAT(Sent(),
              ElementsAre("dead.example Active", "ok.example Active", "dead.example Active"));
}

TEST_F(DispatcherTest, ACompactedFeedIsCountedAsMissed) {
  store::FakeStore small({.change_retention_revisions = 2});
  Dispatcher d(small, clock_, sender_);
  ASSERT_OK(d.Restore());
  json sub = {{"metadata", {{"name", "ops"}, {"namespace", "team-a"}}},
              {"spec", {{"url", "http://ops.example/"}}}};
  ASSERT_OK(small.Commit({store::WriteOp::Put({"NotificationSubscription", "team-a", "ops", "u1", 0,
                                               clock_.Now(), sub.dump()},
                                              std::nullopt)},
                         {}));
  ASSERT_OK(d.PollOnce());
  for (int i = 0; i < 5; ++i) ASSERT_OK(small.Commit({store::MetaPut("k", std::to_string(i))}, {}));
  ASSERT_OK(d.PollOnce());
  EXPECT_EQ(d.stats().missed_events, 1);
  EXPECT_EQ(d.stats().subscriptions, 1u);
  EXPECT_THAT(d.MetricsText(), HasSubstr("egs_notify_events_missed_total 1\n"));
}

TEST_F(DispatcherTest, DecorateFillsTheStatusOfTheSameObjectOnly) {
  auto d = Make();
  const std::string uid = PutSub("team-a", "ops", "http://ops.example/hook");
  ASSERT_OK(d->PollOnce());
  json same = {{"metadata", {{"name", "ops"}, {"namespace", "team-a"}, {"uid", uid}}}};
  json other = {{"metadata", {{"name", "ops"}, {"namespace", "team-a"}, {"uid", "older"}}}};
  const auto v = d->version();
  d->Decorate(same);
  d->Decorate(other);
  EXPECT_EQ(same["status"]["delivered"], 0);
  EXPECT_FALSE(other.contains("status"));
  PutEvent("team-a", "train", "Active");
  ASSERT_OK(d->PollOnce());
  DeliverAll(*d);
  EXPECT_GT(d->version(), v);
}

}  // namespace
}  // namespace egs::notify
