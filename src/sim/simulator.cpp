// The offline `sim` provider: gold-derived answers with a controlled error rate.
#include "nl2sql/sim/simulator.h"

#include <algorithm>
#include <cctype>
#include <set>

#include <nlohmann/json.hpp>

#include "nl2sql/core/hash.h"
#include "nl2sql/db/result_compare.h"
#include "nl2sql/core/text.h"

namespace nl2sql::sim {
namespace {

using json = nlohmann::json;
using llm::CallTask;
using llm::ChatResponse;
using llm::SimSettings;

// What the simulator knows when it answers: the stage's tag plus what it looked up from gold.
struct Facts {
  CallTask task = CallTask::kNone;
  std::string question_id, question, evidence, db_id, generator;
  int64_t sample_index = 0;
  std::string gold_sql, difficulty;
  std::string failing_sql, failure;
  std::vector<std::string> candidates;
  std::vector<bool> candidate_matches_gold;
  std::string gold_answer;
  std::string column;
  std::string current_plan, current_sql;
  bool current_matches_gold = false, current_result_empty = false;
};

// ---- a small SQL tokenizer: enough structure for robust text mutations ----

enum class Tok { kWord, kQuotedIdent, kString, kNumber, kPunct, kSpace };

struct Token {
  Tok kind;
  std::string text;
  int depth = 0;  // parenthesis depth at the token
};

using core::upper;
using core::lower;

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

struct ColumnRef {
  size_t token;           // index of the column-name token
  std::string qualified;  // "T1.name" or "name"
};

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

size_t find_kw(const std::vector<Token>& t, const char* kw, size_t from = 0) {
  for (size_t i = from; i < t.size(); ++i)
    if (is_kw(t[i], kw)) return i;
  return t.size();
}

// ---- the mistakes ----

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

uint64_t seed_from(std::initializer_list<std::string> parts, int64_t seed, int64_t index) {
  core::KeyHasher h;
  h.add("nl2sql.sim.v1").add(seed).add(index);
  for (const auto& p : parts) h.add(p);
  return h.seed();
}

std::string fenced(const std::string& lang, const std::string& body) {
  return "```" + lang + "\n" + body + "\n```";
}

std::string short_question(const std::string& q) {
  std::string s = q.size() > 160 ? q.substr(0, 160) + "…" : q;
  std::replace(s.begin(), s.end(), '\n', ' ');
  return s;
}

std::string perturb_answer(const std::string& answer, SimRng& rng) {
  // Change the last number, else drop the last row, else claim there is nothing.
  for (size_t i = answer.size(); i-- > 0;) {
    if (std::isdigit(static_cast<unsigned char>(answer[i]))) {
      std::string s = answer;
      s[i] = static_cast<char>('0' + ((s[i] - '0') + 1 + static_cast<int>(rng.below(8))) % 10);
      if (s != answer) return s;
    }
  }
  auto nl = answer.rfind('\n');
  if (nl != std::string::npos && nl > 0) return answer.substr(0, nl);
  return "(no rows)";
}

const std::set<std::string>& stopwords() {
  static const std::set<std::string> s = {
      "a", "an", "the", "of", "in", "on", "for", "to", "and", "or", "is", "are", "was", "were",
      "be", "by", "with", "what", "which", "who", "whom", "how", "many", "much", "list", "give",
      "show", "name", "find", "all", "that", "this", "these", "those", "it", "its", "their",
      "there", "as", "at", "from", "do", "does", "did", "has", "have", "had", "please", "among",
      "each", "per", "than", "between", "into", "me", "i", "refers", "refer", "if", "not",
      "among", "whose", "when", "where", "why", "state", "indicate", "provide", "tell"};
  return s;
}

std::vector<std::string> keywords_of(const std::string& text) {
  std::vector<std::string> out;
  auto add = [&](const std::string& k) {
    if (!k.empty() && std::find(out.begin(), out.end(), k) == out.end()) out.push_back(k);
  };
  // Quoted values first: they are the most useful for value retrieval.
  for (size_t i = 0; i < text.size(); ++i) {
    char q = text[i];
    if (q != '\'' && q != '"') continue;
    if (q == '\'' && i > 0 && std::isalpha(static_cast<unsigned char>(text[i - 1]))) continue;  // it's
    size_t close = text.find(q, i + 1);
    if (close == std::string::npos) break;
    add(text.substr(i + 1, close - i - 1));
    i = close;
  }
  // Words, then bigrams and trigrams of consecutive content words.
  std::vector<std::vector<std::string>> runs(1);
  std::string word;
  auto flush = [&](bool boundary) {
    if (!word.empty()) {
      if (stopwords().count(lower(word))) {
        if (!runs.back().empty()) runs.emplace_back();
      } else {
        runs.back().push_back(word);
      }
      word.clear();
    }
    if (boundary && !runs.back().empty()) runs.emplace_back();
  };
  for (char c : text) {
    if (std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '%' ||
        static_cast<unsigned char>(c) >= 0x80)
      word += c;
    else
      flush(c == ',' || c == '.' || c == '?' || c == ';' || c == ':' || c == '\'' || c == '"' ||
            c == '(' || c == ')' || c == '=');
  }
  flush(true);
  for (const auto& run : runs) {
    for (size_t n = 3; n >= 1; --n)
      for (size_t i = 0; i + n <= run.size(); ++i) {
        std::string g = run[i];
        for (size_t k = 1; k < n; ++k) g += " " + run[i + k];
        add(g);
      }
  }
  if (out.size() > 24) out.resize(24);
  return out;
}



// ---- outlines of a query: what plans, fact sheets and critics are derived from ----

// The outer query's clauses, split at its own parenthesis depth (subqueries stay inside the
// clause text). Tables are collected at every depth.
struct SqlOutline {
  std::vector<std::string> tables, joins, filters, select_items, group_by, measures;
  std::string having, order_by, limit;
  bool distinct = false;
};

std::string squash(const std::string& s) { return core::squash_spaces(s); }

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
      if (!squash(cur).empty()) parts.push_back(squash(cur));
      cur.clear();
      continue;
    }
    cur += t[i].text;
  }
  if (!squash(cur).empty()) parts.push_back(squash(cur));
  return parts;
}

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
        if (!squash(cond).empty()) o.joins.push_back(squash(cond));
        i = j - 1;
      }
    } else if (sp.name == "WHERE") {
      o.filters = split_at(t, sp.from, sp.to, d, "AND");
    } else if (sp.name == "GROUP") {
      o.group_by = split_at(t, sp.from, sp.to, d, ",");
    } else if (sp.name == "HAVING") {
      o.having = squash(text);
    } else if (sp.name == "ORDER") {
      o.order_by = squash(text);
    } else if (sp.name == "LIMIT") {
      o.limit = squash(text);
    }
  }
  return o;
}

