// The one reader of model answers (see answer.h). Kept free of the rest of the library (standard
// library and nlohmann/json only) so the answer-shape corpus can be iterated on standalone.
#include "nl2sql/llm/answer.h"
#include "nl2sql/core/text.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <set>

namespace nl2sql::llm {
namespace {

using nlohmann::json;
constexpr size_t npos = std::string::npos;

bool is_space(char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; }
bool is_word(char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_'; }

using core::lower;
using core::trim;

bool starts_with(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }

// ---- reasoning ----

struct TagPair {
  std::string_view open, close;
};
// Lower-case: matched against a lower-cased copy. Kimi's ◁think▷ is bytes ≥ 0x80, untouched by
// tolower.
constexpr std::array<TagPair, 4> kReasoningTags = {{{"<think>", "</think>"},
                                                    {"<thinking>", "</thinking>"},
                                                    {"<reasoning>", "</reasoning>"},
                                                    {"\xe2\x97\x81think\xe2\x96\xb7", "\xe2\x97\x81/think\xe2\x96\xb7"}}};

// gpt-oss harmony: messages "<|start|>assistant<|channel|>NAME<|message|>BODY<|end|>"; the first
// message may lack "<|start|>assistant" (the prompt ended with it). analysis and commentary are
// reasoning, final (or a message without a channel) is the answer.
std::string split_harmony(const std::string& s, std::vector<std::string>& reasoning) {
  static const std::array<std::string_view, 4> kEnds = {"<|end|>", "<|return|>", "<|call|>", "<|start|>"};
  std::string answer;
  size_t pos = 0;
  while (pos < s.size()) {
    size_t msg = s.find("<|message|>", pos);
    if (msg == npos) {
      // Text after the last message that is not a control token (rare: a stray suffix).
      std::string rest = s.substr(pos);
      for (auto tok : {"<|end|>", "<|return|>", "<|start|>assistant", "<|start|>"})
        for (size_t p; (p = rest.find(tok)) != npos;) rest.erase(p, std::char_traits<char>::length(tok));
      answer += rest;
      break;
    }
    std::string header = s.substr(pos, msg - pos);
    std::string channel;
    if (size_t c = header.find("<|channel|>"); c != npos) {
      size_t b = c + 11, e = b;
      while (e < header.size() && is_word(header[e])) ++e;
      channel = lower(header.substr(b, e - b));
    } else {
      std::string h = lower(trim(header));
      for (const char* name : {"analysis", "commentary", "final"})
        if (starts_with(h, name)) channel = name;
    }
    size_t body = msg + 11, end = s.size(), end_len = 0;
    for (auto tok : kEnds) {
      size_t p = s.find(tok, body);
      if (p != npos && p < end) {
        end = p;
        end_len = tok == "<|start|>" ? 0 : tok.size();  // <|start|> opens the next message
      }
    }
    std::string text = s.substr(body, end - body);
    if (channel.empty() || channel == "final") answer += text;
    else reasoning.push_back(std::move(text));
    pos = end + end_len;
  }
  return answer;
}

}  // namespace

SplitAnswer split_reasoning(std::string_view text) {
  std::vector<std::string> parts;
  std::string s(text);
  if (s.find("<|channel|>") != npos || s.find("<|message|>") != npos) {
    s = split_harmony(s, parts);
  } else if (starts_with(s, "analysis") && s.find("assistantfinal") != npos) {
    // Harmony whose control tokens a server stripped: "analysis…assistantfinal…".
    size_t f = s.find("assistantfinal");
    parts.push_back(s.substr(8, f - 8));
    s = s.substr(f + 14);
  }
  std::string lw = lower(s);
  // A lone closing tag: the chat template opened the reasoning in the prompt, so everything up to
  // the last closing tag that comes before any opening tag was thought.
  size_t first_open = npos;
  for (const auto& t : kReasoningTags) first_open = std::min(first_open, lw.find(t.open));
  size_t lone_at = npos, lone_end = 0;
  for (const auto& t : kReasoningTags) {
    size_t limit = first_open == npos ? npos : (first_open >= t.close.size() ? first_open - t.close.size() : npos);
    if (first_open != npos && first_open < t.close.size()) continue;
    size_t p = lw.rfind(t.close, limit);
    if (p != npos && (lone_at == npos || p + t.close.size() > lone_end)) {
      lone_at = p;
      lone_end = p + t.close.size();
    }
  }
  if (lone_at != npos) {
    parts.push_back(s.substr(0, lone_at));
    s = s.substr(lone_end);
    lw = lw.substr(lone_end);
  }
  // Blocks anywhere; an unclosed one runs to the end.
  std::string answer;
  size_t pos = 0;
  while (pos < s.size()) {
    size_t open = npos;
    const TagPair* tag = nullptr;
    for (const auto& t : kReasoningTags) {
      size_t p = lw.find(t.open, pos);
      if (p < open) {
        open = p;
        tag = &t;
      }
    }
    if (tag == nullptr) {
      answer.append(s, pos, npos);
      break;
    }
    answer.append(s, pos, open - pos);
    size_t body = open + tag->open.size();
    size_t close = lw.find(tag->close, body);
    if (close == npos) {
      parts.push_back(s.substr(body));
      break;
    }
    parts.push_back(s.substr(body, close - body));
    pos = close + tag->close.size();
  }
  SplitAnswer out;
  out.answer = std::move(answer);
  for (const auto& p : parts) {
    std::string t = trim(p);
    if (t.empty()) continue;
    out.reasoning += (out.reasoning.empty() ? "" : "\n\n") + t;
  }
  return out;
}

std::string answer_reasoning(std::string_view server_reasoning, std::string_view content) {
  std::string out = trim(server_reasoning);
  std::string inline_part = split_reasoning(content).reasoning;
  if (!inline_part.empty()) out += (out.empty() ? "" : "\n\n") + inline_part;
  return out;
}

// ---- SQL ----

namespace {

// Position of the first token of a statement, skipping blanks and comments.
size_t statement_start(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    if (is_space(s[i])) {
      ++i;
    } else if (s.substr(i, 2) == "--") {
      size_t nl = s.find('\n', i);
      i = nl == std::string_view::npos ? s.size() : nl + 1;
    } else if (s.substr(i, 2) == "/*") {
      size_t e = s.find("*/", i + 2);
      i = e == std::string_view::npos ? s.size() : e + 2;
    } else {
      break;
    }
  }
  return i;
}

bool starts_with_keyword(std::string_view s, std::string_view kw) {
  if (s.size() < kw.size()) return false;
  for (size_t i = 0; i < kw.size(); ++i)
    if (std::toupper(static_cast<unsigned char>(s[i])) != kw[i]) return false;
  return s.size() == kw.size() || !is_word(s[kw.size()]);
}

// Splits at the first ';' outside string literals, quoted identifiers and comments: a model
// that appends an explanation or a second statement after the query must not get them executed.
std::pair<std::string, std::string> cut_statement(std::string_view s) {
  for (size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    if (c == '\'' || c == '"' || c == '`' || c == '[') {
      const char close = c == '[' ? ']' : c;
      size_t j = i + 1;
      for (; j < s.size(); ++j) {
        if (s[j] != close) continue;
        if (close != ']' && j + 1 < s.size() && s[j + 1] == close) {  // '' escapes a quote
          ++j;
          continue;
        }
        break;
      }
      if (j >= s.size()) return {std::string(s), ""};  // unterminated: no cut inside it
      i = j;
    } else if (s.substr(i, 2) == "--") {
      size_t nl = s.find('\n', i);
      if (nl == std::string_view::npos) break;
      i = nl;
    } else if (s.substr(i, 2) == "/*") {
      size_t e = s.find("*/", i + 2);
      if (e == std::string_view::npos) break;
      i = e + 1;
    } else if (c == ';') {
      return {std::string(s.substr(0, i)), std::string(s.substr(i + 1))};
    }
  }
  return {std::string(s), ""};
}

const std::set<std::string>& sql_words() {
  static const std::set<std::string> k = {
      "SELECT", "FROM",   "WHERE",  "JOIN",  "INNER",     "LEFT",   "RIGHT",   "FULL",    "CROSS", "OUTER",
      "ON",     "AND",    "OR",     "NOT",   "GROUP",     "ORDER",  "BY",      "HAVING",  "LIMIT", "OFFSET",
      "UNION",  "INTERSECT", "EXCEPT", "ALL", "WITH",     "AS",     "CASE",    "WHEN",    "THEN",  "ELSE",
      "END",    "DISTINCT", "IN",    "IS",    "NULL",      "LIKE",   "BETWEEN", "EXISTS",  "CAST",  "ASC",
      "DESC",   "NATURAL", "USING", "VALUES", "COUNT",    "SUM",    "AVG",     "MIN",     "MAX",   "IIF",
      "COALESCE", "IFNULL", "ROUND", "SUBSTR", "STRFTIME", "LENGTH", "OVER",   "PARTITION", "WINDOW", "ROWS",
      "GLOB",   "ESCAPE", "COLLATE", "RECURSIVE", "UPPER",  "LOWER",  "TRIM",    "REPLACE", "INSTR", "DATE"};
  return k;
}

// A line that reads as the model talking, not as SQL continuing: "This query …", "Explanation:",
// "Note: …", or a sentence ending in a period that starts with no SQL word.
bool is_prose_line(std::string_view line) {
  std::string t = trim(line);
  while (!t.empty() && (t.front() == '*' || t.front() == '#' || t.front() == '>' || t.front() == '_')) t.erase(0, 1);
  t = trim(t);
  if (t.empty() || starts_with(t, "--") || starts_with(t, "/*") || starts_with(t, "```") || starts_with(t, "~~~"))
    return false;
  size_t w = 0;
  while (w < t.size() && std::isalpha(static_cast<unsigned char>(t[w]))) ++w;
  if (w == 0) return false;
  std::string first = t.substr(0, w);
  std::string up = first;
  for (auto& c : up) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (sql_words().count(up)) return false;
  size_t words = 1;
  for (size_t i = 1; i < t.size(); ++i) words += is_space(t[i]) && !is_space(t[i - 1]);
  static const std::set<std::string> kOpeners = {
      "this",    "the",     "explanation", "explanations", "note", "notes", "here", "it", "we", "i", "that",
      "these",   "which",   "hope",        "let",          "also", "output", "result", "results", "answer",
      "assuming", "because", "since",      "finally",      "therefore", "thus", "so", "key", "reasoning",
      "breakdown", "summary", "in", "to", "for"};
  const char after = w < t.size() ? t[w] : '\0';
  if (kOpeners.count(lower(first)) && (after == ':' || (after == ' ' && words >= 3))) return true;
  if (t.back() == '.' && words >= 4 && t.find_first_of("(=,") == npos) return true;
  return false;
}

// The text up to the first prose line after the first line; the rest goes to `*rest`.
std::string cut_prose(std::string_view s, std::string* rest) {
  size_t nl = s.find('\n');
  while (nl != std::string_view::npos) {
    size_t next = s.find('\n', nl + 1);
    std::string_view line = s.substr(nl + 1, next == std::string_view::npos ? std::string_view::npos : next - nl - 1);
    if (is_prose_line(line)) {
      *rest = trim(s.substr(nl + 1));
      return std::string(s.substr(0, nl));
    }
    nl = next;
  }
  return std::string(s);
}

// Text up to the first fence marker (``` or ~~~): a fence after a statement ends it.
std::string before_fence(std::string s) {
  for (const char* marker : {"```", "~~~"}) {
    size_t fence = s.find(marker);
    if (fence != npos) s.resize(fence);
  }
  return s;
}

struct CleanSql {
  std::string sql, trailing;
};

// Inline backticks around the whole statement, a repeated language tag, then the cut at the
// first top-level ';'. `prose` also stops at the first line of prose (text outside a fence).
CleanSql clean_sql(std::string_view raw, bool prose) {
  CleanSql out;
  std::string s = trim(raw);
  if (s.size() >= 2 && s.front() == '`' && s.find('`', 1) != npos) {
    size_t close = s.find('`', 1);
    // `SELECT …` possibly followed by prose on the same line: the backticks bound the query.
    if (close == s.size() - 1 || s.find('\n') == npos || s.find('\n') > close) {
      out.trailing = trim(std::string_view(s).substr(close + 1));
      s = trim(std::string_view(s).substr(1, close - 1));
    }
  }
  for (const char* tag : {"sqlite\n", "sql\n"}) {
    const size_t n = std::char_traits<char>::length(tag);
    if (lower(s.substr(0, n)) == tag) {
      s = trim(std::string_view(s).substr(n));
      break;
    }
  }
  std::string prose_rest;
  if (prose) s = cut_prose(s, &prose_rest);
  auto [stmt, rest] = cut_statement(s);
  out.sql = trim(stmt);
  std::string after = trim(rest);
  while (!after.empty() && (after.front() == ';' || is_space(after.front()))) after.erase(0, 1);
  for (const auto& part : {after, prose_rest})
    if (!part.empty()) out.trailing = trim(out.trailing + (out.trailing.empty() ? "" : "\n") + part);
  return out;
}

struct Fence {
  size_t open = 0;  // offset of the opening ```
  std::string tag;  // lower-cased language tag ("" when none)
  std::string body;
  bool closed = true;
};

// "sql SELECT 1" inside a one-line fence: the tag, then the body.
void split_inline_tag(std::string inner, Fence& f) {
  std::string lw = lower(inner);
  for (const char* t : {"sqlite ", "sql "})
    if (lw.rfind(t, 0) == 0) {
      f.tag = trim(std::string_view(t));
      inner = inner.substr(std::char_traits<char>::length(t));
      break;
    }
  f.body = inner;
}

// Fenced blocks in order. A fence opens with ``` (or ~~~) at any position; the tag is the rest
// of that line. An unclosed final fence runs to the end of the text.
std::vector<Fence> fences(std::string_view text) {
  std::vector<Fence> out;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t open = text.find("```", pos);
    size_t tilde = text.find("~~~", pos);
    std::string_view marker = "```";
    if (tilde != std::string_view::npos && (open == std::string_view::npos || tilde < open)) {
      open = tilde;
      marker = "~~~";
    }
    if (open == std::string_view::npos) break;
    size_t line_end = text.find('\n', open);
    Fence f;
    f.open = open;
    size_t body_start;
    if (line_end == std::string_view::npos) {
      // "```SELECT 1```" on one line, or a lone opening fence at the very end.
      size_t close = text.find(marker, open + 3);
      if (close == std::string_view::npos) break;
      split_inline_tag(std::string(text.substr(open + 3, close - open - 3)), f);
      out.push_back(std::move(f));
      pos = close + 3;
      continue;
    }
    std::string tag_line = trim(text.substr(open + 3, line_end - open - 3));
    size_t close_same_line = tag_line.find(marker);
    if (close_same_line != npos) {
      // Inline fence on one line: ```sql SELECT 1```.
      split_inline_tag(tag_line.substr(0, close_same_line), f);
      out.push_back(std::move(f));
      pos = open + 3 + text.substr(open + 3).find(marker) + 3;
      continue;
    }
    // A tag is one word; anything longer on the opening line is code that started right away.
    if (tag_line.find(' ') == npos && tag_line.size() <= 16) {
      f.tag = lower(tag_line);
      body_start = line_end + 1;
    } else {
      body_start = open + 3;
    }
    size_t close = text.find(marker, body_start);
    if (close == std::string_view::npos) {
      f.body = std::string(text.substr(body_start));
      f.closed = false;
      out.push_back(std::move(f));
      break;
    }
    f.body = std::string(text.substr(body_start, close - body_start));
    out.push_back(std::move(f));
    pos = close + 3;
  }
  return out;
}

bool sql_tag(const std::string& tag) {
  return tag == "sql" || tag == "sqlite" || tag == "postgresql" || tag == "mysql";
}
bool plain_tag(const std::string& tag) { return tag.empty() || tag == "text" || tag == "plaintext"; }

// A chosen piece of the answer: where it starts (the reasoning ends there) and its SQL.
struct Pick {
  size_t at = 0;
  CleanSql sql;
  std::string source;
};

// The last fence holding SQL (tagged first, then untagged reading as SQL), or the first one at or
// after `from` when `first` is set.
std::optional<Pick> fence_pick(const std::vector<Fence>& fs, size_t from = 0, bool first = false) {
  std::optional<Pick> out;
  for (int pass = 0; pass < 2 && !out; ++pass)
    for (const auto& f : fs) {
      if (f.open < from) continue;
      if (pass == 0 ? !sql_tag(f.tag) : !plain_tag(f.tag)) continue;
      // An unclosed ~~~ fence runs to the end of the text, past any ``` fence (and vice versa).
      CleanSql c = clean_sql(before_fence(f.body), /*prose=*/!f.closed);
      if (c.sql.empty() || (pass == 1 && !looks_like_sql(c.sql))) continue;
      out = Pick{f.open, std::move(c), !f.closed ? "fence_unclosed" : pass == 0 ? "fence_sql" : "fence"};
      if (first) break;
    }
  return out;
}

// Offsets of each line's start.
std::vector<size_t> line_starts(std::string_view text) {
  std::vector<size_t> out = {0};
  for (size_t i = 0; i < text.size(); ++i)
    if (text[i] == '\n') out.push_back(i + 1);
  return out;
}

// SQL starting right at `s` (after a heading or marker): inline text, inline backticks, or the
// following lines up to a blank line; a fence when the text opens with one.
std::optional<CleanSql> sql_right_here(std::string_view s, bool* fenced = nullptr) {
  size_t i = 0;
  while (i < s.size() && (s[i] == '*' || s[i] == '_' || s[i] == ':' || is_space(s[i]))) ++i;
  std::string rest(s.substr(i));
  if (fenced) *fenced = false;
  if (starts_with(rest, "```") || starts_with(rest, "~~~")) {
    auto fs = fences(rest);
    auto p = fence_pick(fs, 0, /*first=*/true);
    if (!p || p->at != 0) return std::nullopt;
    if (fenced) *fenced = true;
    return p->sql;
  }
  size_t blank = rest.find("\n\n");
  if (blank != npos) rest.resize(blank);
  rest = before_fence(std::move(rest));
  CleanSql c = clean_sql(rest, /*prose=*/true);
  if (c.sql.empty() || !looks_like_sql(c.sql)) return std::nullopt;
  return c;
}

// "Final SQL", "Final answer", "Final query" headings: at a line start, after markdown list or
// heading marks, optionally "The"/"My"; returns the offset just past the phrase for each.
std::vector<std::pair<size_t, size_t>> final_headings(std::string_view text) {
  std::vector<std::pair<size_t, size_t>> out;
  const std::string lw = lower(text);
  for (size_t start : line_starts(text)) {
    size_t i = start;
    while (i < lw.size() && (lw[i] == ' ' || lw[i] == '\t' || lw[i] == '#' || lw[i] == '*' || lw[i] == '>')) ++i;
    if (i + 1 < lw.size() && lw[i] == '-' && lw[i + 1] == ' ') i += 2;
    while (i < lw.size() && std::isdigit(static_cast<unsigned char>(lw[i]))) ++i;
    if (i < lw.size() && lw[i] == '.' && i > start && std::isdigit(static_cast<unsigned char>(lw[i - 1]))) ++i;
    while (i < lw.size() && (lw[i] == ' ' || lw[i] == '*' || lw[i] == '_')) ++i;
    for (const char* art : {"the ", "my "})
      if (lw.compare(i, std::char_traits<char>::length(art), art) == 0) i += std::char_traits<char>::length(art);
    for (const char* phrase : {"final sqlite query", "final sql query", "final sql", "final query", "final answer"}) {
      const size_t n = std::char_traits<char>::length(phrase);
      if (lw.compare(i, n, phrase) != 0) continue;
      if (i + n < lw.size() && is_word(lw[i + n])) continue;  // "final answers", "final sqlx"
      out.push_back({start, i + n});
      break;
    }
  }
  return out;
}

// The text after the last "SQL:"-style marker to the first blank line, with the marker's offset.
std::optional<std::pair<size_t, std::string>> after_marker(const std::string& text) {
  const std::string lw = lower(text);
  static const std::array<std::string_view, 6> kMarkers = {
      "final sql query:", "final sql:", "final query:", "sql query:", "sql:", "answer:"};
  size_t best = npos, best_end = 0;
  for (auto m : kMarkers) {
    size_t p = lw.rfind(m);
    if (p != npos && (best == npos || p > best)) {
      best = p;
      best_end = p + m.size();
    }
  }
  if (best == npos) return std::nullopt;
  // Walk back over a "final"/"final sql" prefix so the reasoning does not end mid-marker.
  for (auto m : kMarkers) {
    size_t p = best_end >= m.size() ? best_end - m.size() : npos;
    if (p != npos && lw.compare(p, m.size(), m) == 0) best = std::min(best, p);
  }
  return std::make_pair(best, text.substr(best_end));
}

// <FINAL_ANSWER>…</FINAL_ANSWER> or <answer>…</answer> (the CHASE-SQL/CHESS output formats): the
// body of the last such tag that holds SQL, and its offset.
std::optional<Pick> tag_pick(const std::string& text) {
  const std::string lw = lower(text);
  std::optional<Pick> out;
  for (auto [open, close] : {std::pair{"<final_answer>", "</final_answer>"}, std::pair{"<answer>", "</answer>"}}) {
    const size_t n = std::char_traits<char>::length(open);
    for (size_t p = lw.rfind(open); p != npos; p = p == 0 ? npos : lw.rfind(open, p - 1)) {
      size_t body = p + n;
      size_t e = lw.find(close, body);
      std::string inner = text.substr(body, e == npos ? npos : e - body);
      std::optional<CleanSql> c;
      if (auto f = fence_pick(fences(inner))) c = f->sql;
      else c = sql_right_here(inner);
      if (c && (!out || p > out->at)) out = Pick{p, std::move(*c), "tag"};
      if (c) break;
    }
  }
  return out;
}

// The last paragraph with a line starting with SELECT or WITH, from that line to the paragraph's
// end (a later SELECT line is a subquery of the same query).
std::optional<Pick> bare_pick(const std::string& text) {
  size_t best = npos;
  bool para_found = false;
  for (size_t p = 0; p < text.size();) {
    size_t nl = text.find('\n', p);
    std::string_view line = std::string_view(text).substr(p, nl == npos ? npos : nl - p);
    if (trim(line).empty()) {
      para_found = false;
    } else {
      size_t s = statement_start(line);
      std::string_view rest = line.substr(s);
      if (!para_found && (starts_with_keyword(rest, "SELECT") || starts_with_keyword(rest, "WITH"))) {
        best = p + s;
        para_found = true;
      }
    }
    if (nl == npos) break;
    p = nl + 1;
  }
  if (best == npos) return std::nullopt;
  std::string rest = text.substr(best);
  size_t blank = rest.find("\n\n");
  if (blank != npos) rest.resize(blank);
  // Bare SQL inside a fence of another language ("```s0ql"): the closing fence ends it.
  CleanSql c = clean_sql(before_fence(std::move(rest)), /*prose=*/true);
  if (c.sql.empty()) return std::nullopt;
  return Pick{best, std::move(c), "bare"};
}

}  // namespace

