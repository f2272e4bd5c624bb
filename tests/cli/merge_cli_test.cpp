// `nl2sql merge`: shard folders into one store with its reports; exit 2 with one input.
#include <gtest/gtest.h>

#include <filesystem>

#include "report/run_fixture.h"
#include "support/test_env.h"

namespace nl2sql {
namespace {

TEST(MergeCli, WritesStoreAndReports) {
  testing::TempDir dir;
  testing::write_shard_run(dir / "s0", 0, 2);
  testing::write_shard_run(dir / "s1", 1, 2);
  auto r = testing::run_nl2sql("merge " + (dir / "s0").string() + " " + (dir / "s1").string() + " --out " + (dir / "m").string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("8 questions"), std::string::npos) << r.out;
  for (const char* f : {"run.sqlite", "manifest.json", "config.resolved.json", "report.json", "report.md", "per_question.csv", "report.html"})
    EXPECT_TRUE(std::filesystem::exists(dir / "m" / f)) << f;
  EXPECT_EQ(testing::run_nl2sql("merge " + (dir / "s0").string() + " --out " + (dir / "x").string()).exit_code, 2);
}

}  // namespace
}  // namespace nl2sql
