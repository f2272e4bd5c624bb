// Answers about a dataset's questions, as the fake servers of the whole-pipeline tests and
// benchmarks give them (scripts/bench/fake_llm_server_tool --gold, tests/pipeline/estimate_test):
// the server finds the question in the prompt (its "Question: …" line) and answers with the
// question's gold query or a near-gold mutation of it drawn from the request's hash, and with a
// JSON list of the gold query's literals and identifiers (keywords the value index really looks
// up; column names the column filter keeps). A fix request ("The query that was tried:") gets
// gold or its relaid copy, so fixing converges as with a capable model. Pure functions.
#pragma once

#include <cctype>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <set>
#include <string>
#include <unordered_map>

#include <nlohmann/json.hpp>

#include "nl2sql/core/hash.h"

namespace nl2sql::llm::testing {

inline std::string trim(std::string s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
  size_t b = 0;
  while (b < s.size() && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  return s.substr(b);
}

// Question text → gold SQL, from dataset question files.
using GoldMap = std::unordered_map<std::string, std::string>;

// Adds a question file's pairs to `out`; false (and `out` unchanged) when the file cannot be read
// or is not a JSON array.
inline bool load_gold(const std::string& file, GoldMap& out) {
  std::ifstream in(file);
  if (!in) return false;
  auto j = nlohmann::json::parse(in, nullptr, false);
  if (!j.is_array()) return false;
  for (const auto& q : j) {
    if (!q.is_object() || !q.contains("question")) continue;
    const char* key = q.contains("SQL") ? "SQL" : "query";
    if (!q.contains(key) || !q[key].is_string() || !q["question"].is_string()) continue;
    out.emplace(trim(q["question"].get<std::string>()), q[key].get<std::string>());
  }
  return true;
}

// The known question a prompt is about: its "Question: …" line (or the online-synthetic
// generator's "New question: …"); nullptr when it names none.
inline const std::string* find_gold(const GoldMap& gold, const std::string& prompt) {
  static const char* kMarkers[] = {"New question: ", "Question (restated): ", "Question: "};
  for (const char* marker : kMarkers) {
    for (size_t at = prompt.find(marker); at != std::string::npos; at = prompt.find(marker, at + 1)) {
      const size_t start = at + std::strlen(marker);
      const size_t end = prompt.find('\n', start);
      auto it = gold.find(trim(prompt.substr(start, end == std::string::npos ? std::string::npos : end - start)));
      if (it != gold.end()) return &it->second;
    }
  }
  return nullptr;
}

// The same query with its blanks laid out differently (outside literals).
inline std::string relaid(const std::string& sql) {
  std::string out;
  char quote = 0;
  for (char ch : sql) {
    if (quote) {
      out.push_back(ch);
      if (ch == quote) quote = 0;
      continue;
    }
    if (ch == '\'' || ch == '"' || ch == '`') quote = ch;
    if (ch == ' ') out += "  ";
    else out.push_back(ch);
  }
  return "  " + out + "\n";
}

inline std::string upper(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

inline std::string toggled_distinct(const std::string& sql) {
  const std::string u = upper(sql);
  if (auto at = u.find("SELECT DISTINCT "); at != std::string::npos) return sql.substr(0, at + 7) + sql.substr(at + 16);
  if (auto at = u.find("SELECT "); at != std::string::npos) return sql.substr(0, at + 7) + "DISTINCT " + sql.substr(at + 7);
  return sql;
}

// The first string literal changed so that it matches nothing (usually: no rows); gold when the
// query has none.
inline std::string changed_literal(const std::string& sql) {
  const size_t open = sql.find('\'');
  if (open == std::string::npos) return sql;
  const size_t close = sql.find('\'', open + 1);
  if (close == std::string::npos) return sql;
  return sql.substr(0, close) + " (unlisted)" + sql.substr(close);
}

inline std::string unknown_column(const std::string& sql) {
  const std::string u = upper(sql);
  const size_t at = u.find("SELECT ");
  if (at == std::string::npos) return sql;
  size_t after = at + 7;
  if (u.compare(after, 9, "DISTINCT ") == 0) after += 9;
  return sql.substr(0, after) + "no_such_column, " + sql.substr(after);
}

// String literals and identifiers of the gold query: the keywords and column names a model
// reading the question would name.
inline nlohmann::json gold_terms(const std::string& sql) {
  static const std::set<std::string> kSqlWords = {
      "SELECT", "FROM", "WHERE", "AND", "OR", "NOT", "AS", "ON", "JOIN", "INNER", "LEFT", "OUTER",
      "GROUP", "BY", "ORDER", "HAVING", "LIMIT", "DESC", "ASC", "DISTINCT", "COUNT", "SUM", "AVG",
      "MIN", "MAX", "IN", "LIKE", "BETWEEN", "IS", "NULL", "CASE", "WHEN", "THEN", "ELSE", "END",
      "CAST", "REAL", "INTEGER", "UNION", "EXCEPT", "INTERSECT", "IIF", "OFFSET", "EXISTS", "T1",
      "T2", "T3", "T4"};
  nlohmann::json out = nlohmann::json::array();
  std::set<std::string> seen;
  auto add = [&](const std::string& t) {
    if (!t.empty() && seen.insert(t).second) out.push_back(t);
  };
  for (size_t i = 0; i < sql.size();) {
    const char ch = sql[i];
    if (ch == '\'' || ch == '"' || ch == '`') {
      const size_t close = sql.find(ch, i + 1);
      if (close == std::string::npos) break;
      add(sql.substr(i + 1, close - i - 1));
      i = close + 1;
    } else if (std::isalpha(static_cast<unsigned char>(ch)) || ch == '_') {
      size_t j = i;
      while (j < sql.size() && (std::isalnum(static_cast<unsigned char>(sql[j])) || sql[j] == '_')) ++j;
      const std::string word = sql.substr(i, j - i);
      if (!kSqlWords.count(upper(word))) add(word);
      i = j;
    } else {
      ++i;
    }
  }
  return out;
}

// Every message's content of a Chat Completions request, joined.
inline std::string prompt_of(const std::string& body) {
  auto j = nlohmann::json::parse(body, nullptr, false);
  std::string out;
  if (!j.is_object() || !j.contains("messages") || !j["messages"].is_array()) return out;
  for (const auto& m : j["messages"])
    if (m.is_object() && m.contains("content") && m["content"].is_string()) out += m["content"].get<std::string>() + "\n";
  return out;
}

// The text a fake server answers to a Chat Completions request body: a pairwise verdict line, a
// JSON list and a final ```sql block that every stage can read. `known` is set when the prompt
// named a question of `gold`. Without one, the SQL varies over a few queries that do not read the
// data. Draws: gold 45%, gold relaid 15%, DISTINCT toggled 15%, a literal changed 15%, an unknown
// column 10%.
inline std::string gold_answer_text(const GoldMap& gold, const std::string& body, bool* known = nullptr) {
  static const char* kSql[] = {
      "SELECT 1",
      "SELECT 2",
      "SELECT count(*) FROM sqlite_master",
      "SELECT name FROM sqlite_master ORDER BY name LIMIT 1",
      "SELECT no_such_column FROM no_such_table",
  };
  const uint64_t h = core::xxh64(body);
  std::string sql = kSql[h % 5];
  std::string terms = "[\"name\", \"count\"]";
  if (known) *known = false;
  if (!gold.empty()) {
    const std::string prompt = prompt_of(body);
    if (const std::string* g = find_gold(gold, prompt)) {
      if (known) *known = true;
      terms = gold_terms(*g).dump();
      const bool fix = prompt.find("The query that was tried:") != std::string::npos;
      const uint64_t draw = (h >> 16) % 100;
      if (fix) sql = draw < 70 ? *g : relaid(*g);
      else if (draw < 45) sql = *g;
      else if (draw < 60) sql = relaid(*g);
      else if (draw < 75) sql = toggled_distinct(*g);
      else if (draw < 90) sql = changed_literal(*g);
      else sql = unknown_column(*g);
    }
  }
  return std::string("Reasoning: compared the two candidates.\nAnswer: ") + ((h >> 8) % 2 ? "A" : "B") +
         "\n```json\n" + terms + "\n```\n```sql\n" + sql + "\n```";
}

}  // namespace nl2sql::llm::testing
