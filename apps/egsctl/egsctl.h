// egsctl's entry point as a library function, so tests run whole commands in-process.
//
// Exit codes:
//   0  success
//   1  error from the server, or an object not found
//   2  usage error: unknown command or flag, missing argument, bad value, unreadable or malformed
//      file (nothing is sent to the server)
//   3  cannot connect to the server, or a timeout
//   4  unauthorized (401) or forbidden (403)
//
// Thread-safety: each call is independent; `clock` and the streams must outlive it.
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/status.h"
#include "egsctl/config.h"

namespace egs::egsctl {

inline constexpr int kExitOk = 0;
inline constexpr int kExitError = 1;
inline constexpr int kExitUsage = 2;
inline constexpr int kExitUnavailable = 3;
inline constexpr int kExitUnauthorized = 4;

inline constexpr const char* kVersion = "v0.1.0";

// The exit code for a failed (or OK) command: InvalidArgument -> 2, Unavailable and
// DeadlineExceeded -> 3, Unauthenticated and PermissionDenied -> 4, any other error -> 1.
int ExitCodeFor(const common::Status& s);

// Runs `args` (without the program name): output to `out`, errors to `err`, `-f -` reads `in`,
// `env` is the environment (HOME, EGSCTL_CONFIG, EGSCTL_SERVER, EGSCTL_TOKEN, EGSCTL_NAMESPACE).
// Returns the exit code.
int RunEgsctl(std::vector<std::string> args, std::ostream& out, std::ostream& err,
              common::Clock& clock, const Environment& env, std::istream& in);

// As above with the process environment and std::cin.
int RunEgsctl(std::vector<std::string> args, std::ostream& out, std::ostream& err,
              common::Clock& clock);

}  // namespace egs::egsctl
