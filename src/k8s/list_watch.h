// ListWatch: the list-then-watch loop every Kubernetes informer runs, once, for the connector's
// node inventory and the GPR custom-resource mirror (docs/design/0005-kubernetes-connector.md).
//
//   1. List `path`: the full state (on_list) and the resourceVersion to watch from.
//   2. Watch from there with bookmarks and a server-side timeoutSeconds; each event but BOOKMARK
//      goes to on_event; every event (bookmarks too) moves the resourceVersion forward, so a
//      watch the server ends resumes where it stopped instead of relisting.
//   3. 410 Gone (an ERROR event or HTTP 410: the resourceVersion was compacted) relists at once;
//      any other failure waits (retry_initial, doubling up to retry_max; reset by a successful
//      list), then relists.
//   4. Stop() ends Run promptly: during a pause and during a watch (KubeClient::CancelWatches).
//
// on_result sees every list's outcome and every failed watch (the connector turns Unavailable
// into a Degraded cluster and the next success into Healthy).
//
// Thread-safety: Run on one thread (it blocks until Stop); Stop, resource_version and lists from
// any thread. Handlers run on Run's thread with no internal lock held. Time from the Clock.
#pragma once

#include <condition_variable>
#include <functional>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>

#include "common/clock.h"
#include "common/status.h"
#include "k8s/kube_client.h"

namespace egs::k8s {

struct ListWatchOptions {
  common::Duration retry_initial = std::chrono::seconds(1);
  common::Duration retry_max = std::chrono::seconds(30);
  common::Duration watch_timeout = std::chrono::minutes(5);  // one watch request, server side
};

struct ListWatchHandlers {
  // After every successful (re)list, with the list's items.
  std::function<void(const nlohmann::json& items)> on_list;
  // Each watch event but BOOKMARK: type "ADDED", "MODIFIED" or "DELETED".
  std::function<void(const std::string& type, const nlohmann::json& object)> on_event;
  // Every list outcome (OK or not) and every watch that failed.
  std::function<void(const common::Status& status)> on_result;
};

class ListWatch {
 public:
  // `path` is the collection, without query ("/api/v1/nodes"). `clock` and `client` must
  // outlive this.
  ListWatch(common::Clock& clock, KubeClient& client, std::string path, ListWatchOptions options);
  ListWatch(const ListWatch&) = delete;
  ListWatch& operator=(const ListWatch&) = delete;

  // Lists and watches until Stop().
  void Run(const ListWatchHandlers& handlers);
  // Ends Run (and every watch of the client).
  void Stop();
  bool stopped() const;
  // The resourceVersion the next watch starts from ("" before the first list).
  std::string resource_version() const;
  // Lists done so far (the first, and every relist).
  int lists() const;

 private:
  // Waits the current backoff (or until Stop) and doubles it.
  void Pause();

  common::Clock& clock_;
  KubeClient& client_;
  const std::string path_;
  const ListWatchOptions options_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;            // GUARDED_BY(mu_)
  std::string rv_;               // GUARDED_BY(mu_)
  int lists_ = 0;                // GUARDED_BY(mu_)
  common::Duration backoff_{0};  // GUARDED_BY(mu_)
};

}  // namespace egs::k8s
