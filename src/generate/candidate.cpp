// Candidate trace JSON: stable keys, unknown keys ignored on read.
#include "nl2sql/generate/candidate.h"

#include <nlohmann/json.hpp>

namespace nl2sql::generate {
namespace {

using nlohmann::json;

// Reads `key` into `out` when present with a compatible type; a wrong type is an error naming
// the key (a trace file edited by hand should not silently lose fields).
template <typename T>
Status read(const json& j, const char* key, T& out, const std::string& where) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return Status::ok();
  try {
    out = it->get<T>();
  } catch (const json::exception& e) {
    return invalid_input(where + ": key \"" + key + "\": " + e.what());
  }
  return Status::ok();
}

Result<db::ExecStatus> exec_status_from_name(const std::string& name) {
  for (auto s : {db::ExecStatus::kOk, db::ExecStatus::kError, db::ExecStatus::kTimeout,
                 db::ExecStatus::kRowCap, db::ExecStatus::kRejected})
    if (name == db::exec_status_name(s)) return s;
  return invalid_input("unknown execution status \"" + name + "\"");
}

Result<LlmCallTrace> call_from_json(const json& j, const std::string& where) {
  if (!j.is_object()) return invalid_input(where + ": a model call must be an object");
  LlmCallTrace c;
  NL2SQL_RETURN_IF_ERROR(read(j, "stage", c.stage, where));
  NL2SQL_RETURN_IF_ERROR(read(j, "template", c.template_name, where));
  NL2SQL_RETURN_IF_ERROR(read(j, "template_hash", c.template_hash, where));
  NL2SQL_RETURN_IF_ERROR(read(j, "profile", c.profile, where));
  NL2SQL_RETURN_IF_ERROR(read(j, "model", c.model, where));
  NL2SQL_RETURN_IF_ERROR(read(j, "provider", c.provider, where));
  NL2SQL_RETURN_IF_ERROR(read(j, "prompt", c.prompt, where));
  NL2SQL_RETURN_IF_ERROR(read(j, "system", c.system, where));
  NL2SQL_RETURN_IF_ERROR(read(j, "response", c.response, where));
  NL2SQL_RETURN_IF_ERROR(read(j, "reasoning", c.reasoning, where));
  NL2SQL_RETURN_IF_ERROR(read(j, "answer_from_reasoning", c.answer_from_reasoning, where));
  int64_t rung = 0;
  NL2SQL_RETURN_IF_ERROR(read(j, "prompt_rung", rung, where));
  c.prompt_rung = static_cast<int>(rung);
  NL2SQL_RETURN_IF_ERROR(read(j, "error", c.error, where));
  NL2SQL_RETURN_IF_ERROR(read(j, "prompt_tokens", c.prompt_tokens, where));
  NL2SQL_RETURN_IF_ERROR(read(j, "completion_tokens", c.completion_tokens, where));
  NL2SQL_RETURN_IF_ERROR(read(j, "cost_usd", c.cost_usd, where));
  NL2SQL_RETURN_IF_ERROR(read(j, "latency_s", c.latency_s, where));
  NL2SQL_RETURN_IF_ERROR(read(j, "from_cache", c.from_cache, where));
  return c;
}

Result<ExecutionSummary> execution_from_json(const json& j, const std::string& where) {
  if (!j.is_object()) return invalid_input(where + ": an execution must be an object");
  ExecutionSummary e;
  NL2SQL_RETURN_IF_ERROR(read(j, "executed", e.executed, where));
  std::string status = db::exec_status_name(db::ExecStatus::kOk);
  NL2SQL_RETURN_IF_ERROR(read(j, "status", status, where));
  auto s = exec_status_from_name(status);
  if (!s) return s.status().with_context(where);
  e.status = *s;
  NL2SQL_RETURN_IF_ERROR(read(j, "error", e.error, where));
  NL2SQL_RETURN_IF_ERROR(read(j, "rows", e.rows, where));
  NL2SQL_RETURN_IF_ERROR(read(j, "columns", e.columns, where));
  NL2SQL_RETURN_IF_ERROR(read(j, "preview", e.preview, where));
  NL2SQL_RETURN_IF_ERROR(read(j, "elapsed_ms", e.elapsed_ms, where));
  return e;
}

}  // namespace

int64_t Candidate::tokens() const {
  int64_t t = 0;
  for (const auto& c : calls) t += c.prompt_tokens + c.completion_tokens;
  for (const auto& r : fix_rounds) t += r.call.prompt_tokens + r.call.completion_tokens;
  return t;
}

double Candidate::cost_usd() const {
  double t = 0;
  for (const auto& c : calls) t += c.cost_usd;
  for (const auto& r : fix_rounds) t += r.call.cost_usd;
  return t;
}

double Candidate::llm_latency_s() const {
  double t = 0;
  for (const auto& c : calls) t += c.latency_s;
  for (const auto& r : fix_rounds) t += r.call.latency_s;
  return t;
}

json to_json(const LlmCallTrace& c) {
  json j = {{"stage", c.stage},
            {"template", c.template_name},
            {"template_hash", c.template_hash},
            {"profile", c.profile},
            {"model", c.model},
            {"provider", c.provider},
            {"system", c.system},
            {"prompt", c.prompt},
            {"response", c.response},
            {"error", c.error},
            {"prompt_tokens", c.prompt_tokens},
            {"completion_tokens", c.completion_tokens},
            {"cost_usd", c.cost_usd},
            {"latency_s", c.latency_s},
            {"from_cache", c.from_cache}};
  // Omitted when empty, so traces of models that do not reason read as before.
  if (!c.reasoning.empty()) j["reasoning"] = c.reasoning;
  if (c.answer_from_reasoning) j["answer_from_reasoning"] = true;
  if (c.prompt_rung > 0) j["prompt_rung"] = c.prompt_rung;
  return j;
}

