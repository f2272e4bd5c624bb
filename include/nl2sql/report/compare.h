// Comparing runs: side-by-side EX on the questions every run answered, and for each run against
// the first (the baseline) the paired bootstrap CI of the EX difference, McNemar's test and the
// questions that flipped — the ablation table people paste into papers.
//
// McNemar's test uses the discordant counts b (baseline right, other wrong) and c (baseline
// wrong, other right): when b + c < 25 the exact two-sided binomial test
// p = min(1, 2 · P[X ≤ min(b, c)]), X ~ Bin(b + c, 1/2); otherwise the chi-square statistic with
// continuity correction (|b − c| − 1)² / (b + c) on 1 degree of freedom. b + c = 0 gives p = 1.
// Pure functions, deterministic for a seed, thread-safe.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "nl2sql/eval/evaluator.h"
#include "nl2sql/run/run_data.h"

namespace nl2sql::report {

struct McNemar {
  size_t b = 0, c = 0;
  double statistic = 0;   // chi-square (continuity-corrected) or, for the exact test, min(b, c)
  double p_value = 1;
  std::string method;     // "exact_binomial" | "chi2_continuity"
};
McNemar mcnemar(size_t b, size_t c);

// Percentile bootstrap (resampling questions, paired) of mean(b) − mean(a), in percentage points.
eval::Interval paired_bootstrap_diff(const std::vector<int>& a, const std::vector<int>& b, int samples, uint64_t seed);

struct CompareOptions {
  int bootstrap_samples = 1000;
  uint64_t bootstrap_seed = 20240101;
  size_t max_flips_listed = 0;  // 0: all
};

// runs[0] is the baseline. Correctness per run is run::record_correct under that run's primary
// metric. Result: {"runs": [{name, n, ex_all, ex_common, ci95}], "common_questions",
// "comparisons": [{baseline, run, ex_a, ex_b, diff, diff_ci95, mcnemar{b,c,statistic,p_value,
// method}, flipped: [{question_id, db_id, baseline, run}]}]}.
nlohmann::json compare_runs(const std::vector<run::RunData>& runs, const CompareOptions& options);
std::string compare_markdown(const nlohmann::json& comparison);

}  // namespace nl2sql::report
