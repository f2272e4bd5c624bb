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
//    "config_hash", "templates": [{"name", "file"?, "source", "hash"}] (the prompt templates
//    used; runs before them hold "prompt_hashes": {name: hash}), "simulated": bool, "seed",
//    "primary_selector", "selectors": [...], "generators": [...], "record_version"}; optional "primary_metric"
//    (an eval metric name, default spider_ts for Spider, else bird) and "merged_from".
//  - `config.resolved.json`: the resolved config.
//  - reports written by report::write_reports: report.json, report.md, per_question.csv,
//    report.html.
//
// The final question record (stage "final") is a run::QuestionRecord; its JSON layout and
// version are described and read in nl2sql/run/question_record.h only.
//
// RunData is a plain value; the helpers below are pure functions, safe from any thread.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "nl2sql/core/status.h"
#include "nl2sql/run/question_record.h"

namespace nl2sql::run {

struct RunData {
  std::string name;               // the run folder's name (for tables)
  std::filesystem::path dir;
  nlohmann::json manifest = nlohmann::json::object();
  nlohmann::json config = nlohmann::json::object();  // resolved config (may be empty)
  std::vector<QuestionRecord> records;               // final records ordered by index
  // Model calls that belong to no question (the preflight of each invocation), by stage:
  // {"preflight": {"calls", "prompt_tokens", "completion_tokens", "cost_usd", "latency_s"}}.
  nlohmann::json run_usage = nlohmann::json::object();
  // Overload back-pressure per profile over every invocation: {"<profile>": {"overloads",
  // "max_in_flight", "lowest_in_flight"}} (llm::Client::profile_loads); empty when none.
  nlohmann::json endpoint_load = nlohmann::json::object();
};

// The store's meta key of RunData::run_usage.
inline constexpr const char* kRunUsageKey = "run_usage";
// Adds one invocation's calls of `stage` to the stored run usage (read, add, write): `delta`
// holds counts by name (calls, prompt_tokens, completion_tokens, cached_tokens,
// calls_reporting_cached, reasoning_tokens, calls_reporting_reasoning, cost_usd, latency_s, as
// StageUsage names them); each number is added to the stored one, integers staying integers.
class RunStore;
Status add_run_usage(RunStore& store, const std::string& stage, const nlohmann::json& delta);
// The run-usage fields of `usage`, times `sign` (+1 to add, -1 to take back).
nlohmann::json run_usage_delta(const StageUsage& usage, int sign = 1);

// The store's meta key of the usage counted in run_usage for stages of questions that a stopped
// run left unfinished ({"<question_id>": {"<stage>": usage}}): it leaves run_usage when the
// question's record, which counts those stages again, is stored (pipeline.cpp).
inline constexpr const char* kProvisionalUsageKey = "provisional_usage";
// The store's meta key of RunData::endpoint_load.
inline constexpr const char* kEndpointLoadKey = "endpoint_load";
// Adds one invocation's overload answers of `profile` and the lowest in-flight limit they
// brought it to (read, merge, write).
Status add_endpoint_load(RunStore& store, const std::string& profile, int64_t overloads, int64_t max_in_flight,
                         int64_t lowest_in_flight);

// The store's final records, typed (record_from_json at `version`), in the store's order;
// parsed and read on every core. A record that does not read is an error naming `dir`'s store.
Result<std::vector<QuestionRecord>> read_final_records(const RunStore& store, const std::filesystem::path& dir,
                                                       int version = kRecordVersion);

// Reads manifest, resolved config and final records from `dir`'s run store; a record that does
// not read is an error naming the store, the question and the field.
// `records`: the final records already read (record_from_json at kRecordVersion, all of the
// store's, in its order: pipeline::RunSummary::records); then only the manifest, config and
// run usage are read, unless the manifest names another record version.
Result<RunData> load_run(const std::filesystem::path& dir,
                         std::optional<std::vector<QuestionRecord>> records = std::nullopt);

// The eval metric that decides correctness: manifest "primary_metric", else spider_ts for
// Spider, else bird.
std::string primary_metric(const nlohmann::json& manifest);

// Safe field access for tolerant readers.
const nlohmann::json& field(const nlohmann::json& obj, const char* key);  // null when absent
std::string string_field(const nlohmann::json& obj, const char* key, const std::string& def = "");
double number_field(const nlohmann::json& obj, const char* key, double def = 0);
// true / false / null (unknown) as -1
int tri_bool(const nlohmann::json& v);

}  // namespace nl2sql::run
