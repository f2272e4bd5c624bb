// Candidate: one SQL query proposed for a question, with everything needed to explain where it
// came from — the generator and sample that produced it, every model call made for it (prompt,
// response, template hash, tokens, latency), how its SQL was extracted from the answer, how it
// executed, and each execution-feedback fixer round applied to it. Produced by generate/,
// updated by fix/, read by select/, pipeline/ and report/. A plain value: copy freely; not
// synchronised. to_json/from_json give the trace format stored in the run store (stable keys;
// unknown keys are ignored on read so older runs stay readable).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "nl2sql/core/status.h"
#include "nl2sql/feedback/feedback.h"
#include "nl2sql/llm/trace.h"

namespace nl2sql::generate {

using feedback::ExecutionSummary;
using llm::LlmCallTrace;

struct FixRound {
  int round = 0;                // 1-based
  std::string failure_class;    // syntax_error | no_such_column | no_such_table | ambiguous_column
                                // | type_mismatch | timeout | empty_result | other
  std::string feedback;         // what the prompt told the model (error text, hints)
  std::string sql_before, sql_after;
  ExecutionSummary execution_after;
  LlmCallTrace call;
};

struct Candidate {
  std::string id;               // unique within the question, e.g. "dc#3" (generator#sample)
  std::string generator;        // baseline | dc | qp | os | presql | postsql | agent names …
  std::string profile;          // model profile that wrote it
  int64_t sample_index = 0;
  std::string reasoning;        // the response text before the final SQL
  std::string raw_response;
  std::string sql;              // extracted (and, after fixing, the fixed) SQL; "" if none
  std::string original_sql;     // as first extracted, before any fixer round
  bool extraction_ok = true;
  std::string extraction_error; // why no SQL could be extracted
  std::string sql_trailing;     // what followed the query's first top-level ';' (never executed)
  bool rejected = false;        // "rejected: not read-only" — never executed
  std::string rejection;
  ExecutionSummary execution;   // of `sql` (after fixing, when fixed)
  std::vector<FixRound> fix_rounds;
  // Fixed once with an earlier candidate of the same SQL (its id): that candidate's rounds and
  // calls are the repair of both, so none are repeated here; sql and execution are its result.
  std::string fix_shared_with;
  bool still_failing = false;   // the fixer gave up; the candidate stays in the pool, marked
  std::vector<LlmCallTrace> calls;  // generation calls (fixer calls live in fix_rounds)
  // Totals over calls and fix rounds.
  int64_t tokens() const;
  double cost_usd() const;
  double llm_latency_s() const;
};

nlohmann::json to_json(const ExecutionSummary& execution);
nlohmann::json to_json(const FixRound& round);
nlohmann::json to_json(const Candidate& candidate);
Result<Candidate> candidate_from_json(const nlohmann::json& json);

}  // namespace nl2sql::generate
