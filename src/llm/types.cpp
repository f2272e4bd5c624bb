#include "nl2sql/llm/types.h"

#include <string_view>

namespace nl2sql::llm {
namespace {

struct KindInfo {
  CallErrorKind kind;
  const char* name;
  ErrorCode code;
};

constexpr KindInfo kKinds[] = {
    {CallErrorKind::kConfig, "config", ErrorCode::kInvalidInput},
    {CallErrorKind::kHttpClient, "http_client_error", ErrorCode::kInvalidInput},
    {CallErrorKind::kContextLength, "context_length", ErrorCode::kInvalidInput},
    {CallErrorKind::kAuth, "auth", ErrorCode::kPermission},
    {CallErrorKind::kRateLimited, "rate_limited", ErrorCode::kUnavailable},
    {CallErrorKind::kServer, "server_error", ErrorCode::kUnavailable},
    {CallErrorKind::kConnection, "connection", ErrorCode::kUnavailable},
    {CallErrorKind::kTimeout, "timeout", ErrorCode::kTimeout},
    {CallErrorKind::kCancelled, "cancelled", ErrorCode::kCancelled},
    {CallErrorKind::kNotJson, "not_json", ErrorCode::kInvalidInput},
    {CallErrorKind::kMissingField, "missing_field", ErrorCode::kInvalidInput},
    {CallErrorKind::kEmptyChoices, "empty_choices", ErrorCode::kInvalidInput},
    {CallErrorKind::kEmptyContent, "empty_content", ErrorCode::kInvalidInput},
    {CallErrorKind::kTruncated, "truncated", ErrorCode::kInvalidInput},
    {CallErrorKind::kReplayMiss, "replay_miss", ErrorCode::kNotFound},
    {CallErrorKind::kCache, "cache", ErrorCode::kIo},
};

}  // namespace

const char* call_error_kind_name(CallErrorKind kind) {
  for (const auto& k : kKinds)
    if (k.kind == kind) return k.name;
  return "none";
}

Status make_call_error(CallErrorKind kind, std::string message) {
  for (const auto& k : kKinds)
    if (k.kind == kind) return Status(k.code, std::string("[") + k.name + "] " + message);
  return internal_error(std::move(message));
}

CallErrorKind call_error_kind(const Status& status) {
  if (status.is_ok()) return CallErrorKind::kNone;
  std::string_view m = status.message();
  if (m.empty() || m[0] != '[') return CallErrorKind::kNone;
  auto close = m.find(']');
  if (close == std::string_view::npos) return CallErrorKind::kNone;
  auto name = m.substr(1, close - 1);
  for (const auto& k : kKinds)
    if (name == k.name && status.code() == k.code) return k.kind;
  return CallErrorKind::kNone;
}

bool is_lost_call(CallErrorKind kind) {
  switch (kind) {
    case CallErrorKind::kRateLimited:
    case CallErrorKind::kServer:
    case CallErrorKind::kConnection:
    case CallErrorKind::kTimeout:
    case CallErrorKind::kCancelled:
    case CallErrorKind::kCache:
      return true;
    default:
      return false;
  }
}

bool is_lost_call_kind_name(const std::string& name) {
  for (const auto& k : kKinds)
    if (name == k.name) return is_lost_call(k.kind);
  return false;
}

bool is_malformed_answer(CallErrorKind kind) {
  switch (kind) {
    case CallErrorKind::kNotJson:
    case CallErrorKind::kMissingField:
    case CallErrorKind::kEmptyChoices:
    case CallErrorKind::kEmptyContent:
    case CallErrorKind::kTruncated:
      return true;
    default:
      return false;
  }
}

const char* call_task_name(CallTask task) {
  switch (task) {
    case CallTask::kNone: return "none";
    case CallTask::kGenerate: return "generate";
    case CallTask::kFix: return "fix";
    case CallTask::kSelectPair: return "select_pair";
    case CallTask::kRank: return "rank";
    case CallTask::kChoose: return "choose";
    case CallTask::kNlEval: return "nl_eval";
    case CallTask::kKeywords: return "keywords";
    case CallTask::kColumnFilter: return "column_filter";
    case CallTask::kLedger: return "ledger";
    case CallTask::kPlan: return "plan";
    case CallTask::kPlanCritique: return "plan_critique";
    case CallTask::kSqlCritique: return "sql_critique";
    case CallTask::kValidate: return "validate";
  }
  return "none";
}

}  // namespace nl2sql::llm
