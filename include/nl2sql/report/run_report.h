// The run report: from a run's manifest and final records (run/run_data.h) build
// report.json (every aggregate plus every record), report.md (tables for people),
// per_question.csv (one row per question) and report.html (self-contained: inline CSS, inline
// SVG charts, a few lines of inline JS, no network; every string from the data is escaped).
//
// Aggregates: EX with 95% bootstrap CI (eval::bootstrap_ci) overall / by difficulty / by database
// / by SQL feature under the primary metric, every evaluator metric, every selector beside the
// primary one with the oracle/adversarial bounds, per generator counts (candidates,
// executability before/after fixing, correct, unique correct, upper bound), the overlap of
// generators that found a correct candidate, the curves vs number of candidates, the selection
// error analysis, tokens/cost/latency percentiles per stage and WMA weight trajectories.
// A failed question counts as wrong everywhere. All functions are pure and thread-safe;
// output is deterministic for a given run::RunData and options (bootstrap seeded).
#pragma once

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "nl2sql/core/status.h"
#include "nl2sql/run/run_data.h"

namespace nl2sql::report {

struct ReportOptions {
  bool html = true;
  std::string title;              // default: the run's name
  int bootstrap_samples = 1000;
  uint64_t bootstrap_seed = 20240101;
  size_t drilldown_limit = 0;     // questions in the HTML drill-down (0: all)
  size_t preview_chars = 2000;    // longest text shown in the drill-down before it is cut

  // Reads the `report.*` keys (configs/schema/report.json) of a resolved config.
  static Result<ReportOptions> from_config(const nlohmann::json& config);
};

nlohmann::json build_report(const run::RunData& run, const ReportOptions& options);
// report.json's text: `report.dump(1)` byte for byte (invalid UTF-8 replaced), its questions
// serialized on every core. `report` is left as it was.
std::string dump_report(nlohmann::json& report);
std::string render_markdown(const nlohmann::json& report);
std::string render_csv(const run::RunData& run);
std::string render_html(const nlohmann::json& report, const run::RunData& run, const ReportOptions& options);

// Writes the four files into `out_dir` (each atomically); report.html only when options.html.
Status write_reports(const run::RunData& run, const std::filesystem::path& out_dir, const ReportOptions& options);

// The reports of the run folder `dir`, written into it with the options its resolved config
// names (report.*): what `nl2sql run` and `nl2sql sweep` do after the pipeline returns. Reads
// under the folder's shared lock (refused while a run holds it). `duplicates`, when given,
// receives duplicate_requests(run) of the folder.
// `records`: the folder's final records already read (run::load_run's): what `nl2sql run`
// passes with the records its summary read, so a large run's records are not parsed twice.
Status write_run_reports(const std::filesystem::path& dir,
                         std::map<std::string, int64_t>* duplicates = nullptr,
                         std::optional<std::vector<run::QuestionRecord>> records = std::nullopt);

// Duplicate requests by usage stage: calls whose request body (run::recorded_calls' traces,
// request_hash: endpoint + body as posted) the run had already sent, byte for byte, counted in
// the stage of the repeat, over every question in record order. Cache hits and memo-shared
// answers were not sent and never count. Stages without a repeat are absent.
std::map<std::string, int64_t> duplicate_requests(const run::RunData& run);

// report.json's "usage": {"stages": {stage: row}, "total": row, "cost_per_question_usd"}, each
// row with calls, prompt_tokens, completion_tokens, cost_usd, latency_s, duplicate_requests and
// the provider's own breakdown — cached_tokens / calls_reporting_cached / cached_pct (share of
// the prompt tokens) and reasoning_tokens / calls_reporting_reasoning / reasoning_pct (share of
// the completion tokens); a pct is null when no call reported its count (unknown, not 0%).
nlohmann::json usage_report(const run::RunData& run);
// A usage row's provider breakdown as a table cell: "12345 (61.5%)", "… (3 of 7 calls)" when only
// some calls reported it, "not reported" when none did.
std::string cached_tokens_cell(const nlohmann::json& row);
std::string reasoning_tokens_cell(const nlohmann::json& row);

// Text and attribute escaping for HTML (& < > " ').
std::string html_escape(std::string_view text);

// Linear-interpolated percentile (q in [0, 1]) of unsorted values; 0 for none.
double percentile(std::vector<double> values, double q);

}  // namespace nl2sql::report