json to_json(const ExecutionSummary& e) {
  return {{"executed", e.executed},
          {"status", db::exec_status_name(e.status)},
          {"error", e.error},
          {"rows", e.rows},
          {"columns", e.columns},
          {"preview", e.preview},
          {"elapsed_ms", e.elapsed_ms}};
}

json to_json(const FixRound& r) {
  return {{"round", r.round},
          {"failure_class", r.failure_class},
          {"feedback", r.feedback},
          {"sql_before", r.sql_before},
          {"sql_after", r.sql_after},
          {"execution_after", to_json(r.execution_after)},
          {"call", to_json(r.call)}};
}

json to_json(const Candidate& c) {
  json calls = json::array();
  for (const auto& call : c.calls) calls.push_back(to_json(call));
  json rounds = json::array();
  for (const auto& r : c.fix_rounds) rounds.push_back(to_json(r));
  return {{"id", c.id},
          {"generator", c.generator},
          {"profile", c.profile},
          {"sample_index", c.sample_index},
          {"reasoning", c.reasoning},
          {"raw_response", c.raw_response},
          {"sql", c.sql},
          {"original_sql", c.original_sql},
          {"extraction_ok", c.extraction_ok},
          {"extraction_error", c.extraction_error},
          {"sql_trailing", c.sql_trailing},
          {"rejected", c.rejected},
          {"rejection", c.rejection},
          {"execution", to_json(c.execution)},
          {"fix_rounds", rounds},
          {"still_failing", c.still_failing},
          {"calls", calls}};
}

Result<Candidate> candidate_from_json(const json& j) {
  if (!j.is_object()) return invalid_input("candidate trace: expected an object");
  Candidate c;
  NL2SQL_RETURN_IF_ERROR(read(j, "id", c.id, "candidate trace"));
  const std::string where = "candidate " + (c.id.empty() ? std::string("?") : c.id);
  NL2SQL_RETURN_IF_ERROR(read(j, "generator", c.generator, where));
  NL2SQL_RETURN_IF_ERROR(read(j, "profile", c.profile, where));
  NL2SQL_RETURN_IF_ERROR(read(j, "sample_index", c.sample_index, where));
  NL2SQL_RETURN_IF_ERROR(read(j, "reasoning", c.reasoning, where));
  NL2SQL_RETURN_IF_ERROR(read(j, "raw_response", c.raw_response, where));
  NL2SQL_RETURN_IF_ERROR(read(j, "sql", c.sql, where));
  NL2SQL_RETURN_IF_ERROR(read(j, "original_sql", c.original_sql, where));
  NL2SQL_RETURN_IF_ERROR(read(j, "extraction_ok", c.extraction_ok, where));
  NL2SQL_RETURN_IF_ERROR(read(j, "extraction_error", c.extraction_error, where));
  NL2SQL_RETURN_IF_ERROR(read(j, "sql_trailing", c.sql_trailing, where));
  NL2SQL_RETURN_IF_ERROR(read(j, "rejected", c.rejected, where));
  NL2SQL_RETURN_IF_ERROR(read(j, "rejection", c.rejection, where));
  NL2SQL_RETURN_IF_ERROR(read(j, "still_failing", c.still_failing, where));
  if (auto it = j.find("execution"); it != j.end() && !it->is_null()) {
    auto e = execution_from_json(*it, where);
    if (!e) return e.status();
    c.execution = *e;
  }
  if (auto it = j.find("calls"); it != j.end() && it->is_array()) {
    for (const auto& cj : *it) {
      auto call = call_from_json(cj, where);
      if (!call) return call.status();
      c.calls.push_back(std::move(*call));
    }
  }
  if (auto it = j.find("fix_rounds"); it != j.end() && it->is_array()) {
    for (const auto& rj : *it) {
      if (!rj.is_object()) return invalid_input(where + ": a fix round must be an object");
      FixRound r;
      const std::string rw = where + " fix round";
      NL2SQL_RETURN_IF_ERROR(read(rj, "round", r.round, rw));
      NL2SQL_RETURN_IF_ERROR(read(rj, "failure_class", r.failure_class, rw));
      NL2SQL_RETURN_IF_ERROR(read(rj, "feedback", r.feedback, rw));
      NL2SQL_RETURN_IF_ERROR(read(rj, "sql_before", r.sql_before, rw));
      NL2SQL_RETURN_IF_ERROR(read(rj, "sql_after", r.sql_after, rw));
      if (auto e = rj.find("execution_after"); e != rj.end() && !e->is_null()) {
        auto ex = execution_from_json(*e, rw);
        if (!ex) return ex.status();
        r.execution_after = *ex;
      }
      if (auto cl = rj.find("call"); cl != rj.end() && !cl->is_null()) {
        auto call = call_from_json(*cl, rw);
        if (!call) return call.status();
        r.call = std::move(*call);
      }
      c.fix_rounds.push_back(std::move(r));
    }
  }
  return c;
}

}  // namespace nl2sql::generate
