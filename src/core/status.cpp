#include "nl2sql/core/status.h"

namespace nl2sql {

const char* error_code_name(ErrorCode code) {
  switch (code) {
    case ErrorCode::kOk: return "ok";
    case ErrorCode::kInvalidInput: return "invalid input";
    case ErrorCode::kNotFound: return "not found";
    case ErrorCode::kIo: return "I/O error";
    case ErrorCode::kSql: return "SQL error";
    case ErrorCode::kTimeout: return "timeout";
    case ErrorCode::kRejected: return "rejected";
    case ErrorCode::kUnavailable: return "unavailable";
    case ErrorCode::kPermission: return "permission denied";
    case ErrorCode::kCancelled: return "cancelled";
    case ErrorCode::kInternal: return "internal error";
  }
  return "unknown";
}

std::string Status::to_string() const {
  if (is_ok()) return "ok";
  return std::string(error_code_name(code_)) + ": " + message_;
}

}  // namespace nl2sql
