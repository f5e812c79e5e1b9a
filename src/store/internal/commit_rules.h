// Commit rules shared by every Store backend, so that they agree on validation, precondition
// checks and error messages (the contract tests hold them to it).
//
// Thread-safety: pure functions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "store/store.h"

namespace egs::store::internal {

// "Kind ns/name", or "Kind name" for a cluster-scoped object; used in error messages.
std::string DescribeObject(std::string_view kind, std::string_view ns, std::string_view name);

// InvalidArgument for an op with empty kind or name or a negative expected_version, or a log
// record with an empty stream. Checked before anything is touched.
common::Status ValidateCommit(const std::vector<WriteOp>& ops, const std::vector<LogRecord>& logs);
// InvalidArgument for a record with an empty series or key or a prune with an empty series.
common::Status ValidateSeries(const std::vector<SeriesRecord>& records,
                              const std::vector<SeriesPrune>& prunes);

// Checks `op`'s expected_version against the object's current resource_version (`actual`,
// nullopt when it does not exist). OK, AlreadyExists, NotFound or Aborted as Store::Commit
// documents.
common::Status CheckExpectedVersion(const WriteOp& op, std::optional<std::int64_t> actual);

// The last revision of a commit of `ops` op(s) made after revision `current`: op i takes
// current + 1 + i, so that no two object writes share a revision; a commit without ops takes one.
constexpr std::int64_t LastRevisionOf(std::int64_t current, std::size_t ops) {
  return current + (ops == 0 ? 1 : static_cast<std::int64_t>(ops));
}

// Whether two commits write the same: the same ops (type, expected version, object) and the same
// log records (stream, time, data), in order. Resource versions and sequence numbers, which the
// store assigns, are not compared. A backend that lost the reply to a commit that landed tells
// its retry from a new commit with it.
bool SameCommit(const std::vector<WriteOp>& a_ops, const std::vector<LogRecord>& a_logs,
                const std::vector<WriteOp>& b_ops, const std::vector<LogRecord>& b_logs);

// Aborted: changes after `after_revision` were compacted (the feed starts after `compacted`).
common::Status CompactedError(std::int64_t after_revision, std::int64_t compacted);

}  // namespace egs::store::internal
