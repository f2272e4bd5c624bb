// Exports a run's predictions in the official formats, for the official scripts or for
// `nl2sql eval`:
//  - bird: predict_dev.json, {"<position>": "SQL\t----- bird -----\t<db_id>"} keyed by the
//    question's position in the question file (what eval::read_predictions and the official
//    BIRD script read);
//  - spider: one SQL per line in question-file order (newlines and tabs inside a query become
//    spaces);
//  - jsonl: {"question_id", "db_id", "sql"} per line, only the recorded questions.
// For bird and spider every position from 0 to the largest recorded one gets a line, because
// both official scripts pair predictions with gold by position; a question without a
// prediction (failed, no candidate, or not in this run) gets kNoPredictionSql, a query that
// fails to execute (and fails the official Spider parser, which then scores it as an empty
// query), so it is counted wrong — never accidentally right as an empty string could be.
#pragma once

#include <string>

#include "nl2sql/core/status.h"
#include "nl2sql/run/run_data.h"

namespace nl2sql::report {

enum class ExportFormat { kBird, kSpider, kJsonl };
Result<ExportFormat> parse_export_format(const std::string& name);

inline constexpr const char* kNoPredictionSql = "SELECT nl2sql_no_prediction";

struct ExportStats {
  size_t written = 0;       // questions with a prediction
  size_t placeholders = 0;  // positions given kNoPredictionSql
};

std::string export_predictions(const run::RunData& run, ExportFormat format, ExportStats* stats = nullptr);

}  // namespace nl2sql::report
