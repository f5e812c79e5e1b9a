// EGS_CHECK / EGS_DCHECK: abort on a broken invariant (a bug, never user input).
//
// EGS_CHECK is active in every build type. EGS_DCHECK is for expensive checks and compiles to
// nothing when NDEBUG is defined. Each use should say in a comment why the condition must hold.
#pragma once

namespace egs::common::internal {
[[noreturn]] void CheckFailed(const char* condition, const char* file, int line);
}  // namespace egs::common::internal

#define EGS_CHECK(cond)                                                           \
  do {                                                                            \
    if (!(cond)) ::egs::common::internal::CheckFailed(#cond, __FILE__, __LINE__); \
  } while (false)

#ifdef NDEBUG
#define EGS_DCHECK(cond) \
  do {                   \
  } while (false && (cond))
#else
#define EGS_DCHECK(cond) EGS_CHECK(cond)
#endif
