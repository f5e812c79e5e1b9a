#include "store/internal/migrations.h"

#include <fmt/format.h>

namespace egs::store::internal {

common::Status CheckSchemaVersion(std::int64_t found, std::int64_t latest) {
  if (found <= latest) return common::OkStatus();
  return common::FailedPreconditionError(fmt::format(
      "database schema version {} is newer than this binary supports (up to {}); run a newer "
      "egs or restore a matching backup",
      found, latest));
}

}  // namespace egs::store::internal
