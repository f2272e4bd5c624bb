// The evaluator: executes gold and predicted SQL through db::Executor (with the persistent
// result cache), applies every requested metric per question, assigns an outcome code, and
// aggregates EX with bootstrap confidence intervals and breakdowns.
//
// Takes a loaded data::Dataset and predictions aligned to its questions; hands back an
// EvalReport that eval/report.h writes as eval.json / eval.md / eval.csv. One bad question
// (missing prediction, failing SQL, unusable gold) never stops the evaluation.
// evaluate() is thread-safe and itself runs questions on `threads` workers.
#pragma once

#include <atomic>
#include <filesystem>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "nl2sql/core/config.h"
#include "nl2sql/core/status.h"
#include "nl2sql/data/dataset.h"
#include "nl2sql/db/executor.h"
#include "nl2sql/db/result_cache.h"
#include "nl2sql/eval/efficiency.h"
#include "nl2sql/eval/judge.h"
#include "nl2sql/llm/prompt_library.h"

namespace nl2sql::eval {

enum class Metric { kBird, kSpiderTs, kRelaxed };
const char* metric_name(Metric m);  // "bird", "spider_ts", "relaxed"
// "bird" | "spider-ts" | "relaxed" | "all"
Result<std::vector<Metric>> parse_metrics(const std::string& spec);
// eval.metrics as a whole: the correctness metrics above plus the efficiency ones (ves, rves,
// ves-steps, rves-steps; efficiency.h), which score beside them and are never primary. A spec
// naming only efficiency metrics leaves `metrics` empty (the caller adds its default).
struct MetricSpec {
  std::vector<Metric> metrics;
  std::vector<EfficiencyMetric> efficiency;
  bool judge = false;  // "judge": AgentNLQ's judged semantic accuracy (judge.h)
};
Result<MetricSpec> parse_metric_spec(const std::string& spec);

struct Prediction {
  std::string sql;
  bool present = false;  // false: the prediction file had nothing for this question
  // The database the official BIRD script would run this entry on when that is not the
  // question's: a non-string value in predict_dev.json runs as " " on "financial" there.
  std::string official_db;
};

enum class PredictionFormat { kAuto, kBird, kSpider, kJsonl };
Result<PredictionFormat> parse_prediction_format(const std::string& name);

// Reads predictions and aligns them with `ds.questions` (same order). BIRD predict_dev.json is
// keyed by position in the question file, Spider text is one SQL per line in question order,
// JSONL is {"question_id","sql"} per line.
Result<std::vector<Prediction>> read_predictions(const std::filesystem::path& path,
                                                 PredictionFormat format,
                                                 const data::Dataset& ds,
                                                 std::vector<std::string>* warnings = nullptr);

struct EvalOptions {
  std::vector<Metric> metrics = {Metric::kBird};
  bool keep_distinct = false;  // spider-ts: keep DISTINCT
  // spider-ts: also try the prediction with gold's values plugged into its value slots, as the
  // test-suite evaluator's --plug_value does; at most `plug_value_limit` fillings per question.
  bool plug_value = false;
  size_t plug_value_limit = 10000;
  // spider-ts on a test suite: by db_id, the other database files of its folder
  // (data::Dataset::db_variants; evaluate() takes the dataset's when this is empty). A prediction
  // is correct only when it matches gold on the original and on every variant, as the official
  // test-suite evaluator decides.
  std::map<std::string, std::vector<std::filesystem::path>> variants;
  // eval.test_suite: a folder of suites (<db_id>/…) whose files become the variants; empty:
  // the dataset's own folders (data::Dataset::db_variants).
  std::filesystem::path test_suite;
  size_t threads = 0;          // 0: one per core
  // 30 s, 100,000 rows. For verdicts the row cap is the number of rows kept: a larger answer
  // (prediction or gold) is hashed past it and compared whole (db::QueryLimits::hash_rows_after),
  // so the cap bounds memory and never decides a verdict.
  db::QueryLimits pred_limits;
  db::QueryLimits gold_limits{30.0, 0, 1ull << 30};  // 30 s, no row cap, 1 GiB
  std::optional<std::filesystem::path> cache_file;   // unset: no persistent cache
  bool check_ties = true;
  // VES / R-VES and their steps variants, measured after the correctness pass (efficiency.h);
  // eval.ves_repeats timed rounds per correct pair, the pair's budget eval.timeout_s × that.
  std::vector<EfficiencyMetric> efficiency;
  int ves_repeats = 100;
  // "judge" in eval.metrics: every question judged by the model of role `judge` through
  // `judge_client` (set by the caller; required then), with prompts/judge_semantic.txt from
  // `prompts` (null: the bundled prompts).
  bool judge = false;
  llm::Client* judge_client = nullptr;
  const llm::PromptLibrary* prompts = nullptr;
  uint64_t bootstrap_seed = 20240101;
  int bootstrap_samples = 1000;
};

// The eval.* keys of a config (metrics, timeout_s, row_cap, keep_distinct, check_ties,
// plug_value; defaults
// from configs/schema) as EvalOptions: one reader for `nl2sql run` and `nl2sql eval`, so a
// run's judging and a standalone evaluation with the same config agree. "auto" metrics become
// `auto_metrics` (the caller's choice: eval scores the official metric, a run adds relaxed).
// The timeout applies to gold and predictions, the row cap to predictions (see pred_limits).
// Errors name the key.
Result<EvalOptions> options_from_config(const core::Config& config, const std::string& auto_metrics);

struct ItemResult {
  std::string question_id;
  size_t index = 0;
  std::string db_id;
  std::string difficulty;
  std::map<std::string, bool> verdicts;  // by metric_name
  std::string outcome;                   // RES1..RES6
  double soft_f1 = 0;
  std::string pred_status;  // ok | error | timeout | row_cap | rejected | missing
  // How the primary metric's evaluator read the prediction when that differs from running its
  // text (e.g. "spider-ts scored the first statement only, as the official evaluator"); "".
  std::string note;
  // spider-ts on a test suite (more than one database file): the verdict on the original alone,
  // how many files were compared, and the first variant where the prediction failed with why.
  size_t ts_databases = 1;
  bool ts_original = false;
  std::string ts_failed_on, ts_failure;
  std::string error;        // prediction's error message
  std::string gold_status;
  std::string gold_error;
  bool gold_unusable = false;
  bool gold_tie_dependent = false;
  size_t pred_rows = 0, gold_rows = 0;
  double pred_ms = 0, gold_ms = 0, total_ms = 0;
  bool pred_cached = false, gold_cached = false;
};

struct EvalReport {
  std::string benchmark, split;
  std::string dataset_fingerprint;
  std::string predictions_file;
  std::vector<Metric> metrics;
  std::vector<ItemResult> items;
  std::vector<data::SkippedQuestion> skipped;
  std::vector<std::string> warnings;
  double wall_s = 0;
  double exec_ms_total = 0;  // time inside SQLite (pred + gold), summed over threads
  size_t threads = 1;
  size_t cache_hits = 0, cache_misses = 0;
  EfficiencyReport efficiency;  // empty unless an efficiency metric was asked for
  std::vector<JudgedItem> judged;  // aligned with items when the judge ran; else empty
  nlohmann::json summary;  // filled by summarize()
};

// The primary metric decides RES3: spider-ts for Spider, bird otherwise (when computed).
Metric primary_metric(data::Benchmark benchmark, const std::vector<Metric>& metrics);

// Scores one prediction for one question exactly as evaluate() does (same metrics, outcome
// codes, tie check), so the pipeline can judge every candidate of a question and the report's
// per-candidate "correct" agrees with the final EX. Gold is executed once per (database, SQL)
// when a ResultCache is given. Unless the request keeps the prediction's run, a prediction is
// not executed when gold timed out or outgrew the byte cap (every verdict is then 0). Thread-safe: judge() may run on many threads; the cache is
// internally locked.
// One prediction for ItemJudge::judge. The first four are required.
struct JudgeRequest {
  const data::Question& question;
  const std::filesystem::path& db_path;
  const std::string& fingerprint;  // db::database_fingerprint(db_path)
  const Prediction& prediction;
  // Run the prediction even when gold's timeout or cap decides every verdict, and hand its
  // execution back in Judged::prediction_run (a run's selection needs it).
  bool keep_prediction_run = false;
  // The prediction's successful execution when the caller holds it (the pipeline's, hashed past
  // fix.keep_rows): judged as it is, as if read from the cache, instead of being run again.
  const db::ExecutionResult* known_prediction = nullptr;
  // Gold's execution with its tie check, from gold() with a known result (the pipeline's, when a
  // candidate ran gold's text to a hashed result): used as it is.
  const db::CachedExecution* known_gold = nullptr;
};

struct Judged {
  ItemResult item;
  // With keep_prediction_run: the prediction's execution; an answer past the row cap comes back
  // as kRowCap without rows, as before hashing.
  db::ExecutionResult prediction_run;
  double exec_ms = 0;  // time spent in SQLite for this judgement (cache hits: none)
};

class ItemJudge {
 public:
  ItemJudge(data::Benchmark benchmark, EvalOptions options, db::ResultCache* cache = nullptr);
  // Judges one prediction (see JudgeRequest).
  Judged judge(const JudgeRequest& request) const;
  // Gold's execution (cached) with its tie check. `known`: gold's successful execution when the
  // caller holds it (a candidate ran the same text): taken instead of running gold, as if read
  // from the cache; the tie check still runs its own query when gold has one.
  db::CachedExecution gold(const data::Question& q, const std::filesystem::path& db_path,
                           const std::string& fingerprint, bool* cached = nullptr,
                           double* exec_ms = nullptr, const db::ExecutionResult* known = nullptr) const;
  // Any SQL through the same cache and limits.
  db::CachedExecution run(const std::filesystem::path& db_path, const std::string& fingerprint,
                          const std::string& sql, const db::QueryLimits& limits,
                          bool* cached = nullptr, std::string_view variant = "") const;
  // The primary metric's verdict of an item.
  bool correct(const ItemResult& item) const;
  Metric primary() const { return primary_; }
  const EvalOptions& options() const { return options_; }
  size_t cache_hits() const { return hits_; }
  size_t cache_misses() const { return misses_; }
  // Queries this judge sent to SQLite (cache hits not counted).
  size_t executions() const { return executions_; }

