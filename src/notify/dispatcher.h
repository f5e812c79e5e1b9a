// Dispatcher: delivers committed Events to the webhooks of the NotificationSubscriptions that
// ask for them (docs/design/0009-notifications.md).
//
// Source: the Store's change feed. One feeder thread reads it (Store::ChangesSince) every
// poll_interval: NotificationSubscription puts and deletes update its view of the
// subscriptions; every Event put is matched against the subscriptions of the event's namespace
// (and reason) and becomes one delivery per match. Nothing here runs on, or waits for, the
// scheduler loop or an HTTP handler: they only commit to the Store, as before.
//
// Delivery: `workers` threads take due deliveries from a bounded queue (max_queue, counting
// the ones in flight) and post them through the WebhookSender, each attempt bounded by
// attempt_timeout. One workspace's receivers cannot starve the others': a subscription has at
// most one delivery in flight (a hanging receiver holds one worker), a namespace at most half
// the workers (its hanging receivers leave the other half to the other workspaces), and a
// namespace may hold at most max_queue_per_namespace of the queue, a subscription at most
// max_queue_per_subscription (beyond that its own new deliveries are dropped, not others'). A
// retryable failure (connection error, timeout, 5xx, 429) is retried after initial_backoff *
// 2^(attempt-1), capped at max_backoff (or the receiver's Retry-After, capped the same), up to
// max_attempts; then the delivery is abandoned. A non-retryable answer (another 4xx) abandons it at
// once. A delivery whose subscription was deleted or replaced is dropped. When the queue is full a
// new delivery is dropped and counted (queue overflow): visible in the subscription's
// status.dropped and in egs_notify_queue_overflow_total.
//
// Durability (at-least-once for events committed before a restart): the feeder persists, at
// most every state_interval, a cursor (every event at or before it has been delivered, abandoned
// or dropped) and the subscriptions' status counters, as the store metadata key "notify.state".
// A restart replays the feed from the cursor, so deliveries in the queue or in flight at a crash
// are made again, and some that had succeeded may be made twice (receivers can de-duplicate on
// the X-EGS-Delivery header / deliveryId). If the feed was compacted past the cursor, the events
// in between are lost and counted (egs_notify_events_missed_total). On a first start (no state)
// delivery begins at the current revision: history is not replayed.
//
// Thread-safety: every public method may be called from any thread, but PollOnce and
// PersistState from one thread at a time (the feeder's, once Start has run).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "api/notification_codec.h"
#include "common/clock.h"
#include "common/status.h"
#include "notify/payload.h"
#include "notify/webhook_sender.h"
#include "store/store.h"

namespace egs::notify {

struct DispatcherOptions {
  int workers = 4;
  std::size_t max_queue = 1000;  // deliveries waiting or in flight
  std::size_t max_queue_per_namespace = 250;
  std::size_t max_queue_per_subscription = 100;
  int max_attempts = 8;
  common::Duration initial_backoff = common::Seconds(1);
  common::Duration max_backoff = common::Minutes(5);
  common::Duration attempt_timeout = common::Seconds(10);
  common::Duration poll_interval = std::chrono::milliseconds(200);
  common::Duration state_interval = common::Seconds(1);
  std::size_t feed_batch = 1000;  // changes read per ChangesSince call
};

// What a subscription's status section shows.
struct SubscriptionStatus {
  std::string uid;
  // The store revision of the first write of this uid seen (0: unknown). A subscription edited
  // after the cursor still existed before it: a replay gives it the events since the cursor.
  std::int64_t since = 0;
  // Every event of the feed at or before this revision was delivered, abandoned or dropped for
  // this subscription (0: unknown). A replay from the global cursor, held back by another
  // subscription's retries, skips them: a healthy receiver is not sent them twice.
  std::int64_t done_through = 0;
  std::int64_t delivered = 0;
  std::int64_t failures = 0;  // failed attempts
  std::int64_t consecutive_failures = 0;
  std::int64_t dropped = 0;    // queue full
  std::int64_t abandoned = 0;  // retries exhausted, or refused by the receiver
  std::optional<common::Time> last_success;
  std::optional<common::Time> last_error_time;
  std::string last_error;
};

struct DispatcherStats {
  std::int64_t enqueued = 0;
  std::int64_t delivered = 0;
  std::int64_t attempt_errors = 0;
  std::int64_t abandoned = 0;
  std::int64_t overflow = 0;
  std::int64_t missed_events = 0;  // compacted away before they were read
  std::size_t queue_length = 0;    // waiting + in flight
  std::size_t subscriptions = 0;
};

class Dispatcher {
 public:
  // `store`, `clock` and `sender` must outlive the dispatcher.
  Dispatcher(store::Store& store, common::Clock& clock, WebhookSender& sender,
             DispatcherOptions options = {});
  ~Dispatcher();  // Stop()
  Dispatcher(const Dispatcher&) = delete;
  Dispatcher& operator=(const Dispatcher&) = delete;

  // Before Start (or the first PollOnce): loads the subscriptions and the persisted state
  // ("notify.state"), and positions the feed at the persisted cursor, or at the current revision
  // on a first start. Errors: the Store's.
  common::Status Restore();
  // Starts the feeder and the workers. Idempotent.
  void Start();
  // Stops the threads (an attempt in flight finishes, bounded by attempt_timeout) and persists
  // the state once more. Idempotent.
  void Stop();

