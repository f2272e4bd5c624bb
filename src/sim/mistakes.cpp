// The simulator's mistake taxonomy: text mutations of gold SQL (wrong column, dropped
// condition, literal case, DISTINCT, extra column, wrong aggregate, wrong join key, syntax
// error), each returning nothing when it does not apply.
#include <algorithm>
#include <cctype>

#include "nl2sql/core/text.h"
#include "nl2sql/sim/simulator.h"
#include "sql_tokens.h"

namespace nl2sql::sim {
namespace {

using detail::column_refs;
using detail::find_kw;
using detail::is_kw;
using detail::join;
using detail::keywords;
using detail::next_nonspace;
using detail::prev_nonspace;
using detail::Tok;
using detail::tokenize;
using detail::Token;
using core::lower;
using core::upper;

std::optional<std::string> wrong_column(std::vector<Token> t, SimRng& rng) {
  auto refs = column_refs(t);
  std::vector<std::string> names;
  for (const auto& r : refs)
    if (std::find(names.begin(), names.end(), t[r.token].text) == names.end())
      names.push_back(t[r.token].text);
  if (names.size() < 2) return std::nullopt;
  const auto& victim = refs[rng.below(refs.size())];
  std::vector<std::string> others;
  for (const auto& n : names)
    if (n != t[victim.token].text) others.push_back(n);
  t[victim.token].text = others[rng.below(others.size())];
  return join(t);
}

bool is_clause_end(const Token& tok) {
  for (const char* kw : {"GROUP", "ORDER", "LIMIT", "HAVING", "UNION", "INTERSECT", "EXCEPT"})
    if (is_kw(tok, kw)) return true;
  return false;
}

std::optional<std::string> dropped_condition(std::vector<Token> t, SimRng& rng) {
  size_t w = find_kw(t, "WHERE");
  if (w == t.size()) return std::nullopt;
  const int d = t[w].depth;
  size_t end = t.size();
  for (size_t i = w + 1; i < t.size(); ++i) {
    if (t[i].depth < d || (t[i].depth == d && t[i].kind == Tok::kPunct && t[i].text == ")") ||
        (t[i].depth == d && (is_clause_end(t[i]) || (t[i].kind == Tok::kPunct && t[i].text == ";")))) {
      end = i;
      break;
    }
  }
  // Split at top-level AND (not the AND of BETWEEN … AND …).
  std::vector<size_t> ands;
  bool pending_between = false;
  for (size_t i = w + 1; i < end; ++i) {
    if (t[i].depth != d) continue;
    if (is_kw(t[i], "BETWEEN")) pending_between = true;
    if (is_kw(t[i], "OR")) return std::nullopt;  // dropping half of an OR is not a "condition"
    if (is_kw(t[i], "AND")) {
      if (pending_between) pending_between = false;
      else ands.push_back(i);
    }
  }
  if (ands.empty()) {
    // The only condition: drop the whole WHERE clause (keep one space before what follows).
    t.erase(t.begin() + static_cast<long>(w), t.begin() + static_cast<long>(end));
    std::string s = join(t);
    // tidy double spaces left behind
    for (size_t p; (p = s.find("  ")) != std::string::npos;) s.erase(p, 1);
    while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
    return s;
  }
  // Conjunct k spans (bounds[k], bounds[k+1]); remove it with one adjacent AND.
  size_t k = rng.below(ands.size() + 1);
  size_t from, to;  // token range [from, to) to erase
  if (k == 0) {
    from = w + 1;
    to = ands[0] + 1;
  } else {
    from = ands[k - 1];
    to = k < ands.size() ? ands[k] : end;
  }
  t.erase(t.begin() + static_cast<long>(from), t.begin() + static_cast<long>(to));
  if (k == 0) t.insert(t.begin() + static_cast<long>(w) + 1, Token{Tok::kSpace, " ", d});
  std::string s = join(t);
  for (size_t p; (p = s.find("  ")) != std::string::npos;) s.erase(p, 1);
  return s;
}

std::optional<std::string> literal_case(std::vector<Token> t, SimRng& rng) {
  std::vector<size_t> lits;
  for (size_t i = 0; i < t.size(); ++i)
    if (t[i].kind == Tok::kString &&
        std::any_of(t[i].text.begin(), t[i].text.end(), [](unsigned char c) { return std::isalpha(c); }))
      lits.push_back(i);
  if (lits.empty()) return std::nullopt;
  auto& tok = t[lits[rng.below(lits.size())]];
  bool has_upper = std::any_of(tok.text.begin(), tok.text.end(), [](unsigned char c) { return std::isupper(c); });
  std::string changed = has_upper ? lower(tok.text) : upper(tok.text);
  if (changed == tok.text) return std::nullopt;
  tok.text = changed;
  return join(t);
}

std::optional<std::string> distinct_toggle(std::vector<Token> t, SimRng&) {
  size_t s = find_kw(t, "SELECT");
  if (s == t.size()) return std::nullopt;
  size_t nx = next_nonspace(t, s);
  if (nx < t.size() && is_kw(t[nx], "DISTINCT")) {
    size_t after = next_nonspace(t, nx);
    t.erase(t.begin() + static_cast<long>(s) + 1, t.begin() + static_cast<long>(after));
    t.insert(t.begin() + static_cast<long>(s) + 1, Token{Tok::kSpace, " ", t[s].depth});
  } else {
    // DISTINCT over a lone aggregate changes nothing: not a mistake.
    static const std::set<std::string> kAggs = {"COUNT", "SUM", "AVG", "MAX", "MIN"};
    if (nx < t.size() && kAggs.count(upper(t[nx].text))) return std::nullopt;
    t.insert(t.begin() + static_cast<long>(s) + 1, Token{Tok::kWord, " DISTINCT", t[s].depth});
  }
  return join(t);
}

std::optional<std::string> extra_column(std::vector<Token> t, SimRng& rng) {
  size_t s = find_kw(t, "SELECT");
  if (s == t.size()) return std::nullopt;
  size_t from = t.size();
  for (size_t i = s + 1; i < t.size(); ++i)
    if (t[i].depth == t[s].depth && is_kw(t[i], "FROM")) { from = i; break; }
  if (from == t.size()) return std::nullopt;
  auto refs = column_refs(t);
  std::string selected;
  for (size_t i = s + 1; i < from; ++i) selected += t[i].text;
  std::vector<std::string> candidates;
  for (const auto& r : refs)
    if (r.token > from && selected.find(r.qualified) == std::string::npos &&
        std::find(candidates.begin(), candidates.end(), r.qualified) == candidates.end())
      candidates.push_back(r.qualified);
  if (candidates.empty()) return std::nullopt;
  size_t last = prev_nonspace(t, from);  // end of the select list
  t.insert(t.begin() + static_cast<long>(last) + 1,
           Token{Tok::kWord, ", " + candidates[rng.below(candidates.size())], t[s].depth});
  return join(t);
}

std::optional<std::string> wrong_aggregate(std::vector<Token> t, SimRng& rng) {
  static const std::vector<std::string> kAggs = {"COUNT", "SUM", "AVG", "MAX", "MIN"};
  std::vector<size_t> sites;
  for (size_t i = 0; i < t.size(); ++i) {
    if (t[i].kind != Tok::kWord) continue;
    if (std::find(kAggs.begin(), kAggs.end(), upper(t[i].text)) == kAggs.end()) continue;
    size_t p = next_nonspace(t, i);
    if (p >= t.size() || t[p].text != "(") continue;
    size_t a = next_nonspace(t, p);
    if (a < t.size() && t[a].text == "*") continue;  // COUNT(*) has no other aggregate
    sites.push_back(i);
  }
  if (sites.empty()) return std::nullopt;
  auto& tok = t[sites[rng.below(sites.size())]];
  std::vector<std::string> others;
  for (const auto& a : kAggs)
    if (a != upper(tok.text)) others.push_back(a);
  tok.text = others[rng.below(others.size())];
  return join(t);
}

std::optional<std::string> wrong_join_key(std::vector<Token> t, SimRng& rng) {
  std::vector<size_t> ons;
  for (size_t i = 0; i < t.size(); ++i)
    if (is_kw(t[i], "ON")) ons.push_back(i);
  if (ons.empty()) return std::nullopt;
  size_t on = ons[rng.below(ons.size())];
  // Expect: q1 . c1 = q2 . c2
  size_t idx[7];
  idx[0] = next_nonspace(t, on);
  for (int k = 1; k < 7; ++k) idx[k] = idx[k - 1] < t.size() ? next_nonspace(t, idx[k - 1]) : t.size();
  for (int k = 0; k < 7; ++k)
    if (idx[k] >= t.size()) return std::nullopt;
  if (t[idx[1]].text != "." || t[idx[3]].text != "=" || t[idx[5]].text != ".") return std::nullopt;
  auto& c1 = t[idx[2]];
  auto& c2 = t[idx[6]];
  if (c1.text != c2.text) {
    std::swap(c1.text, c2.text);
    return join(t);
  }
  auto refs = column_refs(t);
  std::vector<std::string> others;
  for (const auto& r : refs)
    if (t[r.token].text != c1.text &&
        std::find(others.begin(), others.end(), t[r.token].text) == others.end())
      others.push_back(t[r.token].text);
  if (others.empty()) return std::nullopt;
  c2.text = others[rng.below(others.size())];
  return join(t);
}

std::string syntax_error(std::vector<Token> t, SimRng& rng) {
  size_t from = find_kw(t, "FROM");
  std::vector<int> options;
  if (from < t.size()) options.push_back(0);
  for (size_t i = 0; i < t.size(); ++i)
    if (t[i].text == ")") { options.push_back(1); break; }
  size_t s = find_kw(t, "SELECT");
  if (s < t.size() && from < t.size()) options.push_back(2);
  if (options.empty()) return join(t) + " WHERE";
  switch (options[rng.below(options.size())]) {
    case 0:
      t[from].text = "FORM";  // a misspelt keyword
      break;
    case 1:
      for (size_t i = t.size(); i-- > 0;)
        if (t[i].text == ")") { t.erase(t.begin() + static_cast<long>(i)); break; }  // unbalanced
      break;
    default: {
      size_t last = prev_nonspace(t, from);  // a dangling comma before FROM
      t.insert(t.begin() + static_cast<long>(last) + 1, Token{Tok::kPunct, ",", t[s].depth});
      break;
    }
  }
  return join(t);
}

}  // namespace

const char* sql_mistake_name(SqlMistake m) {
  switch (m) {
    case SqlMistake::kWrongColumn: return "wrong_column";
    case SqlMistake::kDroppedCondition: return "dropped_condition";
    case SqlMistake::kLiteralCase: return "literal_case";
    case SqlMistake::kDistinctToggle: return "distinct_toggle";
    case SqlMistake::kExtraColumn: return "extra_column";
    case SqlMistake::kWrongAggregate: return "wrong_aggregate";
    case SqlMistake::kWrongJoinKey: return "wrong_join_key";
    case SqlMistake::kSyntaxError: return "syntax_error";
  }
  return "?";
}

std::optional<std::string> apply_mistake(const std::string& sql, SqlMistake mistake, SimRng& rng) {
  auto t = tokenize(sql);
  std::optional<std::string> out;
  switch (mistake) {
    case SqlMistake::kWrongColumn: out = wrong_column(t, rng); break;
    case SqlMistake::kDroppedCondition: out = dropped_condition(t, rng); break;
    case SqlMistake::kLiteralCase: out = literal_case(t, rng); break;
    case SqlMistake::kDistinctToggle: out = distinct_toggle(t, rng); break;
    case SqlMistake::kExtraColumn: out = extra_column(t, rng); break;
    case SqlMistake::kWrongAggregate: out = wrong_aggregate(t, rng); break;
    case SqlMistake::kWrongJoinKey: out = wrong_join_key(t, rng); break;
    case SqlMistake::kSyntaxError: out = syntax_error(t, rng); break;
  }
  if (out && *out == sql) return std::nullopt;
  return out;
}

std::pair<std::string, SqlMistake> mutate_sql(const std::string& sql, SimRng& rng) {
  const uint64_t start = rng.below(kSqlMistakeCount);
  for (int k = 0; k < kSqlMistakeCount; ++k) {
    auto m = static_cast<SqlMistake>((start + static_cast<uint64_t>(k)) % kSqlMistakeCount);
    if (auto s = apply_mistake(sql, m, rng)) return {*s, m};
  }
  return {sql + " FORM", SqlMistake::kSyntaxError};  // unreachable for non-empty SQL
}

}  // namespace nl2sql::sim
