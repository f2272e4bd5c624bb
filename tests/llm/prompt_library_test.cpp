// The prompt library over a small bundled folder of its own: an override folder replaces
// templates file by file, a `template` key's file stands in for a role, and a file whose
// placeholders do not fit fails at open naming its file, line and placeholder.
#include "nl2sql/llm/prompt_library.h"

#include <gtest/gtest.h>

#include <fstream>

#include "support/test_env.h"

namespace nl2sql::llm {
namespace {

namespace fs = std::filesystem;

class PromptLibraryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    fs::create_directories(bundled_);
    fs::create_directories(overrides_);
    write(bundled_ / "generate_baseline.txt", "Schema:\n{{schema}}\nQuestion: {{question}}\n");
    write(bundled_ / "fix_sql.txt", "Fix {{sql}} for {{question}}\n");
    write(bundled_ / "sqlite_syntax.md", "## abs | abs\n");
  }
  static void write(const fs::path& p, const std::string& text) { std::ofstream(p, std::ios::binary) << text; }

  testing::TempDir dir_;
  fs::path bundled_ = dir_ / "bundled";
  fs::path overrides_ = dir_ / "mine";
};

TEST_F(PromptLibraryTest, AnOverrideReplacesItsTemplateAndTheRestStayBundled) {
  write(overrides_ / "generate_baseline.txt", "MINE {{question}} over\n{{schema}}\n");
  auto lib = PromptLibrary::open(overrides_, bundled_);
  ASSERT_TRUE(lib.is_ok()) << lib.status().message();
  auto gen = lib->load("generate_baseline");
  ASSERT_TRUE(gen.is_ok()) << gen.status().message();
  EXPECT_EQ(gen->text(), "MINE {{question}} over\n{{schema}}\n");
  auto fix = lib->load("fix_sql");
  ASSERT_TRUE(fix.is_ok());
  EXPECT_EQ(fix->text(), "Fix {{sql}} for {{question}}\n");

  auto used = lib->used();
  ASSERT_EQ(used.size(), 2u);
  EXPECT_EQ(used[0].name, "fix_sql");
  EXPECT_EQ(used[0].source, "bundled");
  EXPECT_EQ(used[0].hash, fix->hash());
  EXPECT_EQ(used[1].name, "generate_baseline");
  EXPECT_EQ(used[1].source, (overrides_ / "generate_baseline.txt").string());
  EXPECT_EQ(used[1].hash, gen->hash());

  auto effective = lib->effective();
  ASSERT_TRUE(effective.is_ok());
  ASSERT_EQ(effective->size(), 2u);  // every bundled template, as resolved
  EXPECT_EQ((*effective)[0].source, "bundled");
  EXPECT_EQ((*effective)[1].source, (overrides_ / "generate_baseline.txt").string());
  EXPECT_TRUE(lib->unmatched_overrides().empty());
}

TEST_F(PromptLibraryTest, AnUnknownPlaceholderFailsAtOpenNamingFileAndLine) {
  write(overrides_ / "generate_baseline.txt", "{{schema}}\n{{question}}\nHint: {{hint}}\n");
  auto lib = PromptLibrary::open(overrides_, bundled_);
  ASSERT_FALSE(lib.is_ok());
  EXPECT_EQ(lib.status().code(), ErrorCode::kInvalidInput);
  const std::string msg = lib.status().message();
  EXPECT_NE(msg.find((overrides_ / "generate_baseline.txt").string() + ":3: unknown placeholder {{hint}}"),
            std::string::npos) << msg;
  EXPECT_NE(msg.find("takes question, schema"), std::string::npos) << msg;
}

TEST_F(PromptLibraryTest, AMissingPlaceholderFailsNamingIt) {
  write(overrides_ / "fix_sql.txt", "Fix it for {{question}}\n");
  auto lib = PromptLibrary::open(overrides_, bundled_);
  ASSERT_FALSE(lib.is_ok());
  const std::string msg = lib.status().message();
  EXPECT_NE(msg.find((overrides_ / "fix_sql.txt").string() + ": missing placeholder {{sql}}"), std::string::npos)
      << msg;
  EXPECT_NE(msg.find("line 1"), std::string::npos) << msg;  // where the bundled one uses it
}

TEST_F(PromptLibraryTest, EveryBadFileIsReportedAtOnce) {
  write(overrides_ / "fix_sql.txt", "Fix {{sql}} for {{question}} {{extra}}\n");
  write(overrides_ / "generate_baseline.txt", "{{question}}\n");
  auto lib = PromptLibrary::open(overrides_, bundled_);
  ASSERT_FALSE(lib.is_ok());
  const std::string msg = lib.status().message();
  EXPECT_NE(msg.find("fix_sql.txt:1: unknown placeholder {{extra}}"), std::string::npos) << msg;
  EXPECT_NE(msg.find("generate_baseline.txt: missing placeholder {{schema}}"), std::string::npos) << msg;
}

