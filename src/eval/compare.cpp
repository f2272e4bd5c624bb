// Spider test-suite text preprocessing (see compare.h).
#include "nl2sql/eval/compare.h"

#include <algorithm>
#include <cctype>
#include <regex>

#include "nl2sql/core/text.h"

namespace nl2sql::eval {

std::string spider_postprocess(std::string_view sql) {
  std::string s(sql);
  for (auto [from, to] : {std::pair{"> =", ">="}, {"< =", "<="}, {"! =", "!="}}) {
    size_t pos = 0;
    while ((pos = s.find(from, pos)) != std::string::npos) {
      s.replace(pos, 3, to);
      pos += 2;
    }
  }
  return s;
}

std::string remove_distinct(std::string_view sql) {
  std::string out;
  out.reserve(sql.size());
  size_t i = 0, n = sql.size();
  auto is_word = [](unsigned char c) { return std::isalnum(c) || c == '_' || c == '$' || c >= 0x80; };
  while (i < n) {
    char c = sql[i];
    size_t start = i;
    if (c == '\'' || c == '"' || c == '`') {
      ++i;
      while (i < n) {
        if (sql[i] == c) {
          if (i + 1 < n && sql[i + 1] == c) { i += 2; continue; }
          ++i;
          break;
        }
        ++i;
      }
    } else if (c == '[') {
      while (i < n && sql[i] != ']') ++i;
      if (i < n) ++i;
    } else if (c == '-' && i + 1 < n && sql[i + 1] == '-') {
      while (i < n && sql[i] != '\n') ++i;
    } else if (c == '/' && i + 1 < n && sql[i + 1] == '*') {
      auto end = sql.find("*/", i + 2);
      i = end == std::string_view::npos ? n : end + 2;
    } else if (is_word(static_cast<unsigned char>(c))) {
      while (i < n && is_word(static_cast<unsigned char>(sql[i]))) ++i;
      std::string_view w = sql.substr(start, i - start);
      if (core::iequals(w, "distinct")) continue;
    } else {
      ++i;
    }
    out.append(sql.substr(start, i - start));
  }
  return out;
}

std::string replace_cur_year(std::string_view sql) {
  if (core::lower(sql).find("curdate") == std::string::npos) return std::string(sql);  // skip the slow regex
  static const std::regex kCurYear(R"(YEAR\s*\(\s*CURDATE\s*\(\s*\)\s*\)\s*)", std::regex::icase);
  return std::regex_replace(std::string(sql), kCurYear, "2020");
}

bool spider_order_matters(std::string_view gold_sql) {
  return core::lower(gold_sql).find("order by") != std::string::npos;
}

namespace {

// End of the quoted string or name, or of the comment, that starts at `i` (which must be one);
// unterminated ones run to the end of the text.
size_t skip_quoted_or_comment(std::string_view s, size_t i) {
  const size_t n = s.size();
  const char c = s[i];
  if (c == '\'' || c == '"' || c == '`') {
    for (size_t j = i + 1; j < n; ++j) {
      if (s[j] != c) continue;
      if (j + 1 < n && s[j + 1] == c) {
        ++j;
        continue;
      }
      return j + 1;
    }
    return n;
  }
  if (c == '[') {
    const size_t e = s.find(']', i + 1);
    return e == std::string_view::npos ? n : e + 1;
  }
  if (c == '-') {
    const size_t e = s.find('\n', i + 2);
    return e == std::string_view::npos ? n : e + 1;
  }
  const size_t e = s.find("*/", i + 2);  // "/*"
  return e == std::string_view::npos ? n : e + 2;
}

bool starts_quoted_or_comment(std::string_view s, size_t i) {
  const char c = s[i];
  if (c == '\'' || c == '"' || c == '`' || c == '[') return true;
  return i + 1 < s.size() && ((c == '-' && s[i + 1] == '-') || (c == '/' && s[i + 1] == '*'));
}

// Only whitespace and comments from `i` on (Python's test; ';' is not among them).
bool only_space_and_comments(std::string_view s, size_t i) {
  while (i < s.size()) {
    const char c = s[i];
    if (c == ' ' || c == '\t' || c == '\f' || c == '\n' || c == '\r') {
      ++i;
    } else if (i + 1 < s.size() && ((c == '-' && s[i + 1] == '-') || (c == '/' && s[i + 1] == '*'))) {
      i = skip_quoted_or_comment(s, i);
    } else {
      return false;
    }
  }
  return true;
}

}  // namespace

size_t first_statement_end(std::string_view sql) {
  size_t i = 0;
  while (i < sql.size()) {
    if (sql[i] == ';') return i + 1;
    i = starts_quoted_or_comment(sql, i) ? skip_quoted_or_comment(sql, i) : i + 1;
  }
  return sql.size();
}

bool python_runs_as_one_statement(std::string_view sql) {
  return only_space_and_comments(sql, first_statement_end(sql));
}

namespace {

// Whether the first statement is blank (whitespace, comments, at most its ';').
bool blank_first_statement(std::string_view sql) {
  std::string_view first = sql.substr(0, first_statement_end(sql));
  if (!first.empty() && first.back() == ';') first.remove_suffix(1);
  return only_space_and_comments(first, 0);
}

}  // namespace

bool holds_no_statement(std::string_view sql) {
  while (!sql.empty()) {
    const size_t end = first_statement_end(sql);
    if (!blank_first_statement(sql.substr(0, end))) return false;
    sql.remove_prefix(end);
  }
  return true;
}

std::string first_statement(std::string_view sql) { return std::string(sql.substr(0, first_statement_end(sql))); }

namespace {

struct ValueToken {
  std::string text;
  bool string_literal = false;  // '…' or "…"
};

bool word_char(unsigned char c) { return std::isalnum(c) || c == '_' || c == '$' || c >= 0x80; }

// Tokens split where the official evaluator's tokenizer (sqlparse) splits them; only that and
// which tokens are string literals matter, since the tokens are re-joined with single spaces.
// A '-' directly before a digit belongs to the number ("a-5" is "a", "-5"), as in sqlparse.
std::vector<ValueToken> value_tokens(std::string_view s) {
  std::vector<ValueToken> out;
  const size_t n = s.size();
  auto digit = [&](size_t j) { return j < n && std::isdigit(static_cast<unsigned char>(s[j])); };
  size_t i = 0;
  while (i < n) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    size_t start = i;
    if (std::isspace(c)) {
      ++i;
      continue;
    }
    if (starts_quoted_or_comment(s, i)) {
      i = skip_quoted_or_comment(s, i);
      out.push_back({std::string(s.substr(start, i - start)), c == '\'' || c == '"'});
      continue;
    }
    const bool number_start = digit(i) || (c == '.' && digit(i + 1)) ||
                              (c == '-' && (digit(i + 1) || (i + 2 < n && s[i + 1] == '.' && digit(i + 2))));
    if (number_start) {
      if (c == '-') ++i;
      while (digit(i)) ++i;
      if (i < n && s[i] == '.') {
        ++i;
        while (digit(i)) ++i;
      }
      if (i < n && (s[i] == 'e' || s[i] == 'E') && (digit(i + 1) || ((s[i + 1] == '-' || s[i + 1] == '+') && digit(i + 2)))) {
        i += 2;
        while (digit(i)) ++i;
      }
    } else if (word_char(c)) {
      while (i < n && word_char(static_cast<unsigned char>(s[i]))) ++i;
    } else {
      static const char* kTwo[] = {"<>", "!=", ">=", "<=", "==", "||", "::"};
      i += 1;
      for (const char* op : kTwo)
        if (s.substr(start, 2) == op) i = start + 2;
    }
    out.push_back({std::string(s.substr(start, i - start)), false});
  }
  return out;
}

std::vector<std::string> split_words(const std::string& s) {
  std::vector<std::string> out;
  size_t i = 0;
  while (i < s.size()) {
    while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
    size_t start = i;
    while (i < s.size() && !std::isspace(static_cast<unsigned char>(s[i]))) ++i;
    if (i > start) out.push_back(s.substr(start, i - start));
  }
  return out;
}

std::set<std::string> matches(const std::string& text, const std::regex& re, bool strip) {
  std::set<std::string> out;
  for (auto it = std::sregex_iterator(text.begin(), text.end(), re); it != std::sregex_iterator(); ++it)
    out.insert(strip ? core::trim(it->str()) : it->str());
  return out;
}

}  // namespace

