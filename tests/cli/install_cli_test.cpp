// An installed nl2sql (issue 40, item 2): `cmake --install` into a temporary prefix, the prefix
// moved elsewhere (so nothing of the build or source tree is where the binary was built to look),
// and the quickstart config run from the moved copy with its own prompts and config schema.
// `--version` names the commit, and the run's manifest records it.
#include <sys/wait.h>

#include <cstdlib>
#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "support/test_env.h"

namespace nl2sql {
namespace {
namespace fs = std::filesystem;

std::string quote(const fs::path& p) { return "'" + p.string() + "'"; }

// Runs `cmd` through the shell with NL2SQL_PROMPTS / NL2SQL_SCHEMA_DIR removed; stdout+stderr.
testing::CommandResult shell(const std::string& cmd, const fs::path& scratch) {
  const fs::path out = scratch / "cmd_out.txt";
  int rc = std::system(("env -u NL2SQL_PROMPTS -u NL2SQL_SCHEMA_DIR " + cmd + " >" + quote(out) + " 2>&1").c_str());
  std::ifstream in(out);
  testing::CommandResult r;
  r.exit_code = WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
  r.out.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  return r;
}

TEST(Install, AMovedInstallRunsTheQuickstartWithItsOwnPromptsAndSchema) {
  testing::TempDir dir;
  const fs::path prefix = dir / "prefix", moved = dir / "elsewhere";
  auto install = shell(std::string(NL2SQL_CMAKE) + " --install " + quote(NL2SQL_BUILD_DIR) + " --prefix " + quote(prefix), dir.path());
  ASSERT_EQ(install.exit_code, 0) << install.out;
  for (const char* f : {"bin/nl2sql", "share/nl2sql/prompts/generate_divide_conquer.txt",
                        "share/nl2sql/configs/quickstart.json", "share/nl2sql/configs/schema/run.json",
                        "share/nl2sql/doc/README.md"})
    EXPECT_TRUE(fs::exists(prefix / f)) << f;
  fs::rename(prefix, moved);
  const fs::path bin = moved / "bin" / "nl2sql";

  auto version = shell(quote(bin) + " --version", dir.path());
  ASSERT_EQ(version.exit_code, 0) << version.out;
  EXPECT_NE(version.out.find("(commit "), std::string::npos) << version.out;

  const fs::path data = testing::build_mini_bird(dir / "mini");
  const fs::path out = dir / "run";
  auto run = shell(quote(bin) + " run --config " + quote(moved / "share/nl2sql/configs/quickstart.json") +
                       " --benchmark bird --data " + quote(data) + " --out " + quote(out) + " --index-dir " +
                       quote(dir / "index") + " --progress off --questions 0-2",
                   dir.path());
  ASSERT_EQ(run.exit_code, 0) << run.out;
  EXPECT_TRUE(fs::exists(out / "report.html"));
  const auto manifest = testing::read_json_file(out / "manifest.json");
  ASSERT_FALSE(manifest["templates"].empty());  // the templates the run used, from the installed folder
  for (const auto& t : manifest["templates"]) {
    EXPECT_EQ(t["source"], "bundled") << t.dump();
    EXPECT_TRUE(fs::exists(moved / "share/nl2sql/prompts" / (t["name"].get<std::string>() + ".txt"))) << t.dump();
  }
  const std::string commit = manifest.value("tool_commit", "");
  EXPECT_FALSE(commit.empty());
  EXPECT_NE(version.out.find(commit), std::string::npos) << version.out << " vs " << commit;

  // With the prompts gone from the moved copy, the run stops naming where it looked.
  fs::remove_all(moved / "share/nl2sql/prompts");
  auto broken = shell(quote(bin) + " run --config " + quote(moved / "share/nl2sql/configs/quickstart.json") +
                          " --benchmark bird --data " + quote(data) + " --out " + quote(dir / "run2") +
                          " --index-dir " + quote(dir / "index") + " --progress off --questions 0",
                      dir.path());
  EXPECT_NE(broken.exit_code, 0);
  EXPECT_NE(broken.out.find((moved / "share/nl2sql/prompts").string()), std::string::npos) << broken.out;
}

}  // namespace
}  // namespace nl2sql
