// The README documents every config key: its "Config keys" table is generated from the schema
// fragments (scripts/update_readme_config.sh) and must list every documented key, and every
// shipped config must validate against the schema.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "nl2sql/core/config.h"
#include "nl2sql/core/config_schema.h"
#include "support/test_env.h"

namespace nl2sql::core {
namespace {

namespace fs = std::filesystem;

fs::path source_root() { return testing::fixtures_dir().parent_path().parent_path(); }

TEST(ReadmeConfig, EveryDocumentedKeyIsInTheReadmeTable) {
  auto schema = ConfigSchema::load_dir(source_root() / "configs" / "schema");
  ASSERT_TRUE(schema.is_ok()) << schema.status().message();
  std::ifstream in(source_root() / "README.md");
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string readme = ss.str();
  auto begin = readme.find("<!-- config-keys -->");
  auto end = readme.find("<!-- /config-keys -->");
  ASSERT_NE(begin, std::string::npos) << "README.md lacks the <!-- config-keys --> table";
  ASSERT_NE(end, std::string::npos);
  const std::string table = readme.substr(begin, end - begin);
  ASSERT_GT(schema->keys().size(), 50u);
  for (const auto& key : schema->keys())
    EXPECT_NE(table.find("`" + key.pattern + "`"), std::string::npos)
        << key.pattern << " is not in README.md's config table: run scripts/update_readme_config.sh";
}

TEST(ReadmeConfig, EveryShippedConfigValidates) {
  auto schema = ConfigSchema::load_dir(source_root() / "configs" / "schema");
  ASSERT_TRUE(schema.is_ok()) << schema.status().message();
  size_t checked = 0;
  for (const auto& entry : fs::recursive_directory_iterator(source_root() / "configs")) {
    if (entry.path().extension() != ".json" || entry.path().parent_path().filename() == "schema") continue;
    auto config = Config::load(entry.path());
    ASSERT_TRUE(config.is_ok()) << entry.path().filename() << ": " << config.status().message();
    auto errors = schema->validate(config->json());
    std::string all;
    for (const auto& e : errors) all += e + "\n";
    EXPECT_TRUE(errors.empty()) << entry.path().filename() << ":\n" << all;
    ++checked;
  }
  EXPECT_GE(checked, 12u);
}

}  // namespace
}  // namespace nl2sql::core
