// Outlines of a query (see outline.h).
#include "outline.h"

#include <cctype>

#include "nl2sql/core/text.h"
#include "sql_tokens.h"

namespace nl2sql::sim::detail {
namespace {

using json = nlohmann::json;
using core::upper;

// Splits tokens [from, to) at `sep` (a keyword, or "," as punctuation) found at depth `d`;
// AND of BETWEEN … AND … is not a separator.
std::vector<std::string> split_at(const std::vector<Token>& t, size_t from, size_t to, int d, const char* sep) {
  std::vector<std::string> parts;
  std::string cur;
  bool between = false;
  const bool comma = std::string(sep) == ",";
  for (size_t i = from; i < to; ++i) {
    bool at = t[i].depth == d;
    if (at && is_kw(t[i], "BETWEEN")) between = true;
    bool is_sep = at && (comma ? (t[i].kind == Tok::kPunct && t[i].text == ",") : is_kw(t[i], sep));
    if (is_sep && !comma && between) {
      between = false;
      is_sep = false;
    }
    if (is_sep) {
      if (!core::squash_spaces(cur).empty()) parts.push_back(core::squash_spaces(cur));
      cur.clear();
      continue;
    }
    cur += t[i].text;
  }
  if (!core::squash_spaces(cur).empty()) parts.push_back(core::squash_spaces(cur));
  return parts;
}

}  // namespace

SqlOutline outline_of(const std::string& sql) {
  SqlOutline o;
  auto t = tokenize(sql);
  size_t sel = find_kw(t, "SELECT");
  if (sel == t.size()) return o;
  const int d = t[sel].depth;
  // Tables after FROM / JOIN at any depth, and after commas of a FROM list.
  for (size_t i = 0; i < t.size(); ++i) {
    if (!is_kw(t[i], "FROM") && !is_kw(t[i], "JOIN")) continue;
    size_t j = next_nonspace(t, i);
    while (j < t.size() && (t[j].kind == Tok::kWord || t[j].kind == Tok::kQuotedIdent) &&
           !keywords().count(upper(t[j].text))) {
      std::string name = t[j].text;
      if (name.size() > 1 && (name[0] == '`' || name[0] == '"' || name[0] == '['))
        name = name.substr(1, name.size() - 2);
      if (std::find(o.tables.begin(), o.tables.end(), name) == o.tables.end()) o.tables.push_back(name);
      // FROM a AS x, b y: skip an alias, continue after a comma.
      size_t k = next_nonspace(t, j);
      if (k < t.size() && is_kw(t[k], "AS")) k = next_nonspace(t, k);
      if (k < t.size() && t[k].kind == Tok::kWord && !keywords().count(upper(t[k].text))) k = next_nonspace(t, k);
      if (k < t.size() && t[k].kind == Tok::kPunct && t[k].text == "," && is_kw(t[i], "FROM"))
        j = next_nonspace(t, k);
      else
        break;
    }
  }
  // Clause boundaries of the outer query.
  struct Span {
    std::string name;
    size_t from, to;
  };
  std::vector<Span> spans;
  for (size_t i = sel; i < t.size(); ++i) {
    if (t[i].depth != d || t[i].kind != Tok::kWord) continue;
    std::string u = upper(t[i].text);
    if (u == "UNION" || u == "INTERSECT" || u == "EXCEPT") break;
    if (u == "SELECT" || u == "FROM" || u == "WHERE" || u == "GROUP" || u == "HAVING" || u == "ORDER" ||
        u == "LIMIT") {
      if (!spans.empty()) spans.back().to = i;
      size_t start = i + 1;
      if (u == "GROUP" || u == "ORDER") start = next_nonspace(t, i) + 1;  // skip BY
      spans.push_back({u, start, t.size()});
    }
  }
  for (size_t i = spans.empty() ? t.size() : spans.back().from; i < t.size(); ++i)
    if (t[i].depth == d && t[i].kind == Tok::kWord &&
        (is_kw(t[i], "UNION") || is_kw(t[i], "INTERSECT") || is_kw(t[i], "EXCEPT"))) {
      spans.back().to = i;
      break;
    }
  for (const auto& sp : spans) {
    std::string text;
    for (size_t i = sp.from; i < sp.to && i < t.size(); ++i) text += t[i].text;
    if (sp.name == "SELECT") {
      size_t from = sp.from;
      size_t first = from < t.size() && t[from].kind == Tok::kSpace ? next_nonspace(t, from) : from;
      if (first < sp.to && is_kw(t[first], "DISTINCT")) {
        o.distinct = true;
        from = first + 1;
      }
      o.select_items = split_at(t, from, sp.to, d, ",");
      for (const auto& item : o.select_items)
        for (const char* agg : {"COUNT(", "SUM(", "AVG(", "MAX(", "MIN(", "COUNT (", "SUM (", "AVG ("})
          if (upper(item).find(agg) != std::string::npos) {
            o.measures.push_back(item);
            break;
          }
    } else if (sp.name == "FROM") {
      // ON conditions: from ON to the next join keyword at the same depth.
      for (size_t i = sp.from; i < sp.to; ++i) {
        if (t[i].depth != d || !is_kw(t[i], "ON")) continue;
        std::string cond;
        size_t j = i + 1;
        for (; j < sp.to; ++j) {
          if (t[j].depth == d && (is_kw(t[j], "JOIN") || is_kw(t[j], "INNER") || is_kw(t[j], "LEFT") ||
                                  is_kw(t[j], "CROSS") || is_kw(t[j], "NATURAL")))
            break;
          cond += t[j].text;
        }
        if (!core::squash_spaces(cond).empty()) o.joins.push_back(core::squash_spaces(cond));
        i = j - 1;
      }
    } else if (sp.name == "WHERE") {
      o.filters = split_at(t, sp.from, sp.to, d, "AND");
    } else if (sp.name == "GROUP") {
      o.group_by = split_at(t, sp.from, sp.to, d, ",");
    } else if (sp.name == "HAVING") {
      o.having = core::squash_spaces(text);
    } else if (sp.name == "ORDER") {
      o.order_by = core::squash_spaces(text);
    } else if (sp.name == "LIMIT") {
      o.limit = core::squash_spaces(text);
    }
  }
  return o;
}

// Case-folded outside string literals: 'Alameda' and 'alameda' are different conditions.
std::string key_of(const std::string& s) {
  std::string out = core::squash_spaces(s);
  bool quoted = false;
  for (auto& c : out) {
    if (c == '\'') quoted = !quoted;
    if (!quoted) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  return out;
}

bool contains_key(const std::vector<std::string>& v, const std::string& s) {
  for (const auto& x : v)
    if (key_of(x) == key_of(s)) return true;
  return false;
}

namespace {

std::string list_text(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
  return s.empty() ? "(none)" : s;
}

}  // namespace

std::string describe_defect(const std::string& current, const std::string& gold) {
  SqlOutline c = outline_of(current), g = outline_of(gold);
  for (const auto& tb : g.tables)
    if (!contains_key(c.tables, tb)) return "The query does not read table " + tb + ", which the question needs.";
  for (const auto& tb : c.tables)
    if (!contains_key(g.tables, tb)) return "Table " + tb + " is not needed to answer the question.";
  for (const auto& j : g.joins)
    if (!contains_key(c.joins, j)) return "The join condition should be " + j + ".";
  for (const auto& f : g.filters)
    if (!contains_key(c.filters, f)) return "The condition " + f + " is missing or written differently.";
  for (const auto& f : c.filters)
    if (!contains_key(g.filters, f)) return "The condition " + f + " is not asked for by the question.";
  if (c.distinct != g.distinct)
    return g.distinct ? "Duplicate rows should be removed (SELECT DISTINCT)."
                      : "DISTINCT changes the answer here; the question counts every row.";
  if (c.select_items.size() != g.select_items.size())
    return "The query should return " + std::to_string(g.select_items.size()) + " column(s): " +
           list_text(g.select_items) + ".";
  for (size_t i = 0; i < g.select_items.size(); ++i)
    if (key_of(c.select_items[i]) != key_of(g.select_items[i]))
      return "Column " + std::to_string(i + 1) + " should be " + g.select_items[i] + ", not " + c.select_items[i] + ".";
  if (key_of(list_text(c.group_by)) != key_of(list_text(g.group_by)))
    return "Grouping should be by " + list_text(g.group_by) + ".";
  if (key_of(c.order_by) != key_of(g.order_by) || key_of(c.limit) != key_of(g.limit))
    return "Ordering/limit should be ORDER BY " + (g.order_by.empty() ? "(none)" : g.order_by) +
           (g.limit.empty() ? "" : " LIMIT " + g.limit) + ".";
  if (key_of(c.having) != key_of(g.having)) return "The HAVING condition should be " + g.having + ".";
  return "";
}

json ledger_of(const std::string& gold, const std::string& evidence) {
  SqlOutline o = outline_of(gold);
  json subs = json::array();
  for (const auto& f : o.filters) subs.push_back("Which rows satisfy " + f + "?");
  if (!o.group_by.empty()) subs.push_back("Group the kept rows by " + list_text(o.group_by) + ".");
  subs.push_back("Return " + list_text(o.select_items) + (o.order_by.empty() ? "" : ", ordered by " + o.order_by) +
                 (o.limit.empty() ? "" : ", limit " + o.limit) + ".");
  return json{{"sub_questions", subs},
              {"required_tables", o.tables},
              {"join_paths", o.joins},
              {"filters", o.filters},
              {"group_by", o.group_by},
              {"measures", o.measures},
              {"output_columns", o.select_items},
              {"distinct", o.distinct},
              {"business_rules", evidence.empty() ? json::array() : json::array({evidence})}};
}

json plan_of(const std::string& gold) {
  SqlOutline o = outline_of(gold);
  json steps = json::array();
  steps.push_back("Read table(s) " + list_text(o.tables) + ".");
  for (const auto& j : o.joins) steps.push_back("Join on " + j + ".");
  for (const auto& f : o.filters) steps.push_back("Keep rows where " + f + ".");
  if (!o.group_by.empty()) steps.push_back("Group by " + list_text(o.group_by) + ".");
  if (!o.having.empty()) steps.push_back("Keep groups where " + o.having + ".");
  if (!o.order_by.empty()) steps.push_back("Order by " + o.order_by + (o.limit.empty() ? "" : ", limit " + o.limit) + ".");
  steps.push_back(std::string("Return ") + (o.distinct ? "distinct " : "") + list_text(o.select_items) + ".");
  return json{{"steps", steps}, {"expected_columns", o.select_items}};
}

}  // namespace nl2sql::sim::detail
