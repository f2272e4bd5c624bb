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

// RFC 4180 quoting of one CSV field.
std::string csv_field(const std::string& s);

}  // namespace nl2sql::eval
