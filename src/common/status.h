// Status and Result<T>: how every fallible call in EGS reports its outcome.
//
// A Status is a code plus a human-readable message. Codes map one-to-one to HTTP statuses and CLI
// exit codes (see StatusCodeToHttp / StatusCodeToExit). Retry meaning: kUnavailable means retry
// the call; kAborted means re-read, then retry; kFailedPrecondition means wait until the state
// changes. Result<T> holds a value or a non-OK Status; its interface follows std::expected
// (has_value(), value(), error()) so it can become an alias once we build as C++23.
//
// Thread-safety: value types; safe to copy between threads.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

#include "common/check.h"

namespace egs::common {

enum class StatusCode : std::uint8_t {
  kOk = 0,
  kInvalidArgument,
  kNotFound,
  kAlreadyExists,
  kFailedPrecondition,
  kResourceExhausted,
  kAborted,
  kUnavailable,
  kDeadlineExceeded,
  kPermissionDenied,
  kUnauthenticated,
  kInternal,
};

// "InvalidArgument", "NotFound", ...
std::string_view StatusCodeName(StatusCode code);
// 400, 404, 409, ... (kOk -> 200).
int StatusCodeToHttp(StatusCode code);
// Process exit code for CLIs: 0 for kOk, otherwise a distinct small number per code.
int StatusCodeToExit(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;  // OK.
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // "NotFound: request 12 does not exist", or "OK".
  std::string ToString() const;
  // Prepends context: "submit: " + message. No-op on OK.
  Status WithContext(std::string_view context) const;
  // Marks a deliberately ignored status.
  void IgnoreError() const {}

  friend bool operator==(const Status& a, const Status& b) {
    return a.code_ == b.code_ && a.message_ == b.message_;
  }

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

inline Status OkStatus() { return Status(); }
Status InvalidArgumentError(std::string message);
Status NotFoundError(std::string message);
Status AlreadyExistsError(std::string message);
Status FailedPreconditionError(std::string message);
Status ResourceExhaustedError(std::string message);
Status AbortedError(std::string message);
Status UnavailableError(std::string message);
Status DeadlineExceededError(std::string message);
Status PermissionDeniedError(std::string message);
Status UnauthenticatedError(std::string message);
Status InternalError(std::string message);

template <typename T>
class [[nodiscard]] Result {
 public:
  // Implicit on purpose: `return value;` and `return SomeError(...);` both read naturally.
  Result(T value) : v_(std::move(value)) {}        // NOLINT(google-explicit-constructor)
  Result(Status status) : v_(std::move(status)) {  // NOLINT(google-explicit-constructor)
    // An OK status carries no value; constructing a Result from one is a bug at the call site.
    EGS_CHECK(!std::get<Status>(v_).ok());
  }

  bool has_value() const { return v_.index() == 0; }
  bool ok() const { return has_value(); }
  explicit operator bool() const { return has_value(); }

  T& value() & {
    EGS_CHECK(has_value());
    return std::get<0>(v_);
  }
  const T& value() const& {
    EGS_CHECK(has_value());
    return std::get<0>(v_);
  }
  T&& value() && {
    EGS_CHECK(has_value());
    return std::get<0>(std::move(v_));
  }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

  // The error; OkStatus() when a value is held.
  Status error() const { return has_value() ? OkStatus() : std::get<Status>(v_); }
  Status status() const { return error(); }

  template <typename U>
  T value_or(U&& fallback) const& {
    return has_value() ? std::get<0>(v_) : static_cast<T>(std::forward<U>(fallback));
  }

 private:
  std::variant<T, Status> v_;
};

namespace internal {
inline Status AsStatus(const Status& s) { return s; }
template <typename T>
Status AsStatus(const Result<T>& r) {
  return r.error();
}
}  // namespace internal

}  // namespace egs::common

#define EGS_STATUS_CONCAT_INNER_(a, b) a##b
#define EGS_STATUS_CONCAT_(a, b) EGS_STATUS_CONCAT_INNER_(a, b)

// Returns the Status of `expr` from the enclosing function when it is not OK.
#define EGS_RETURN_IF_ERROR(expr)                                                \
  do {                                                                           \
    ::egs::common::Status egs_status_ = ::egs::common::internal::AsStatus(expr); \
    if (!egs_status_.ok()) return egs_status_;                                   \
  } while (false)

// `EGS_ASSIGN_OR_RETURN(auto x, MakeX());` declares x from the value or returns the error.
#define EGS_ASSIGN_OR_RETURN(lhs, expr) \
  EGS_ASSIGN_OR_RETURN_IMPL_(EGS_STATUS_CONCAT_(egs_result_, __LINE__), lhs, expr)
#define EGS_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                               \
  if (!tmp.has_value()) return tmp.error();        \
  lhs = std::move(tmp).value()
