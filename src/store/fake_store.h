// FakeStore: an in-memory Store with the same semantics as the durable backends (the contract
// tests run against both). Nothing survives the object; "durable" means "applied".
//
// Thread-safety: every method is safe from any thread; one mutex serializes them.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "store/store.h"

namespace egs::store {

struct FakeStoreOptions {
  // The change feed keeps the changes of the last this-many revisions (as SqliteOptions).
  std::int64_t change_retention_revisions = 100'000;
};

class FakeStore final : public Store {
 public:
  explicit FakeStore(FakeStoreOptions options = {});

  common::Result<CommitResult> Commit(std::vector<WriteOp> ops,
                                      std::vector<LogRecord> logs) override;
  common::Result<std::optional<StoredObject>> Get(std::string_view kind, std::string_view ns,
                                                  std::string_view name) override;
  common::Result<ListResult> List(std::string_view kind,
                                  std::optional<std::string_view> ns) override;
  common::Result<std::vector<LogRecord>> ReadLog(std::string_view stream, std::int64_t after_seq,
                                                 std::size_t limit) override;
  common::Result<std::int64_t> CurrentRevision() override;
  common::Result<std::vector<Change>> ChangesSince(std::int64_t after_revision,
                                                   std::size_t limit) override;
  common::Status WriteSeries(std::vector<SeriesRecord> records,
                             std::vector<SeriesPrune> prunes) override;
  common::Result<std::vector<SeriesRecord>> ReadSeries(std::string_view series, common::Time since,
                                                       const std::optional<SeriesCursor>& after,
                                                       std::size_t limit) override;

 private:
  using Key = std::tuple<std::string, std::string, std::string>;  // (kind, ns, name)
  using KeyView = std::tuple<std::string_view, std::string_view, std::string_view>;
  // Orders keys and views of them alike, so that lookups by string_view copy nothing. (Comparing
  // the two tuple types directly needs a three-way comparison between them that clang with
  // libstdc++ 12 does not find.)
  struct KeyLess {
    using is_transparent = void;
    static KeyView View(const KeyView& v) { return v; }
    static KeyView View(const Key& k) { return {std::get<0>(k), std::get<1>(k), std::get<2>(k)}; }
    template <typename A, typename B>
    bool operator()(const A& a, const B& b) const {
      return View(a) < View(b);
    }
  };

  const FakeStoreOptions options_;
  std::mutex mu_;
  std::map<Key, StoredObject, KeyLess> objects_;  // GUARDED_BY(mu_)
  std::vector<LogRecord> logs_;                   // GUARDED_BY(mu_), ascending seq
  std::vector<Change> changes_;                   // GUARDED_BY(mu_), ascending revision
  std::int64_t revision_ = 0;                     // GUARDED_BY(mu_)
  std::int64_t compacted_revision_ = 0;           // GUARDED_BY(mu_)
  std::int64_t last_seq_ = 0;                     // GUARDED_BY(mu_)
  // (series, key, at) -> data.
  std::map<std::tuple<std::string, std::string, common::Time>, std::string> series_;  // GUARDED_BY
};

}  // namespace egs::store