bool looks_like_sql(std::string_view text) {
  size_t i = statement_start(text);
  std::string_view s = text.substr(i);
  if (!s.empty() && s.front() == '(') s = s.substr(statement_start(s.substr(1)) + 1);
  for (std::string_view kw : {"SELECT", "WITH", "VALUES", "INSERT", "UPDATE", "DELETE", "REPLACE",
                              "CREATE", "DROP", "ALTER", "PRAGMA", "ATTACH", "DETACH", "EXPLAIN",
                              "BEGIN", "VACUUM"})
    if (starts_with_keyword(s, kw)) return true;
  return false;
}

namespace {

// The SQL value of the last JSON object that names one ("SQL", "sql", "query", "sql_query",
// "final_sql", "answer"), when it reads as SQL.
std::optional<Pick> json_sql_pick(const std::string& text) {
  if (text.find('{') == npos) return std::nullopt;
  for (const char* key : {"SQL", "sql", "final_sql", "sql_query", "query", "Query", "answer"}) {
    JsonWant want;
    want.required_key = key;
    auto j = read_json(text, want);
    if (!j || !(*j)[key].is_string()) continue;
    CleanSql c = clean_sql((*j)[key].get<std::string>(), /*prose=*/false);
    if (c.sql.empty() || !looks_like_sql(c.sql)) continue;
    size_t at = text.rfind('"' + std::string(key) + '"');
    return Pick{at == npos ? 0 : at, std::move(c), "json"};
  }
  return std::nullopt;
}

// The last single-backtick span that reads as a SQL query.
std::optional<Pick> inline_code_pick(const std::string& text) {
  std::optional<Pick> best;
  for (size_t open = text.find('`'); open != npos;) {
    if (text.compare(open, 3, "```") == 0) {
      open = text.find('`', open + 3);
      continue;
    }
    size_t close = text.find('`', open + 1);
    if (close == npos) break;
    std::string inner = text.substr(open + 1, close - open - 1);
    if (inner.find('\n') == npos) {
      CleanSql c = clean_sql(inner, /*prose=*/false);
      if (!c.sql.empty() && looks_like_sql(c.sql) && c.sql.find(' ') != npos)
        best = Pick{open, std::move(c), "inline_code"};
    }
    open = text.find('`', close + 1);
  }
  return best;
}

// extract_sql's work: the SQL found, or why none was (with the reasoning in both cases).
struct Extraction {
  ExtractedSql found;  // found.reasoning is set either way
  std::string error;   // non-empty: no SQL
};

Extraction extract(std::string_view response) {
  Extraction out;
  ExtractedSql& r = out.found;
  SplitAnswer split = split_reasoning(response);
  const std::string& text = split.answer;
  auto reasoning_before = [&](size_t offset) {
    std::string before = trim(std::string_view(text).substr(0, std::min(offset, text.size())));
    if (split.reasoning.empty()) return before;
    return before.empty() ? split.reasoning : split.reasoning + "\n\n" + before;
  };
  auto done = [&](Pick p) {
    r.sql = std::move(p.sql.sql);
    r.trailing = std::move(p.sql.trailing);
    r.reasoning = reasoning_before(p.at);
    r.source = std::move(p.source);
    return out;
  };
  if (trim(text).empty()) {
    out.error = split.reasoning.empty() ? "empty answer" : "the answer holds only reasoning (no text after it)";
    r.reasoning = split.reasoning;
    return out;
  }

  if (auto p = tag_pick(text)) return done(std::move(*p));

  const auto fs = fences(text);
  // The last "Final …" heading that is followed by SQL: what comes before it were drafts.
  auto heads = final_headings(text);
  for (auto it = heads.rbegin(); it != heads.rend(); ++it) {
    bool fenced = false;
    if (auto c = sql_right_here(std::string_view(text).substr(it->second), &fenced)) {
      return done(Pick{it->first, std::move(*c), fenced ? "final_fence" : "marker"});
    }
    if (auto f = fence_pick(fs, it->second, /*first=*/true)) {
      f->source = "final_fence";
      f->at = it->first;
      return done(std::move(*f));
    }
  }

  if (auto p = fence_pick(fs)) return done(std::move(*p));

  if (auto m = after_marker(text)) {
    if (auto c = sql_right_here(m->second)) return done(Pick{m->first, std::move(*c), "marker"});
  }

  if (auto p = bare_pick(text)) return done(std::move(*p));

  // JSON answers (CHESS-style prompts ask for {"chain_of_thought_reasoning": …, "SQL": …}):
  // the last object holding a SQL-named key whose value reads as SQL.
  if (auto p = json_sql_pick(text)) return done(std::move(*p));
  // Last, an inline `…` span that reads as SQL ("The query is `SELECT …`.").
  if (auto p = inline_code_pick(text)) return done(std::move(*p));

  r.reasoning = reasoning_before(text.size());
  if (!fs.empty())
    out.error = "no fenced block holds SQL (" + std::to_string(fs.size()) + " block(s), last tagged \"" +
                fs.back().tag + "\")";
  else
    out.error = "no SQL found in the answer (no fenced block, no \"SQL:\" line, no line starting with SELECT/WITH)";
  return out;
}

}  // namespace

