// Spider test-suite text preprocessing (see compare.h).
#include "nl2sql/eval/compare.h"

#include <algorithm>
#include <cctype>
#include <regex>

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
      if (w.size() == 8) {
        std::string lw(w);
        std::transform(lw.begin(), lw.end(), lw.begin(), ::tolower);
        if (lw == "distinct") continue;
      }
    } else {
      ++i;
    }
    out.append(sql.substr(start, i - start));
  }
  return out;
}

std::string replace_cur_year(std::string_view sql) {
  std::string low(sql);
  std::transform(low.begin(), low.end(), low.begin(), ::tolower);
  if (low.find("curdate") == std::string::npos) return std::string(sql);  // skip the slow regex
  static const std::regex kCurYear(R"(YEAR\s*\(\s*CURDATE\s*\(\s*\)\s*\)\s*)", std::regex::icase);
  return std::regex_replace(std::string(sql), kCurYear, "2020");
}

bool spider_order_matters(std::string_view gold_sql) {
  std::string s(gold_sql);
  std::transform(s.begin(), s.end(), s.begin(), ::tolower);
  return s.find("order by") != std::string::npos;
}

}  // namespace nl2sql::eval