// Case-folded outside string literals: 'Alameda' and 'alameda' are different conditions.
std::string key_of(const std::string& s) {
  std::string out = squash(s);
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

std::string list_text(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
  return s.empty() ? "(none)" : s;
}

// The first real difference of `current` against `gold`, as a reviewer would name it; "" when
// the outlines agree (the difference, if any, is then in literals or subqueries).
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

namespace {

Result<ChatResponse> answer_from(const SimSettings& settings_, const Facts& c, int n_choices) {
  const std::string who = "sim provider, question " + (c.question_id.empty() ? "?" : c.question_id) +
                          ", task " + llm::call_task_name(c.task);
  const int n = std::max(1, n_choices);
  ChatResponse r;
  r.provider = "sim";
  for (int choice = 0; choice < n; ++choice) {
    const int64_t index = c.sample_index * n + choice;
    SimRng rng(seed_from({llm::call_task_name(c.task), c.question_id, c.generator}, settings_.seed, index));
    std::string text;
    switch (c.task) {
      case CallTask::kNone:
        return invalid_input(who + ": the request carries no task (set request.tag)");
      case CallTask::kGenerate: {
        if (c.gold_sql.empty()) return invalid_input(who + ": no gold for this question (Simulator::add)");
        double p = settings_.p_correct_for(c.generator, c.difficulty);
        std::string sql = c.gold_sql;
        if (rng.uniform() >= p) sql = mutate_sql(c.gold_sql, rng).first;
        if (c.generator.rfind("os_examples", 0) == 0) {
          // The online-synthetic example writers answer in the "Question:/SQL:" form their
          // prompts ask for: simple queries over the tables gold reads (never gold itself, which
          // would hand the generator its answer as a demonstration).
          const bool filtered = c.generator == "os_examples_filtered";
          for (const auto& t : outline_of(c.gold_sql).tables)
            text += filtered ? "Question: Show five rows of the " + t + " table.\nSQL: SELECT * FROM " + t + " LIMIT 5\n\n"
                             : "Question: How many rows does the " + t + " table hold?\nSQL: SELECT COUNT(*) FROM " + t + "\n\n";
          if (text.empty()) text = "Question: What is one plus one?\nSQL: SELECT 1 + 1\n";
          break;
        }
        text = "The question asks: " + short_question(c.question) +
               "\nI identify the tables and columns it refers to, apply the conditions it states, "
               "and write one SQLite query.\n\n" + fenced("sql", sql) + "\n";
        break;
      }
      case CallTask::kFix: {
        if (c.gold_sql.empty() || c.failing_sql.empty())
          return invalid_input(who + ": needs gold (Simulator::add) and failing_sql");
        bool fixed = rng.uniform() < settings_.p_fix;
        text = "The query failed (" + (c.failure.empty() ? std::string("error") : c.failure) +
               "). " + (fixed ? "I corrected it." : "I checked it again and kept it.") + "\n\n" +
               fenced("sql", fixed ? c.gold_sql : c.failing_sql) + "\n";
        break;
      }
      case CallTask::kSelectPair: {
        if (c.candidates.size() != 2 || c.candidate_matches_gold.size() != 2)
          return invalid_input(who + ": needs 2 candidates and 2 candidate_matches_gold flags");
        int pick;
        bool a = c.candidate_matches_gold[0], b = c.candidate_matches_gold[1];
        if (a != b) {
          int correct = a ? 0 : 1;
          pick = rng.uniform() < settings_.p_sel ? correct : 1 - correct;
        } else {
          pick = rng.uniform() < 0.5 ? 0 : 1;
        }
        text = "Comparing both queries against the question, candidate " +
               std::string(pick == 0 ? "A" : "B") + " answers it better.\n\n" +
               fenced("json", json{{"winner", pick == 0 ? "A" : "B"}}.dump()) + "\n";
        break;
      }
      case CallTask::kRank: {
        const size_t k = c.candidates.size();
        if (k == 0 || c.candidate_matches_gold.size() != k)
          return invalid_input(who + ": needs candidates and one candidate_matches_gold flag each");
        std::vector<size_t> good, bad;
        for (size_t i = 0; i < k; ++i) (c.candidate_matches_gold[i] ? good : bad).push_back(i);
        std::vector<size_t> order;
        bool right = rng.uniform() < settings_.p_sel;
        const auto& first_pool = (right && !good.empty()) || bad.empty() ? good : bad;
        size_t first = first_pool[rng.below(first_pool.size())];
        order.push_back(first);
        std::vector<size_t> rest;
        for (size_t i = 0; i < k; ++i)
          if (i != first) rest.push_back(i);
        for (size_t i = rest.size(); i > 1; --i) std::swap(rest[i - 1], rest[rng.below(i)]);
        order.insert(order.end(), rest.begin(), rest.end());
        text = "I compared the candidates' logic with the question and ranked them.\n\n" +
               fenced("json", json{{"ranking", order}}.dump()) + "\n";
        break;
      }
      case CallTask::kNlEval: {
        std::string answer = c.gold_answer.empty() ? "(no rows)" : c.gold_answer;
        if (rng.uniform() < settings_.p_hallucinate) answer = perturb_answer(answer, rng);
        text = "Reading the instance data, the answer is:\n\n" + fenced("text", answer) + "\n";
        break;
      }
      case CallTask::kKeywords: {
        auto kws = keywords_of(c.question + (c.evidence.empty() ? "" : " ; " + c.evidence));
        text = json{{"keywords", kws}}.dump();  // bare JSON, as prompts/extract_keywords.txt asks
        break;
      }
      case CallTask::kColumnFilter: {
        if (c.column.empty()) return invalid_input(who + ": needs column");
        bool truth = core::mentions_identifier(c.gold_sql, c.column);
        bool said = rng.uniform() < settings_.p_sel ? truth : !truth;
        text = fenced("json", json{{"relevant", said}}.dump()) + "\n";
        break;
      }
      case CallTask::kLedger: {
        if (c.gold_sql.empty()) return invalid_input(who + ": no gold for this question (Simulator::add)");
        text = "I read the schema, the evidence and the rules, and compiled the fact sheet.\n\n" +
               fenced("json", ledger_of(c.gold_sql, c.evidence).dump(2)) + "\n";
        break;
      }
      case CallTask::kPlan: {
        if (c.gold_sql.empty()) return invalid_input(who + ": no gold for this question (Simulator::add)");
        text = "Plan for: " + short_question(c.question) + "\n\n" + fenced("json", plan_of(c.gold_sql).dump(2)) + "\n";
        break;
      }
      case CallTask::kPlanCritique: {
        if (c.gold_sql.empty()) return invalid_input(who + ": no gold for this question (Simulator::add)");
        json issues = json::array();
        for (const auto& tb : outline_of(c.gold_sql).tables)
          if (!core::mentions_identifier(c.current_plan, tb)) issues.push_back("The plan never reads table " + tb + ".");
        text = std::string(issues.empty() ? "The plan covers what the question asks." : "The plan has gaps.") +
               "\n\n" + fenced("json", json{{"approved", issues.empty()}, {"issues", issues}}.dump()) + "\n";
        break;
      }
      case CallTask::kSqlCritique: {
        if (c.gold_sql.empty() || c.current_sql.empty())
          return invalid_input(who + ": needs gold (Simulator::add) and current_sql");
        // A critic right w.p. p_sel: it approves a correct query and names a real defect of a
        // wrong one; otherwise it errs the other way.
        bool right = rng.uniform() < settings_.p_sel;
        bool approve = c.current_matches_gold == right;
        json issues = json::array();
        if (!approve) {
          std::string d = c.current_matches_gold ? "" : describe_defect(c.current_sql, c.gold_sql);
          if (d.empty()) d = c.current_matches_gold ? "The query may not filter exactly what the question asks."
                                                    : "The literal values or a subquery do not match the question.";
          issues.push_back(d);
        }
        text = std::string(approve ? "The query answers the question." : "The query needs changes.") + "\n\n" +
               fenced("json", json{{"approved", approve}, {"issues", issues}}.dump()) + "\n";
        break;
      }
      case CallTask::kValidate: {
        if (c.gold_sql.empty() || c.current_sql.empty())
          return invalid_input(who + ": needs gold (Simulator::add) and current_sql");
        json extra = json::array();
        SqlOutline cur = outline_of(c.current_sql), g = outline_of(c.gold_sql);
        if (cur.select_items.size() > g.select_items.size())
          for (const auto& item : cur.select_items)
            if (!contains_key(g.select_items, item)) extra.push_back(item);
        std::string fix;
        if (!c.current_matches_gold) {
          fix = describe_defect(c.current_sql, c.gold_sql);
          if (fix.empty()) fix = "Check the literal values against the stored values and the subqueries.";
        }
        text = std::string(c.current_matches_gold ? "The result answers the question." : "The result does not answer the question.") +
               "\n\n" +
               fenced("json", json{{"valid_result", c.current_matches_gold},
                                   {"columns_not_needed", c.current_matches_gold ? json::array() : extra},
                                   {"result_empty", c.current_result_empty},
                                   {"suggest_fix", fix}}
                                  .dump()) +
               "\n";
        break;
      }
    }
    r.choices.push_back(std::move(text));
    r.finish_reasons.push_back("stop");
  }
  return r;
}

}  // namespace

Simulator::Simulator(SimSettings settings)
    : settings_(std::move(settings)), executor_(std::make_unique<db::Executor>()) {}

Simulator::~Simulator() = default;

void Simulator::add(const data::Question& q, const std::filesystem::path& db_path) {
  gold_[q.question_id] = Gold{q.gold_sql, q.difficulty, db_path};
}

void Simulator::add_all(const data::Dataset& ds) {
  for (const auto& q : ds.questions) {
    auto it = ds.db_paths.find(q.db_id);
    add(q, it == ds.db_paths.end() ? std::filesystem::path() : it->second);
  }
}

void Simulator::set_judge(std::function<bool(const std::string&, const std::string&)> judge) {
  judge_ = std::move(judge);
}

const Simulator::Gold* Simulator::gold_of(const std::string& question_id) const {
  auto it = gold_.find(question_id);
  return it == gold_.end() || it->second.gold_sql.empty() ? nullptr : &it->second;
}

bool Simulator::executes_like_gold(const std::string& question_id, const std::string& sql) const {
  const Gold* g = gold_of(question_id);
  if (g == nullptr || g->db_path.empty() || sql.empty()) return false;
  auto pred = executor_->run(g->db_path, sql);
  if (!pred.ok()) return false;
  std::optional<db::ExecutionResult> gold;
  {
    std::lock_guard lock(mu_);
    if (auto it = gold_results_.find(question_id); it != gold_results_.end()) gold = it->second;
  }
  if (!gold) {
    gold = executor_->run(g->db_path, g->gold_sql);
    std::lock_guard lock(mu_);
    gold_results_.emplace(question_id, *gold);
  }
  return gold->ok() && db::bird_equal(pred.result, gold->result);
}

bool Simulator::judged_correct(const std::string& question_id, const std::string& sql) const {
  if (judge_) return !sql.empty() && judge_(question_id, sql);
  return executes_like_gold(question_id, sql);
}

Result<ChatResponse> Simulator::answer(const llm::ChatRequest& request) const {
  const llm::CallTag& t = request.tag;
  Facts f;
  f.task = t.task;
  f.question_id = t.question_id;
  f.question = t.question;
  f.evidence = t.evidence;
  f.db_id = t.db_id;
  f.generator = t.generator;
  f.sample_index = t.sample_index;
  f.failing_sql = t.failing_sql;
  f.failure = t.failure;
  f.candidates = t.candidates;
  f.column = t.column;
  f.current_plan = t.current_plan;
  f.current_sql = t.current_sql;
  f.current_result_empty = t.current_result_empty;
  if (const Gold* g = gold_of(t.question_id)) {
    f.gold_sql = g->gold_sql;
    f.difficulty = g->difficulty;
    switch (t.task) {
      case CallTask::kSelectPair:
      case CallTask::kRank:
        for (const auto& c : t.candidates) f.candidate_matches_gold.push_back(judged_correct(t.question_id, c));
        break;
      case CallTask::kNlEval:
        if (t.answer_on_instance) {
          auto a = t.answer_on_instance(g->gold_sql);
          if (a.is_ok()) f.gold_answer = *a;
        }
        break;
      case CallTask::kSqlCritique:
      case CallTask::kValidate:
        f.current_matches_gold = executes_like_gold(t.question_id, t.current_sql);
        break;
      default:
        break;
    }
  }
  return answer_from(settings_, f, request.n);
}

std::shared_ptr<Simulator> attach(llm::ClientOptions& options, const SimSettings& settings,
                                  const data::Dataset* dataset) {
  auto sim = std::make_shared<Simulator>(settings);
  if (dataset) sim->add_all(*dataset);
  options.simulator = sim;
  return sim;
}

Result<std::shared_ptr<Simulator>> attach_if_simulated(llm::ClientOptions& options, const core::Config& config,
                                                       const data::Dataset* dataset) {
  auto settings = llm::load_llm_settings(config);
  if (!settings) return settings.status();
  for (const auto& [name, profile] : settings->profiles)
    if (profile.provider == "sim") return attach(options, settings->sim, dataset);
  return std::shared_ptr<Simulator>();
}

Result<std::unique_ptr<llm::Client>> make_client(const core::Config& config, const data::Dataset* dataset,
                                                 llm::ClientOptions options) {
  auto simulator = attach_if_simulated(options, config, dataset);
  if (!simulator) return simulator.status();
  return llm::Client::from_config(config, options);
}

}  // namespace nl2sql::sim
