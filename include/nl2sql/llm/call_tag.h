// CallTag: what a stage says about the call it makes — which task it is, for which question and
// sample, and the material under review (a failing query, the candidates of a duel, a column,
// a plan). It carries no gold and nothing derived from gold: stage inputs never hold the answer
// (a test checks every request of a run for it). Real providers ignore the tag; it is not part
// of the cache key. The offline simulator (src/sim/) reads it and looks the gold up itself in
// the dataset it was given.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "nl2sql/core/status.h"

namespace nl2sql::llm {

enum class CallTask {
  kNone,          // not set (the simulator refuses the call)
  kGenerate,      // write SQL for the question
  kFix,           // repair `failing_sql`
  kSelectPair,    // pairwise: candidates[0] = A, candidates[1] = B
  kRank,          // rank all candidates, best first
  kChoose,        // choose one of `candidates` and write its SQL back (naive listwise selection)
  kNlEval,        // answer the question on a small instance (separating instances)
  kKeywords,      // keyword extraction from question + evidence
  kColumnFilter,  // is `column` relevant to the question?
  kLedger,        // agent: JSON fact sheet (sub-questions, tables, joins, filters, …)
  kPlan,          // recap: JSON step plan and expected result columns
  kPlanCritique,  // recap: approve `current_plan` or name what it misses
  kSqlCritique,   // recap: approve `current_sql` or name a defect
  kValidate,      // recap: {valid_result, columns_not_needed, result_empty, suggest_fix}
};

const char* call_task_name(CallTask task);

struct CallTag {
  CallTask task = CallTask::kNone;
  std::string question_id;
  std::string question;
  std::string evidence;
  std::string db_id;
  std::string generator;    // e.g. "divide_conquer", "query_plan", "online_synthetic"
  int64_t sample_index = 0;
  // kFix
  std::string failing_sql;
  std::string failure;      // "syntax_error" | "empty_result" | any error text
  // kSelectPair / kRank / kChoose: the candidates' SQL texts.
  std::vector<std::string> candidates;
  // kNlEval: runs a query on the instance the model is shown and renders its answer rows as the
  // prompt shows them (the instance itself stays with the selector).
  std::function<Result<std::string>(const std::string& sql)> answer_on_instance;
  // kColumnFilter
  std::string column;
  // kPlanCritique: the plan text under review.
  std::string current_plan;
  // kSqlCritique / kValidate: the SQL under review and whether it returned no rows.
  std::string current_sql;
  bool current_result_empty = false;
};

}  // namespace nl2sql::llm
