// Robust extraction of the final SQL from a model answer (see extract.h).
#include "nl2sql/generate/extract.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <optional>
#include <vector>

namespace nl2sql::generate {
namespace {

bool is_space(char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; }

std::string trim(std::string_view s) {
  size_t b = 0, e = s.size();
  while (b < e && is_space(s[b])) ++b;
  while (e > b && is_space(s[e - 1])) --e;
  return std::string(s.substr(b, e - b));
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (auto& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// Removes trailing semicolons (and blanks between them), and one layer of inline backticks
// wrapping the whole statement (`SELECT …`).
std::string clean_sql(std::string_view raw) {
  std::string s = trim(raw);
  if (s.size() >= 2 && s.front() == '`' && s.back() == '`' && s.find('`', 1) == s.size() - 1)
    s = trim(std::string_view(s).substr(1, s.size() - 2));
  // A model sometimes repeats the language tag on the first line of an untagged fence.
  for (const char* tag : {"sqlite\n", "sql\n"}) {
    if (lower(s.substr(0, std::char_traits<char>::length(tag))) == tag) {
      s = trim(std::string_view(s).substr(std::char_traits<char>::length(tag)));
      break;
    }
  }
  while (!s.empty() && (s.back() == ';' || is_space(s.back()))) s.pop_back();
  return s;
}

struct Fence {
  size_t open = 0;         // offset of the opening ```
  std::string tag;         // lower-cased language tag ("" when none)
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

// Text up to the first fence marker (``` or ~~~): a fence after a statement ends it.
std::string before_fence(std::string s) {
  for (const char* marker : {"```", "~~~"}) {
    size_t fence = s.find(marker);
    if (fence != std::string::npos) s.resize(fence);
  }
  return s;
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
      std::string inner(text.substr(open + 3, close - open - 3));
      split_inline_tag(inner, f);
      out.push_back(std::move(f));
      pos = close + 3;
      continue;
    }
    std::string tag_line = trim(text.substr(open + 3, line_end - open - 3));
    size_t close_same_line = tag_line.find(marker);
    if (close_same_line != std::string::npos) {
      // Inline fence on one line: ```sql SELECT 1```.
      split_inline_tag(tag_line.substr(0, close_same_line), f);
      out.push_back(std::move(f));
      pos = open + 3 + text.substr(open + 3).find(marker) + 3;
      continue;
    }
    // A tag is one word; anything longer on the opening line is code that started right away.
    if (tag_line.find(' ') == std::string::npos && tag_line.size() <= 16) {
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

// Position of the SQL keyword a statement starts with, skipping blanks and comments.
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
  return s.size() == kw.size() || !(std::isalnum(static_cast<unsigned char>(s[kw.size()])) || s[kw.size()] == '_');
}

// Removes <think>…</think> sections (their text is reasoning) and returns what remains.
std::string strip_think(std::string_view text, std::string* thoughts) {
  std::string out;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t open = text.find("<think>", pos);
    if (open == std::string_view::npos) {
      out.append(text.substr(pos));
      break;
    }
    out.append(text.substr(pos, open - pos));
    size_t close = text.find("</think>", open);
    size_t body = open + 7;
    if (close == std::string_view::npos) {
      // An unclosed think section: everything after it is thought, nothing is answer.
      thoughts->append(text.substr(body));
      break;
    }
    thoughts->append(text.substr(body, close - body));
    thoughts->push_back('\n');
    pos = close + 8;
  }
  return out;
}

// Text after the last answer marker ("Final SQL:", "SQL query:", "SQL:", "Answer:"), to the
// first blank line. Returns the offset of the marker in `text` too.
std::optional<std::pair<size_t, std::string>> after_marker(const std::string& text) {
  const std::string lw = lower(text);
  static const std::array<std::string_view, 6> kMarkers = {
      "final sql query:", "final sql:", "final query:", "sql query:", "sql:", "answer:"};
  size_t best = std::string::npos, best_end = 0;
  for (auto m : kMarkers) {
    size_t p = lw.rfind(m);
    // Prefer the marker nearest the end; at equal positions, the longer marker (listed first).
    if (p != std::string::npos && (best == std::string::npos || p > best)) {
      // "final sql:" also contains "sql:"; the later rfind of "sql:" lands inside it.
      best = p;
      best_end = p + m.size();
    }
  }
  if (best == std::string::npos) return std::nullopt;
  // Walk back over a "final"/"final sql" prefix so the reasoning does not end mid-marker.
  for (auto m : kMarkers) {
    size_t p = best_end >= m.size() ? best_end - m.size() : std::string::npos;
    if (p != std::string::npos && lw.compare(p, m.size(), m) == 0) best = std::min(best, p);
  }
  std::string rest = text.substr(best_end);
  // Markdown emphasis around the marker ("**Final SQL:** SELECT …").
  size_t i = 0;
  while (i < rest.size() && (rest[i] == '*' || rest[i] == '_' || is_space(rest[i]))) ++i;
  rest = rest.substr(i);
  size_t blank = rest.find("\n\n");
  if (blank != std::string::npos) rest = rest.substr(0, blank);
  return std::make_pair(best, before_fence(std::move(rest)));
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

ExtractedSql extract_sql(std::string_view response) {
  ExtractedSql r;
  std::string thoughts;
  const std::string text = strip_think(response, &thoughts);
  auto reasoning_before = [&](size_t offset) {
    std::string before = trim(std::string_view(text).substr(0, offset));
    std::string t = trim(thoughts);
    if (t.empty()) return before;
    return before.empty() ? t : t + "\n\n" + before;
  };
  if (trim(text).empty()) {
    r.error = thoughts.empty() ? "empty answer" : "the answer holds only a <think> section";
    r.reasoning = trim(thoughts);
    return r;
  }

  auto fs = fences(text);
  const Fence* chosen = nullptr;
  for (const auto& f : fs)
    if ((f.tag == "sql" || f.tag == "sqlite" || f.tag == "postgresql" || f.tag == "mysql") &&
        !clean_sql(f.body).empty())
      chosen = &f;
  if (chosen) {
    r.source = chosen->closed ? "fence_sql" : "fence_unclosed";
  } else {
    for (const auto& f : fs)
      if ((f.tag.empty() || f.tag == "text" || f.tag == "plaintext") && looks_like_sql(clean_sql(f.body)))
        chosen = &f;
    if (chosen) r.source = chosen->closed ? "fence" : "fence_unclosed";
  }
  if (chosen) {
    // An unclosed ~~~ fence runs to the end of the text, past any ``` fence (and vice versa).
    r.sql = clean_sql(before_fence(chosen->body));
    r.reasoning = reasoning_before(chosen->open);
    r.ok = true;
    return r;
  }

  if (auto m = after_marker(text); m && looks_like_sql(clean_sql(m->second))) {
    r.sql = clean_sql(m->second);
    r.reasoning = reasoning_before(m->first);
    r.source = "marker";
    r.ok = true;
    return r;
  }

  // Bare SQL: in the last paragraph that has a line starting with SELECT or WITH, from the
  // first such line to the paragraph's end (a later SELECT line is a subquery of the same query).
  size_t best = std::string::npos;
  bool para_found = false;
  for (size_t p = 0; p < text.size();) {
    size_t nl = text.find('\n', p);
    std::string_view line = std::string_view(text).substr(p, nl == std::string::npos ? std::string::npos : nl - p);
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
    if (nl == std::string::npos) break;
    p = nl + 1;
  }
  if (best != std::string::npos) {
    std::string rest = text.substr(best);
    size_t blank = rest.find("\n\n");
    if (blank != std::string::npos) rest = rest.substr(0, blank);
    // Bare SQL inside a fence of another language ("```s0ql"): the closing fence ends it.
    r.sql = clean_sql(before_fence(std::move(rest)));
    r.reasoning = reasoning_before(best);
    r.source = "bare";
    r.ok = !r.sql.empty();
    if (r.ok) return r;
  }

  r.reasoning = reasoning_before(text.size());
  if (!fs.empty())
    r.error = "no fenced block holds SQL (" + std::to_string(fs.size()) + " block(s), last tagged \"" +
              fs.back().tag + "\")";
  else
    r.error = "no SQL found in the answer (no fenced block, no \"SQL:\" line, no line starting with SELECT/WITH)";
  return r;
}

}  // namespace nl2sql::generate
