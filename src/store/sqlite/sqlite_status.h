// Turns SQLiteCpp exceptions into Status, so that nothing throws out of the SQLite adapter.
//
// Thread-safety: pure functions.
#pragma once

#include <exception>
#include <string_view>

#include "common/status.h"

namespace egs::store::sqlite {

// Unavailable for SQLITE_BUSY / SQLITE_LOCKED (another writer holds the database: retry),
// Internal for every other error. The message starts with `context`.
common::Status StatusFromException(const std::exception& e, std::string_view context);

// Runs `fn` (returning a Status or a Result<T>) and converts any exception it throws into a
// Status through StatusFromException.
template <typename Fn>
auto RunGuarded(std::string_view context, Fn&& fn) -> decltype(fn()) {
  try {
    return fn();
  } catch (const std::exception& e) {
    return StatusFromException(e, context);
  }
}

}  // namespace egs::store::sqlite
