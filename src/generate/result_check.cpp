// Result summaries and heuristics for the agentic generators (see result_check.h).
#include "result_check.h"
#include "nl2sql/core/text.h"

#include <algorithm>
#include <cctype>
#include <set>

#include "prompt_text.h"

namespace nl2sql::generate {
namespace {

using core::lower;

bool has_phrase(const std::string& text, const std::string& phrase) {
  for (size_t p = text.find(phrase); p != std::string::npos; p = text.find(phrase, p + 1)) {
    bool left = p == 0 || !std::isalnum(static_cast<unsigned char>(text[p - 1]));
    size_t e = p + phrase.size();
    bool right = e >= text.size() || !std::isalnum(static_cast<unsigned char>(text[e]));
    if (left && right) return true;
  }
  return false;
}

}  // namespace

ResultSummary summarize_result(const db::ExecutionResult& r, size_t first_rows) {
  ResultSummary s;
  s.status = r.status;
  s.error = r.error;
  if (!r.ok()) return s;
  s.columns = r.result.columns;
  s.rows = r.result.rows.size();
  s.null_counts.assign(s.columns.size(), 0);
  std::set<std::string> seen;
  for (size_t i = 0; i < r.result.rows.size(); ++i) {
    const auto& row = r.result.rows[i];
    std::string key;
    std::vector<std::string> cells;
    for (size_t c = 0; c < row.size(); ++c) {
      if (row[c].is_null() && c < s.null_counts.size()) ++s.null_counts[c];
      // Type tag + text: 1 and '1' are different rows.
      key += std::to_string(static_cast<int>(row[c].type)) + ":" + row[c].to_display() + '\x1f';
      if (i < first_rows) cells.push_back(cut(row[c].to_display(), 60));
    }
    if (!seen.insert(key).second) ++s.duplicate_rows;
    if (i < first_rows) s.first_rows.push_back(std::move(cells));
  }
  return s;
}

std::string render_summary(const ResultSummary& s) {
  if (!s.ok()) return std::string("status: ") + db::exec_status_name(s.status) + "\nerror: " + s.error + "\n";
  std::string out = "status: ok\nrows: " + std::to_string(s.rows);
  if (s.duplicate_rows > 0) out += " (" + std::to_string(s.duplicate_rows) + " duplicated)";
  out += "\ncolumns:";
  for (size_t c = 0; c < s.columns.size(); ++c)
    out += (c ? ", " : " ") + s.columns[c] + " (" + std::to_string(s.null_counts[c]) + " NULL)";
  out += "\n";
  if (!s.first_rows.empty()) {
    out += "first rows:\n";
    for (const auto& row : s.first_rows) {
      std::string line;
      for (const auto& cell : row) line += (line.empty() ? "" : " | ") + cell;
      out += "  " + line + "\n";
    }
  }
  return out;
}

bool expects_single_answer(const std::string& question) {
  const std::string q = lower(question);
  // "List …", "Name all …", "Which … are …" ask for sets even when they mention a measure.
  for (const char* p : {"list", "name all", "all the", "give me all", "what are the", "which are the", "each", "every",
                        "per"})
    if (has_phrase(q, p)) return false;
  for (const char* p : {"how many", "how much", "what is the average", "what is the total", "what is the sum",
                        "percentage", "ratio", "what is the difference", "the highest", "the lowest", "the most",
                        "the least", "the largest", "the smallest", "the oldest", "the youngest", "the maximum",
                        "the minimum", "calculate the"})
    if (has_phrase(q, p)) return true;
  return false;
}

std::vector<ResultIssue> check_result(const ResultSummary& s, const std::string& question,
                                      const ResultCheckOptions& o) {
  std::vector<ResultIssue> out;
  if (!s.ok()) {
    out.push_back({"error", s.status == db::ExecStatus::kError
                                ? s.error
                                : std::string(db::exec_status_name(s.status)) + ": " + s.error});
    return out;
  }
  if (s.rows == 0) {
    out.push_back({"empty_result",
                   "The query returned no rows; a filter value may be spelt or cased differently from the stored "
                   "values, or a join may use the wrong key."});
    return out;
  }
  if (expects_single_answer(question) && s.rows > o.single_answer_max_rows)
    out.push_back({"row_count", "The question asks for one figure or entity but the query returned " +
                                    std::to_string(s.rows) + " rows; an aggregate, a GROUP BY or a LIMIT may be "
                                    "missing or wrong."});
  else if (o.max_rows > 0 && s.rows > o.max_rows)
    out.push_back({"row_count", "The query returned " + std::to_string(s.rows) +
                                    " rows, more than an answer is likely to have; a condition or join may be "
                                    "missing."});
  if (s.duplicate_rows > 0)
    out.push_back({"duplicate_rows", std::to_string(s.duplicate_rows) + " of " + std::to_string(s.rows) +
                                         " rows repeat an earlier row; a join may fan out or DISTINCT may be "
                                         "needed."});
  for (size_t c = 0; c < s.columns.size(); ++c)
    if (s.null_counts[c] == s.rows)
      out.push_back({"null_column", "Column " + s.columns[c] +
                                        " is NULL in every row; it may come from the wrong table or an outer join "
                                        "that never matches."});
  return out;
}

int issue_weight(const std::vector<ResultIssue>& issues) {
  int w = 0;
  for (const auto& i : issues) w += i.kind == "error" ? 100 : i.kind == "empty_result" ? 10 : 1;
  return w;
}

std::string issues_text(const std::vector<ResultIssue>& issues) {
  if (issues.empty()) return "accepted";
  std::string out;
  for (const auto& i : issues) out += (out.empty() ? "" : "; ") + i.kind + ": " + i.detail;
  return out;
}

}  // namespace nl2sql::generate
