// EXPLAIN QUERY PLAN → readable steps (see query_plan.h).
#include "nl2sql/generate/query_plan.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <regex>
#include <set>

#include "nl2sql/sql/parser.h"
#include "nl2sql/sql/printer.h"

namespace nl2sql::generate {
namespace {

bool starts(const std::string& s, std::string_view p) { return s.rfind(p, 0) == 0; }

std::string cell_text(const db::Value& v) {
  if (v.type == db::ValueType::kInteger) return std::to_string(v.i);
  return v.to_display();
}

int64_t cell_int(const db::Value& v) {
  if (v.type == db::ValueType::kInteger) return v.i;
  if (v.type == db::ValueType::kReal) return static_cast<int64_t>(v.r);
  if (v.type == db::ValueType::kText) {
    try {
      return std::stoll(v.s);
    } catch (...) {
      return 0;
    }
  }
  return 0;
}

// "x AS T1" → "table x (alias T1)"
std::string table_phrase(const std::string& name_and_alias) {
  static const std::regex re(R"(^(?:TABLE )?(\S+)(?: AS (\S+))?$)");
  std::smatch m;
  if (std::regex_match(name_and_alias, m, re)) {
    std::string s = "table " + m[1].str();
    if (m[2].matched) s += " (alias " + m[2].str() + ")";
    return s;
  }
  return name_and_alias;
}

// How a SEARCH/SCAN reaches its rows: "USING INDEX i (a=?)" etc.
std::string access_phrase(const std::string& using_part) {
  static const std::regex re(
      R"(^USING (AUTOMATIC PARTIAL COVERING INDEX|AUTOMATIC COVERING INDEX|AUTOMATIC INDEX|COVERING INDEX|INDEX|INTEGER PRIMARY KEY|PRIMARY KEY)(?: (\S+))?(?: \((.*)\))?$)");
  std::smatch m;
  if (!std::regex_match(using_part, m, re)) return "(" + using_part + ")";
  const std::string kind = m[1].str();
  std::string idx = m[2].matched ? m[2].str() : "";
  std::string cond = m[3].matched ? m[3].str() : "";
  // "USING INDEX (a=?)" has no name: the optional name group then caught nothing.
  if (!idx.empty() && idx.front() == '(') {
    cond = idx.substr(1, idx.size() - 2);
    idx.clear();
  }
  std::string how;
  if (kind == "INTEGER PRIMARY KEY" || kind == "PRIMARY KEY")
    how = "by its primary key";
  else if (starts(kind, "AUTOMATIC"))
    how = "through a temporary index SQLite builds for this query";
  else
    how = std::string("through ") + (kind == "COVERING INDEX" ? "covering index " : "index ") + idx;
  if (!cond.empty()) how += " where " + cond + " (? = the value from the condition or the join)";
  return how;
}

std::string describe(const std::string& d, bool later_table) {
  static const std::regex scan_re(R"(^SCAN (.+?)(?: (USING .+))?$)");
  static const std::regex search_re(R"(^SEARCH (.+?) (USING .+)$)");
  std::smatch m;
  if (d == "SCAN CONSTANT ROW") return "Produce one constant row (no table is read).";
  if (std::regex_match(d, m, search_re)) {
    return std::string(later_table ? "For each row so far, look up" : "Look up") + " the matching rows of " +
           table_phrase(m[1].str()) + " " + access_phrase(m[2].str()) + ".";
  }
  if (std::regex_match(d, m, scan_re) && !starts(d, "SCAN SUBQUERY")) {
    std::string s = std::string(later_table ? "For each row so far, scan" : "Scan") + " every row of " +
                    table_phrase(m[1].str());
    if (m[2].matched) {
      std::string u = m[2].str();
      auto pos = u.find("INDEX ");
      s += pos != std::string::npos ? " in the order of index " + u.substr(pos + 6) : " (" + u + ")";
    }
    return s + ".";
  }
  if (starts(d, "SCAN SUBQUERY")) return "Scan the rows of subquery " + d.substr(14) + ".";
  if (d == "USE TEMP B-TREE FOR GROUP BY") return "Sort the rows into groups with a temporary B-tree (GROUP BY).";
  if (d == "USE TEMP B-TREE FOR ORDER BY") return "Sort the result rows with a temporary B-tree (ORDER BY).";
  if (d == "USE TEMP B-TREE FOR DISTINCT") return "Drop duplicate rows with a temporary B-tree (DISTINCT).";
  if (starts(d, "USE TEMP B-TREE FOR RIGHT PART OF ORDER BY") || starts(d, "USE TEMP B-TREE FOR LAST"))
    return "Finish sorting on the remaining ORDER BY terms with a temporary B-tree.";
  if (starts(d, "USE TEMP B-TREE FOR")) return "Use a temporary B-tree for " + d.substr(20) + ".";
  if (starts(d, "CORRELATED SCALAR SUBQUERY"))
    return "Compute a scalar subquery again for every outer row (it refers to the outer query):";
  if (starts(d, "SCALAR SUBQUERY")) return "Compute a scalar subquery once:";
  if (starts(d, "CORRELATED LIST SUBQUERY"))
    return "Build the value list of an IN (…) subquery again for every outer row:";
  if (starts(d, "LIST SUBQUERY")) return "Build the value list of an IN (…) subquery:";
  if (starts(d, "MATERIALIZE ")) return "Compute subquery " + d.substr(12) + " into a temporary table:";
  if (starts(d, "CO-ROUTINE ")) return "Run subquery " + d.substr(11) + " as a co-routine, row by row:";
  if (d == "COMPOUND QUERY") return "Combine the results of several SELECT statements:";
  if (d == "LEFT-MOST SUBQUERY") return "First SELECT:";
  if (d == "UNION ALL") return "Then append the rows of the next SELECT (UNION ALL):";
  if (starts(d, "UNION USING TEMP B-TREE")) return "Then add the next SELECT's rows without duplicates (UNION):";
  if (starts(d, "INTERSECT USING TEMP B-TREE")) return "Then keep only rows also in the next SELECT (INTERSECT):";
  if (starts(d, "EXCEPT USING TEMP B-TREE")) return "Then remove rows found in the next SELECT (EXCEPT):";
  if (d == "MULTI-INDEX OR") return "Answer an OR condition with one index per branch:";
  if (starts(d, "INDEX ")) return "Branch " + d.substr(6) + ":";
  if (starts(d, "BLOOM FILTER ON ")) return "Build a Bloom filter on " + d.substr(16) + " to skip rows that cannot match.";
  if (starts(d, "RIGHT-JOIN")) return "Add the unmatched rows of the right side (RIGHT JOIN).";
  return "Plan step: " + d + ".";
}

bool is_table_access(const std::string& d) {
  return (starts(d, "SCAN ") || starts(d, "SEARCH ")) && d != "SCAN CONSTANT ROW" &&
         !starts(d, "SCAN SUBQUERY");
}

struct Tree {
  std::map<int64_t, std::vector<size_t>> children;  // parent id → row indices in order
};

Tree build_tree(const std::vector<PlanRow>& rows) {
  Tree t;
  std::set<int64_t> ids;
  for (const auto& r : rows) ids.insert(r.id);
  for (size_t i = 0; i < rows.size(); ++i) {
    // A parent that is not in the plan (should not happen) makes the node a root.
    int64_t parent = ids.count(rows[i].parent) ? rows[i].parent : 0;
    t.children[parent].push_back(i);
  }
  return t;
}

void walk_steps(const std::vector<PlanRow>& rows, const Tree& t, int64_t parent, const std::string& prefix,
                int depth, std::vector<std::string>& out) {
  auto it = t.children.find(parent);
  if (it == t.children.end()) return;
  int n = 0;
  bool seen_table = false;
  for (size_t idx : it->second) {
    const auto& d = rows[idx].detail;
    std::string number = prefix + std::to_string(++n) + ".";
    out.push_back(std::string(static_cast<size_t>(depth) * 3, ' ') + number + " " + describe(d, seen_table));
    if (is_table_access(d)) seen_table = true;
    walk_steps(rows, t, rows[idx].id, number, depth + 1, out);
  }
}

void walk_tree(const std::vector<PlanRow>& rows, const Tree& t, int64_t parent, const std::string& indent,
               std::string& out) {
  auto it = t.children.find(parent);
  if (it == t.children.end()) return;
  for (size_t k = 0; k < it->second.size(); ++k) {
    bool last = k + 1 == it->second.size();
    size_t idx = it->second[k];
    out += indent + (last ? "`--" : "|--") + rows[idx].detail + "\n";
    walk_tree(rows, t, rows[idx].id, indent + (last ? "   " : "|  "), out);
  }
}

std::string tables_of_plan(const std::vector<PlanRow>& rows) {
  static const std::regex re(R"(^(?:SCAN|SEARCH) (?:TABLE )?(\S+)(?: AS (\S+))?)");
  std::vector<std::string> names;
  for (const auto& r : rows) {
    std::smatch m;
    if (!is_table_access(r.detail) || !std::regex_search(r.detail, m, re)) continue;
    std::string n = m[1].str() + (m[2].matched ? " (as " + m[2].str() + ")" : "");
    if (std::find(names.begin(), names.end(), n) == names.end()) names.push_back(n);
  }
  std::string s;
  for (const auto& n : names) s += (s.empty() ? "" : ", ") + n;
  return s;
}

// alias → table for every FROM item of the query and of subqueries in FROM and CTEs (older
// SQLite versions print only the alias in the plan: "SCAN T2").
void collect_aliases(const sql::Select& sel, std::map<std::string, std::string>& out);

void collect_join_list(const sql::JoinList& list, std::map<std::string, std::string>& out) {
  for (const auto& item : list.items) {
    if (item.kind == sql::TableRef::Kind::kTable && !item.alias.name.empty() && item.alias.name != item.name.name)
      out.emplace(item.alias.name, item.name.name);
    if (item.kind == sql::TableRef::Kind::kSubquery && item.select) collect_aliases(*item.select, out);
    if (item.kind == sql::TableRef::Kind::kJoin && item.join) collect_join_list(*item.join, out);
  }
}

void collect_aliases(const sql::Select& sel, std::map<std::string, std::string>& out) {
  for (const auto& cte : sel.with)
    if (cte.select) collect_aliases(*cte.select, out);
  for (const auto& core : sel.cores)
    if (core.from) collect_join_list(*core.from, out);
}

// "SCAN T2 …" → "SCAN orders AS T2 …" when T2 is an alias the plan printed alone.
std::string with_table_names(const std::string& detail, const std::map<std::string, std::string>& aliases) {
  for (std::string_view verb : {"SCAN ", "SEARCH "}) {
    if (!starts(detail, verb)) continue;
    size_t b = verb.size();
    size_t e = detail.find(' ', b);
    std::string name = detail.substr(b, e == std::string::npos ? std::string::npos : e - b);
    if (e != std::string::npos && detail.compare(e, 4, " AS ") == 0) return detail;
    auto it = aliases.find(name);
    if (it == aliases.end()) return detail;
    return std::string(verb) + it->second + " AS " + name + (e == std::string::npos ? "" : detail.substr(e));
  }
  return detail;
}

}  // namespace

std::vector<PlanRow> plan_rows(const db::ResultSet& result) {
  int id_col = -1, parent_col = -1, detail_col = -1;
  for (size_t i = 0; i < result.columns.size(); ++i) {
    if (result.columns[i] == "id") id_col = static_cast<int>(i);
    if (result.columns[i] == "parent") parent_col = static_cast<int>(i);
    if (result.columns[i] == "detail") detail_col = static_cast<int>(i);
  }
  std::vector<PlanRow> out;
  if (id_col < 0 || parent_col < 0 || detail_col < 0) return out;
  for (const auto& row : result.rows) {
    PlanRow r;
    r.id = cell_int(row[static_cast<size_t>(id_col)]);
    r.parent = cell_int(row[static_cast<size_t>(parent_col)]);
    r.detail = cell_text(row[static_cast<size_t>(detail_col)]);
    out.push_back(std::move(r));
  }
  return out;
}

std::string render_plan_tree(const std::vector<PlanRow>& rows) {
  std::string out = "QUERY PLAN\n";
  walk_tree(rows, build_tree(rows), 0, "", out);
  return out;
}

std::vector<std::string> plan_steps(const std::vector<PlanRow>& rows) {
  std::vector<std::string> out;
  walk_steps(rows, build_tree(rows), 0, "", 0, out);
  return out;
}

std::string QueryPlanText::text() const {
  std::string s;
  for (const auto& line : steps) s += line + "\n";
  return s;
}

Result<QueryPlanText> explain_query(const db::Executor& executor, const std::filesystem::path& db,
                                    const std::string& sql) {
  auto parsed = sql::parse_query(sql);
  if (!parsed) return parsed.status();
  auto plan = executor.explain_query_plan(db, sql);
  if (!plan.ok())
    return Status(plan.status == db::ExecStatus::kRejected ? ErrorCode::kRejected : ErrorCode::kSql,
                  "EXPLAIN QUERY PLAN failed: " + plan.error);
  QueryPlanText out;
  out.rows = plan_rows(plan.result);
  std::map<std::string, std::string> aliases;
  collect_aliases(*parsed->select, aliases);
  for (auto& r : out.rows) r.detail = with_table_names(r.detail, aliases);
  out.tree = render_plan_tree(out.rows);
  std::string tables = tables_of_plan(out.rows);
  out.steps.push_back("Preparation: open the tables " + (tables.empty() ? std::string("(none)") : tables) + ".");
  out.steps.push_back("Plan (how SQLite reads the rows):");
  for (auto& s : plan_steps(out.rows)) out.steps.push_back("  " + s);
  // What the plan does not spell out: the conditions and the result, from the outermost query.
  const sql::Select& sel = *parsed->select;
  const sql::SelectCore& core = sel.cores.front();
  std::vector<std::string> tail;
  if (core.from)
    for (size_t i = 1; i < core.from->items.size(); ++i)
      if (core.from->items[i].on)
        tail.push_back("Match rows on " + sql::to_sql(*core.from->items[i].on) + ".");
  if (core.where) tail.push_back("Keep only the rows where " + sql::to_sql(*core.where) + ".");
  if (!core.group_by.empty()) {
    std::string g;
    for (const auto& e : core.group_by) g += (g.empty() ? "" : ", ") + sql::to_sql(*e);
    tail.push_back("Form one group per value of " + g + ".");
  }
  if (core.having) tail.push_back("Keep only the groups where " + sql::to_sql(*core.having) + ".");
  if (!sel.order_by.empty()) {
    std::string o;
    for (const auto& t : sel.order_by)
      o += (o.empty() ? "" : ", ") + sql::to_sql(*t.expr) + (t.direction < 0 ? " descending" : " ascending");
    tail.push_back("Order the rows by " + o + ".");
  }
  if (sel.limit) tail.push_back("Keep the first " + sql::to_sql(*sel.limit) + " row(s).");
  std::string cols;
  for (const auto& c : core.columns) {
    cols += (cols.empty() ? "" : ", ") + sql::to_sql(*c.expr);
    if (!c.alias.name.empty()) cols += " AS " + c.alias.name;
  }
  if (sel.cores.size() > 1) cols += " (from each combined SELECT)";
  tail.push_back(std::string("Deliver ") + (core.distinct ? "the distinct values of " : "") + cols + ".");
  out.steps.push_back("Conditions and result:");
  for (size_t i = 0; i < tail.size(); ++i) out.steps.push_back("  " + std::to_string(i + 1) + ". " + tail[i]);
  return out;
}

}  // namespace nl2sql::generate
