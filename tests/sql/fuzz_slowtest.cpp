// Slow tier: builds the libFuzzer target for the parser with clang++ and runs it for a bounded
// time (NL2SQL_FUZZ_SECONDS, default 30). Skips visibly when clang++ is not installed.
#include <cstdlib>
#include <string>

#include <gtest/gtest.h>

#include "support/test_env.h"

namespace nl2sql::sql {
namespace {

TEST(SqlFuzz, ParserSurvivesLibFuzzer) {
  if (std::system("command -v clang++ >/dev/null 2>&1") != 0)
    GTEST_SKIP() << "clang++ not found: skipping the parser fuzz run";
  const char* env = std::getenv("NL2SQL_FUZZ_SECONDS");
  std::string seconds = env ? env : "30";
  nl2sql::testing::TempDir out;
  // A fixed seed, as in tests/fuzz/fuzz_targets_slowtest.cpp: CI does not fail by chance.
  std::string cmd = "FUZZ_FLAGS=-seed=1 " + std::string(NL2SQL_SOURCE_DIR) + "/tests/fuzz/run_sql_fuzz.sh " +
                    out.path().string() + " " + seconds + " > " + (out / "log.txt").string() + " 2>&1";
  int rc = std::system(cmd.c_str());
  std::string tail_cmd = "tail -20 " + (out / "log.txt").string();
  if (rc != 0) std::system(tail_cmd.c_str());
  EXPECT_EQ(rc, 0) << "fuzzer reported a failure (see log above)";
}

}  // namespace
}  // namespace nl2sql::sql