Result<ExtractedSql> extract_sql(std::string_view response) {
  Extraction e = extract(response);
  if (!e.error.empty()) return invalid_input(std::move(e.error));
  return std::move(e.found);
}

std::string sql_reasoning(std::string_view response) { return extract(response).found.reasoning; }

// ---- JSON ----

namespace {

// Rewrites the slips models make into JSON: single-quoted strings and keys, Python True/False/
// None, // and /* */ comments, trailing commas. Double-quoted strings are copied untouched.
std::string repair_json(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    if (c == '"') {
      size_t j = i + 1;
      while (j < s.size() && s[j] != '"') j += s[j] == '\\' ? 2 : 1;
      out.append(s.substr(i, std::min(j, s.size() - 1) - i + 1));
      i = j;
    } else if (c == '\'') {
      out.push_back('"');
      size_t j = i + 1;
      for (; j < s.size() && s[j] != '\''; ++j) {
        if (s[j] == '\\' && j + 1 < s.size()) {
          if (s[j + 1] == '\'') out.push_back('\'');
          else out.append(s.substr(j, 2));
          ++j;
        } else if (s[j] == '"') {
          out += "\\\"";
        } else {
          out.push_back(s[j]);
        }
      }
      out.push_back('"');
      i = j;
    } else if (c == '/' && i + 1 < s.size() && s[i + 1] == '/') {
      size_t nl = s.find('\n', i);
      i = nl == std::string_view::npos ? s.size() : nl - 1;
    } else if (c == '/' && i + 1 < s.size() && s[i + 1] == '*') {
      size_t e = s.find("*/", i + 2);
      i = e == std::string_view::npos ? s.size() : e + 1;
    } else if (c == '}' || c == ']') {
      size_t e = out.size();
      while (e > 0 && is_space(out[e - 1])) --e;
      if (e > 0 && out[e - 1] == ',') out.erase(e - 1, 1);
      out.push_back(c);
    } else if (std::isalpha(static_cast<unsigned char>(c)) && (i == 0 || !is_word(s[i - 1]))) {
      size_t j = i;
      while (j < s.size() && is_word(s[j])) ++j;
      std::string_view w = s.substr(i, j - i);
      if (w == "True") out += "true";
      else if (w == "False") out += "false";
      else if (w == "None") out += "null";
      else out.append(w);
      i = j - 1;
    } else {
      out.push_back(c);
    }
  }
  return out;
}

