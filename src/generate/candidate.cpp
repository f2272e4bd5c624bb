// Candidate trace JSON: stable keys; a key this build does not write is refused on read.
#include "nl2sql/generate/candidate.h"

#include <nlohmann/json.hpp>

#include "nl2sql/core/json_read.h"
#include "nl2sql/generate/call_tags.h"

namespace nl2sql::generate {
namespace {

using nlohmann::json;
using core::read_key;
using llm::to_json;

Result<db::ExecStatus> exec_status_from_name(const std::string& name) {
  for (auto s : {db::ExecStatus::kOk, db::ExecStatus::kError, db::ExecStatus::kTimeout,
                 db::ExecStatus::kRowCap, db::ExecStatus::kRejected})
    if (name == db::exec_status_name(s)) return s;
  return invalid_input("unknown execution status \"" + name + "\"");
}

Result<ExecutionSummary> execution_from_json(const json& j, const std::string& where) {
  if (!j.is_object()) return invalid_input(where + ": an execution must be an object");
  NL2SQL_RETURN_IF_ERROR(core::known_keys_only(
      j, {"executed", "status", "error", "rows", "columns", "preview", "elapsed_ms"}, where + ", execution"));
  ExecutionSummary e;
  NL2SQL_RETURN_IF_ERROR(read_key(j, "executed", e.executed, where));
  std::string status = db::exec_status_name(db::ExecStatus::kOk);
  NL2SQL_RETURN_IF_ERROR(read_key(j, "status", status, where));
  auto s = exec_status_from_name(status);
  if (!s) return s.status().with_context(where);
  e.status = *s;
  NL2SQL_RETURN_IF_ERROR(read_key(j, "error", e.error, where));
  NL2SQL_RETURN_IF_ERROR(read_key(j, "rows", e.rows, where));
  NL2SQL_RETURN_IF_ERROR(read_key(j, "columns", e.columns, where));
  NL2SQL_RETURN_IF_ERROR(read_key(j, "preview", e.preview, where));
  NL2SQL_RETURN_IF_ERROR(read_key(j, "elapsed_ms", e.elapsed_ms, where));
  return e;
}

}  // namespace

int64_t Candidate::tokens() const {
  int64_t t = 0;
  for (const auto& c : calls)
    if (c.shared_from.empty()) t += c.prompt_tokens + c.completion_tokens;  // shared: spent elsewhere
  for (const auto& r : fix_rounds) t += r.call.prompt_tokens + r.call.completion_tokens;
  return t;
}

double Candidate::cost_usd() const {
  double t = 0;
  for (const auto& c : calls)
    if (c.shared_from.empty()) t += c.cost_usd;
  for (const auto& r : fix_rounds) t += r.call.cost_usd;
  return t;
}

double Candidate::llm_latency_s() const {
  double t = 0;
  for (const auto& c : calls) t += c.latency_s;
  for (const auto& r : fix_rounds) t += r.call.latency_s;
  return t;
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
  json out = {{"id", c.id},
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
  if (!c.fix_shared_with.empty()) out["fix_shared_with"] = c.fix_shared_with;
  if (!c.generation_shared_with.empty()) out["generation_shared_with"] = c.generation_shared_with;
  if (c.source)
    out["source"] = {{"file", c.source->file}, {"position", c.source->position}, {"generator", c.source->generator}};
  return out;
}

Result<Candidate> candidate_from_json(const json& j) {
  if (!j.is_object()) return invalid_input("candidate trace: expected an object");
  Candidate c;
  NL2SQL_RETURN_IF_ERROR(read_key(j, "id", c.id, "candidate trace"));
  const std::string where = "candidate " + (c.id.empty() ? std::string("?") : c.id);
  NL2SQL_RETURN_IF_ERROR(core::known_keys_only(
      j, {"id", "generator", "profile", "sample_index", "reasoning", "raw_response", "sql", "original_sql",
          "extraction_ok", "extraction_error", "sql_trailing", "rejected", "rejection", "execution", "fix_rounds",
          "still_failing", "calls", "fix_shared_with", "generation_shared_with", "source"},
      where));
  NL2SQL_RETURN_IF_ERROR(read_key(j, "generator", c.generator, where));
  NL2SQL_RETURN_IF_ERROR(read_key(j, "profile", c.profile, where));
  NL2SQL_RETURN_IF_ERROR(read_key(j, "sample_index", c.sample_index, where));
  NL2SQL_RETURN_IF_ERROR(read_key(j, "reasoning", c.reasoning, where));
  NL2SQL_RETURN_IF_ERROR(read_key(j, "raw_response", c.raw_response, where));
  NL2SQL_RETURN_IF_ERROR(read_key(j, "sql", c.sql, where));
  NL2SQL_RETURN_IF_ERROR(read_key(j, "original_sql", c.original_sql, where));
  NL2SQL_RETURN_IF_ERROR(read_key(j, "extraction_ok", c.extraction_ok, where));
  NL2SQL_RETURN_IF_ERROR(read_key(j, "extraction_error", c.extraction_error, where));
  NL2SQL_RETURN_IF_ERROR(read_key(j, "sql_trailing", c.sql_trailing, where));
  NL2SQL_RETURN_IF_ERROR(read_key(j, "rejected", c.rejected, where));
  NL2SQL_RETURN_IF_ERROR(read_key(j, "rejection", c.rejection, where));
  NL2SQL_RETURN_IF_ERROR(read_key(j, "still_failing", c.still_failing, where));
  if (auto it = j.find("execution"); it != j.end() && !it->is_null()) {
    auto e = execution_from_json(*it, where);
    if (!e) return e.status();
    c.execution = *e;
  }
  if (auto it = j.find("calls"); it != j.end() && it->is_array()) {
    for (const auto& cj : *it) {
      auto call = llm::call_trace_from_json(cj, where);
      if (!call) return call.status();
      c.calls.push_back(std::move(*call));
    }
  }
  if (auto it = j.find("fix_shared_with"); it != j.end() && it->is_string()) c.fix_shared_with = it->get<std::string>();
  if (auto it = j.find("generation_shared_with"); it != j.end() && it->is_string())
    c.generation_shared_with = it->get<std::string>();
  if (auto it = j.find("source"); it != j.end() && !it->is_null()) {
    if (!it->is_object()) return invalid_input(where + ": \"source\" must be an object");
    NL2SQL_RETURN_IF_ERROR(core::known_keys_only(*it, {"file", "position", "generator"}, where + " source"));
    CandidateSource src;
    NL2SQL_RETURN_IF_ERROR(read_key(*it, "file", src.file, where + " source"));
    NL2SQL_RETURN_IF_ERROR(read_key(*it, "position", src.position, where + " source"));
    NL2SQL_RETURN_IF_ERROR(read_key(*it, "generator", src.generator, where + " source"));
    c.source = std::move(src);
  }
  if (auto it = j.find("fix_rounds"); it != j.end() && it->is_array()) {
    for (const auto& rj : *it) {
      if (!rj.is_object()) return invalid_input(where + ": a fix round must be an object");
      FixRound r;
      const std::string rw = where + " fix round";
      NL2SQL_RETURN_IF_ERROR(core::known_keys_only(
          rj, {"round", "failure_class", "feedback", "sql_before", "sql_after", "execution_after", "call"}, rw));
      NL2SQL_RETURN_IF_ERROR(read_key(rj, "round", r.round, rw));
      NL2SQL_RETURN_IF_ERROR(read_key(rj, "failure_class", r.failure_class, rw));
      NL2SQL_RETURN_IF_ERROR(read_key(rj, "feedback", r.feedback, rw));
      NL2SQL_RETURN_IF_ERROR(read_key(rj, "sql_before", r.sql_before, rw));
      NL2SQL_RETURN_IF_ERROR(read_key(rj, "sql_after", r.sql_after, rw));
      if (auto e = rj.find("execution_after"); e != rj.end() && !e->is_null()) {
        auto ex = execution_from_json(*e, rw);
        if (!ex) return ex.status();
        r.execution_after = *ex;
      }
      if (auto cl = rj.find("call"); cl != rj.end() && !cl->is_null()) {
        auto call = llm::call_trace_from_json(*cl, rw);
        if (!call) return call.status();
        r.call = std::move(*call);
      }
      c.fix_rounds.push_back(std::move(r));
    }
  }
  return c;
}

llm::CallTag generation_tag(const data::Task& q, const std::string& generator, int64_t sample_index) {
  llm::CallTag t;
  t.task = llm::CallTask::kGenerate;
  t.question_id = q.question_id;
  t.question = q.question;
  t.evidence = q.evidence;
  t.db_id = q.db_id;
  t.generator = generator;
  t.sample_index = sample_index;
  return t;
}

}  // namespace nl2sql::generate
