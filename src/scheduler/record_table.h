// RecordTable: the scheduler's request records by id, shared copy-on-write with the published
// snapshots.
//
// Each record lives on the heap behind a shared_ptr, in a slot indexed by its id. Publish hands the
// same pointers to the snapshot, so a published snapshot costs a pointer per unchanged request
// instead of a copy. The mutable accessors (at, Find) copy a record first when a snapshot still
// holds it, so readers never see a record change; the const accessors (Get, FindConst, iteration)
// never copy.
//
// Not thread-safe: owned by the scheduler loop. Readers only touch records through snapshots.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <memory>
#include <unordered_map>
#include <utility>
#include <vector>

#include "common/check.h"
#include "core/ids.h"
#include "scheduler/request_record.h"

namespace egs::scheduler {

class RecordTable {
  using Slot = std::shared_ptr<RequestRecord>;

 public:
  // The record of `id`, copied first if a published snapshot shares it. Aborts if absent.
  RequestRecord& at(core::RequestId id) {
    Slot* slot = Locate(id);
    EGS_CHECK(slot != nullptr && *slot);
    return Own(*slot);
  }
  // The record of `id` for reading. Aborts if absent.
  const RequestRecord& Get(core::RequestId id) const {
    const RequestRecord* r = FindConst(id);
    EGS_CHECK(r != nullptr);
    return *r;
  }
  // nullptr when absent; otherwise as at().
  RequestRecord* Find(core::RequestId id) {
    Slot* slot = Locate(id);
    return slot == nullptr || !*slot ? nullptr : &Own(*slot);
  }
  const RequestRecord* FindConst(core::RequestId id) const {
    const Slot* slot = Locate(id);
    return slot == nullptr ? nullptr : slot->get();
  }
  bool contains(core::RequestId id) const { return FindConst(id) != nullptr; }
  std::size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }

  // Adds `record` under its id; nullptr (and nothing changes) when the id is taken.
  RequestRecord* Insert(RequestRecord record) {
    const std::uint64_t v = record.id.value();
    Slot* slot;
    if (v < kDenseLimit) {
      if (v >= dense_.size()) dense_.resize(std::max<std::size_t>(v + 1, dense_.size() * 2));
      slot = &dense_[v];
    } else {
      slot = &sparse_[record.id];
    }
    if (*slot) return nullptr;
    *slot = std::make_shared<RequestRecord>(std::move(record));
    ++size_;
    return slot->get();
  }
  void erase(core::RequestId id) {
    Slot* slot = Locate(id);
    if (slot == nullptr || !*slot) return;
    slot->reset();
    if (id.value() >= kDenseLimit) sparse_.erase(id);
    --size_;
  }

  // The record of `id` as a snapshot holds it (nullptr when absent). Once shared, the next
  // mutable access copies it.
  std::shared_ptr<const RequestRecord> Share(core::RequestId id) const {
    const Slot* slot = Locate(id);
    return slot == nullptr ? nullptr : *slot;
  }
  // Calls fn(shared record) for every record, in increasing id order (publishing a snapshot).
  template <typename Fn>
  void ShareEach(Fn fn) const {
    for (const Slot& slot : dense_) {
      if (slot) fn(std::shared_ptr<const RequestRecord>(slot));
    }
    if (sparse_.empty()) return;
    std::vector<const Slot*> rest;
    for (const auto& [id, slot] : sparse_) rest.push_back(&slot);
    std::sort(rest.begin(), rest.end(),
              [](const Slot* a, const Slot* b) { return (*a)->id < (*b)->id; });
    for (const Slot* slot : rest) fn(std::shared_ptr<const RequestRecord>(*slot));
  }

  // Iteration for reading, in no particular order: each element is a pair (id, const record&).
  class const_iterator {
   public:
    using value_type = std::pair<core::RequestId, const RequestRecord&>;
    const_iterator(const RecordTable* table, std::size_t dense,
                   std::unordered_map<core::RequestId, Slot>::const_iterator sparse)
        : table_(table), dense_(dense), sparse_(sparse) {
      SkipEmpty();
    }
    value_type operator*() const {
      const RequestRecord& r =
          dense_ < table_->dense_.size() ? *table_->dense_[dense_] : *sparse_->second;
      return {r.id, r};
    }
    const_iterator& operator++() {
      if (dense_ < table_->dense_.size()) {
        ++dense_;
        SkipEmpty();
      } else {
        ++sparse_;
      }
      return *this;
    }
    bool operator==(const const_iterator& o) const {
      return dense_ == o.dense_ && sparse_ == o.sparse_;
    }

   private:
    void SkipEmpty() {
      while (dense_ < table_->dense_.size() && !table_->dense_[dense_]) ++dense_;
    }
    const RecordTable* table_;
    std::size_t dense_;
    std::unordered_map<core::RequestId, Slot>::const_iterator sparse_;
  };
  const_iterator begin() const { return const_iterator(this, 0, sparse_.begin()); }
  const_iterator end() const { return const_iterator(this, dense_.size(), sparse_.end()); }

 private:
  // Ids are handed out densely (Scheduler::Submit counts up from 1), so they index a flat array
  // of slots; ids past kDenseLimit, which only a restore of odd records could bring, go to a map.
  static constexpr std::uint64_t kDenseLimit = 1u << 24;

  Slot* Locate(core::RequestId id) {
    const std::uint64_t v = id.value();
    if (v < kDenseLimit) return v < dense_.size() ? &dense_[v] : nullptr;
    auto it = sparse_.find(id);
    return it == sparse_.end() ? nullptr : &it->second;
  }
  const Slot* Locate(core::RequestId id) const {
    const std::uint64_t v = id.value();
    if (v < kDenseLimit) return v < dense_.size() ? &dense_[v] : nullptr;
    auto it = sparse_.find(id);
    return it == sparse_.end() ? nullptr : &it->second;
  }

  // Makes `slot` the only owner of its record, copying it if a snapshot shares it.
  static RequestRecord& Own(Slot& slot) {
    if (slot.use_count() > 1) {
      slot = std::make_shared<RequestRecord>(*slot);
    } else {
      // A reader that just let go of its snapshot released the record; see its reads first.
      std::atomic_thread_fence(std::memory_order_acquire);
    }
    return *slot;
  }

  std::vector<Slot> dense_;
  std::unordered_map<core::RequestId, Slot> sparse_;
  std::size_t size_ = 0;
};

}  // namespace egs::scheduler