ValueSlots value_slots(std::string_view sql) {
  // The query without ';' or tabs (anywhere, strings included), its tokens joined by one space.
  std::string raw;
  for (char c : core::trim(sql))
    if (c != ';' && c != '\t') raw += c;
  const auto tokens = value_tokens(raw);
  std::string query;
  for (const auto& t : tokens) query += (query.empty() ? "" : " ") + t.text;
  static const std::string kMark = "VALUERARE";
  ValueSlots out;
  // String literals: every occurrence of the literal's text becomes a slot.
  for (const auto& t : tokens) {
    if (!t.string_literal) continue;
    out.values.insert(t.text);
    for (size_t pos = 0; (pos = query.find(t.text, pos)) != std::string::npos; pos += kMark.size())
      query.replace(pos, t.text.size(), kMark);
  }
  std::vector<std::string> words = split_words(query);
  // Numbers: words equal to a float found in the text, then to an integer not right after a t/T
  // (so T1, t2 stay names), each found on the text as it is at that step.
  static const std::regex kFloat(R"([-+]?\d*\.\d+)");
  static const std::regex kInt(R"([^tT]\d+)");
  const auto floats = matches(query, kFloat, false);
  for (auto& w : words)
    if (floats.count(w)) {
      out.values.insert(w);
      w = kMark;
    }
  std::string rejoined;
  for (const auto& w : words) rejoined += (rejoined.empty() ? "" : " ") + w;
  const auto ints = matches(rejoined, kInt, true);
  for (auto& w : words)
    if (ints.count(w)) {
      out.values.insert(w);
      w = kMark;
    }
  for (auto& w : words) {
    w = core::lower(w);
    if (w == "valuerare") {
      w = kValueSlot;
      ++out.slots;
    }
  }
  out.words = std::move(words);
  return out;
}

std::vector<std::string> plugged_predictions(std::string_view gold, std::string_view pred, size_t limit,
                                             bool* truncated) {
  const ValueSlots p = value_slots(pred);
  const std::vector<std::string> values = [&] {
    auto g = value_slots(gold).values;
    return std::vector<std::string>(g.begin(), g.end());
  }();
  if (truncated) *truncated = false;
  std::vector<std::string> out;
  if (p.slots > 0 && values.empty()) return out;
  std::vector<size_t> pick(p.slots, 0);  // an odometer over the slots, the last turning fastest
  while (true) {
    if (out.size() == limit) {
      if (truncated) *truncated = true;
      return out;
    }
    std::string text;
    size_t slot = 0;
    for (const auto& w : p.words) {
      text += text.empty() ? "" : " ";
      text += w == kValueSlot ? values[pick[slot++]] : w;
    }
    out.push_back(std::move(text));
    size_t k = p.slots;
    while (k > 0 && ++pick[k - 1] == values.size()) pick[--k] = 0;
    if (k == 0) return out;
  }
}

}  // namespace nl2sql::eval
