// FailingStore: a Store decorator for fault-injection tests. It forwards every call to the
// wrapped store, except that the Nth Commit (counting from 1, across all threads) fails with
// Unavailable, optionally with the next few (an outage that ends) or every Commit after it too.
//
//   FakeStore fake;
//   FailingStore store(fake, {.fail_on_commit = 3, .keep_failing = true});
//
// kBeforeApply failures leave the wrapped store untouched (the write was lost). kAfterApply
// failures forward the commit first and then report Unavailable anyway (the write happened
// but its acknowledgement was lost), which is what a caller sees when a connection drops after
// the backend committed; callers must tolerate both.
//
// Thread-safety: safe from any thread if the wrapped store is.
#pragma once

#include <atomic>
#include <cstdint>

#include "store/store.h"

namespace egs::store {

struct FailingStoreOptions {
  enum class Mode { kBeforeApply, kAfterApply };
  std::int64_t fail_on_commit = 1;  // the 1-based index of the first failing Commit; 0: never
  bool keep_failing = false;        // also fail every Commit after it
  std::int64_t fail_times = 1;      // without keep_failing: this many Commits in a row fail
  Mode mode = Mode::kBeforeApply;
  // After each successful Commit, this many Get calls fail with Unavailable (a connection the
  // server dropped just after the commit, as a PostgreSQL restart does).
  int fail_gets_after_commit = 0;
};

class FailingStore final : public Store {
 public:
  // Borrows `inner`, which must outlive this object.
  FailingStore(Store& inner, FailingStoreOptions options);

  // Commits attempted so far, failed ones included.
  std::int64_t commit_count() const { return commits_.load(); }

  common::Result<CommitResult> Commit(std::vector<WriteOp> ops,
                                      std::vector<LogRecord> logs) override;
  common::Result<std::optional<StoredObject>> Get(std::string_view kind, std::string_view ns,
                                                  std::string_view name) override {
    if (failing_gets_ > 0) {
      --failing_gets_;
      return common::UnavailableError("injected: the connection was closed after the commit");
    }
    return inner_.Get(kind, ns, name);
  }
  common::Result<ListResult> List(std::string_view kind,
                                  std::optional<std::string_view> ns) override {
    return inner_.List(kind, ns);
  }
  common::Result<std::vector<LogRecord>> ReadLog(std::string_view stream, std::int64_t after_seq,
                                                 std::size_t limit) override {
    return inner_.ReadLog(stream, after_seq, limit);
  }
  common::Result<std::int64_t> CurrentRevision() override { return inner_.CurrentRevision(); }
  common::Result<std::vector<Change>> ChangesSince(std::int64_t after_revision,
                                                   std::size_t limit) override {
    return inner_.ChangesSince(after_revision, limit);
  }
  // Counts as a write: fails as Commit does (the same counter and options).
  common::Status WriteSeries(std::vector<SeriesRecord> records,
                             std::vector<SeriesPrune> prunes) override;
  common::Result<std::vector<SeriesRecord>> ReadSeries(std::string_view series, common::Time since,
                                                       const std::optional<SeriesCursor>& after,
                                                       std::size_t limit) override {
    return inner_.ReadSeries(series, since, after, limit);
  }

 private:
  // Whether the n-th (1-based) commit or series write fails.
  bool Fails(std::int64_t n) const;
  Store& inner_;
  const FailingStoreOptions options_;
  std::atomic<std::int64_t> commits_{0};
  std::atomic<int> failing_gets_{0};
};

}  // namespace egs::store
