// QuestionRecord: one question's final record — what the pipeline writes (stage "final" of the
// run store) and what report, compare, merge, export and selector-data read. It holds each
// stage's result as the type its layer owns (context::ContextRecord, generate::Candidate,
// llm::LlmCallTrace, select::Explanation) and no JSON; each of those types writes and reads its
// own part of the layout beside its definition, and this file the rest (to_json /
// record_from_json), so a field added to a stage is added in that stage's layer and the
// compiler finds every reader.
//
// JSON layout (record version 1; the manifest names the version as "record_version", and a run
// folder written before records were versioned reads as version 1):
//   question_id, index (position in the question file), db_id, question, evidence, difficulty,
//   gold_sql, status ("ok" | "error"), error, features [SQL features of gold: "join",
//   "aggregate", "nested", …],
//   context {question_id, db_id, keywords, values[{table, column, value, score, keyword}],
//     columns, selected_columns, calls, errors, latency_s} — context::ContextRecord,
//   candidates [the candidate as the generate layer writes it + once judged {correct:
//     bool|null, cluster, executable_before_fix, executable_after_fix, verdict {outcome,
//     verdicts}}],
//   selections {<selector>: {chosen, candidate_id, sql, correct, llm_calls, cost_usd,
//     latency_s, explanation {…per selector family: select::Explanation…}, calls [...]}},
//   primary_selector, prediction (the primary selector's SQL, "" when none),
//   verdict {verdicts {metric: bool}, outcome RES1..RES6, soft_f1, pred_status, error,
//     gold_status, gold_error, gold_unusable, gold_tie_dependent, pred_rows, gold_rows,
//     difficulty} | null,
//   bounds {oracle, adversarial}, curves {"<k>": {upper, lower, self_consistency, selector:
//     bool|null}}, usage {<stage>: {calls, prompt_tokens, completion_tokens, cost_usd,
//     latency_s, degraded_prompts (when > 0)}},
//   llm_faults {failed_calls, retries, failed_by_kind {kind: n}, parse_failures,
//     parse_failures_by_stage {<stage>[:<reader>]: n}},
//   latency_s {context, generate, fix, select, eval, total},
//   weights {<expert>: w} (WMA weights after this question, when the run keeps them),
//   curve_calls [call traces of the primary selector re-run on the curves' prefixes; written
//     when there were any].
// A failed question is still recorded (status "error", verdict null) and counts as wrong; its
// record has no context, bounds, curves, usage or latency unless they were filled.
//
// Reading is tolerant of absence and strict about types and names: a missing field reads as
// empty (fields written only when they have a value), a field of the wrong type is an error
// naming the question and the field, and so is a key this version does not write — a key renamed
// on the writing side only is refused, not read as an empty field (tests/run/golden/ holds a
// record that must read and write back byte for byte). Plain values; every function is pure
// and thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "nl2sql/context/context_record.h"
#include "nl2sql/core/status.h"
#include "nl2sql/generate/candidate.h"
#include "nl2sql/llm/trace.h"
#include "nl2sql/select/explanation.h"

