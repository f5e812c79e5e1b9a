// Event: a Kubernetes-style record of what happened to an object.
//
// Thread-safety: value type.
#pragma once

#include <string>

#include "core/ids.h"

namespace egs::core {

enum class EventType { kNormal, kWarning };

enum class ObjectKind { kRequest, kNode, kWorkspace, kCluster };

struct ObjectRef {
  ObjectKind kind = ObjectKind::kRequest;
  std::uint64_t id = 0;
  friend bool operator==(const ObjectRef&, const ObjectRef&) = default;
};

struct Event {
  EventId id;
  ObjectRef object;
  EventType type = EventType::kNormal;
  std::string reason;   // CamelCase machine-readable: "Queued", "Provisioning", "Progress50"
  std::string message;  // human-readable
  Time first_time;
  Time last_time;
  int count = 1;
};

}  // namespace egs::core
