// RecordTable: the scheduler's request records by id, shared copy-on-write with the published
// snapshots.
//
// Each record lives on the heap behind a shared_ptr. Publish hands the same pointers to the
// snapshot, so a published snapshot costs a pointer per unchanged request instead of a copy. The
// mutable accessors (at, Find) copy a record first when a snapshot still holds it, so readers
// never see a record change; the const accessors (Get, FindConst, iteration) never copy.
//
// Not thread-safe: owned by the scheduler loop. Readers only touch records through snapshots.
#pragma once

#include <atomic>
#include <cstddef>
#include <memory>
#include <unordered_map>
#include <utility>

#include "common/check.h"
#include "core/ids.h"
#include "scheduler/request_record.h"

namespace egs::scheduler {

class RecordTable {
  using Map = std::unordered_map<core::RequestId, std::shared_ptr<RequestRecord>>;

 public:
  // The record of `id`, copied first if a published snapshot shares it. Aborts if absent.
  RequestRecord& at(core::RequestId id) {
    auto it = map_.find(id);
    EGS_CHECK(it != map_.end());
    return Own(it->second);
  }
  // The record of `id` for reading. Aborts if absent.
  const RequestRecord& Get(core::RequestId id) const {
    auto it = map_.find(id);
    EGS_CHECK(it != map_.end());
    return *it->second;
  }
  // nullptr when absent; otherwise as at().
  RequestRecord* Find(core::RequestId id) {
    auto it = map_.find(id);
    return it == map_.end() ? nullptr : &Own(it->second);
  }
  const RequestRecord* FindConst(core::RequestId id) const {
    auto it = map_.find(id);
    return it == map_.end() ? nullptr : it->second.get();
  }
  bool contains(core::RequestId id) const { return map_.contains(id); }
  std::size_t size() const { return map_.size(); }
  bool empty() const { return map_.empty(); }

  // Adds `record` under its id; nullptr (and nothing changes) when the id is taken.
  RequestRecord* Insert(RequestRecord record) {
    const core::RequestId id = record.id;
    auto [it, inserted] = map_.try_emplace(id, nullptr);
    if (!inserted) return nullptr;
    it->second = std::make_shared<RequestRecord>(std::move(record));
    return it->second.get();
  }
  void erase(core::RequestId id) { map_.erase(id); }

  // The record of `id` as a snapshot holds it (nullptr when absent). Once shared, the next
  // mutable access copies it.
  std::shared_ptr<const RequestRecord> Share(core::RequestId id) const {
    auto it = map_.find(id);
    return it == map_.end() ? nullptr : it->second;
  }

  // Iteration for reading, in no particular order: each element is a pair (id, const record&).
  class const_iterator {
   public:
    using value_type = std::pair<core::RequestId, const RequestRecord&>;
    explicit const_iterator(Map::const_iterator it) : it_(it) {}
    value_type operator*() const { return {it_->first, *it_->second}; }
    const_iterator& operator++() {
      ++it_;
      return *this;
    }
    bool operator==(const const_iterator&) const = default;

   private:
    Map::const_iterator it_;
  };
  const_iterator begin() const { return const_iterator(map_.begin()); }
  const_iterator end() const { return const_iterator(map_.end()); }

 private:
  // Makes `slot` the only owner of its record, copying it if a snapshot shares it.
  static RequestRecord& Own(std::shared_ptr<RequestRecord>& slot) {
    if (slot.use_count() > 1) {
      slot = std::make_shared<RequestRecord>(*slot);
    } else {
      // A reader that just let go of its snapshot released the record; see its reads first.
      std::atomic_thread_fence(std::memory_order_acquire);
    }
    return *slot;
  }

  Map map_;
};

}  // namespace egs::scheduler