// Balanced {…} and […] spans, found in one pass: strings (double-quoted, and single-quoted where
// a value or key may start) and // comments inside a span do not count. Ordered by their closing
// offset, so an outer span comes after the spans it holds.
std::vector<std::pair<size_t, size_t>> bracket_spans(std::string_view s) {
  std::vector<std::pair<size_t, size_t>> out;
  std::vector<size_t> stack;
  auto value_position = [&](size_t i) {
    size_t k = i;
    while (k > 0 && is_space(s[k - 1])) --k;
    return k > 0 && (s[k - 1] == '{' || s[k - 1] == '[' || s[k - 1] == ',' || s[k - 1] == ':');
  };
  for (size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    if (!stack.empty() && (c == '"' || (c == '\'' && value_position(i)))) {
      size_t j = i + 1;
      while (j < s.size() && s[j] != c && s[j] != '\n') j += s[j] == '\\' ? 2 : 1;
      if (j >= s.size() || s[j] == '\n') {
        stack.clear();  // a string that never closes: nothing around it is JSON
        continue;
      }
      i = j;
    } else if (!stack.empty() && c == '/' && i + 1 < s.size() && s[i + 1] == '/') {
      size_t nl = s.find('\n', i);
      i = nl == std::string_view::npos ? s.size() : nl;
    } else if (c == '{' || c == '[') {
      stack.push_back(i);
    } else if (c == '}' || c == ']') {
      if (stack.empty()) continue;
      if (s[stack.back()] != (c == '}' ? '{' : '[')) {
        stack.clear();  // mismatched: prose brackets; start over
        continue;
      }
      out.push_back({stack.back(), i});
      stack.pop_back();
    }
  }
  return out;
}

