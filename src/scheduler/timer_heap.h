// TimerHeap: a min-heap of (when, request, tag) timers with lazy cancellation. Owners never
// remove entries; they check an entry against the request's current state when it reaches the
// top (a stale one is dropped), which keeps each timer at 24 bytes instead of a tree node.
//
// Not thread-safe. Owned by the scheduler loop.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <vector>

#include "core/ids.h"

namespace egs::scheduler {

class TimerHeap {
 public:
  struct Entry {
    core::Time when;
    core::RequestId request;
    std::uint8_t tag = 0;
    friend bool operator>(const Entry& a, const Entry& b) {
      if (a.when != b.when) return a.when > b.when;
      if (a.request != b.request) return a.request > b.request;
      return a.tag > b.tag;
    }
  };

  void Push(core::Time when, core::RequestId request, std::uint8_t tag = 0) {
    heap_.push_back({when, request, tag});
    std::push_heap(heap_.begin(), heap_.end(), std::greater<>());
  }
  // Drops stale entries from the top; `live(entry)` says whether an entry still stands.
  template <typename Live>
  void Prune(const Live& live) {
    while (!heap_.empty() && !live(heap_.front())) Pop();
  }
  bool empty() const { return heap_.empty(); }
  const Entry& top() const { return heap_.front(); }
  void Pop() {
    std::pop_heap(heap_.begin(), heap_.end(), std::greater<>());
    heap_.pop_back();
  }
  // Push that first removes every stale entry (`live(entry)` false) once the heap has doubled
  // since the last compaction (amortised O(log n) per push). The new entry is added after the
  // compaction and is not judged: the caller may set the state that makes it live only later
  // (a start pushes its end while the request is still queued).
  template <typename Live>
  void Push(core::Time when, core::RequestId request, std::uint8_t tag, const Live& live) {
    if (heap_.size() > 2 * compacted_size_ + 64) {
      std::erase_if(heap_, [&](const Entry& e) { return !live(e); });
      std::make_heap(heap_.begin(), heap_.end(), std::greater<>());
      compacted_size_ = heap_.size();
    }
    Push(when, request, tag);
  }
  std::size_t size() const { return heap_.size(); }

 private:
  std::vector<Entry> heap_;
  std::size_t compacted_size_ = 0;
};

}  // namespace egs::scheduler
