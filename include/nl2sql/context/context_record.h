// ContextRecord: the context stage's result as a run keeps it — the stored "context" stage and
// the question record's "context". It is the part of a QuestionContext that outlives the run
// (the value index and the metadata are reopened from the index folder): the keywords with their
// source, the retrieved values and columns, the selected columns, the model calls and the
// non-fatal errors, plus the stage's wall time once the pipeline has measured it.
//
// JSON (keys sorted as nlohmann writes them): {"question_id", "db_id", "keywords": [{text,
// source}], "values": [{table, column, value, score, keyword}], "columns": [{table, column, score,
// keyword, via}], "selected_columns": [...], "calls": [llm::LlmCallTrace…], "errors": [...],
// "latency_s" (when measured)}. Reading refuses a key this build does not write (a renamed key is
// an error, not an empty field). A plain value; the functions are pure and thread-safe.
#pragma once

#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "nl2sql/context/retrieve.h"
#include "nl2sql/core/status.h"
#include "nl2sql/llm/trace.h"

namespace nl2sql::context {

struct ContextRecord {
  std::string question_id, db_id;
  std::vector<Keyword> keywords;
  std::vector<ValueMatch> values;    // best first; value_id is not kept
  std::vector<ColumnMatch> columns;  // best first
  std::set<std::string> selected_columns;  // "table.column"; empty: the whole schema
  std::vector<llm::LlmCallTrace> calls;
  std::vector<std::string> errors;
  std::optional<double> latency_s;  // the stage's wall time, set by the pipeline

  // The retrieval a generator's prompt needs (keywords, values, columns).
  Retrieval retrieval() const;
};

nlohmann::json to_json(const ContextRecord& record);
// `where` names the record in errors (e.g. "question 12, context").
Result<ContextRecord> context_record_from_json(const nlohmann::json& json, const std::string& where);

}  // namespace nl2sql::context