bool wanted(const json& j, const JsonWant& want) {
  if (!want.required_key.empty()) return j.is_object() && j.contains(want.required_key);
  if (want.shape == JsonShape::kObject) return j.is_object();
  if (want.shape == JsonShape::kArray) return j.is_array();
  return j.is_object() || j.is_array();
}

std::string want_text(const JsonWant& want) {
  if (!want.required_key.empty()) return "a JSON object with key \"" + want.required_key + "\"";
  if (want.shape == JsonShape::kObject) return "a JSON object";
  if (want.shape == JsonShape::kArray) return "a JSON list";
  return "a JSON object or list";
}

}  // namespace

Result<json> read_json(std::string_view answer, const JsonWant& want) {
  const std::string text = split_reasoning(answer).answer;
  if (trim(text).empty()) return invalid_input("the answer is empty (or holds only reasoning)");
  // Bounded work on adversarial text: the outermost spans near the end are the ones that matter.
  constexpr int kMaxAttempts = 64;
  auto spans = bracket_spans(text);
  int attempts = 0, parsed = 0;
  for (auto it = spans.rbegin(); it != spans.rend() && attempts < kMaxAttempts; ++it, ++attempts) {
    std::string_view span = std::string_view(text).substr(it->first, it->second - it->first + 1);
    json j = json::parse(span, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded()) j = json::parse(repair_json(span), nullptr, false);
    if (j.is_discarded()) continue;
    ++parsed;
    if (wanted(j, want)) return j;
  }
  if (spans.empty()) return invalid_input("no JSON in the answer (no {…} or […])");
  if (parsed == 0) return invalid_input("no {…} or […] in the answer parses as JSON, even repaired");
  return invalid_input("no " + want_text(want) + " in the answer (" + std::to_string(parsed) + " other JSON value(s))");
}

