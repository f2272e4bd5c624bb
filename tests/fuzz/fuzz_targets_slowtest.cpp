// Slow tier: a short libFuzzer run of every target of tests/fuzz/run_fuzz.sh except the SQL
// parser (tests/sql/fuzz_slowtest.cpp runs that one), linked against the library this test was
// built with. NL2SQL_FUZZ_SECONDS sets the time per target (default 20). Skips visibly when
// clang++ or libFuzzer is missing, or when this build is sanitized (gcc's ASan runtime and
// clang's cannot share a process).
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

#include "support/test_env.h"

namespace nl2sql {
namespace {

bool libfuzzer_available() {
  if (std::system("command -v clang++ >/dev/null 2>&1") != 0) return false;
  // clang++ without the libFuzzer runtime fails to link this.
  return std::system("printf 'extern \"C\" int LLVMFuzzerTestOneInput(const char*, unsigned long) { return 0; }' | "
                     "clang++ -x c++ -fsanitize=fuzzer - -o /dev/null >/dev/null 2>&1") == 0;
}

class FuzzTargets : public ::testing::TestWithParam<const char*> {};

TEST_P(FuzzTargets, SurvivesAShortRun) {
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "sanitized build: the fuzz targets link the uninstrumented library of a normal build";
#endif
  if (!libfuzzer_available()) GTEST_SKIP() << "clang++ with libFuzzer not found: skipping fuzz target " << GetParam();
  // The library sits beside the nl2sql binary in the build directory.
  auto lib = std::filesystem::path(NL2SQL_BINARY).parent_path() / "libnl2sql_lib.a";
  ASSERT_TRUE(std::filesystem::exists(lib)) << lib;
  const char* env = std::getenv("NL2SQL_FUZZ_SECONDS");
  std::string seconds = env ? env : "20";
  testing::TempDir out;
  auto log = out / "log.txt";
  // A fixed seed: the same mutations every run, so CI does not pass or fail by chance (new
  // crashes are found by longer, unseeded runs of run_fuzz.sh).
  std::string cmd = "FUZZ_FLAGS=-seed=1 NL2SQL_LIB='" + lib.string() + "' '" + std::string(NL2SQL_SOURCE_DIR) +
                    "/tests/fuzz/run_fuzz.sh' " + GetParam() + " '" + out.path().string() + "' " + seconds +
                    " > '" + log.string() + "' 2>&1";
  int rc = std::system(cmd.c_str());
  std::ifstream in(log);
  std::stringstream text;
  text << in.rdbuf();
  std::string s = text.str();
  // The figures for the report: executions and the final stats line.
  auto at = s.find("stat::number_of_executed_units:");
  std::cout << "[fuzz] " << GetParam() << ": "
            << (at == std::string::npos ? "no stats" : s.substr(at, s.find('\n', at) - at)) << "\n";
  EXPECT_EQ(rc, 0) << "fuzz target " << GetParam() << " failed:\n" << s.substr(s.size() > 4000 ? s.size() - 4000 : 0);
}

INSTANTIATE_TEST_SUITE_P(Hardening, FuzzTargets, ::testing::Values("llm_answers", "config", "predictions"));

}  // namespace
}  // namespace nl2sql
