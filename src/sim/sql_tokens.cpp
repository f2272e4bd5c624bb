// The simulator's SQL tokenizer (see sql_tokens.h).
#include "sql_tokens.h"

#include <cctype>

#include "nl2sql/core/text.h"

namespace nl2sql::sim::detail {

using core::upper;

std::vector<Token> tokenize(const std::string& sql) {
  std::vector<Token> out;
  int depth = 0;
  size_t i = 0;
  const size_t n = sql.size();
  while (i < n) {
    char c = sql[i];
    size_t start = i;
    Tok kind;
    if (std::isspace(static_cast<unsigned char>(c))) {
      while (i < n && std::isspace(static_cast<unsigned char>(sql[i]))) ++i;
      kind = Tok::kSpace;
    } else if (c == '\'' || c == '"' || c == '`' || c == '[') {
      char close = c == '[' ? ']' : c;
      ++i;
      while (i < n) {
        if (sql[i] == close) {
          if (close != ']' && i + 1 < n && sql[i + 1] == close) { i += 2; continue; }
          ++i;
          break;
        }
        ++i;
      }
      kind = c == '\'' ? Tok::kString : Tok::kQuotedIdent;
    } else if (std::isdigit(static_cast<unsigned char>(c))) {
      while (i < n && (std::isalnum(static_cast<unsigned char>(sql[i])) || sql[i] == '.')) ++i;
      kind = Tok::kNumber;
    } else if (std::isalpha(static_cast<unsigned char>(c)) || c == '_' || static_cast<unsigned char>(c) >= 0x80) {
      while (i < n && (std::isalnum(static_cast<unsigned char>(sql[i])) || sql[i] == '_' ||
                       static_cast<unsigned char>(sql[i]) >= 0x80))
        ++i;
      kind = Tok::kWord;
    } else {
      ++i;
      kind = Tok::kPunct;
    }
    Token t{kind, sql.substr(start, i - start), depth};
    if (kind == Tok::kPunct && t.text == "(") ++depth;
    if (kind == Tok::kPunct && t.text == ")") { depth = std::max(0, depth - 1); t.depth = depth; }
    out.push_back(std::move(t));
  }
  return out;
}

std::string join(const std::vector<Token>& toks) {
  std::string s;
  for (const auto& t : toks) s += t.text;
  return s;
}

bool is_kw(const Token& t, const char* kw) { return t.kind == Tok::kWord && upper(t.text) == kw; }

const std::set<std::string>& keywords() {
  static const std::set<std::string> k = {
      "SELECT", "FROM", "WHERE", "AND", "OR", "NOT", "IN", "IS", "NULL", "AS", "ON", "JOIN",
      "INNER", "LEFT", "RIGHT", "OUTER", "CROSS", "NATURAL", "GROUP", "BY", "ORDER", "HAVING",
      "LIMIT", "OFFSET", "DISTINCT", "CASE", "WHEN", "THEN", "ELSE", "END", "LIKE", "BETWEEN",
      "EXISTS", "UNION", "ALL", "INTERSECT", "EXCEPT", "ASC", "DESC", "CAST", "REAL", "INTEGER",
      "TEXT", "WITH", "GLOB", "ESCAPE", "TRUE", "FALSE", "USING", "OVER", "PARTITION"};
  return k;
}

size_t next_nonspace(const std::vector<Token>& t, size_t i) {
  ++i;
  while (i < t.size() && t[i].kind == Tok::kSpace) ++i;
  return i;
}
size_t prev_nonspace(const std::vector<Token>& t, size_t i) {
  // returns t.size() when none
  while (i > 0) {
    --i;
    if (t[i].kind != Tok::kSpace) return i;
  }
  return t.size();
}

// Column references: names after "alias." and bare names that are not keywords, functions,
// tables, aliases or qualifiers.
std::vector<ColumnRef> column_refs(const std::vector<Token>& t) {
  std::vector<ColumnRef> refs;
  for (size_t i = 0; i < t.size(); ++i) {
    if (t[i].kind != Tok::kWord && t[i].kind != Tok::kQuotedIdent) continue;
    if (t[i].kind == Tok::kWord && keywords().count(upper(t[i].text))) continue;
    size_t nx = next_nonspace(t, i);
    if (nx < t.size() && t[nx].kind == Tok::kPunct && (t[nx].text == "." || t[nx].text == "("))
      continue;  // qualifier or function
    size_t pv = prev_nonspace(t, i);
    if (pv < t.size() && t[pv].kind == Tok::kPunct && t[pv].text == ".") {
      size_t q = pv > 0 ? pv - 1 : t.size();
      refs.push_back({i, (q < t.size() ? t[q].text + "." : "") + t[i].text});
      continue;
    }
    if (pv < t.size()) {
      if (is_kw(t[pv], "FROM") || is_kw(t[pv], "JOIN") || is_kw(t[pv], "AS")) continue;
      // alias after a table name: FROM tbl alias
      if (t[pv].kind == Tok::kWord || t[pv].kind == Tok::kQuotedIdent) {
        if (!keywords().count(upper(t[pv].text))) continue;
      }
      if (t[pv].kind == Tok::kPunct && t[pv].text == ")") continue;  // subquery alias
    }
    refs.push_back({i, t[i].text});
  }
  return refs;
}

size_t find_kw(const std::vector<Token>& t, const char* kw, size_t from) {
  for (size_t i = from; i < t.size(); ++i)
    if (is_kw(t[i], kw)) return i;
  return t.size();
}

}  // namespace nl2sql::sim::detail