// ---- pairwise winner ----

namespace {

// "A", "candidate b", "Query A", "first", "1", "SQL B." → 'A'/'B'; 0 when not a winner word.
char winner_letter(std::string s) {
  s = lower(trim(s));
  auto strip = [&](std::string_view chars) {
    while (!s.empty() && chars.find(s.front()) != std::string_view::npos) s.erase(0, 1);
    while (!s.empty() && chars.find(s.back()) != std::string_view::npos) s.pop_back();
  };
  strip(" \t*_`\"'.!()[]:");
  for (const char* prefix : {"candidate ", "query ", "sql ", "option ", "answer "})
    if (starts_with(s, prefix)) s = trim(s.substr(std::char_traits<char>::length(prefix)));
  strip(" \t*_`\"'.!()[]:");
  if (s == "a" || s == "first" || s == "1" || s == "#1") return 'A';
  if (s == "b" || s == "second" || s == "2" || s == "#2") return 'B';
  return 0;
}

}  // namespace

Result<std::string> read_pairwise_winner(std::string_view answer) {
  const std::string text = split_reasoning(answer).answer;
  if (auto j = read_json(text, {JsonShape::kObject, "winner"})) {
    const json& w = (*j)["winner"];
    char l = 0;
    if (w.is_string()) l = winner_letter(w.get<std::string>());
    else if (w.is_number_integer()) l = w.get<int64_t>() == 1 ? 'A' : w.get<int64_t>() == 2 ? 'B' : 0;
    if (l != 0) return std::string(1, l);
    return invalid_input("the answer's \"winner\" is neither A nor B: " + w.dump());
  }
  // A closing line: "Winner: B", "**B**", "Answer: Candidate B", "The better query is A.".
  std::vector<std::string> lines;
  for (size_t p = 0; p <= text.size();) {
    size_t nl = text.find('\n', p);
    std::string line = trim(std::string_view(text).substr(p, nl == npos ? npos : nl - p));
    if (!line.empty() && line != "```") lines.push_back(line);
    if (nl == npos) break;
    p = nl + 1;
  }
  for (auto it = lines.rbegin(); it != lines.rend() && it - lines.rbegin() < 3; ++it) {
    if (char l = winner_letter(*it)) return std::string(1, l);
    const std::string lw = lower(*it);
    for (const char* lead : {"winner", "answer", "final answer", "better query", "better candidate", "choice",
                             "the better query is", "the better candidate is", "the winner is", "i choose",
                             "i pick", "verdict"}) {
      std::string_view rest = lw;
      size_t k = 0;
      while (k < rest.size() && (rest[k] == '*' || rest[k] == '#' || rest[k] == ' ')) ++k;
      rest = rest.substr(k);
      if (!starts_with(rest, lead)) continue;
      rest = rest.substr(std::char_traits<char>::length(lead));
      if (char l = winner_letter(std::string(rest))) return std::string(1, l);
    }
  }
  return invalid_input("no winner in the answer (no {\"winner\": …} object, no closing \"Winner: A/B\" line)");
}

