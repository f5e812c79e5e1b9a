// Time text at the CLI's edges: Go-style durations typed by users ("4h", "1h30m", "90s"),
// RFC 3339 timestamps from the server, and kubectl-style ages ("5m", "3h", "2d").
//
// Thread-safety: free functions of values.
#pragma once

#include <string>
#include <string_view>

#include "common/status.h"
#include "common/time.h"

namespace egs::egsctl {

// "300ms", "45s", "90m", "1h30m", "2d" (a day is 24h; Go has no "d" but users type it).
// InvalidArgument for empty text, a missing or unknown unit, or a negative duration.
common::Result<common::Duration> ParseDuration(std::string_view text);

// "2026-11-22T10:00:00Z", with optional fractional seconds and a "+hh:mm" offset.
// InvalidArgument otherwise.
common::Result<common::Time> ParseTimestamp(std::string_view text);

// kubectl's human age of `d`: "45s", "5m30s", "42m", "5h10m", "26h", "3d4h", "45d", "3y".
std::string FormatAge(common::Duration d);

}  // namespace egs::egsctl
