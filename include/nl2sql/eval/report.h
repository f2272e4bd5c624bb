// Writers for an EvalReport: eval.json (summary + one item per question), eval.md (tables for
// people) and eval.csv (one row per question). Each file is written atomically.
#pragma once

#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "nl2sql/core/status.h"
#include "nl2sql/eval/evaluator.h"

namespace nl2sql::eval {

nlohmann::json report_to_json(const EvalReport& report);
std::string report_to_markdown(const EvalReport& report);
std::string report_to_csv(const EvalReport& report);
Status write_report(const EvalReport& report, const std::filesystem::path& out_dir);

// The "Test suite" section of a Markdown report from a test_suite_summary() block (eval.md and a
// run's report.md).
std::string test_suite_markdown(const nlohmann::json& block);

// The evaluation for a terminal, as `nl2sql eval` prints it (after summarize()): the counts, EX
// per metric with its 95% CI, the rule codes' semantic accuracy, the judge's, Soft-F1, the test
// suite and efficiency blocks, then the time taken.
std::string report_to_console(const EvalReport& report);
// The EX % that `nl2sql eval --fail-under` compares: the first metric of the summary (metrics
// by name); 0 when there is none.
double first_metric_ex(const EvalReport& report);

// RFC 4180 quoting of one CSV field.
std::string csv_field(const std::string& s);

}  // namespace nl2sql::eval
