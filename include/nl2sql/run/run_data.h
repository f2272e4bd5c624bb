// RunData: what a finished (or partial) run folder holds, as the report, compare, export and
// merge commands read it — the data contract between the pipeline (which writes it) and
// everything downstream.
//
// A run folder `runs/NAME/` holds:
//  - `run.sqlite` (RunStore, SQLite WAL): one row per (question, stage) with status,
//    payload JSON and time; stages are named by the pipeline ("context", "generate", "fix",
//    "select", "final"); a `meta` table with "manifest" and "config".
//  - `manifest.json` (= meta "manifest"): {"tool_version", "created_at", "benchmark", "split",
//    "dataset_fingerprint", "question_ids": [...], "shard": {"index", "count"} | null,
//    "config_hash", "prompt_hashes": {name: hash}, "simulated": bool, "seed",
//    "primary_selector", "selectors": [...], "generators": [...]}; optional "primary_metric"
//    (an eval metric name, default spider_ts for Spider, else bird) and "merged_from".
//  - `config.resolved.json`: the resolved config.
//  - reports written by report::write_reports: report.json, report.md, per_question.csv,
//    report.html.
//
// The final question record (stage "final") is one JSON object per question:
//   question_id, index (position in the question file), db_id, question, evidence, difficulty,
//   gold_sql, status ("ok" | "error"), error, features (SQL features of gold: "join",
//   "aggregate", "nested", "order_limit", "group_having", …),
//   context {keywords, values[{table, column, value, score}], columns, selected_columns, calls},
//   candidates [generate::to_json(Candidate) + {correct: bool|null, cluster: int,
//               executable_before_fix: bool, executable_after_fix: bool}],
//   selections {<selector>: {chosen, candidate_id, sql, correct: bool|null, llm_calls, cost_usd,
//               latency_s, explanation {...}}},
//     (separating_instances: explanation.duels[] = {a, b, outcome, why?, lineage?, instance
//      {found, attempts, rows, instance {table: [row…]}, answer_a, answer_b | failure},
//      model_answers[], majority?, gold_answer?, model_agrees_with_gold?})
//   primary_selector, prediction (the primary selector's SQL, "" when none),
//   verdict (eval::ItemResult as JSON: verdicts {metric: bool}, outcome RES1..RES6, soft_f1,
//            pred_status, gold_unusable, gold_tie_dependent, …) | null,
//   bounds {oracle: bool, adversarial: bool},
//   curves {"<k>": {upper, lower, self_consistency, selector: bool|null}} for k in
//          run.curve_points,
//   usage {<stage>: {calls, prompt_tokens, completion_tokens, cost_usd, latency_s}},
//   llm_faults {failed_calls, retries, failed_by_kind {<call error kind>: n}, parse_failures,
//               parse_failures_by_stage {<stage>[:<reader>]: n}}  (model calls that failed after
//               their retries, the retries, and answers of successful calls no reader could use,
//               over the stages kept in the store),
//   latency_s {context, generate, fix, select, eval, total},
//   weights {<expert>: w} (optional: WMA weights after this question).
// A failed question is still recorded (status "error", verdict null) and counts as wrong.
// Readers are tolerant: a missing optional field reads as absent/empty, never as an error.
//
// RunData is a plain value; the helpers below are pure functions, safe from any thread.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "nl2sql/core/status.h"

namespace nl2sql::run {

struct RunData {
  std::string name;               // the run folder's name (for tables)
  std::filesystem::path dir;
  nlohmann::json manifest = nlohmann::json::object();
  nlohmann::json config = nlohmann::json::object();  // resolved config (may be empty)
  std::vector<nlohmann::json> records;               // final records ordered by index
};

// Reads manifest, resolved config and final records from `dir`'s run store.
Result<RunData> load_run(const std::filesystem::path& dir);

// Checks the fields every reader relies on (question_id, index, status); the message names the
// question and the field.
Status check_record(const nlohmann::json& record);

// The eval metric that decides correctness: manifest "primary_metric", else spider_ts for
// Spider, else bird.
std::string primary_metric(const nlohmann::json& manifest);

// Whether the run's prediction for this record is correct under `metric` (false when the
// question failed or was not evaluated).
bool record_correct(const nlohmann::json& record, const std::string& metric);

// Safe field access for tolerant readers.
const nlohmann::json& field(const nlohmann::json& obj, const char* key);  // null when absent
std::string string_field(const nlohmann::json& obj, const char* key, const std::string& def = "");
double number_field(const nlohmann::json& obj, const char* key, double def = 0);
// true / false / null (unknown) as -1
int tri_bool(const nlohmann::json& v);

}  // namespace nl2sql::run