 private:
  class Judging;  // one judge() call's state and steps (evaluator.cpp)
  data::Benchmark benchmark_;
  EvalOptions options_;
  db::ResultCache* cache_;
  db::Executor executor_;
  Metric primary_;
  mutable std::atomic<size_t> hits_{0}, misses_{0}, executions_{0};
  // gold_limits with hashing past the row cap; pred_limits without the row cap, hashing past it.
  db::QueryLimits gold_limits_, verdict_limits_;
  // Fingerprints of test-suite variants (cache keys), computed once per file.
  std::string variant_fingerprint(const std::filesystem::path& file) const;
  mutable std::mutex variant_mu_;
  mutable std::map<std::string, std::string> variant_fps_;
};

// Executes and scores every question. Fails only on setup problems (cache cannot be opened).
Result<EvalReport> evaluate(const data::Dataset& ds, const std::vector<Prediction>& preds,
                            const EvalOptions& options);

// The outcome precedence (documented in docs/eval-and-metrics.md, "Outcome codes"):
// gold unusable → RES6; prediction timeout / row cap → RES6; missing, rejected or failing
// prediction → RES1; correct under the primary metric → RES3; empty where gold is not → RES4;
// gold's answer contained in a larger result → RES5; otherwise RES2.
std::string outcome_code(const ItemResult& item, bool primary_correct, bool pred_empty,
                         bool contains);

struct Interval {
  double low = 0, high = 0;
};
// Percentile bootstrap of the mean of 0/1 outcomes (deterministic for a seed).
Interval bootstrap_ci(const std::vector<int>& outcomes, int samples, uint64_t seed);

// One question's spider-ts verdict where a test suite may apply, as the summaries count it (the
// eval report's items and a run's records both give these).
struct SuiteOutcome {
  std::string question_id, db_id;
  size_t databases = 1;      // database files compared on (1: the original only, no suite)
  bool original = false;     // correct on the original database
  bool suite = false;        // the spider-ts verdict (on every file)
  std::string failed_on, why;  // the first variant it failed on, and both answers there
};

// The "test_suite" summary: questions on a suite, correct on the suite vs on the original alone,
// spider-ts EX on the original databases alone (questions without a suite counted as they are),
// and every question that passes on the original but fails on a variant. Null when no question
// was judged on a suite.
nlohmann::json test_suite_summary(const std::vector<SuiteOutcome>& outcomes);

// Fills report.summary: per metric EX (all questions, and excluding unusable gold) with 95% CI,
// by difficulty and by database, outcome counts, Soft-F1, gold-unusable and tie lists, timings.
void summarize(EvalReport& report, const EvalOptions& options);

}  // namespace nl2sql::eval
