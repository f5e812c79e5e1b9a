// Schema migrations shared by the SQL backends (sqlite/schema.cc, postgres/postgres_store.cc):
// the step type, the latest version of a list of steps, and the refusal of a database whose
// schema is newer than the binary, in the same words for both.
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <span>

#include "common/status.h"

namespace egs::store::internal {

// One schema step. Append only: a released step is never edited, a change is a new step.
struct Migration {
  std::int64_t version;
  const char* sql;
};

// The version of the last step (steps ascend); 0 for none.
constexpr std::int64_t LatestVersion(std::span<const Migration> steps) {
  return steps.empty() ? 0 : steps.back().version;
}

// OK when a database at schema version `found` can be opened by a binary whose steps end at
// `latest`; FailedPrecondition naming both otherwise.
common::Status CheckSchemaVersion(std::int64_t found, std::int64_t latest);

}  // namespace egs::store::internal
