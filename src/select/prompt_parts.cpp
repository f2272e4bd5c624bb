// Prompt pieces shared by the selectors and the training-data builder.
#include "prompt_parts.h"

#include <algorithm>
#include <cctype>

#include <nlohmann/json.hpp>

#include "nl2sql/context/schema_render.h"
#include "nl2sql/sql/parser.h"

namespace nl2sql::select::detail {

std::string union_schema_text(const data::Schema& schema, const sql::Schema* sql_schema,
                              const std::vector<std::string>& sqls) {
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
  return context::render_schema(schema, options);
}

std::string result_preview(const db::ResultSet& result, size_t max_rows) {
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
  if (result.rows.size() > max_rows)
    out += "… (" + std::to_string(result.rows.size()) + " rows in total)\n";
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

std::string pairwise_answer(const std::string& winner, const std::string& reason) {
  return reason + "\n\n```json\n" + nlohmann::json{{"winner", winner}}.dump() + "\n```";
}

std::optional<std::string> parse_pairwise_winner(const std::string& text) {
  // Preferred: the JSON object the prompt asks for (the last one in the text).
  std::optional<std::string> found;
  for (size_t p = text.find("\"winner\""); p != std::string::npos; p = text.find("\"winner\"", p + 1)) {
    size_t colon = text.find(':', p);
    if (colon == std::string::npos) break;
    size_t q = text.find('"', colon);
    if (q == std::string::npos || q + 2 >= text.size()) break;
    char w = static_cast<char>(std::toupper(static_cast<unsigned char>(text[q + 1])));
    if ((w == 'A' || w == 'B') && text[q + 2] == '"') found = std::string(1, w);
  }
  if (found) return found;
  // Else a last line that is just "A" or "B".
  size_t end = text.find_last_not_of(" \t\r\n.`*");
  if (end == std::string::npos) return std::nullopt;
  size_t start = text.find_last_of(" \t\r\n`*:", end);
  std::string last = text.substr(start == std::string::npos ? 0 : start + 1, end - (start == std::string::npos ? 0 : start + 1) + 1);
  if (last == "A" || last == "B") return last;
  return std::nullopt;
}

}  // namespace nl2sql::select::detail