// ---- synthetic examples ----

namespace {

enum class Label { kNone, kQuestion, kSql, kSeparator };

// The label a line opens with ("Question:", "**Q2:**", "1. Input:", "Example 3:"), and the
// text after it.
Label line_label(const std::string& line, std::string* rest) {
  std::string t = trim(line);
  size_t i = 0;
  auto skip = [&](std::string_view chars) {
    while (i < t.size() && chars.find(t[i]) != std::string_view::npos) ++i;
  };
  skip("#*>-_ \t");
  size_t d = i;
  while (i < t.size() && std::isdigit(static_cast<unsigned char>(t[i]))) ++i;
  if (i > d && i < t.size() && (t[i] == '.' || t[i] == ')')) ++i;
  skip("*_ \t");
  const std::string lw = lower(t.substr(i));
  static const std::array<std::pair<std::string_view, Label>, 10> kLabels = {{
      {"question", Label::kQuestion}, {"input", Label::kQuestion},  {"q", Label::kQuestion},
      {"sql query", Label::kSql},     {"sql", Label::kSql},          {"output", Label::kSql},
      {"query", Label::kSql},          {"a", Label::kSql},            {"example", Label::kSeparator},
      {"pair", Label::kSeparator}}};
  for (const auto& [word, label] : kLabels) {
    if (!starts_with(lw, word)) continue;
    size_t k = word.size();
    if (k < lw.size() && std::isalpha(static_cast<unsigned char>(lw[k]))) continue;
    while (k < lw.size() && (lw[k] == ' ' || std::isdigit(static_cast<unsigned char>(lw[k])) || lw[k] == '#')) ++k;
    size_t before_colon = k;
    while (k < lw.size() && (lw[k] == '*' || lw[k] == '_')) ++k;
    bool colon = k < lw.size() && (lw[k] == ':' || lw[k] == '.');
    if (!colon && label != Label::kSeparator) continue;
    if (!colon && before_colon != lw.size() && label == Label::kSeparator) {
      // "Example 2" alone on its line (or with emphasis) separates; "Example of …" does not.
      std::string tail = trim(lw.substr(k));
      if (!tail.empty()) continue;
    }
    if (colon) ++k;
    while (k < lw.size() && (lw[k] == '*' || lw[k] == '_')) ++k;
    *rest = trim(std::string_view(t).substr(i + k));
    return label;
  }
  return Label::kNone;
}

// "3. text" / "3) text": the text of a numbered line.
bool numbered_text(const std::string& line, std::string* rest) {
  std::string t = trim(line);
  size_t i = 0;
  while (i < t.size() && std::isdigit(static_cast<unsigned char>(t[i]))) ++i;
  if (i == 0 || i >= t.size() || (t[i] != '.' && t[i] != ')')) return false;
  *rest = trim(std::string_view(t).substr(i + 1));
  return !rest->empty();
}

std::string strip_inline_backticks(std::string s) {
  s = trim(s);
  if (s.size() >= 2 && s.front() == '`' && s.back() == '`' && !starts_with(s, "```"))
    s = trim(std::string_view(s).substr(1, s.size() - 2));
  return s;
}

}  // namespace

