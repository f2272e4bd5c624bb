// `nl2sql cache stats|export|import|prune` on a response cache file.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "nl2sql/llm/response_cache.h"
#include "support/chat_response.h"
#include "support/test_env.h"

namespace nl2sql::llm {
namespace {

using nl2sql::testing::canned_response;

TEST(LlmCacheCommand, StatsExportImportPrune) {
  nl2sql::testing::TempDir tmp;
  {
    auto c = ResponseCache::open(tmp / "c.sqlite", false).value();
    ASSERT_TRUE(c->store("k1", "big", "qwen", "{}", canned_response("one")).is_ok());
    ASSERT_TRUE(c->store("k2", "big", "qwen", "{}", canned_response("two")).is_ok());
  }
  const std::string cache = "--cache '" + (tmp / "c.sqlite").string() + "'";
  auto stats = nl2sql::testing::run_nl2sql("cache stats " + cache);
  EXPECT_EQ(stats.exit_code, 0) << stats.err;
  EXPECT_NE(stats.out.find("entries      2"), std::string::npos) << stats.out;
  auto js = nl2sql::testing::run_nl2sql("cache stats --json " + cache);
  ASSERT_EQ(js.exit_code, 0) << js.err;
  EXPECT_EQ(nlohmann::json::parse(js.out)["by_model"]["qwen"], 2);

  auto exp = nl2sql::testing::run_nl2sql("cache export '" + (tmp / "e.jsonl").string() + "' " + cache);
  EXPECT_EQ(exp.exit_code, 0) << exp.err;
  auto imp = nl2sql::testing::run_nl2sql("cache import '" + (tmp / "e.jsonl").string() +
                                         "' --set llm.cache.path='" + (tmp / "d.sqlite").string() + "'");
  EXPECT_EQ(imp.exit_code, 0) << imp.err;
  EXPECT_NE(imp.out.find("imported 2"), std::string::npos) << imp.out;

  auto refuse = nl2sql::testing::run_nl2sql("cache prune " + cache);
  EXPECT_EQ(refuse.exit_code, 2);
  auto prune = nl2sql::testing::run_nl2sql("cache prune --model qwen " + cache);
  EXPECT_EQ(prune.exit_code, 0) << prune.err;
  EXPECT_NE(prune.out.find("pruned 2"), std::string::npos) << prune.out;

  auto missing = nl2sql::testing::run_nl2sql("cache stats --cache '" + (tmp / "none.sqlite").string() + "'");
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_NE(missing.err.find("does not exist"), std::string::npos) << missing.err;
}

}  // namespace
}  // namespace nl2sql::llm
