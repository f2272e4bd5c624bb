// Selector training data: pairwise fine-tuning examples built from candidate pools whose
// correctness is known (a run over a split with gold). For each question, pairs (correct,
// incorrect) are drawn from different execution clusters; the order of the two is shuffled
// with a seed, so the label is "A" about half the time. Each example is one line of the
// OpenAI chat fine-tuning JSONL format: {"messages":[system, user, assistant]}, where the user
// message is prompts/select_pairwise.txt rendered by the tournament's own function from the same
// inputs (the schema restricted to the union of what the two queries read, with the database's
// metadata when the run had it; each result's first rows in the tournament's format), so for the
// same question and pair it is byte for byte the prompt the tournament sends, and the assistant
// message is the answer the tournament parses.
// Pure function of its inputs; thread-safe.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "nl2sql/context/metadata.h"
#include "nl2sql/core/status.h"
#include "nl2sql/data/dataset.h"
#include "nl2sql/db/value.h"
#include "nl2sql/llm/prompt_library.h"
#include "nl2sql/sql/analysis.h"

namespace nl2sql::select {

struct TrainingCandidate {
  std::string sql;
  int cluster = -1;            // execution cluster; -1: not executable (never used)
  bool correct = false;
  // Its execution's result, shown to the model as in the tournament (null: "(not shown)").
  std::shared_ptr<const db::ResultSet> result;
};

struct TrainingQuestion {
  std::string question_id;
  std::string question;
  std::string evidence;
  const data::Schema* schema = nullptr;     // null: "(schema not available)", as in the tournament
  const sql::Schema* sql_schema = nullptr;  // resolves what each query reads (the union schema)
  const context::DatabaseMetadata* metadata = nullptr;  // when the run had context.metadata on
  std::vector<TrainingCandidate> candidates;
};

struct TrainingOptions {
  uint64_t seed = 0;
  size_t max_pairs_per_question = 8;  // 0: every (correct, incorrect) pair
};

struct TrainingExample {
  std::string question_id;
  std::string label;  // "A" or "B": which of the two is the correct one
  std::string jsonl;  // one JSON object, no newline
};

Result<std::vector<TrainingExample>> build_selector_training_data(
    const std::vector<TrainingQuestion>& questions, const TrainingOptions& options,
    const llm::PromptLibrary* prompts = nullptr);  // null: the bundled prompts

// Writes the examples' lines to `out` (one per line).
Status write_training_jsonl(const std::vector<TrainingExample>& examples,
                            const std::filesystem::path& out);

}  // namespace nl2sql::select
