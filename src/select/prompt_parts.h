// Private to src/select: pieces shared by the selectors and the training-data builder, so the
// pairwise prompt a fine-tuned selector learns from is rendered exactly as at inference.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "nl2sql/data/dataset.h"
#include "nl2sql/db/value.h"
#include "nl2sql/sql/analysis.h"

namespace nl2sql::select::detail {

inline constexpr const char* kSystemPrompt =
    "You are a careful SQLite expert who checks SQL queries against questions about a database.";

// The schema rendered for a prompt, restricted to the tables and columns the queries read
// (join keys between them are kept by the renderer). Falls back to the whole schema when a
// query cannot be parsed or resolved.
std::string union_schema_text(const data::Schema& schema, const sql::Schema* sql_schema,
                              const std::vector<std::string>& sqls);

// The first rows of a result as a small text table for prompts.
std::string result_preview(const db::ResultSet& result, size_t max_rows = 5);

// Values of prompts/select_pairwise.txt.
std::map<std::string, std::string> pairwise_values(const std::string& question,
                                                   const std::string& evidence,
                                                   const std::string& schema_text,
                                                   const std::string& sql_a,
                                                   const std::string& result_a,
                                                   const std::string& sql_b,
                                                   const std::string& result_b);

// The answer text the pairwise prompt asks for, and its parser ("A", "B" or nullopt).
std::string pairwise_answer(const std::string& winner, const std::string& reason);
std::optional<std::string> parse_pairwise_winner(const std::string& text);

}  // namespace nl2sql::select::detail
