// Prompt pieces shared by the selectors and the training-data builder.
#include "prompt_parts.h"

#include <algorithm>
#include <cctype>

#include <nlohmann/json.hpp>

#include "nl2sql/context/schema_render.h"
#include "nl2sql/llm/answer.h"
#include "nl2sql/sql/parser.h"

namespace nl2sql::select::detail {

std::string union_schema_text(const data::Schema& schema, const sql::Schema* sql_schema,
                              const context::DatabaseMetadata* metadata, const std::vector<std::string>& sqls) {
  context::RenderOptions options;
  options.examples = 0;
  if (sql_schema) {
    std::set<std::string> columns;
    bool ok = true;
    for (const auto& sql : sqls) {
      auto stmt = sql::parse_query(sql);
      if (!stmt.is_ok()) { ok = false; break; }
      auto refs = sql::analyze_references(*stmt->select, *sql_schema);
      for (const auto& [table, column] : refs.columns) columns.insert(table + "." + column);
      // Tables read without naming a column (COUNT(*)) still belong in the schema: keep their
      // key columns.
      for (const auto& table : refs.tables) {
        const auto* t = sql_schema->find(table);
        if (!t) continue;
        for (const auto& c : t->columns)
          if (c.primary_key) columns.insert(t->name + "." + c.name);
      }
    }
    if (ok && !columns.empty()) options.columns = std::move(columns);
  }
  return context::render_schema(context::SchemaSources{&schema, nullptr, nullptr, metadata}, options);
}

std::string result_preview(const db::ExecutionResult& execution, size_t max_rows) {
  return result_preview(execution.result, max_rows, execution.row_count());
}

std::string result_preview(const db::ResultSet& result, size_t max_rows, std::optional<size_t> total_rows) {
  const size_t total = total_rows ? *total_rows : result.rows.size();
  if (result.rows.empty()) return "(no rows)";
  std::string out;
  for (size_t c = 0; c < result.columns.size(); ++c) out += (c ? " | " : "") + result.columns[c];
  out += "\n";
  for (size_t r = 0; r < std::min(max_rows, result.rows.size()); ++r) {
    const auto& row = result.rows[r];
    for (size_t c = 0; c < row.size(); ++c) {
      std::string cell = row[c].to_display();
      if (cell.size() > 60) cell = cell.substr(0, 57) + "...";
      out += (c ? " | " : "") + cell;
    }
    out += "\n";
  }
  if (total > max_rows) out += "… (" + std::to_string(total) + " rows in total)\n";
  return out;
}

std::map<std::string, std::string> pairwise_values(const std::string& question,
                                                   const std::string& evidence,
                                                   const std::string& schema_text,
                                                   const std::string& sql_a,
                                                   const std::string& result_a,
                                                   const std::string& sql_b,
                                                   const std::string& result_b) {
  return {{"question", question},
          {"evidence", evidence.empty() ? "(none)" : evidence},
          {"schema", schema_text},
          {"sql_a", sql_a},
          {"result_a", result_a.empty() ? "(not shown)" : result_a},
          {"sql_b", sql_b},
          {"result_b", result_b.empty() ? "(not shown)" : result_b}};
}

std::map<std::string, std::string> pair_prompt_values(const PairPrompt& p) {
  const std::string schema = p.schema ? union_schema_text(*p.schema, p.sql_schema, p.metadata, {p.sql_a, p.sql_b})
                                      : "(schema not available)";
  return pairwise_values(p.question, p.evidence, schema, p.sql_a, p.result_a ? result_preview(*p.result_a, 5, p.total_a) : "",
                         p.sql_b, p.result_b ? result_preview(*p.result_b, 5, p.total_b) : "");
}

std::string pairwise_answer(const std::string& winner, const std::string& reason) {
  return reason + "\n\n```json\n" + nlohmann::json{{"winner", winner}}.dump() + "\n```";
}

Result<std::vector<int64_t>> read_ranking(const std::string& answer, size_t count) {
  auto j = llm::read_json(answer, {llm::JsonShape::kObject, "ranking"});
  if (!j) return j.status();
  const auto& list = (*j)["ranking"];
  if (!list.is_array()) return invalid_input("\"ranking\" is not a list: " + list.dump());
  std::vector<int64_t> out;
  for (const auto& v : list) {
    if (!v.is_number_integer()) continue;
    const int64_t k = v.get<int64_t>();
    if (k >= 0 && k < static_cast<int64_t>(count) && std::find(out.begin(), out.end(), k) == out.end())
      out.push_back(k);
  }
  if (out.empty()) return invalid_input("the ranking names no candidate in [0, " + std::to_string(count) + ")");
  return out;
}

}  // namespace nl2sql::select::detail
