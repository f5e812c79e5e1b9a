#include "store/sqlite/sqlite_status.h"

#include <SQLiteCpp/Exception.h>
#include <fmt/format.h>
#include <sqlite3.h>

namespace egs::store::sqlite {

common::Status StatusFromException(const std::exception& e, std::string_view context) {
  if (const auto* sql = dynamic_cast<const SQLite::Exception*>(&e)) {
    const int primary = sql->getErrorCode() & 0xff;  // strip extended-code bits
    if (primary == SQLITE_BUSY || primary == SQLITE_LOCKED) {
      return common::UnavailableError(fmt::format("{}: database busy: {}", context, e.what()));
    }
    return common::InternalError(
        fmt::format("{}: sqlite error {}: {}", context, sql->getErrorCode(), e.what()));
  }
  return common::InternalError(fmt::format("{}: {}", context, e.what()));
}

}  // namespace egs::store::sqlite
