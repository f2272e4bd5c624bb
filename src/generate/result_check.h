// Result checks for the agentic generators (agent, recap): a compact summary of one execution
// (columns, NULL count per column, row count, duplicated rows, first rows) that prompts can
// show a model, and the result heuristics the orchestrator's fast loop decides by — an error,
// an empty result, a row count out of proportion to the question, duplicated rows, columns
// holding nothing but NULL. The heuristics never see gold: they are what an agent can observe.
// Pure functions of their inputs; thread-safe.
#pragma once

#include <string>
#include <vector>

#include "nl2sql/db/executor.h"

namespace nl2sql::generate {

struct ResultSummary {
  db::ExecStatus status = db::ExecStatus::kOk;
  std::string error;                       // SQLite's message or the guardrail's reason
  std::vector<std::string> columns;
  std::vector<size_t> null_counts;         // per column
  size_t rows = 0;
  size_t duplicate_rows = 0;               // rows equal to an earlier row
  std::vector<std::vector<std::string>> first_rows;  // display text, cells cut at 60 characters
  bool ok() const { return status == db::ExecStatus::kOk; }
};

ResultSummary summarize_result(const db::ExecutionResult& result, size_t first_rows = 5);

// The summary as prompt text: status, columns with their NULL counts, row count, first rows.
std::string render_summary(const ResultSummary& summary);

struct ResultIssue {
  std::string kind;    // error | empty_result | row_count | duplicate_rows | null_column
  std::string detail;  // one sentence a model can act on
};

struct ResultCheckOptions {
  // A question asking for one figure ("how many", "what is the average …") whose answer has
  // more rows than this is suspicious.
  size_t single_answer_max_rows = 5;
  // More rows than this is suspicious for any question (the answer is meant to be read).
  size_t max_rows = 1000;
};

// True for questions whose answer is one figure or one entity (how many, average, percentage,
// ratio, total, the highest/lowest …), judged from the wording only.
bool expects_single_answer(const std::string& question);

// The heuristics' findings for `summary` as an answer to `question`; empty: accept.
std::vector<ResultIssue> check_result(const ResultSummary& summary, const std::string& question,
                                      const ResultCheckOptions& options = {});

// Ordering for a best-effort answer: lower is better (errors weigh most, then empty results,
// then each remaining issue).
int issue_weight(const std::vector<ResultIssue>& issues);

// "empty_result: …; duplicate_rows: …" (or "accepted").
std::string issues_text(const std::vector<ResultIssue>& issues);

}  // namespace nl2sql::generate
