// `nl2sql config keys|check|show`: the documented keys, every problem of a bad config at once
// (exit 2), and the resolved config with extends and --set.
#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "support/test_env.h"

namespace nl2sql {
namespace {

TEST(ConfigCli, KeysCheckAndShow) {
  testing::TempDir dir;
  {
    std::ofstream(dir / "base.json") << R"({"run": {"seed": 1, "threads": 2}, "llm": {"cache": {"mode": "off"}}})";
    std::ofstream(dir / "bad.json") << R"({"extends": "base.json", // comment
      "run": {"thread": 4, "seed": "x"}, "llm": {"cache": {"mode": "rw"}}})";
    std::ofstream(dir / "good.json") << R"({"extends": "base.json", "run": {"threads": 4}})";
  }
  auto keys = testing::run_nl2sql("config keys");
  ASSERT_EQ(keys.exit_code, 0) << keys.err;
  EXPECT_NE(keys.out.find("| `llm.cache.mode` | string | `\"read-write\"` | `read-write`, `read-only`, `off`, `replay` |"), std::string::npos) << keys.out.substr(0, 400);
  EXPECT_NE(keys.out.find("`run.curve_points`"), std::string::npos);

  auto bad = testing::run_nl2sql("config check --config " + (dir / "bad.json").string());
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.out.find("3 config problems"), std::string::npos) << bad.out;
  EXPECT_NE(bad.out.find("unknown config key \"run.thread\" (closest known key: \"run.threads\")"), std::string::npos) << bad.out;
  EXPECT_NE(bad.out.find("\"run.seed\": expected integer, got string"), std::string::npos);
  EXPECT_NE(bad.out.find("\"llm.cache.mode\": \"rw\" is not one of"), std::string::npos);

  auto fixed = testing::run_nl2sql("config check --config " + (dir / "bad.json").string() +
                                   " --set run.seed=3 --set llm.cache.mode=replay --set run.thread=null");
  EXPECT_EQ(fixed.exit_code, 2);  // run.thread is still there (null)
  auto good = testing::run_nl2sql("config check --config " + (dir / "good.json").string() + " --set run.max_cost_usd=2.5");
  EXPECT_EQ(good.exit_code, 0) << good.out << good.err;
  EXPECT_NE(good.out.find("OK"), std::string::npos);

  auto show = testing::run_nl2sql("config show --config " + (dir / "good.json").string() + " --set run.seed=9");
  ASSERT_EQ(show.exit_code, 0) << show.err;
  auto j = nlohmann::json::parse(show.out);
  EXPECT_EQ(j["run"]["threads"], 4);
  EXPECT_EQ(j["run"]["seed"], 9);
  EXPECT_EQ(j["llm"]["cache"]["mode"], "off");
}

// Every command that reads a config validates it the same way (one loader, cli/config_options.h):
// a misspelt key stops the command with exit 2 and names the key, before any work, instead of
// being silently ignored (nl2sql generate and nl2sql cache once read their configs unchecked).
TEST(ConfigCli, EveryCommandWithAConfigRefusesAnUnknownKey) {
  testing::TempDir dir;
  std::ofstream(dir / "c.json") << "{}";
  const std::vector<std::string> commands = {
      "run --benchmark bird --data . --config " + (dir / "c.json").string(), "generate --benchmark bird --data . --question-id 0",
      "retrieve --benchmark bird --data . --question-id 0", "index --benchmark bird --data .",
      "schema --benchmark bird --data .", "metadata --benchmark bird --data .", "models check", "cache stats"};
  for (const auto& c : commands) {
    auto r = testing::run_nl2sql(c + " --set run.thread=4");
    EXPECT_EQ(r.exit_code, 2) << c << "\n" << r.out << r.err;
    EXPECT_NE(r.err.find("unknown config key \"run.thread\" (closest known key: \"run.threads\")"), std::string::npos)
        << c << "\n" << r.err;
  }
}

}  // namespace
}  // namespace nl2sql
