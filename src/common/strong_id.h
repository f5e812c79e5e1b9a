// StrongId<Tag, Rep>: an identifier that cannot be mixed up with another kind of id or with a
// plain integer. `using NodeId = StrongId<struct NodeIdTag, std::uint32_t>;`
//
// Thread-safety: value type.
#pragma once

#include <compare>
#include <cstddef>
#include <functional>
#include <string>

namespace egs::common {

template <typename Tag, typename Rep>
class StrongId {
 public:
  using rep_type = Rep;
  constexpr StrongId() = default;
  constexpr explicit StrongId(Rep value) : value_(value) {}
  constexpr Rep value() const { return value_; }
  std::string ToString() const { return std::to_string(value_); }
  friend constexpr auto operator<=>(StrongId, StrongId) = default;

 private:
  Rep value_{};
};

}  // namespace egs::common

template <typename Tag, typename Rep>
struct std::hash<egs::common::StrongId<Tag, Rep>> {
  std::size_t operator()(egs::common::StrongId<Tag, Rep> id) const noexcept {
    return std::hash<Rep>()(id.value());
  }
};
