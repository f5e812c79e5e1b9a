#include "store/failing_store.h"

#include <fmt/format.h>

#include <algorithm>
#include <utility>

namespace egs::store {

FailingStore::FailingStore(Store& inner, FailingStoreOptions options)
    : inner_(inner), options_(options) {}

bool FailingStore::Fails(std::int64_t n) const {
  const std::int64_t first = options_.fail_on_commit;
  return first > 0 && n >= first &&
         (options_.keep_failing || n < first + std::max<std::int64_t>(options_.fail_times, 1));
}

common::Result<CommitResult> FailingStore::Commit(std::vector<WriteOp> ops,
                                                  std::vector<LogRecord> logs) {
  const std::int64_t n = ++commits_;
  if (!Fails(n)) {
    auto committed = inner_.Commit(std::move(ops), std::move(logs));
    if (committed.ok()) failing_gets_ = options_.fail_gets_after_commit;
    return committed;
  }
  common::Status injected =
      common::UnavailableError(fmt::format("injected failure of commit {}", n));
  if (options_.mode == FailingStoreOptions::Mode::kAfterApply) {
    common::Result<CommitResult> applied = inner_.Commit(std::move(ops), std::move(logs));
    if (!applied.ok()) return applied;
  }
  return injected;
}

common::Status FailingStore::WriteSeries(std::vector<SeriesRecord> records,
                                         std::vector<SeriesPrune> prunes) {
  const std::int64_t n = ++commits_;
  if (!Fails(n)) return inner_.WriteSeries(std::move(records), std::move(prunes));
  if (options_.mode == FailingStoreOptions::Mode::kAfterApply) {
    EGS_RETURN_IF_ERROR(inner_.WriteSeries(std::move(records), std::move(prunes)));
  }
  return common::UnavailableError(fmt::format("injected failure of write {}", n));
}

}  // namespace egs::store
