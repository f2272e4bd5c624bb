#include "nl2sql/report/merge.h"
#include "nl2sql/run/run_data.h"

#include <gtest/gtest.h>

#include "nl2sql/report/run_report.h"
#include "report/run_fixture.h"
#include "support/test_env.h"

namespace nl2sql::report {
namespace {

using nlohmann::json;

TEST(Merge, ShardsMergedEqualTheUnshardedRun) {
  testing::TempDir dir;
  testing::write_fixture_run(dir / "all");
  for (size_t i = 0; i < 3; ++i) testing::write_shard_run(dir / ("s" + std::to_string(i)), i, 3);
  auto merged = merge_runs({dir / "s0", dir / "s1", dir / "s2"}, dir / "merged");
  ASSERT_TRUE(merged.is_ok()) << merged.status().to_string();
  EXPECT_EQ(merged->questions, 8u);
  EXPECT_EQ(merged->rows, 16u);
  EXPECT_EQ(merged->overlapping, 0u);
  EXPECT_TRUE(merged->manifest["shard"].is_null());
  EXPECT_EQ(merged->manifest["merged_from"].size(), 3u);
  EXPECT_EQ(merged->manifest["question_ids"], testing::fixture_manifest()["question_ids"]);

  auto whole = run::load_run(dir / "all");
  auto union_run = run::load_run(dir / "merged");
  ASSERT_TRUE(whole.is_ok());
  ASSERT_TRUE(union_run.is_ok()) << union_run.status().to_string();
  EXPECT_EQ(union_run->records, whole->records);
  EXPECT_EQ(union_run->config, whole->config);
  json a = build_report(*whole, ReportOptions{}), b = build_report(*union_run, ReportOptions{});
  for (const char* k : {"ex", "metrics", "selectors", "bounds", "generators", "overlap", "curves", "selection_errors", "usage", "latency_s", "weights", "questions"})
    EXPECT_EQ(a[k], b[k]) << k;
}

TEST(Merge, AgreeingOverlapIsKeptOnceDisagreeingIsRefused) {
  testing::TempDir dir;
  testing::write_shard_run(dir / "s0", 0, 2);
  testing::write_fixture_run(dir / "all");
  auto merged = merge_runs({dir / "s0", dir / "all"}, dir / "m1");
  ASSERT_TRUE(merged.is_ok()) << merged.status().to_string();
  EXPECT_EQ(merged->questions, 8u);
  EXPECT_EQ(merged->overlapping, 4u);

  auto recs = testing::fixture_records();
  recs[2]["prediction"] = "SELECT 42";
  json m = testing::fixture_manifest();
  testing::write_run(dir / "other", m, recs);
  auto refused = merge_runs({dir / "s0", dir / "other"}, dir / "m2");
  ASSERT_FALSE(refused.is_ok());
  EXPECT_NE(refused.status().message().find("question 2 disagrees"), std::string::npos) << refused.status().message();

  m["config_hash"] = "cfg-other";
  testing::write_run(dir / "cfg", m, {recs[1]});
  refused = merge_runs({dir / "s0", dir / "cfg"}, dir / "m3");
  ASSERT_FALSE(refused.is_ok());
  EXPECT_NE(refused.status().message().find("config_hash differs (\"cfg-other\" vs \"cfg-fixture-1\")"), std::string::npos)
      << refused.status().message();

  // The output must be empty.
  refused = merge_runs({dir / "s0", dir / "all"}, dir / "m1");
  ASSERT_FALSE(refused.is_ok());
  EXPECT_NE(refused.status().message().find("already holds a run"), std::string::npos);
}

}  // namespace
}  // namespace nl2sql::report
