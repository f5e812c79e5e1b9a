// NodeList: the nodes of a plan or a decision, in order. Most requests take one node, so up to
// kInline ids are kept in place and only longer lists allocate: a one-node plan then costs no
// heap block (a std::vector<NodeId> of one costs a 32-byte block besides its 24 bytes), and the
// list itself is 16 bytes. Reads like a std::vector<NodeId> (size, empty, [], front, back,
// iteration, push_back, ==) and converts to std::span<const NodeId> and std::vector<NodeId>.
//
// Thread-safety: value type.
#pragma once

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <span>
#include <type_traits>
#include <vector>

#include "core/ids.h"

namespace egs::core {

class NodeList {
 public:
  static constexpr std::uint32_t kInline = 2;
  using value_type = NodeId;
  using size_type = std::size_t;
  using iterator = NodeId*;
  using const_iterator = const NodeId*;

  NodeList() noexcept = default;
  NodeList(std::initializer_list<NodeId> ids) { Assign(ids.begin(), ids.size()); }
  NodeList(std::span<const NodeId> ids) { Assign(ids.data(), ids.size()); }  // NOLINT: implicit
  NodeList(const std::vector<NodeId>& ids) : NodeList(std::span<const NodeId>(ids)) {}  // NOLINT
  NodeList(const NodeList& o) { Assign(o.data(), o.size_); }
  NodeList(NodeList&& o) noexcept { Steal(o); }
  NodeList& operator=(const NodeList& o) {
    if (this != &o) Assign(o.data(), o.size_);
    return *this;
  }
  NodeList& operator=(NodeList&& o) noexcept {
    if (this != &o) {
      Free();
      Steal(o);
    }
    return *this;
  }
  ~NodeList() { Free(); }

  std::size_t size() const noexcept { return size_; }
  bool empty() const noexcept { return size_ == 0; }
  const NodeId* data() const noexcept { return OnHeap() ? heap_ : inline_; }
  NodeId* data() noexcept { return OnHeap() ? heap_ : inline_; }
  const NodeId* begin() const noexcept { return data(); }
  const NodeId* end() const noexcept { return data() + size_; }
  NodeId* begin() noexcept { return data(); }
  NodeId* end() noexcept { return data() + size_; }
  const NodeId& operator[](std::size_t i) const noexcept { return data()[i]; }
  NodeId& operator[](std::size_t i) noexcept { return data()[i]; }
  const NodeId& front() const noexcept { return data()[0]; }
  const NodeId& back() const noexcept { return data()[size_ - 1]; }

  void clear() noexcept { size_ = 0; }
  void push_back(NodeId id) {
    if (size_ == capacity_) Grow(capacity_ * 2);
    data()[size_++] = id;
  }

  operator std::span<const NodeId>() const noexcept { return {data(), size_}; }  // NOLINT
  operator std::vector<NodeId>() const { return {begin(), end()}; }              // NOLINT

  friend bool operator==(const NodeList& a, const NodeList& b) {
    return a.size_ == b.size_ && std::equal(a.begin(), a.end(), b.begin());
  }

 private:
  static_assert(std::is_trivially_copyable_v<NodeId>);

  bool OnHeap() const noexcept { return capacity_ > kInline; }
  void Free() noexcept {
    if (OnHeap()) delete[] heap_;
    capacity_ = kInline;
    size_ = 0;
  }
  // Takes o's nodes (its heap array, or a copy of its inline ids); o is left empty.
  void Steal(NodeList& o) noexcept {
    if (o.OnHeap()) {
      heap_ = o.heap_;
    } else {
      std::copy(o.inline_, o.inline_ + kInline, inline_);
    }
    size_ = o.size_;
    capacity_ = o.capacity_;
    o.capacity_ = kInline;
    o.size_ = 0;
  }
  void Grow(std::uint32_t capacity) {
    NodeId* bigger = new NodeId[capacity];
    std::copy(begin(), end(), bigger);
    const std::uint32_t size = size_;
    Free();
    heap_ = bigger;
    capacity_ = capacity;
    size_ = size;
  }
  void Assign(const NodeId* ids, std::size_t n) {
    if (n > capacity_) {
      Free();
      Grow(static_cast<std::uint32_t>(n));
    }
    std::copy(ids, ids + n, data());
    size_ = static_cast<std::uint32_t>(n);
  }

  union {
    NodeId inline_[kInline] = {};
    NodeId* heap_;
  };
  std::uint32_t size_ = 0;
  std::uint32_t capacity_ = kInline;
};

static_assert(sizeof(NodeList) == 16);

}  // namespace egs::core
