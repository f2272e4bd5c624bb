// Execution feedback: what the fixer, the agentic generators and the report say about a SQL
// query that failed — the summary of one execution, the failure taxonomy (syntax_error,
// no_such_column, no_such_table, ambiguous_column, type_mismatch, timeout, empty_result, other)
// and the hint text offered for each class (closest schema names by edit distance, stored values
// resembling the query's literals, the parser's position). Below generate/ and fix/, which both
// use it. Pure functions; thread-safe.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "nl2sql/context/retrieve.h"
#include "nl2sql/context/value_index.h"
#include "nl2sql/data/dataset.h"
#include "nl2sql/db/executor.h"

namespace nl2sql::feedback {

// How a query executed (the rows themselves are not kept in a trace; a preview is).
struct ExecutionSummary {
  bool executed = false;       // false: never run (extraction failed, or rejected before running)
  db::ExecStatus status = db::ExecStatus::kOk;
  std::string error;
  size_t rows = 0, columns = 0;
  std::string preview;         // first rows as text, for the microscope and the report
  double elapsed_ms = 0;
  bool empty() const { return executed && status == db::ExecStatus::kOk && rows == 0; }
  bool ok() const { return executed && status == db::ExecStatus::kOk; }
};

// The summary of one execution (preview: header + first rows, cells cut at 60 characters).
ExecutionSummary summarize_execution(const db::ExecutionResult& result, size_t preview_rows = 5);

// syntax_error | no_such_column | no_such_table | ambiguous_column | type_mismatch | timeout
// | empty_result | other; "" for a successful execution with rows.
std::string classify_failure(const ExecutionSummary& execution);

// The `k` names of `names` closest to `name` by edit distance (case-insensitive), best first.
std::vector<std::string> closest_names(const std::string& name, const std::vector<std::string>& names, size_t k);

// What a hint may draw on; every pointer may be null (the hint is then plainer).
struct HintInput {
  const data::Schema* schema = nullptr;
  const context::ValueIndex* index = nullptr;  // stored values for an empty result
  size_t hint_names = 3;                       // closest schema names offered per unknown name
};

// The hint text for a failure class.
std::string failure_hint(const std::string& failure_class, const ExecutionSummary& execution,
                         const std::string& sql, const HintInput& input);

}  // namespace nl2sql::feedback