namespace nl2sql::run {

// The layout this build writes and the newest it reads.
inline constexpr int kRecordVersion = 1;

// Model use of one stage of one question, summed over its calls.
// A stage's model calls. Answers served from the response cache are not calls (no request
// reached a server, nothing was spent): they are counted apart, with what they would have cost
// at the profile's prices.
struct StageUsage {
  int64_t calls = 0, prompt_tokens = 0, completion_tokens = 0;
  // The provider's own accounting, summed over the calls that reported it (see
  // llm::UsageTotals): prompt tokens its prefix cache served, completion tokens spent reasoning.
  int64_t cached_tokens = 0, calls_reporting_cached = 0;
  int64_t reasoning_tokens = 0, calls_reporting_reasoning = 0;
  double cost_usd = 0, latency_s = 0;
  int64_t degraded_prompts = 0;  // prompts lightened to fit the model's context
  int64_t cache_hits = 0, cache_prompt_tokens = 0, cache_completion_tokens = 0;
  double saved_usd = 0;          // the cache hits' tokens at their profile's prices
  bool operator==(const StageUsage&) const = default;
};

// Model calls that failed after their retries, the retries, and answers no reader could use.
struct LlmFaults {
  int64_t failed_calls = 0, retries = 0, parse_failures = 0;
  std::map<std::string, int64_t> failed_by_kind, parse_failures_by_stage;
  LlmFaults& operator+=(const LlmFaults& other);
  bool operator==(const LlmFaults&) const = default;
};

// The evaluator's verdict on the question's prediction (eval::ItemResult as recorded).
struct Verdict {
  std::map<std::string, bool> verdicts;  // by metric name
  std::string outcome;                   // RES1..RES6
  double soft_f1 = 0;
  std::string pred_status, error, gold_status, gold_error;
  bool gold_unusable = false, gold_tie_dependent = false;
  int64_t pred_rows = 0, gold_rows = 0;
  std::string difficulty;
  // spider-ts on a test suite (eval.test_suite or variants in the database folder): files compared
  // on, whether the original alone agreed, the first variant that did not and both answers there.
  // Recorded as "test_suite" only when databases > 1.
  int64_t suite_databases = 1;
  bool suite_original = false;
  std::string suite_failed_on, suite_failure;
  bool operator==(const Verdict&) const = default;
};

// One candidate: the generate layer's typed trace (generate::Candidate: id, generator, sql, its
// calls and fix rounds …), plus how it fared once judged. Written as the candidate's trace with
// the judgement's keys beside its own.
struct CandidateRecord : generate::Candidate {
  struct Judgement {
    std::optional<bool> correct;  // nullopt: gold unusable
    int64_t cluster = -1;         // result cluster (relaxed equality)
    bool executable_before_fix = false, executable_after_fix = false;
    std::string outcome;
    std::map<std::string, bool> verdicts;
    bool operator==(const Judgement&) const = default;
  };
  std::optional<Judgement> judged;  // absent in a failed question's record
};
// Equal when written alike (the stage types compare by their JSON).
bool operator==(const CandidateRecord& a, const CandidateRecord& b);

// What one selector chose and what choosing cost.
struct SelectionRecord {
  int64_t chosen = -1;  // index into candidates; -1: nothing selectable
  std::string candidate_id, sql;
  std::optional<bool> correct;
  int64_t llm_calls = 0;
  double cost_usd = 0, latency_s = 0;
  select::Explanation explanation;  // typed per selector family (select/explanation.h)
  std::optional<std::vector<llm::LlmCallTrace>> calls;  // nullopt: not kept
};
bool operator==(const SelectionRecord& a, const SelectionRecord& b);

struct Bounds {
  bool oracle = false, adversarial = false;
  bool operator==(const Bounds&) const = default;
};

// Accuracy on the first k candidates (CHASE-SQL Fig. 2): nullopt where not computed.
struct CurvePoint {
  std::optional<bool> upper, lower, self_consistency, selector;
  // run.curve_selectors: per selector, whether its pick on these k candidates was correct, one
  // entry per repeat (repeat 0 first); empty when none is configured. Written as "selectors".
  std::map<std::string, std::vector<bool>> selectors;
  // The separating-instance paper's task filter on these k candidates: they disagree (two or
  // more result clusters) and at least one is correct. Written with "selectors".
  std::optional<bool> contested;
  bool operator==(const CurvePoint&) const = default;
};

struct QuestionRecord {
  std::string question_id;
  int64_t index = 0;
  std::string db_id, question, evidence, difficulty, gold_sql;
  bool ok = true;  // "status": "ok" | "error"
  std::string error;
  std::vector<std::string> features;
  std::optional<context::ContextRecord> context;  // the context stage's result; absent when it did not end
  std::vector<CandidateRecord> candidates;
  std::map<std::string, SelectionRecord> selections;
  std::string primary_selector, prediction;
  std::optional<Verdict> verdict;
  std::optional<Bounds> bounds;
  std::map<int64_t, CurvePoint> curves;
  std::map<std::string, StageUsage> usage;
  LlmFaults llm_faults;
  std::map<std::string, double> latency_s;
  std::optional<std::map<std::string, double>> weights;
  std::vector<llm::LlmCallTrace> curve_calls;  // run.curve_selector's call traces

  // Whether the prediction is correct under `metric` (false when the question failed or was not
  // evaluated; a verdict without that metric — an older run — counts RES3 as correct).
  bool correct(const std::string& metric) const;
};
bool operator==(const QuestionRecord& a, const QuestionRecord& b);

nlohmann::json to_json(const QuestionRecord& record);
// `version`: the run's record version (record_version(manifest)). Errors name the question and
// the field.
Result<QuestionRecord> record_from_json(const nlohmann::json& j, int version = kRecordVersion);

nlohmann::json to_json(const SelectionRecord& selection);
// `selector` (the selection's name in the run) gives its explanation's family.
Result<SelectionRecord> selection_from_json(const nlohmann::json& j, const std::string& selector,
                                            const std::string& where);
nlohmann::json to_json(const LlmFaults& faults);
Result<LlmFaults> faults_from_json(const nlohmann::json& j, const std::string& where);

// One model call a record keeps, where it keeps it: `stage` is the usage stage that made it
// ("context", "generate", "fix", "select", "curves"), `owner` what it belongs to (a candidate
// id, a selector name; "" for context and curves) and `trace` the call.
struct RecordedCall {
  std::string stage, owner;
  const llm::LlmCallTrace* trace = nullptr;  // points into the record
};
// Every call trace of a record, in pipeline order (context, then per candidate its generation
// calls and its fix rounds' calls, then the selectors, then the curves); within a group in the
// order the calls were made. The pointers live as long as `record` is unchanged.
std::vector<RecordedCall> recorded_calls(const QuestionRecord& record);

// The manifest's "record_version" (1 when absent); an error when this build cannot read it.
Result<int> record_version(const nlohmann::json& manifest);

}  // namespace nl2sql::run
