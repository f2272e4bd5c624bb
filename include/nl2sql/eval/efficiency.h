// Efficiency scores of a prediction file: BIRD dev's VES (evaluation_ves.py of the BIRD
// repository), BIRD mini-dev's R-VES (its evaluation_ves.py), and the same two formulas on
// SQLite's work counters instead of a clock (ves-steps, rves-steps), which give the same number
// on every machine and every run.
//
// The official rules, reproduced (notes: evaluator-semantics.md, "Efficiency"):
//  - a pair is timed only when prediction and gold return the same set of rows (BIRD's EX
//    rule); an incorrect pair, an error, or a pair that runs out of its budget
//    (timeout × repeats for the whole pair, the scripts' meta_time_out × iterate_num) scores 0;
//  - `repeats` rounds, each timing the prediction and then gold on a fresh read-only connection
//    (opened before the clock starts; with file locking, as the scripts' connections, not
//    immutable), ratio = t_gold / t_pred; ratios outside
//    mean ± 3σ (population σ, strict bounds) are dropped and the rest averaged; when every
//    ratio is dropped (all equal: σ = 0) the script divides by zero and scores 0, and so do we;
//  - VES times up to the first row (Python's cursor.execute), R-VES the whole result;
//  - VES = mean of sqrt(ratio) × 100; R-VES = mean of sqrt(reward) × 100 with reward 1.25
//    (ratio ≥ 2), 1 (≥ 1), 0.75 (≥ 0.5), 0.5 (≥ 0.25), 0.25 (> 0), 0 (incorrect).
// The steps variants take one execution per query (cached in the result cache): ves-steps
// divides the VM steps up to the first row, rves-steps the VM steps of the whole execution.
//
// measure_efficiency() runs after the correctness pass, one pair at a time on its own
// executor (nothing else of this process runs SQL meanwhile); the steps variants may use
// several threads, their numbers do not depend on it.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "nl2sql/core/status.h"
#include "nl2sql/data/dataset.h"
#include "nl2sql/db/executor.h"
#include "nl2sql/db/result_cache.h"

namespace nl2sql::eval {

enum class EfficiencyMetric { kVes, kRves, kVesSteps, kRvesSteps };
const char* efficiency_metric_name(EfficiencyMetric m);  // "ves", "rves", "ves_steps", "rves_steps"
// True for the names eval.metrics accepts for an efficiency metric (ves, rves, ves-steps,
// rves-steps; "_" for "-" too), with the metric in `out`.
bool parse_efficiency_metric(const std::string& name, EfficiencyMetric* out);

// VES's reward of a ratio: sqrt(ratio) × 100 (0 for an incorrect pair, ratio 0).
double ves_reward(double ratio);
// R-VES's reward: sqrt of the mini-dev step reward, × 100.
double rves_reward(double ratio);
// The ratio where R-VES's reward changes (0.25, 0.5, 1, 2).
const std::vector<double>& rves_boundaries();

// The official outlier rule on one pair's per-round ratios.
struct FilteredRatios {
  double mean = 0;      // mean of the kept ratios; 0 when none is kept (the script's 0)
  double sd = 0;        // population σ of the kept ratios
  size_t kept = 0;
  double low = 0, high = 0;  // 95% interval of the kept ratios' mean (mean ± 1.96 σ/√kept)
  // Where an independent rerun's mean would fall (95%) under the same conditions: half-width
  // √2 × the larger of t·s/√kept (s the sample σ, t Student's for kept − 1 df) and t·SE of
  // consecutive batch means (rounds timed close
  // together share the machine's state, so they are not independent; batches see that).
  double rerun_low = 0, rerun_high = 0;
};
FilteredRatios drop_outliers(const std::vector<double>& ratios);

// One question's score under one efficiency metric.
struct EfficiencyScore {
  double ratio = 0;          // 0: incorrect / error / timeout
  double ratio_sd = 0;
  double ratio_low = 0, ratio_high = 0;
  double rerun_low = 0, rerun_high = 0;  // a rerun's 95% interval (FilteredRatios)
  size_t rounds = 0, kept = 0;
  double reward = 0;         // the question's term of the mean (sqrt(…) × 100)
  bool near_boundary = false;  // rves: the rerun interval crosses a reward boundary
};

struct EfficiencyItem {
  std::string question_id, db_id, difficulty;
  // ok (correct, scored) | incorrect | pred_error | gold_error | timeout | missing
  std::string status;
  std::string error;
  // A correct pair whose timed rounds failed (timeout: the budget ran out; pred_error /
  // gold_error): its timed scores are 0, as the script's.
  std::string timed_failure;
  std::map<std::string, EfficiencyScore> scores;  // by efficiency_metric_name
  // The steps variants' counters (when one of them was asked for).
  db::StatementCounters pred_counters, gold_counters;
};

struct EfficiencyOptions {
  std::vector<EfficiencyMetric> metrics;
  int repeats = 100;           // iterate_num
  double timeout_s = 30.0;     // meta_time_out: the pair's budget is timeout_s × repeats
  size_t threads = 1;          // steps variants only
};

struct EfficiencyReport {
  std::vector<EfficiencyMetric> metrics;
  int repeats = 0;
  std::vector<EfficiencyItem> items;  // aligned with the questions
  std::string cpu;                    // /proc/cpuinfo's model name × cores
  double load_before = -1, load_after = -1;  // 1-minute load average around the timed pass
  double timed_s = 0;                 // wall time of the timed pass
  bool empty() const { return metrics.empty(); }
};

// Correctness (BIRD's set rule), timed rounds and step counts of every question. `cache` may be
// null (steps are then executed every time). Fails only when `preds` is not aligned.
struct PredictedSql {
  std::string sql;
  bool present = false;  // false: the prediction file had nothing for this question
};
Result<EfficiencyReport> measure_efficiency(const data::Dataset& ds,
                                            const std::vector<PredictedSql>& preds,
                                            const EfficiencyOptions& options,
                                            db::ResultCache* cache);

// The "efficiency" summary: per metric, the score by difficulty and overall (counts beside, as
// the official tables), a 95% bootstrap CI of the overall mean, the pairs near a boundary; the
// Spearman rank correlation of per-question ratios between timed and steps variants when both
// were measured; repeats, CPU and load.
nlohmann::json efficiency_summary(const EfficiencyReport& report, int bootstrap_samples, uint64_t seed);

// The official scripts' table (counts and score per difficulty: simple, moderate, challenging,
// total), for one metric of a summary, plus a CI line.
std::string efficiency_table(const nlohmann::json& summary, const std::string& metric);

// Percentile bootstrap 95% CI of the mean of `values` (deterministic for a seed).
struct MeanInterval {
  double low = 0, high = 0;
};
MeanInterval bootstrap_mean_ci(const std::vector<double>& values, int samples, uint64_t seed);

// Spearman's rank correlation (average ranks for ties); NaN with fewer than 2 pairs or a
// constant side.
double spearman(const std::vector<double>& a, const std::vector<double>& b);

}  // namespace nl2sql::eval