  // One pass of the feeder: reads the feed to its end (in feed_batch pieces), updates the
  // subscriptions and queues the deliveries. Errors: the Store's (the next pass retries).
  common::Status PollOnce();
  // One worker step on the calling thread: makes the earliest due attempt, if any is due now.
  // Returns whether it made (or dropped) one.
  bool DeliverOnce();
  // Writes "notify.state" if anything changed since the last write.
  common::Status PersistState();

  // The status section of subscription ns/name (as served in the object), or nullopt for a
  // subscription the dispatcher does not know.
  std::optional<nlohmann::json> StatusJson(std::string_view ns, std::string_view name) const;
  // Sets object["status"] for a NotificationSubscription object (matched by namespace, name
  // and uid).
  void Decorate(nlohmann::json& object) const;
  // Changes whenever a status may have changed.
  std::uint64_t version() const { return version_.load(); }
  DispatcherStats stats() const;
  // When the earliest waiting delivery is due; nullopt when none waits.
  std::optional<common::Time> NextDue() const;
  // Prometheus text for /metrics (egs_notify_* families).
  std::string MetricsText() const;

 private:
  struct Subscription {
    SubscriptionRef ref;
    std::int64_t written = 0;  // the store revision of its last write
    api::WebhookUrl url;
    bool slack = false;
    std::set<std::string, std::less<>> reasons;  // empty: every reason
  };
  struct Delivery {
    std::uint64_t seq = 0;
    std::string key;  // "ns/name"
    std::string sub_uid;
    NotificationEvent event;
    int attempts = 0;
    common::Time due;
  };

  static std::string Key(std::string_view ns, std::string_view name);
  // mu_ held.
  void ApplyChange(const store::Change& change);
  void UpsertSubscription(const store::StoredObject& object);
  void RemoveSubscription(const std::string& key);
  void Enqueue(const Subscription& sub, const NotificationEvent& event);
  void Finish(const Delivery& d);  // the delivery leaves the queue for good
  SubscriptionStatus& StatusFor(const std::string& key, const std::string& uid);
  void Touch();  // a status changed
  std::int64_t Cursor() const;
  // Rebuilds the subscriptions from a List (at start, and after the feed was compacted).
  common::Status ListSubscriptions(std::int64_t* revision);
  void FeederLoop();
  void WorkerLoop();
  // mu_ held: the first due delivery whose subscription has none in flight and whose namespace
  // is below its share of the workers; queue_.end() if none.
  std::map<std::pair<common::Time, std::uint64_t>, Delivery>::iterator NextReady();
  static std::string_view NamespaceOf(std::string_view key) { return key.substr(0, key.find('/')); }

  store::Store& store_;
  common::Clock& clock_;
  WebhookSender& sender_;
  const DispatcherOptions options_;

  mutable std::mutex mu_;
  std::condition_variable work_cv_;  // a delivery became due or was queued; stop
  std::condition_variable stop_cv_;  // stop (the feeder's sleep)
  bool stopping_ = false;            // GUARDED_BY(mu_)
  std::map<std::string, Subscription, std::less<>> subs_;          // GUARDED_BY(mu_)
  std::map<std::string, SubscriptionStatus, std::less<>> status_;  // GUARDED_BY(mu_)
  // Waiting deliveries by (due, seq).
  std::map<std::pair<common::Time, std::uint64_t>, Delivery> queue_;  // GUARDED_BY(mu_)
  std::size_t in_flight_ = 0;                                         // GUARDED_BY(mu_)
  // Per namespace: deliveries waiting or in flight. The subscription keys with a delivery in
  // flight (at most `workers` of them).
  std::map<std::string, std::size_t, std::less<>> open_by_ns_;  // GUARDED_BY(mu_)
  std::set<std::string, std::less<>> busy_keys_;                // GUARDED_BY(mu_)
  // Revisions of the events behind queued or in-flight deliveries (one entry per delivery).
  std::multiset<std::int64_t> open_revisions_;  // GUARDED_BY(mu_)
  // The same per subscription key, for its own cursor (SubscriptionStatus::done_through).
  std::map<std::string, std::multiset<std::int64_t>, std::less<>> open_by_key_;  // GUARDED_BY(mu_)
  std::int64_t feed_revision_ = 0;                  // GUARDED_BY(mu_): read up to here
  std::uint64_t next_seq_ = 1;                      // GUARDED_BY(mu_)
  bool dirty_ = false;                              // GUARDED_BY(mu_): state to persist
  DispatcherStats stats_;                           // GUARDED_BY(mu_), queue/subs filled on read
  std::optional<common::Time> last_persist_;        // feeder thread only
  std::optional<common::Time> feed_failing_since_;  // feeder thread only: polls failing since
  common::Time last_feed_warning_;                  // feeder thread only
  std::atomic<std::uint64_t> version_{1};

  std::vector<std::thread> threads_;
  bool started_ = false;  // Start/Stop caller's thread
};

}  // namespace egs::notify
