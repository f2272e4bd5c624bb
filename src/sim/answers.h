// The simulator's answers (private to the sim layer): for each call task, the text a model
// would send back, derived from what Simulator::answer looked up (gold, its difficulty, whether
// candidates match it) with the configured error rates.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "nl2sql/core/status.h"
#include "nl2sql/llm/client.h"

namespace nl2sql::sim::detail {

// What the simulator knows when it answers: the stage's tag plus what it looked up from gold.
struct Facts {
  llm::CallTask task = llm::CallTask::kNone;
  std::string question_id, question, evidence, db_id, generator;
  int64_t sample_index = 0;
  // The request's sampling seed, when it set one: samples of one prompt that differ only in
  // their seed draw differently, as a model sampling at a temperature would.
  std::optional<int64_t> request_seed;
  std::string gold_sql, difficulty;
  std::string failing_sql, failure;
  std::vector<std::string> candidates;
  std::vector<bool> candidate_matches_gold;
  std::string gold_answer;
  std::string column;
  std::string current_plan, current_sql;
  bool current_matches_gold = false, current_result_empty = false;
};

// `n_choices` answers (n > 1 samples of one request), each drawn from its own seed.
Result<llm::ChatResponse> answer_from(const llm::SimSettings& settings, const Facts& facts, int n_choices);

}  // namespace nl2sql::sim::detail