TEST_F(PromptLibraryTest, AMalformedOverrideFailsNamingItsFile) {
  write(overrides_ / "fix_sql.txt", "Fix {{sql}} for {{question}}\n{{ not a name }}\n");
  auto lib = PromptLibrary::open(overrides_, bundled_);
  ASSERT_FALSE(lib.is_ok());
  EXPECT_NE(lib.status().message().find("fix_sql.txt"), std::string::npos) << lib.status().message();
  EXPECT_NE(lib.status().message().find("line 2"), std::string::npos) << lib.status().message();
}

TEST_F(PromptLibraryTest, AMissingFolderFails) {
  auto lib = PromptLibrary::open(dir_ / "nowhere", bundled_);
  ASSERT_FALSE(lib.is_ok());
  EXPECT_NE(lib.status().message().find("nowhere"), std::string::npos);
  EXPECT_TRUE(PromptLibrary::open({}, bundled_).is_ok());  // no folder: bundled alone
}

TEST_F(PromptLibraryTest, ATemplateKeyPicksAnotherFileCheckedAgainstTheRole) {
  write(overrides_ / "terse_baseline.txt", "{{question}} -- {{schema}}\n");
  write(overrides_ / "wrong_fix.txt", "Fix {{sql}}\n");
  auto lib = PromptLibrary::open(overrides_, bundled_);
  ASSERT_TRUE(lib.is_ok()) << lib.status().message();
  EXPECT_EQ(lib->unmatched_overrides(), (std::vector<std::string>{"terse_baseline", "wrong_fix"}));

  auto t = lib->load_as("generate_baseline", "terse_baseline.txt");
  ASSERT_TRUE(t.is_ok()) << t.status().message();
  EXPECT_EQ(t->text(), "{{question}} -- {{schema}}\n");
  auto used = lib->used();
  ASSERT_EQ(used.size(), 1u);
  EXPECT_EQ(used[0].name, "generate_baseline");
  EXPECT_EQ(used[0].file, "terse_baseline");
  EXPECT_EQ(used[0].source, (overrides_ / "terse_baseline.txt").string());

  auto wrong = lib->load_as("fix_sql", "wrong_fix");
  ASSERT_FALSE(wrong.is_ok());
  EXPECT_NE(wrong.status().message().find("wrong_fix.txt: missing placeholder {{question}}"), std::string::npos)
      << wrong.status().message();

  // A bundled file may stand in too, and a path is read as it is.
  write(bundled_ / "generate_other.txt", "{{schema}} {{question}} other\n");
  auto other = lib->load_as("generate_baseline", "generate_other");
  ASSERT_TRUE(other.is_ok()) << other.status().message();
  write(dir_ / "elsewhere.txt", "{{schema}}?{{question}}\n");
  auto by_path = lib->load_as("generate_baseline", (dir_ / "elsewhere.txt").string());
  ASSERT_TRUE(by_path.is_ok()) << by_path.status().message();
  EXPECT_EQ(by_path->text(), "{{schema}}?{{question}}\n");
  auto missing = lib->load_as("generate_baseline", "no_such_file");
  ASSERT_FALSE(missing.is_ok());
  EXPECT_NE(missing.status().message().find("no_such_file"), std::string::npos);
}

TEST_F(PromptLibraryTest, AResourceComesFromTheOverrideFolderFirst) {
  auto bundled = PromptLibrary::open({}, bundled_);
  ASSERT_TRUE(bundled.is_ok());
  EXPECT_EQ(*bundled->resource("sqlite_syntax.md"), bundled_ / "sqlite_syntax.md");
  write(overrides_ / "sqlite_syntax.md", "## abs | abs, absolute\n");
  auto mine = PromptLibrary::open(overrides_, bundled_);
  ASSERT_TRUE(mine.is_ok());
  EXPECT_EQ(*mine->resource("sqlite_syntax.md"), overrides_ / "sqlite_syntax.md");
  ASSERT_EQ(mine->used().size(), 1u);
  EXPECT_NE(mine->used()[0].hash, bundled->used()[0].hash);
}

TEST(PromptLibrary, EveryBundledTemplateLoadsThroughTheLibrary) {
  auto lib = PromptLibrary::bundled();
  auto all = lib.effective();
  ASSERT_TRUE(all.is_ok()) << all.status().message();
  EXPECT_GT(all->size(), 20u);
  for (const auto& t : *all) {
    EXPECT_EQ(t.source, "bundled");
    auto loaded = lib.load(t.name);
    ASSERT_TRUE(loaded.is_ok()) << t.name;
    EXPECT_EQ(loaded->hash(), t.hash);
  }
}

}  // namespace
}  // namespace nl2sql::llm
