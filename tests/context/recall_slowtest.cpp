// Value retrieval recall on real data (NL2SQL_DATA): the index (LSH + short values) within one
// point of the exhaustive edit-distance baseline on Spider dev and BIRD superhero, and on one-letter
// typos of superhero's literals (as written and lowercased), kept as a regression check. Speed
// (the query-time ratio) is measured by scripts/bench/context_recall.sh, not asserted here:
// tests stay deterministic.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "nl2sql/core/files.h"
#include "support/test_env.h"

namespace nl2sql {
namespace {

nlohmann::json recall(const std::string& args, const testing::TempDir& dir) {
  const auto out = dir / "recall.json";
  auto r = testing::run_nl2sql("retrieve " + args + " --recall --index-dir '" + (dir / "index").string() +
                               "' --recall-json '" + out.string() + "'");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  auto j = core::read_json_file(out);
  EXPECT_TRUE(j.is_ok());
  return j.is_ok() ? *j : nlohmann::json::object();
}

void check(const nlohmann::json& j, size_t min_pairs) {
  ASSERT_GE(j.value("pairs", size_t{0}), min_pairs);
  for (const char* k : {"recall@5", "recall@10", "recall@20"})
    EXPECT_GE(j["index"][k].get<double>(), j["exhaustive"][k].get<double>() - 1.0) << k;
  EXPECT_GE(j["index"]["recall@20"].get<double>(), 90.0);
}

TEST(ContextRecall, SpiderDev) {
  NL2SQL_REQUIRE_DATA(data);
  testing::TempDir dir;
  check(recall("--benchmark spider --data '" + (data / "spider").string() + "'", dir), 300);
}

TEST(ContextRecall, BirdSuperhero) {
  NL2SQL_REQUIRE_DATA(data);
  testing::TempDir dir;
  check(recall("--benchmark bird --data '" + (data / "bird").string() + "' --db superhero", dir), 100);
}

TEST(ContextRecall, BirdSuperheroOneLetterTypos) {
  NL2SQL_REQUIRE_DATA(data);
  testing::TempDir dir;
  auto j = recall("--benchmark bird --data '" + (data / "bird").string() + "' --db superhero --typos", dir);
  ASSERT_GE(j["typos"]["as_written"]["index"].value("cases", size_t{0}), 200u) << j.dump(2);
  for (const char* set : {"as_written", "lowercased"})
    for (const char* k : {"recall@5", "recall@10", "recall@20"})
      EXPECT_GE(j["typos"][set]["index"][k].get<double>(), j["typos"][set]["exhaustive"][k].get<double>() - 1.0)
          << set << " " << k;
}

}  // namespace
}  // namespace nl2sql
