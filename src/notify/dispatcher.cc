#include "notify/dispatcher.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <utility>

namespace egs::notify {
namespace {

using common::Status;
using nlohmann::json;

constexpr std::string_view kStateKey = "notify.state";
constexpr std::string_view kEventKind = "Event";

std::optional<std::int64_t> MicrosOf(const std::optional<common::Time>& t) {
  if (!t) return std::nullopt;
  return common::ToUnixMicros(*t);
}

json StatusToState(const SubscriptionStatus& s) {
  json j = {{"uid", s.uid},
            {"since", s.since},
            {"doneThrough", s.done_through},
            {"delivered", s.delivered},
            {"failures", s.failures},
            {"consecutiveFailures", s.consecutive_failures},
            {"dropped", s.dropped},
            {"abandoned", s.abandoned},
            {"lastError", s.last_error}};
  if (auto us = MicrosOf(s.last_success)) j["lastSuccessUnixUs"] = *us;
  if (auto us = MicrosOf(s.last_error_time)) j["lastErrorUnixUs"] = *us;
  return j;
}

SubscriptionStatus StatusFromState(const json& j) {
  SubscriptionStatus s;
  s.uid = j.value("uid", "");
  s.since = j.value("since", std::int64_t{0});
  s.done_through = j.value("doneThrough", std::int64_t{0});
  s.delivered = j.value("delivered", std::int64_t{0});
  s.failures = j.value("failures", std::int64_t{0});
  s.consecutive_failures = j.value("consecutiveFailures", std::int64_t{0});
  s.dropped = j.value("dropped", std::int64_t{0});
  s.abandoned = j.value("abandoned", std::int64_t{0});
  s.last_error = j.value("lastError", "");
  if (j.contains("lastSuccessUnixUs")) {
    s.last_success = common::FromUnixMicros(j["lastSuccessUnixUs"].get<std::int64_t>());
  }
  if (j.contains("lastErrorUnixUs")) {
    s.last_error_time = common::FromUnixMicros(j["lastErrorUnixUs"].get<std::int64_t>());
  }
  return s;
}

std::string Escape(std::string_view label) {
  std::string out;
  for (char c : label) {
    if (c == '\\' || c == '"') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

}  // namespace

Dispatcher::Dispatcher(store::Store& store, common::Clock& clock, WebhookSender& sender,
                       DispatcherOptions options)
    : store_(store), clock_(clock), sender_(sender), options_(std::move(options)) {}

Dispatcher::~Dispatcher() { Stop(); }

std::string Dispatcher::Key(std::string_view ns, std::string_view name) {
  return fmt::format("{}/{}", ns, name);
}

// ---- Restore and the feed ----------------------------------------------------------------------

Status Dispatcher::ListSubscriptions(std::int64_t* revision) {
  EGS_ASSIGN_OR_RETURN(store::ListResult list,
                       store_.List(api::kNotificationSubscriptionKind, std::nullopt));
  std::lock_guard lock(mu_);
  std::set<std::string, std::less<>> listed;
  for (const store::StoredObject& o : list.objects) {
    UpsertSubscription(o);
    listed.insert(Key(o.ns, o.name));
  }
  std::vector<std::string> gone;
  for (const auto& [key, sub] : subs_) {
    if (!listed.contains(key)) gone.push_back(key);
  }
  for (const std::string& key : gone) RemoveSubscription(key);
  *revision = list.revision;
  return common::OkStatus();
}

Status Dispatcher::Restore() {
  EGS_ASSIGN_OR_RETURN(std::optional<std::string> saved, store::GetMeta(store_, kStateKey));
  std::optional<std::int64_t> cursor;
  std::map<std::string, SubscriptionStatus, std::less<>> statuses;
  if (saved) {
    json j = json::parse(*saved, nullptr, /*allow_exceptions=*/false);
    if (j.is_object() && j.contains("cursor") && j["cursor"].is_number_integer()) {
      cursor = j["cursor"].get<std::int64_t>();
      if (j.contains("subscriptions") && j["subscriptions"].is_object()) {
        for (auto it = j["subscriptions"].begin(); it != j["subscriptions"].end(); ++it) {
          if (it->is_object()) statuses[it.key()] = StatusFromState(*it);
        }
      }
    } else {
      spdlog::warn("notify: ignoring unreadable {}; starting at the current revision", kStateKey);
    }
  }
  std::int64_t revision = 0;
  EGS_RETURN_IF_ERROR(ListSubscriptions(&revision));
  std::lock_guard lock(mu_);
  if (cursor) {
    for (const auto& [key, st] : statuses) {
      auto sub = subs_.find(key);
      if (sub != subs_.end() && sub->second.ref.uid == st.uid) status_[key] = st;
    }
    // A subscription written after the cursor comes back with its put when the feed is
    // replayed; until then it must not match events from before it was written. One that
    // existed at the cursor and was only edited since keeps them (with its latest spec).
    for (auto it = subs_.begin(); it != subs_.end();) {
      const auto st = status_.find(it->first);
      const bool existed = st != status_.end() && st->second.uid == it->second.ref.uid &&
                           st->second.since > 0 && st->second.since <= *cursor;
      it = it->second.written > *cursor && !existed ? subs_.erase(it) : std::next(it);
    }
    feed_revision_ = std::min(*cursor, revision);
  } else {
    feed_revision_ = revision;
  }
  Touch();
  return common::OkStatus();
}

void Dispatcher::UpsertSubscription(const store::StoredObject& object) {
  json j = json::parse(object.data, nullptr, /*allow_exceptions=*/false);
  auto doc = api::ParseNotificationSubscription(j);
  const std::string key = Key(object.ns, object.name);
  if (!doc) {
    spdlog::warn("notify: ignoring stored subscription {}: {}", key, doc.error().message());
    RemoveSubscription(key);
    return;
  }
  auto url = api::ParseWebhookUrl(doc->url, "spec.url");
  if (!url) {
    RemoveSubscription(key);
    return;
  }
  Subscription sub;
  sub.ref = {object.ns, object.name, object.uid};
  sub.written = object.resource_version;
  sub.url = std::move(*url);
  sub.slack = doc->format == "Slack";
  sub.reasons.insert(doc->reasons.begin(), doc->reasons.end());
  auto old = subs_.find(key);
  if (old != subs_.end() && old->second.ref.uid != object.uid) RemoveSubscription(key);
  subs_[key] = std::move(sub);
  SubscriptionStatus& st = StatusFor(key, object.uid);
  if (st.since == 0) {
    st.since = object.resource_version;
    dirty_ = true;
  }
  Touch();
}

void Dispatcher::RemoveSubscription(const std::string& key) {
  subs_.erase(key);
  status_.erase(key);
  for (auto it = queue_.begin(); it != queue_.end();) {
    if (it->second.key == key) {
      Finish(it->second);
      it = queue_.erase(it);
    } else {
      ++it;
    }
  }
  Touch();
}

void Dispatcher::ApplyChange(const store::Change& change) {
  const store::StoredObject& o = change.object;
  if (o.kind == api::kNotificationSubscriptionKind) {
    if (change.type == store::WriteOp::Type::kPut) {
      UpsertSubscription(o);
    } else {
      RemoveSubscription(Key(o.ns, o.name));
    }
    return;
  }
  if (o.kind != kEventKind || change.type != store::WriteOp::Type::kPut) return;
  const std::string prefix = o.ns + "/";
  auto it = subs_.lower_bound(prefix);
  if (it == subs_.end() || !it->first.starts_with(prefix)) return;  // nobody listens here
  auto event = ParseStoredEvent(o);
  if (!event) {
    spdlog::warn("notify: skipping event: {}", event.error().message());
    return;
  }
  event->revision = change.revision;
  for (; it != subs_.end() && it->first.starts_with(prefix); ++it) {
    const Subscription& sub = it->second;
    if (!sub.reasons.empty() && !sub.reasons.contains(event->reason)) continue;
    // Replayed after a restart, but done for this subscription before it.
    if (auto st = status_.find(it->first); st != status_.end() && st->second.uid == sub.ref.uid &&
                                           event->revision <= st->second.done_through) {
      continue;
    }
    Enqueue(sub, *event);
  }
}

Status Dispatcher::PollOnce() {
  std::int64_t from = 0;
  bool any = false;
  {
    std::lock_guard lock(mu_);
    from = feed_revision_;
    any = !subs_.empty();
  }
  if (!any) {
    // Nobody subscribes: skip the feed (cheap) unless a subscription has appeared, which the
    // feed then brings in order.
    EGS_ASSIGN_OR_RETURN(store::ListResult list,
                         store_.List(api::kNotificationSubscriptionKind, std::nullopt));
    if (list.objects.empty()) {
      std::lock_guard lock(mu_);
      if (subs_.empty()) feed_revision_ = std::max(feed_revision_, list.revision);
      return common::OkStatus();
    }
  }
  while (true) {
    auto changes = store_.ChangesSince(from, options_.feed_batch);
    if (!changes.ok() && changes.error().code() == common::StatusCode::kAborted) {
      // Compacted past our position: what was in between is lost. Start over from a list.
      std::int64_t revision = 0;
      EGS_RETURN_IF_ERROR(ListSubscriptions(&revision));
      std::lock_guard lock(mu_);
      spdlog::warn("notify: change feed compacted after revision {}; events up to {} missed", from,
                   revision);
      ++stats_.missed_events;
      feed_revision_ = revision;
      dirty_ = true;
      return common::OkStatus();
    }
    if (!changes.ok()) return changes.error();
    if (changes->empty()) return common::OkStatus();
    std::lock_guard lock(mu_);
    if (feed_revision_ != from) return common::OkStatus();  // restored meanwhile
    for (const store::Change& c : *changes) ApplyChange(c);
    from = feed_revision_ = changes->back().revision;
  }
}

// ---- Queue -------------------------------------------------------------------------------------

void Dispatcher::Enqueue(const Subscription& sub, const NotificationEvent& event) {
  const std::string key = Key(sub.ref.ns, sub.ref.name);
  SubscriptionStatus& st = StatusFor(key, sub.ref.uid);
  dirty_ = true;
  const std::string ns(NamespaceOf(key));
  const auto mine = open_by_key_.find(key);
  const std::size_t sub_open = mine == open_by_key_.end() ? 0 : mine->second.size();
  const auto ns_it = open_by_ns_.find(ns);
  const std::size_t ns_open = ns_it == open_by_ns_.end() ? 0 : ns_it->second;
  std::string full;
  if (queue_.size() + in_flight_ >= options_.max_queue) {
    full = fmt::format("notification queue full ({} deliveries)", options_.max_queue);
  } else if (ns_open >= options_.max_queue_per_namespace) {
    full = fmt::format("the workspace's share of the notification queue is full ({} deliveries)",
                       options_.max_queue_per_namespace);
  } else if (sub_open >= options_.max_queue_per_subscription) {
    full = fmt::format(
        "this subscription's share of the notification queue is full ({} "
        "deliveries)",
        options_.max_queue_per_subscription);
  }
  if (!full.empty()) {
    ++st.dropped;
    ++stats_.overflow;
    st.last_error = fmt::format("{}: {} event dropped", full, event.reason);
    st.last_error_time = clock_.Now();
    Touch();
    return;
  }
  Delivery d;
  d.seq = next_seq_++;
  d.key = key;
  d.sub_uid = sub.ref.uid;
  d.event = event;
  d.due = clock_.Now();
  open_revisions_.insert(event.revision);
  open_by_key_[key].insert(event.revision);
  ++open_by_ns_[ns];
  queue_.emplace(std::make_pair(d.due, d.seq), std::move(d));
  ++stats_.enqueued;
  Touch();
  work_cv_.notify_one();
}

void Dispatcher::Finish(const Delivery& d) {
  auto it = open_revisions_.find(d.event.revision);
  if (it != open_revisions_.end()) open_revisions_.erase(it);
  if (auto mine = open_by_key_.find(d.key); mine != open_by_key_.end()) {
    if (auto r = mine->second.find(d.event.revision); r != mine->second.end())
      mine->second.erase(r);
    if (mine->second.empty()) open_by_key_.erase(mine);
  }
  if (auto ns = open_by_ns_.find(NamespaceOf(d.key)); ns != open_by_ns_.end()) {
    if (--ns->second == 0) open_by_ns_.erase(ns);
  }
  dirty_ = true;
}

std::map<std::pair<common::Time, std::uint64_t>, Dispatcher::Delivery>::iterator
Dispatcher::NextReady() {
  const common::Time now = clock_.Now();
  const int ns_share = std::max(1, options_.workers / 2);
  for (auto it = queue_.begin(); it != queue_.end() && it->first.first <= now; ++it) {
    if (busy_keys_.contains(it->second.key)) continue;
    const std::string_view ns = NamespaceOf(it->second.key);
    const auto in_flight =
        std::count_if(busy_keys_.begin(), busy_keys_.end(),
                      [&](const std::string& k) { return NamespaceOf(k) == ns; });
    if (in_flight < ns_share) return it;
  }
  return queue_.end();
}

SubscriptionStatus& Dispatcher::StatusFor(const std::string& key, const std::string& uid) {
  SubscriptionStatus& st = status_[key];
  if (st.uid != uid) {
    st = SubscriptionStatus{};
    st.uid = uid;
  }
  return st;
}

void Dispatcher::Touch() { version_.fetch_add(1); }

std::int64_t Dispatcher::Cursor() const {
  if (open_revisions_.empty()) return feed_revision_;
  return std::min(feed_revision_, *open_revisions_.begin() - 1);
}

std::optional<common::Time> Dispatcher::NextDue() const {
  std::lock_guard lock(mu_);
  if (queue_.empty()) return std::nullopt;
  return queue_.begin()->first.first;
}

bool Dispatcher::DeliverOnce() {
  std::unique_lock lock(mu_);
  const auto next = NextReady();
  if (next == queue_.end()) return false;
  Delivery d = std::move(next->second);
  queue_.erase(next);
  auto sub = subs_.find(d.key);
  if (sub == subs_.end() || sub->second.ref.uid != d.sub_uid) {
    Finish(d);  // deleted or replaced meanwhile
    return true;
  }
  WebhookRequest request;
  request.url = sub->second.url;
  request.delivery_id = DeliveryId(sub->second.ref, d.event);
  request.reason = d.event.reason;
  request.body =
      (sub->second.slack ? SlackPayload(d.event) : GenericPayload(sub->second.ref, d.event))
          .dump(-1, ' ', false, json::error_handler_t::replace);
  ++in_flight_;
  busy_keys_.insert(d.key);
  lock.unlock();

  SendOutcome out = sender_.Send(request, options_.attempt_timeout);

  lock.lock();
  --in_flight_;
  busy_keys_.erase(d.key);
  work_cv_.notify_all();  // the namespace's next delivery may go now
  ++d.attempts;
  const common::Time now = clock_.Now();
  sub = subs_.find(d.key);
  const bool alive = sub != subs_.end() && sub->second.ref.uid == d.sub_uid;
  if (!alive) {
    Finish(d);
    return true;
  }
  SubscriptionStatus& st = StatusFor(d.key, d.sub_uid);
  if (out.status.ok()) {
    ++st.delivered;
    st.consecutive_failures = 0;
    st.last_success = now;
    ++stats_.delivered;
    Finish(d);
    Touch();
    return true;
  }
  ++st.failures;
  ++st.consecutive_failures;
  ++stats_.attempt_errors;
  st.last_error_time = now;
  st.last_error =
      fmt::format("{} event {}: {}", d.event.reason, d.event.name, out.status.message());
  if (out.retryable() && d.attempts < options_.max_attempts) {
    common::Duration backoff = options_.initial_backoff;
    for (int i = 1; i < d.attempts && backoff < options_.max_backoff; ++i) backoff *= 2;
    if (out.retry_after) backoff = std::max(backoff, *out.retry_after);
    backoff = std::min(backoff, options_.max_backoff);
    d.due = now + backoff;
    st.last_error += fmt::format(" (attempt {} of {}; next in {})", d.attempts,
                                 options_.max_attempts, common::FormatGoDuration(backoff));
    queue_.emplace(std::make_pair(d.due, d.seq), std::move(d));
    work_cv_.notify_one();
  } else {
    ++st.abandoned;
    ++stats_.abandoned;
    st.last_error +=
        fmt::format(" (gave up after {} attempt{})", d.attempts, d.attempts == 1 ? "" : "s");
    Finish(d);
  }
  dirty_ = true;
  Touch();
  return true;
}

// ---- State -------------------------------------------------------------------------------------

Status Dispatcher::PersistState() {
  std::string data;
  {
    std::lock_guard lock(mu_);
    if (!dirty_) return common::OkStatus();
    json subs = json::object();
    for (auto& [key, st] : status_) {
      const auto open = open_by_key_.find(key);
      st.done_through = open == open_by_key_.end()
                            ? feed_revision_
                            : std::min(feed_revision_, *open->second.begin() - 1);
      subs[key] = StatusToState(st);
    }
    data = json{{"cursor", Cursor()}, {"subscriptions", std::move(subs)}}.dump();
    dirty_ = false;
  }
  auto committed = store_.Commit({store::MetaPut(std::string(kStateKey), std::move(data))}, {});
  if (!committed.ok()) {
    std::lock_guard lock(mu_);
    dirty_ = true;
    return committed.error();
  }
  return common::OkStatus();
}

// ---- Threads -----------------------------------------------------------------------------------

void Dispatcher::Start() {
  if (started_) return;
  started_ = true;
  {
    std::lock_guard lock(mu_);
    stopping_ = false;
  }
  threads_.emplace_back([this] { FeederLoop(); });
  for (int i = 0; i < std::max(1, options_.workers); ++i) {
    threads_.emplace_back([this] { WorkerLoop(); });
  }
}

void Dispatcher::Stop() {
  if (!started_) return;
  started_ = false;
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  work_cv_.notify_all();
  stop_cv_.notify_all();
  for (std::thread& t : threads_) t.join();
  threads_.clear();
  if (Status s = PersistState(); !s.ok()) {
    spdlog::warn("notify: could not persist the delivery state: {}", s.message());
  }
}

void Dispatcher::FeederLoop() {
  while (true) {
    const Status polled = PollOnce();
    const common::Time now = clock_.Now();
    // A store out of reach fails every poll: its first failure is logged, then one a minute,
    // and the recovery.
    if (!polled.ok()) {
      if (!feed_failing_since_ || now - last_feed_warning_ >= common::Minutes(1)) {
        spdlog::warn("notify: reading the feed{}: {}",
                     feed_failing_since_
                         ? fmt::format(" (failing for {:.0f} s)",
                                       common::ToSeconds(now - *feed_failing_since_))
                         : "",
                     polled.message());
        last_feed_warning_ = now;
      }
      if (!feed_failing_since_) feed_failing_since_ = now;
    } else if (feed_failing_since_) {
      spdlog::info("notify: reading the feed again after {:.0f} s",
                   common::ToSeconds(now - *feed_failing_since_));
      feed_failing_since_.reset();
    }
    if (!last_persist_ || now - *last_persist_ >= options_.state_interval) {
      if (Status s = PersistState(); !s.ok()) {
        spdlog::warn("notify: persisting the delivery state: {}", s.message());
      }
      last_persist_ = now;
    }
    std::unique_lock lock(mu_);
    clock_.WaitUntil(stop_cv_, lock, now + options_.poll_interval, [&] { return stopping_; });
    if (stopping_) return;
  }
}

void Dispatcher::WorkerLoop() {
  while (true) {
    {
      std::unique_lock lock(mu_);
      auto due = [&] { return NextReady() != queue_.end(); };
      while (!stopping_ && !due()) {
        // The first due delivery waits for its namespace's in-flight one, which wakes us when it
        // ends; otherwise sleep until the first is due.
        const common::Time now = clock_.Now();
        const common::Time deadline = queue_.empty() || queue_.begin()->first.first <= now
                                          ? now + common::Seconds(1)
                                          : queue_.begin()->first.first;
        clock_.WaitUntil(work_cv_, lock, deadline, [&] { return stopping_ || due(); });
      }
      if (stopping_) return;
    }
    DeliverOnce();
  }
}

// ---- Views -------------------------------------------------------------------------------------

std::optional<json> Dispatcher::StatusJson(std::string_view ns, std::string_view name) const {
  std::lock_guard lock(mu_);
  const std::string key = Key(ns, name);
  auto it = status_.find(key);
  if (it == status_.end()) return std::nullopt;
  const SubscriptionStatus& s = it->second;
  std::int64_t pending = 0;
  for (const auto& [k, d] : queue_) pending += d.key == key ? 1 : 0;
  json j = {{"delivered", s.delivered},
            {"failures", s.failures},
            {"consecutiveFailures", s.consecutive_failures},
            {"dropped", s.dropped},
            {"abandoned", s.abandoned},
            {"pending", pending}};
  if (s.last_success) j["lastSuccessTime"] = api::FormatTime(*s.last_success);
  if (s.last_error_time) j["lastErrorTime"] = api::FormatTime(*s.last_error_time);
  if (!s.last_error.empty()) j["lastError"] = s.last_error;
  return j;
}

void Dispatcher::Decorate(json& object) const {
  if (!object.is_object() || !object.contains("metadata") || !object["metadata"].is_object()) {
    return;
  }
  const json& meta = object["metadata"];
  auto status = StatusJson(meta.value("namespace", ""), meta.value("name", ""));
  if (!status) return;
  {
    std::lock_guard lock(mu_);
    auto it = status_.find(Key(meta.value("namespace", ""), meta.value("name", "")));
    if (it == status_.end() || it->second.uid != meta.value("uid", "")) return;
  }
  object["status"] = std::move(*status);
}

DispatcherStats Dispatcher::stats() const {
  std::lock_guard lock(mu_);
  DispatcherStats s = stats_;
  s.queue_length = queue_.size() + in_flight_;
  s.subscriptions = subs_.size();
  return s;
}

std::string Dispatcher::MetricsText() const {
  std::string out;
  auto family = [&](std::string_view name, std::string_view type, std::string_view help) {
    out += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
  };
  std::lock_guard lock(mu_);
  family("egs_notify_subscriptions", "gauge", "Notification subscriptions being served.");
  out += fmt::format("egs_notify_subscriptions {}\n", subs_.size());
  family("egs_notify_queue_length", "gauge", "Webhook deliveries waiting or in flight.");
  out += fmt::format("egs_notify_queue_length {}\n", queue_.size() + in_flight_);
  family("egs_notify_queue_capacity", "gauge", "Bound of the delivery queue.");
  out += fmt::format("egs_notify_queue_capacity {}\n", options_.max_queue);
  family("egs_notify_queue_overflow_total", "counter",
         "Deliveries dropped because the queue was full.");
  out += fmt::format("egs_notify_queue_overflow_total {}\n", stats_.overflow);
  family("egs_notify_deliveries_total", "counter", "Deliveries by final outcome.");
  out += fmt::format("egs_notify_deliveries_total{{result=\"delivered\"}} {}\n", stats_.delivered);
  out += fmt::format("egs_notify_deliveries_total{{result=\"abandoned\"}} {}\n", stats_.abandoned);
  family("egs_notify_attempt_errors_total", "counter", "Failed delivery attempts.");
  out += fmt::format("egs_notify_attempt_errors_total {}\n", stats_.attempt_errors);
  family("egs_notify_events_missed_total", "counter",
         "Times the change feed was compacted before the notifier read it (events lost).");
  out += fmt::format("egs_notify_events_missed_total {}\n", stats_.missed_events);
  family("egs_notify_subscription_failures_total", "counter",
         "Failed delivery attempts per subscription (since it was created).");
  for (const auto& [key, st] : status_) {
    const auto slash = key.find('/');
    out +=
        fmt::format("egs_notify_subscription_failures_total{{namespace=\"{}\",name=\"{}\"}} {}\n",
                    Escape(key.substr(0, slash)), Escape(key.substr(slash + 1)), st.failures);
  }
  family("egs_notify_subscription_consecutive_failures", "gauge",
         "Failed attempts since the subscription's last success.");
  for (const auto& [key, st] : status_) {
    const auto slash = key.find('/');
    out += fmt::format(
        "egs_notify_subscription_consecutive_failures{{namespace=\"{}\",name=\"{}\"}} {}\n",
        Escape(key.substr(0, slash)), Escape(key.substr(slash + 1)), st.consecutive_failures);
  }
  return out;
}

}  // namespace egs::notify
