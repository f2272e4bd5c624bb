// Private to src/select: pieces shared by the selectors and the training-data builder, so the
// pairwise prompt a fine-tuned selector learns from is rendered exactly as at inference.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "nl2sql/context/metadata.h"
#include "nl2sql/core/status.h"
#include "nl2sql/data/dataset.h"
#include "nl2sql/db/executor.h"
#include "nl2sql/db/value.h"
#include "nl2sql/sql/analysis.h"

namespace nl2sql::select::detail {

inline constexpr const char* kSystemPrompt =
    "You are a careful SQLite expert who checks SQL queries against questions about a database.";

// The schema rendered for a prompt, restricted to the tables and columns the queries read
// (join keys between them are kept by the renderer), with the metadata when given. Falls back
// to the whole schema when a query cannot be parsed or resolved.
std::string union_schema_text(const data::Schema& schema, const sql::Schema* sql_schema,
                              const context::DatabaseMetadata* metadata, const std::vector<std::string>& sqls);

// The first rows of a result as a small text table for prompts; `total_rows`: the whole
// answer's row count when `result` holds only its first rows (unset: result.rows.size()).
std::string result_preview(const db::ResultSet& result, size_t max_rows = 5,
                           std::optional<size_t> total_rows = std::nullopt);
// The same for an execution (its row_count(): the whole answer, also when it was hashed).
std::string result_preview(const db::ExecutionResult& execution, size_t max_rows = 5);

// One pair prompt's inputs. The tournament at inference and the selector's training data
// (build_selector_training_data) both fill prompts/select_pairwise.txt from this through
// pair_prompt_values, so the same question, pair and database give byte-identical prompts.
struct PairPrompt {
  std::string question, evidence;
  const data::Schema* schema = nullptr;                  // null: "(schema not available)"
  const sql::Schema* sql_schema = nullptr;               // resolves what the queries read
  const context::DatabaseMetadata* metadata = nullptr;   // context.metadata.enabled
  std::string sql_a, sql_b;
  const db::ResultSet* result_a = nullptr;               // null: "(not shown)"
  const db::ResultSet* result_b = nullptr;
  // Rows of the whole answers when result_a/result_b hold only their first rows.
  std::optional<size_t> total_a, total_b;
};
std::map<std::string, std::string> pair_prompt_values(const PairPrompt& pair);

// Values of prompts/select_pairwise.txt.
std::map<std::string, std::string> pairwise_values(const std::string& question,
                                                   const std::string& evidence,
                                                   const std::string& schema_text,
                                                   const std::string& sql_a,
                                                   const std::string& result_a,
                                                   const std::string& sql_b,
                                                   const std::string& result_b);

// The answer text the pairwise prompt asks for (read back with llm::read_pairwise_winner).
std::string pairwise_answer(const std::string& winner, const std::string& reason);

// The ranker's answer: the candidate numbers (in [0, count)) of the last {"ranking": [...]}
// object outside the reasoning — a model that drafts a ranking and revises it means the
// revision. Numbers out of range or repeated are dropped; an error when nothing is left.
Result<std::vector<int64_t>> read_ranking(const std::string& answer, size_t count);

}  // namespace nl2sql::select::detail
