// Names: the two-way map between the API's names and the scheduler's numeric ids, for every kind
// the daemon knows (projects, shapes, clusters, nodes, workspaces, and requests by
// (workspace, name)). Ids are assigned by the daemon when objects are loaded or created; they
// are not persisted (the Store keys everything by name), so they may differ across restarts.
//
// Not thread-safe: owned by the scheduler loop thread.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "core/ids.h"

namespace egs::daemon {

// One kind's names <-> ids.
template <typename Id>
class NameMap {
 public:
  // Returns the id of `name`, assigning the next free one when it is new.
  Id Intern(const std::string& name) {
    auto it = by_name_.find(name);
    if (it != by_name_.end()) return it->second;
    Id id(next_++);
    by_name_.emplace(name, id);
    by_id_.emplace(id, name);
    return id;
  }
  void Add(const std::string& name, Id id) {
    by_name_[name] = id;
    by_id_[id] = name;
    if (id.value() >= next_) next_ = id.value() + 1;
  }
  void Erase(const std::string& name) {
    auto it = by_name_.find(name);
    if (it == by_name_.end()) return;
    by_id_.erase(it->second);
    by_name_.erase(it);
  }
  std::optional<Id> Find(std::string_view name) const {
    auto it = by_name_.find(std::string(name));
    if (it == by_name_.end()) return std::nullopt;
    return it->second;
  }
  // The name of `id`, or "" when unknown.
  const std::string& Name(Id id) const {
    static const std::string kEmpty;
    auto it = by_id_.find(id);
    return it == by_id_.end() ? kEmpty : it->second;
  }
  std::size_t size() const { return by_name_.size(); }
  // Visits every (id, name) in id order.
  template <typename F>
  void ForEach(F fn) const {
    for (const auto& [id, name] : by_id_) fn(id, name);
  }

 private:
  std::map<std::string, Id, std::less<>> by_name_;
  std::map<Id, std::string> by_id_;
  typename Id::rep_type next_ = 1;
};

// A request's API identity: its workspace (the namespace) and its name.
struct RequestName {
  std::string ns;
  std::string name;
  friend auto operator<=>(const RequestName&, const RequestName&) = default;
};

struct Names {
  NameMap<core::ProjectId> projects;
  NameMap<core::ShapeId> shapes;
  NameMap<core::ClusterId> clusters;
  NameMap<core::NodeId> nodes;
  NameMap<core::WorkspaceId> workspaces;
  std::map<RequestName, core::RequestId> requests;
  std::map<core::RequestId, RequestName> request_names;

  void AddRequest(RequestName name, core::RequestId id) {
    requests[name] = id;
    request_names[id] = std::move(name);
  }
  void EraseRequest(core::RequestId id) {
    auto it = request_names.find(id);
    if (it == request_names.end()) return;
    requests.erase(it->second);
    request_names.erase(it);
  }
};

}  // namespace egs::daemon
