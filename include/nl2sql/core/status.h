// Status and Result<T>: the one idiom for expected failures.
//
// A missing file, malformed JSON, a SQL error, an HTTP 429 or a malformed model answer are
// values, not exceptions: functions that can fail that way return Status or Result<T>, and the
// message carries the context a user needs (file:line, question id, config key). Exceptions are
// reserved for programming errors and the CLI boundary. Both types are cheap to move and are
// not thread-safe (like any value).
#pragma once

#include <cassert>
#include <string>
#include <utility>
#include <variant>

namespace nl2sql {

enum class ErrorCode {
  kOk = 0,
  kInvalidInput,   // bad file, bad config, bad flag: exit code 2
  kNotFound,       // missing file / unknown id
  kIo,             // read/write failure
  kSql,            // SQL error from SQLite
  kTimeout,        // a deadline passed
  kRejected,       // refused by a guardrail (not read-only, multi-statement, …)
  kUnavailable,    // transient remote failure (HTTP 429/5xx, connection reset)
  kPermission,     // HTTP 401/403
  kCancelled,      // shutdown requested
  kInternal,       // a bug
};

const char* error_code_name(ErrorCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(ErrorCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status ok() { return Status(); }
  bool is_ok() const { return code_ == ErrorCode::kOk; }
  explicit operator bool() const { return is_ok(); }
  ErrorCode code() const { return code_; }
  const std::string& message() const { return message_; }

  // Prefixes context ("file.json: ") to the message; no-op on OK.
  Status with_context(const std::string& context) const {
    if (is_ok()) return *this;
    return Status(code_, context + ": " + message_);
  }
  std::string to_string() const;

 private:
  ErrorCode code_ = ErrorCode::kOk;
  std::string message_;
};

inline Status invalid_input(std::string msg) { return {ErrorCode::kInvalidInput, std::move(msg)}; }
inline Status not_found(std::string msg) { return {ErrorCode::kNotFound, std::move(msg)}; }
inline Status io_error(std::string msg) { return {ErrorCode::kIo, std::move(msg)}; }
inline Status internal_error(std::string msg) { return {ErrorCode::kInternal, std::move(msg)}; }

// Result<T>: a T or a non-OK Status.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}  // NOLINT(google-explicit-constructor)
  Result(Status status) : v_(std::move(status)) {  // NOLINT(google-explicit-constructor)
    assert(!std::get<Status>(v_).is_ok() && "Result built from an OK status");
  }

  bool is_ok() const { return std::holds_alternative<T>(v_); }
  explicit operator bool() const { return is_ok(); }

  const T& value() const& { assert(is_ok()); return std::get<T>(v_); }
  T& value() & { assert(is_ok()); return std::get<T>(v_); }
  T&& value() && { assert(is_ok()); return std::get<T>(std::move(v_)); }
  const T& operator*() const& { return value(); }
  T& operator*() & { return value(); }
  const T* operator->() const { return &value(); }
  T* operator->() { return &value(); }

  Status status() const { return is_ok() ? Status::ok() : std::get<Status>(v_); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace nl2sql

// Propagate a non-OK Status from an expression returning Status.
#define NL2SQL_RETURN_IF_ERROR(expr)            \
  do {                                          \
    ::nl2sql::Status _st = (expr);              \
    if (!_st.is_ok()) return _st;               \
  } while (0)