namespace {

std::vector<SyntheticExample> examples_in(std::string_view answer) {
  std::vector<SyntheticExample> out;
  const std::string text = split_reasoning(answer).answer;
  auto add = [&](std::string question, std::string sql_text) {
    question = trim(question);
    while (!question.empty() && (question.back() == '*' || question.back() == '_')) question.pop_back();
    auto ex = extract_sql(strip_inline_backticks(sql_text));
    if (!question.empty() && ex && looks_like_sql(ex->sql)) out.push_back({trim(question), ex->sql});
  };
  // JSON: [{question|input, sql|output|query}, …] or {"examples": [...]}.
  auto arr = read_json(text, {JsonShape::kArray, ""});
  json list;
  if (arr && !arr->empty() && (*arr)[0].is_object()) list = *arr;
  else if (auto obj = read_json(text, {JsonShape::kObject, "examples"}); obj && (*obj)["examples"].is_array())
    list = (*obj)["examples"];
  if (list.is_array()) {
    for (const auto& e : list) {
      if (!e.is_object()) continue;
      std::string q, s;
      for (const char* k : {"question", "input", "nl", "q"})
        if (e.contains(k) && e[k].is_string()) { q = e[k].get<std::string>(); break; }
      for (const char* k : {"sql", "output", "query", "answer"})
        if (e.contains(k) && e[k].is_string()) { s = e[k].get<std::string>(); break; }
      add(q, s);
    }
    if (!out.empty()) return out;
  }
  // Labelled lines.
  std::string question, sql;
  Label in = Label::kNone;
  auto flush = [&] {
    if (!question.empty() && !sql.empty()) add(question, sql);
    question.clear();
    sql.clear();
    in = Label::kNone;
  };
  bool in_fence = false;
  for (size_t p = 0; p <= text.size();) {
    size_t nl = text.find('\n', p);
    std::string line(std::string_view(text).substr(p, nl == npos ? npos : nl - p));
    const bool fence_line = starts_with(trim(line), "```") || starts_with(trim(line), "~~~");
    std::string rest;
    Label l = in_fence ? Label::kNone : line_label(line, &rest);
    if (l == Label::kQuestion) {
      flush();
      question = rest;
      in = Label::kQuestion;
    } else if (l == Label::kSql && in == Label::kQuestion) {
      sql = rest;
      in = Label::kSql;
    } else if (l == Label::kSeparator) {
      // "Example 2: How many …?" carries the question on the heading line.
      flush();
      std::string inner;
      if (line_label(rest, &inner) == Label::kQuestion) rest = inner;
      if (!rest.empty() && !looks_like_sql(rest)) {
        question = rest;
        in = Label::kQuestion;
      }
    } else if (l == Label::kSql) {
      flush();  // SQL without a question
    } else if (in == Label::kQuestion && (fence_line || looks_like_sql(trim(line)))) {
      sql = line;  // the SQL follows the question without a label
      in = Label::kSql;
    } else if (in != Label::kQuestion && !in_fence && numbered_text(line, &rest) && !looks_like_sql(rest)) {
      flush();
      question = rest;  // "3. How many …?" with the SQL on the next lines
      in = Label::kQuestion;
    } else if (in == Label::kQuestion && !trim(line).empty()) {
      question += " " + trim(line);
    } else if (in == Label::kSql) {
      sql += "\n" + line;
    }
    if (fence_line) in_fence = !in_fence;
    if (nl == npos) break;
    p = nl + 1;
  }
  flush();
  return out;
}

}  // namespace

Result<std::vector<SyntheticExample>> read_examples(std::string_view answer) {
  auto examples = examples_in(answer);
  if (examples.empty())
    return invalid_input("no (question, SQL) pair could be read from the answer (neither a JSON list of examples "
                         "nor labelled Question/SQL lines with runnable-looking SQL)");
  return examples;
}

}  // namespace nl2sql::llm
