#include "k8s/list_watch.h"

#include <algorithm>

namespace egs::k8s {

using nlohmann::json;

ListWatch::ListWatch(common::Clock& clock, KubeClient& client, std::string path,
                     ListWatchOptions options)
    : clock_(clock),
      client_(client),
      path_(std::move(path)),
      options_(options),
      backoff_(options.retry_initial) {}

void ListWatch::Stop() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  client_.CancelWatches();
}

bool ListWatch::stopped() const {
  std::lock_guard lock(mu_);
  return stop_;
}

std::string ListWatch::resource_version() const {
  std::lock_guard lock(mu_);
  return rv_;
}

int ListWatch::lists() const {
  std::lock_guard lock(mu_);
  return lists_;
}

void ListWatch::Pause() {
  std::unique_lock lock(mu_);
  clock_.WaitUntil(cv_, lock, clock_.Now() + backoff_, [&] { return stop_; });
  backoff_ = std::min(options_.retry_max, backoff_ * 2);
}

void ListWatch::Run(const ListWatchHandlers& handlers) {
  const auto timeout_s = std::max<std::int64_t>(
      1, std::chrono::duration_cast<std::chrono::seconds>(options_.watch_timeout).count());
  auto result = [&](const common::Status& s) {
    if (handlers.on_result) handlers.on_result(s);
  };
  while (!stopped()) {
    // 1. List: the full state and the resourceVersion to watch from.
    auto list = client_.Get(path_);
    result(list.ok() ? common::OkStatus() : list.error());
    if (!list) {
      Pause();
      continue;
    }
    std::string rv = list->value("/metadata/resourceVersion"_json_pointer, std::string());
    {
      std::lock_guard lock(mu_);
      backoff_ = options_.retry_initial;
      rv_ = rv;
      ++lists_;
    }
    if (handlers.on_list) handlers.on_list(list->value("items", json::array()));
    // 2. Watch from there; a watch the server ends resumes from the last resourceVersion seen
    //    (bookmarks keep it fresh); 410 Gone relists at once, a failure after a pause.
    while (!stopped()) {
      common::Status s = client_.Watch(
          path_ + "?watch=true&allowWatchBookmarks=true&timeoutSeconds=" +
              std::to_string(timeout_s) + "&resourceVersion=" + KubeClient::Escape(rv),
          [&](const std::string& type, const json& object) {
            const json* next = nullptr;
            if (object.contains("metadata") && object["metadata"].is_object()) {
              auto it = object["metadata"].find("resourceVersion");
              if (it != object["metadata"].end() && it->is_string()) next = &*it;
            }
            if (next != nullptr && !next->get_ref<const std::string&>().empty()) {
              rv = next->get<std::string>();
              std::lock_guard lock(mu_);
              rv_ = rv;
            }
            if (type != "BOOKMARK" && handlers.on_event) handlers.on_event(type, object);
            return !stopped();
          });
      if (!s.ok()) {
        result(s);
        if (s.code() != common::StatusCode::kFailedPrecondition && !stopped()) Pause();
        break;
      }
    }
  }
}

}  // namespace egs::k8s
