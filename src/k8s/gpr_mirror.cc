#include "k8s/gpr_mirror.h"

#include <set>
#include <vector>

namespace egs::k8s {
namespace {

using nlohmann::json;

std::string Str(const json& j, const char* pointer) {
  return j.value(json::json_pointer(pointer), std::string());
}

}  // namespace

GprMirror::GprMirror(common::Clock& clock, std::unique_ptr<KubeClient> client,
                     GprMirrorOptions options, GprMirrorCallbacks callbacks)
    : clock_(clock),
      client_(std::move(client)),
      options_(options),
      callbacks_(std::move(callbacks)) {}

GprMirror::~GprMirror() { Stop(); }

void GprMirror::Start() {
  std::lock_guard lock(mu_);
  if (thread_.joinable()) return;
  list_watch_ = std::make_unique<ListWatch>(
      clock_, *client_, kPath,
      ListWatchOptions{options_.retry_initial, options_.retry_max, options_.watch_timeout});
  thread_ = std::thread([this] { Run(); });
}

void GprMirror::Stop() {
  {
    std::lock_guard lock(mu_);
    if (list_watch_) list_watch_->Stop();
  }
  if (thread_.joinable()) thread_.join();
}

bool GprMirror::IsSynced() const {
  std::lock_guard lock(mu_);
  return synced_;
}

common::Status GprMirror::WriteStatus(const std::string& ns, const std::string& name,
                                      const json& status) {
  auto patched = client_->Patch(
      "/apis/egs.dev/v1alpha1/namespaces/" + ns + "/gpuprovisionrequests/" + name + "/status",
      {{"status", status}}, PatchType::kMerge);
  return patched.ok() ? common::OkStatus() : patched.error();
}

void GprMirror::Observe(const json& object, bool deleted) {
  const std::string ns = Str(object, "/metadata/namespace");
  const std::string name = Str(object, "/metadata/name");
  if (ns.empty() || name.empty()) return;
  const std::string key = ns + "/" + name;
  const std::string spec = object.value("spec", json::object()).dump();
  bool report;
  {
    std::lock_guard lock(mu_);
    if (deleted) {
      report = specs_.erase(key) > 0;
    } else {
      auto [it, inserted] = specs_.try_emplace(key, spec);
      report = inserted || it->second != spec;
      it->second = spec;
    }
  }
  if (!report) return;
  if (deleted) {
    if (callbacks_.on_delete) callbacks_.on_delete(ns, name);
  } else if (callbacks_.on_upsert) {
    callbacks_.on_upsert(object);
  }
}

void GprMirror::Run() {
  ListWatchHandlers handlers;
  handlers.on_list = [this](const json& items) {
    // What we knew and the list no longer has was deleted meanwhile.
    std::set<std::string> listed;
    for (const auto& item : items) {
      listed.insert(Str(item, "/metadata/namespace") + "/" + Str(item, "/metadata/name"));
      Observe(item, false);
    }
    std::vector<std::string> vanished;
    {
      std::lock_guard lock(mu_);
      for (const auto& [key, spec] : specs_) {
        if (listed.count(key) == 0) vanished.push_back(key);
      }
      synced_ = true;
    }
    for (const auto& key : vanished) {
      const auto slash = key.find('/');
      Observe(
          {{"metadata", {{"namespace", key.substr(0, slash)}, {"name", key.substr(slash + 1)}}}},
          true);
    }
  };
  handlers.on_event = [this](const std::string& type, const json& object) {
    Observe(object, type == "DELETED");
  };
  list_watch_->Run(handlers);
}

}  // namespace egs::k8s
