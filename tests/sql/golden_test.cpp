// Golden files for the SQL parser, printer, normalizer and feature tags: tests/sql/golden/*.test.
// Each record is a directive line, the input SQL (one or more lines), a line "----", and the
// expected output up to the next blank line:
//
//   query                 canonical text (to_sql), which must also be a fixpoint of parse+print
//   lower                 canonical text with lower-case keywords
//   normalize             normalize_sql (what self-consistency and caches compare)
//   features              feature tags, then "hardness: <spider hardness>"
//   error                 the parse error's message (position, expected tokens, excerpt)
//
// Lines starting with '#' between records are comments. A round-trip check passes on a parser
// that drops a clause consistently; an expected text written out by hand does not.
// NL2SQL_UPDATE_GOLDEN=1 rewrites the expected outputs from the current code (read the diff).
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "nl2sql/sql/features.h"
#include "nl2sql/sql/normalize.h"
#include "nl2sql/sql/parser.h"
#include "nl2sql/sql/printer.h"
#include "support/test_env.h"

namespace nl2sql::sql {
namespace {

namespace fs = std::filesystem;

std::string join(const std::vector<std::string>& lines) {
  std::string out;
  for (size_t i = 0; i < lines.size(); ++i) out += (i ? "\n" : "") + lines[i];
  return out;
}

// What `directive` prints for `input`.
std::string run_directive(const std::string& directive, const std::string& input) {
  if (directive == "normalize") {
    auto n = normalize_sql(input);
    return n.is_ok() ? *n : "error: " + n.status().message();
  }
  auto stmt = parse(input);
  if (directive == "error") return stmt.is_ok() ? "parsed: " + to_sql(*stmt) : stmt.status().message();
  if (!stmt.is_ok()) return "error: " + stmt.status().message();
  if (directive == "query") {
    std::string once = to_sql(*stmt);
    auto again = parse(once);
    if (!again.is_ok()) return once + "\n(not a fixpoint: " + again.status().message() + ")";
    if (to_sql(*again) != once) return once + "\n(not a fixpoint: prints again as " + to_sql(*again) + ")";
    return once;
  }
  if (directive == "lower") return to_sql(*stmt, {.lower_keywords = true});
  if (directive == "features") {
    if (!stmt->is_query()) return "not a query";
    std::string tags;
    for (const auto& t : compute_features(*stmt->select).tags()) tags += (tags.empty() ? "" : " ") + t;
    return tags + "\nhardness: " + spider_hardness(*stmt->select);
  }
  return "unknown directive '" + directive + "'";
}

struct GoldenResult {
  std::vector<std::string> mismatches;  // "file:line: directive: expected … got …"
  std::string updated;                  // the file with every expected output rewritten
  size_t records = 0;
};

GoldenResult check_golden(const std::string& text, const std::string& name) {
  GoldenResult out;
  std::vector<std::string> lines;
  {
    std::istringstream in(text);
    std::string l;
    while (std::getline(in, l)) lines.push_back(l);
  }
  std::vector<std::string> written;
  size_t i = 0;
  while (i < lines.size()) {
    if (lines[i].empty() || lines[i][0] == '#') {
      written.push_back(lines[i++]);
      continue;
    }
    const size_t start = i;
    const std::string directive = lines[i++];
    std::vector<std::string> input;
    while (i < lines.size() && lines[i] != "----") input.push_back(lines[i++]);
    if (i == lines.size()) {
      out.mismatches.push_back(name + ":" + std::to_string(start + 1) + ": record without a '----' line");
      return out;
    }
    ++i;  // ----
    std::vector<std::string> expected;
    while (i < lines.size() && !lines[i].empty()) expected.push_back(lines[i++]);
    const std::string actual = run_directive(directive, join(input));
    ++out.records;
    if (actual != join(expected))
      out.mismatches.push_back(name + ":" + std::to_string(start + 1) + ": " + directive + " of\n  " + join(input) +
                               "\nexpected:\n  " + join(expected) + "\ngot:\n  " + actual);
    written.push_back(directive);
    written.insert(written.end(), input.begin(), input.end());
    written.push_back("----");
    written.push_back(actual);
  }
  out.updated = join(written) + "\n";
  return out;
}

fs::path golden_dir() { return testing::fixtures_dir().parent_path() / "sql" / "golden"; }

TEST(SqlGolden, EveryRecordOfEveryFile) {
  const bool update = std::getenv("NL2SQL_UPDATE_GOLDEN") != nullptr;
  size_t files = 0, records = 0;
  for (const auto& entry : fs::directory_iterator(golden_dir())) {
    if (entry.path().extension() != ".test") continue;
    ++files;
    std::ifstream in(entry.path());
    std::stringstream ss;
    ss << in.rdbuf();
    auto result = check_golden(ss.str(), entry.path().filename().string());
    records += result.records;
    if (update) {
      std::ofstream(entry.path()) << result.updated;
      continue;
    }
    for (const auto& m : result.mismatches)
      ADD_FAILURE() << m << "\n(intended? rerun with NL2SQL_UPDATE_GOLDEN=1 and read the diff)";
  }
  EXPECT_GE(files, 5u);
  EXPECT_GE(records, 100u);
}

// The runner itself: a wrong expected text is reported with its line, an unterminated record
// is reported, and update mode writes the actual output.
TEST(SqlGolden, TheRunnerReportsMismatchesAndRewrites) {
  auto r = check_golden("# c\nquery\nselect a from t where x=1\n----\nSELECT a FROM t\n", "t.test");
  ASSERT_EQ(r.mismatches.size(), 1u);
  EXPECT_NE(r.mismatches[0].find("t.test:2: query"), std::string::npos) << r.mismatches[0];
  EXPECT_EQ(r.updated, "# c\nquery\nselect a from t where x=1\n----\nSELECT a FROM t WHERE x = 1\n");
  EXPECT_TRUE(check_golden(r.updated, "t.test").mismatches.empty());
  EXPECT_FALSE(check_golden("query\nselect 1\n", "u.test").mismatches.empty());
  EXPECT_EQ(run_directive("bogus", "SELECT 1"), "unknown directive 'bogus'");
}

}  // namespace
}  // namespace nl2sql::sql
