// Execution feedback (see feedback.h).
#include "nl2sql/feedback/feedback.h"

#include <algorithm>
#include <cctype>
#include <set>

#include "nl2sql/context/text_match.h"
#include "nl2sql/sql/parser.h"
#include "nl2sql/core/text.h"

namespace nl2sql::feedback {
namespace {

using core::lower;

// The name after "no such column: " etc., without quotes.
std::string name_after(const std::string& error, const std::string& marker) {
  auto p = lower(error).find(marker);
  if (p == std::string::npos) return "";
  std::string rest = error.substr(p + marker.size());
  size_t e = rest.find_first_of(" \n\t");
  if (e != std::string::npos) rest = rest.substr(0, e);
  rest.erase(std::remove_if(rest.begin(), rest.end(), [](char c) { return c == '"' || c == '`' || c == '\'' || c == '[' || c == ']'; }),
             rest.end());
  return rest;
}

std::string cut(std::string s, size_t n) {
  if (s.size() <= n) return s;
  return s.substr(0, n) + "…";
}

std::string join_list(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
  return s;
}

}  // namespace

ExecutionSummary summarize_execution(const db::ExecutionResult& r, size_t preview_rows) {
  ExecutionSummary s;
  s.executed = r.status != db::ExecStatus::kRejected;
  s.status = r.status;
  s.error = r.error;
  s.rows = r.row_count();  // the whole answer, also when only its first rows are held
  s.columns = r.result.columns.size();
  s.elapsed_ms = r.elapsed_ms;
  if (r.ok()) {
    std::string p = join_list(r.result.columns);
    for (size_t i = 0; i < std::min(preview_rows, r.result.rows.size()); ++i) {
      std::string line;
      for (const auto& v : r.result.rows[i]) line += (line.empty() ? "" : " | ") + cut(v.to_display(), 60);
      p += "\n" + line;
    }
    if (r.row_count() > preview_rows) p += "\n… (" + std::to_string(r.row_count()) + " rows)";
    s.preview = p;
  }
  return s;
}

std::string classify_failure(const ExecutionSummary& e) {
  if (!e.executed) return "";
  switch (e.status) {
    case db::ExecStatus::kOk: return e.rows == 0 ? "empty_result" : "";
    case db::ExecStatus::kTimeout: return "timeout";
    case db::ExecStatus::kRowCap: return "other";
    case db::ExecStatus::kRejected: return "";
    case db::ExecStatus::kError: break;
  }
  const std::string m = lower(e.error);
  if (m.find("no such column") != std::string::npos) return "no_such_column";
  if (m.find("no such table") != std::string::npos) return "no_such_table";
  if (m.find("ambiguous column") != std::string::npos) return "ambiguous_column";
  if (m.find("datatype mismatch") != std::string::npos || m.find("type mismatch") != std::string::npos)
    return "type_mismatch";
  if (m.find("syntax error") != std::string::npos || m.find("incomplete input") != std::string::npos ||
      m.find("unrecognized token") != std::string::npos || m.find("unterminated") != std::string::npos)
    return "syntax_error";
  return "other";
}

std::vector<std::string> closest_names(const std::string& name, const std::vector<std::string>& names, size_t k) {
  const std::u32string target = context::decode_utf8(lower(name));
  std::vector<std::pair<size_t, std::string>> scored;
  std::set<std::string> seen;
  for (const auto& n : names) {
    if (!seen.insert(n).second) continue;
    scored.emplace_back(context::edit_distance(target, context::decode_utf8(lower(n))), n);
  }
  std::stable_sort(scored.begin(), scored.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<std::string> out;
  for (size_t i = 0; i < std::min(k, scored.size()); ++i) out.push_back(scored[i].second);
  return out;
}

std::string failure_hint(const std::string& cls, const ExecutionSummary& e, const std::string& sql_text,
                         const HintInput& in) {
  const data::Schema* schema = in.schema;
  if (cls == "no_such_column" && schema) {
    std::string name = name_after(e.error, "no such column: ");
    std::string bare = name.substr(name.find('.') == std::string::npos ? 0 : name.find('.') + 1);
    std::vector<std::string> qualified, plain;
    for (const auto& t : schema->tables)
      for (const auto& c : t.columns) {
        qualified.push_back(t.name + "." + c.name);
        plain.push_back(c.name);
      }
    // Rank bare column names, then show each with its table(s).
    std::vector<std::string> best = closest_names(bare, plain, in.hint_names);
    std::vector<std::string> shown;
    for (const auto& b : best)
      for (const auto& q : qualified)
        if (q.size() > b.size() && q.compare(q.size() - b.size(), b.size(), b) == 0 && q[q.size() - b.size() - 1] == '.')
          shown.push_back(q);
    return "Column \"" + name + "\" does not exist. Closest columns in the schema: " + join_list(shown) +
           ". Check also that the table alias in front of the column names the table that has it.";
  }
  if (cls == "no_such_table" && schema) {
    std::string name = name_after(e.error, "no such table: ");
    std::vector<std::string> tables;
    for (const auto& t : schema->tables) tables.push_back(t.name);
    return "Table \"" + name + "\" does not exist. Closest tables in the schema: " +
           join_list(closest_names(name, tables, in.hint_names)) + ".";
  }
  if (cls == "ambiguous_column" && schema) {
    std::string name = name_after(e.error, "ambiguous column name: ");
    std::string bare = name.substr(name.find('.') == std::string::npos ? 0 : name.find('.') + 1);
    std::vector<std::string> owners;
    for (const auto& t : schema->tables)
      for (const auto& c : t.columns)
        if (lower(c.name) == lower(bare)) owners.push_back(t.name);
    return "Column \"" + name + "\" exists in several joined tables (" + join_list(owners) +
           "). Qualify it with the alias of the table you mean (e.g. T1." + bare + ").";
  }
  if (cls == "type_mismatch")
    return "A value is compared or combined with one of another type. Compare numbers with numbers and text with "
           "text; CAST(column AS REAL) or CAST(column AS INTEGER) when numbers are stored as text; dates are text "
           "in the format the schema comments show.";
  if (cls == "syntax_error") {
    std::string h = "SQLite could not parse the query.";
    auto parsed = sql::parse(sql_text);
    if (!parsed) h += " Our parser reports: " + parsed.status().message();
    return h + "\nCheck keywords, commas between columns, balanced parentheses and quotes; use SQLite syntax "
               "(LIMIT instead of TOP, || for concatenation, no ILIKE).";
  }
  if (cls == "timeout")
    return "The query ran too long. Join tables on their key columns instead of producing a cross product, filter "
           "before joining, and avoid correlated subqueries over large tables.";
  if (cls == "empty_result") {
    std::string h = "The query ran but returned no rows. Check that literal values are spelled exactly as stored, "
                    "that conditions are not too strict, and that joins use the right keys.";
    std::vector<std::string> lines;
    if (in.index && schema) {
      std::set<std::string> literals;
      for (const auto& t : sql::tokenize(sql_text))
        if (t.kind == sql::TokenKind::kString && !t.value.empty()) literals.insert(t.value);
      context::RetrievalOptions ro;
      ro.match_columns = false;
      ro.max_values = 5;
      ro.per_column = 3;
      ro.min_similarity = 0.5;
      for (const auto& lit : literals) {
        auto r = context::retrieve(*in.index, *schema, lit, "", ro);
        std::vector<std::string> vals;
        for (const auto& v : r.values) {
          std::string item = v.table + "." + v.column + " = '" + v.value + "'";
          if (std::find(vals.begin(), vals.end(), item) == vals.end()) vals.push_back(item);
        }
        lines.push_back("'" + lit + "': " + (vals.empty() ? std::string("no similar stored value") : join_list(vals)));
      }
    }
    if (!lines.empty()) {
      h += "\nStored values resembling the query's literals:";
      for (const auto& l : lines) h += "\n- " + l;
    }
    return h;
  }
  if (e.status == db::ExecStatus::kRowCap)
    return "The query returned more rows than allowed; it probably misses a join condition or a filter.";
  return "Read the error message and correct the part of the query it names.";
}

}  // namespace nl2sql::feedback
