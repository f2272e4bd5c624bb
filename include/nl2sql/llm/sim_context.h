// SimContext: what the offline `sim` provider needs to answer a call, supplied by the stage
// that makes it. `sim` never reads datasets, runs SQL or evaluates results itself (it may not
// depend on data/ or eval/), so the caller passes the gold SQL, the candidates and — for
// selectors — whether each candidate matches gold (precomputed by the caller, who has the
// evaluator). Real providers ignore this struct entirely; it is not part of the cache key.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace nl2sql::llm {

enum class SimTask {
  kNone,          // not set: the sim provider refuses the call (kInvalidInput)
  kGenerate,      // SQL generation: gold SQL w.p. p_correct, else a taxonomy mistake
  kFix,           // repair `failing_sql`: gold w.p. p_fix, else the input unchanged
  kSelectPair,    // pairwise: candidates[0] = A, candidates[1] = B
  kRank,          // rank all candidates, best first
  kNlEval,        // answer the question on the instance: gold_answer, perturbed w.p. p_hallucinate
  kKeywords,      // keyword extraction from question + evidence
  kColumnFilter,  // is `column` relevant? yes for columns in the gold SQL (p_sel accuracy)
  // Agentic generators (agent, recap). Plans and fact sheets are derived from the gold SQL's
  // tables and clauses; critics and the validator judge `current_sql` using
  // `current_matches_gold`, which the caller computed with the evaluator.
  kLedger,        // agent: JSON fact sheet (sub-questions, tables, joins, filters, group-bys, measures)
  kPlan,          // recap: JSON step plan and expected result columns
  kPlanCritique,  // recap: approve `current_plan` or name a gold table/clause it misses
  kSqlCritique,   // recap: approve `current_sql` or name a real defect against gold (p_sel accuracy)
  kValidate,      // recap: {valid_result, columns_not_needed, result_empty, suggest_fix}; valid iff matches gold
};

const char* sim_task_name(SimTask task);

struct SimContext {
  SimTask task = SimTask::kNone;
  std::string question_id;
  std::string question;
  std::string evidence;
  std::string gold_sql;
  std::string db_id;
  std::string difficulty;   // simple | moderate | challenging (BIRD) or Spider hardness
  std::string generator;    // e.g. "divide_conquer", "query_plan", "online_synthetic"
  int64_t sample_index = 0;
  // kFix
  std::string failing_sql;
  std::string failure;      // "syntax_error" | "empty_result" | any error text
  // kSelectPair / kRank: candidate SQL texts and, per candidate, whether it matches gold.
  std::vector<std::string> candidates;
  std::vector<bool> candidate_matches_gold;
  // kNlEval: the gold SQL's answer on the small instance, rendered as text by the caller.
  std::string gold_answer;
  // kColumnFilter
  std::string column;
  // kPlanCritique: the plan text under review.
  std::string current_plan;
  // kSqlCritique / kValidate: the SQL under review, whether its result equals gold's (computed
  // by the caller with eval::), and whether it returned no rows.
  std::string current_sql;
  bool current_matches_gold = false;
  bool current_result_empty = false;
};

}  // namespace nl2sql::llm
