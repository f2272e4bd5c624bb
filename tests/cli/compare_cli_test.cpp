// `nl2sql compare A B`: the table, the flips, --json and --out, and exit 2 with one run.
#include <gtest/gtest.h>

#include <filesystem>

#include <nlohmann/json.hpp>

#include "report/run_fixture.h"
#include "support/test_env.h"

namespace nl2sql {
namespace {

using nlohmann::json;

TEST(CompareCli, MarkdownJsonAndOut) {
  testing::TempDir dir;
  testing::write_fixture_run(dir / "a");
  auto recs = testing::fixture_records();
  recs[1]["verdict"]["verdicts"]["bird"] = true;   // q1 now right
  recs[0]["verdict"]["verdicts"]["bird"] = false;  // q0 now wrong
  recs[3]["verdict"]["verdicts"]["bird"] = false;  // q4 now wrong
  testing::write_run(dir / "b", testing::fixture_manifest(), recs);
  auto r = testing::run_nl2sql("compare " + (dir / "a").string() + " " + (dir / "b").string() + " --out " + (dir / "cmp.md").string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("SIMULATED"), std::string::npos);
  EXPECT_NE(r.out.find("| b | 8 | 37.50 | 37.50 |"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("2 / 1"), std::string::npos) << r.out;
  EXPECT_TRUE(std::filesystem::exists(dir / "cmp.md"));
  auto j = testing::run_nl2sql("compare " + (dir / "a").string() + " " + (dir / "b").string() + " --json");
  ASSERT_EQ(j.exit_code, 0) << j.err;
  json cmp = json::parse(j.out);
  EXPECT_EQ(cmp["comparisons"][0]["flipped"].size(), 3u);
  EXPECT_EQ(cmp["comparisons"][0]["mcnemar"]["method"], "exact_binomial");
  EXPECT_EQ(testing::run_nl2sql("compare " + (dir / "a").string()).exit_code, 2);
}

}  // namespace
}  // namespace nl2sql
