// GprMirror: watches the GPUProvisionRequest custom resources (gpuprovisionrequests.egs.dev,
// v1alpha1) of one member cluster, so that users and pipelines can `kubectl apply` a GPR in their
// namespace, and writes egsd's view back into each resource's status subresource.
//
// - List, then watch (k8s::ListWatch: bookmarks, resume, relist on 410, backoff on failures).
// - on_upsert reports a resource seen for the first time or whose spec changed (not status-only
//   changes, which are our own writes); on_delete reports a resource deleted (also one found
//   missing at a relist).
// - WriteStatus merge-patches the status subresource.
//
// Threads: one watch thread; callbacks run on it with no lock held (they may block). Every
// public method is safe from any thread. Backoff time comes from the injected Clock.
#pragma once

#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "common/clock.h"
#include "common/status.h"
#include "k8s/kube_client.h"
#include "k8s/list_watch.h"

namespace egs::k8s {

struct GprMirrorCallbacks {
  std::function<void(const nlohmann::json& object)> on_upsert;
  std::function<void(const std::string& ns, const std::string& name)> on_delete;
};

struct GprMirrorOptions {
  common::Duration retry_initial = std::chrono::seconds(1);
  common::Duration retry_max = std::chrono::seconds(30);
  common::Duration watch_timeout = std::chrono::minutes(5);
};

class GprMirror {
 public:
  static constexpr const char* kPath = "/apis/egs.dev/v1alpha1/gpuprovisionrequests";

  // `clock` must outlive the mirror.
  GprMirror(common::Clock& clock, std::unique_ptr<KubeClient> client, GprMirrorOptions options,
            GprMirrorCallbacks callbacks);
  ~GprMirror();  // Stops.
  GprMirror(const GprMirror&) = delete;
  GprMirror& operator=(const GprMirror&) = delete;

  void Start();
  void Stop();
  // True once the first list succeeded.
  bool IsSynced() const;
  // Merge-patches the status of resource `ns`/`name` with `status`. NotFound when it is gone;
  // other errors as KubeClient's.
  common::Status WriteStatus(const std::string& ns, const std::string& name,
                             const nlohmann::json& status);

 private:
  void Run();
  // One resource from a list or an event; reports through the callbacks.
  void Observe(const nlohmann::json& object, bool deleted);

  common::Clock& clock_;
  std::unique_ptr<KubeClient> client_;
  const GprMirrorOptions options_;
  const GprMirrorCallbacks callbacks_;
  mutable std::mutex mu_;
  std::map<std::string, std::string> specs_;  // GUARDED_BY(mu_); "ns/name" -> spec (dumped)
  bool synced_ = false;                       // GUARDED_BY(mu_)
  std::unique_ptr<ListWatch> list_watch_;     // GUARDED_BY(mu_); set by Start
  std::thread thread_;
};

}  // namespace egs::k8s
