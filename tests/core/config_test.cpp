#include "nl2sql/core/config.h"

#include <fstream>
#include <regex>
#include <sstream>

#include <gtest/gtest.h>

#include "nl2sql/core/config_schema.h"
#include "nl2sql/core/files.h"
#include "support/test_env.h"

namespace nl2sql::core {
namespace {

void write(const std::filesystem::path& p, const std::string& s) {
  std::ofstream(p) << s;
}

TEST(Config, ExtendsChainMergesDeeplyAndLaterWins) {
  testing::TempDir dir;
  write(dir / "base.json", R"({ // comment allowed
    "llm": {"models": {"m": {"temperature": 0.0, "max_tokens": 100}}}, "seed": 1 })");
  write(dir / "child.json", R"({"extends": "base.json",
    "llm": {"models": {"m": {"temperature": 0.7}}}})");
  auto c = Config::load(dir / "child.json");
  ASSERT_TRUE(c.is_ok()) << c.status().to_string();
  EXPECT_DOUBLE_EQ(*c->get_number("llm.models.m.temperature"), 0.7);
  EXPECT_EQ(*c->get_int("llm.models.m.max_tokens"), 100);
  EXPECT_EQ(*c->get_int("seed"), 1);
  EXPECT_FALSE(c->has("extends"));
}

TEST(Config, OverridesParseJsonOrFallBackToString) {
  Config c;
  ASSERT_TRUE(c.apply_overrides({"a.b=3", "a.c=hello", "a.d=[1,2]", "a.e=true"}).is_ok());
  EXPECT_EQ(*c.get_int("a.b"), 3);
  EXPECT_EQ(*c.get_string("a.c"), "hello");
  EXPECT_EQ(c.find("a.d")->size(), 2u);
  EXPECT_TRUE(*c.get_bool("a.e"));
  EXPECT_FALSE(c.apply_overrides({"novalue"}).is_ok());
}

TEST(Config, TypeErrorsNameTheKey) {
  Config c(nlohmann::json::parse(R"({"fix": {"max_rounds": "three"}})"));
  auto r = c.get_int("fix.max_rounds");
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("fix.max_rounds"), std::string::npos);
  auto missing = c.get_string("llm.roles.generate");
  ASSERT_FALSE(missing.is_ok());
  EXPECT_NE(missing.status().message().find("llm.roles.generate"), std::string::npos);
}

TEST(Config, ExtendsCycleIsAnError) {
  testing::TempDir dir;
  write(dir / "a.json", R"({"extends": "b.json"})");
  write(dir / "b.json", R"({"extends": "a.json"})");
  auto c = Config::load(dir / "a.json");
  ASSERT_FALSE(c.is_ok());
  EXPECT_NE(c.status().message().find("cycle"), std::string::npos);
}

TEST(Json, ParseErrorNamesFileLineAndColumn) {
  auto r = parse_json("{\n  \"a\": 1,\n  \"b\": ]\n}", "questions.json");
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("questions.json:3:"), std::string::npos)
      << r.status().message();
}

// Defaults live in the schema: a key the config does not set reads the schema's default (wildcard
// patterns included), a caller's explicit default still wins, and a key without one is required.
TEST(Config, AbsentKeysReadTheSchemaDefault) {
  Config c;
  EXPECT_EQ(*c.get_int("fix.max_rounds"), 3);
  EXPECT_EQ(*c.get_bool("fix.enabled"), true);
  EXPECT_EQ(*c.get_string("llm.cache.mode"), "read-write");
  EXPECT_DOUBLE_EQ(*c.get_number("llm.retry.max_delay_s"), 60.0);
  EXPECT_DOUBLE_EQ(*c.get_number("llm.models.main.temperature"), 0.0);  // llm.models.*.temperature
  EXPECT_EQ(*c.get_int("fix.max_rounds", 7), 7);
  Config set(nlohmann::json{{"fix", {{"max_rounds", 1}}}});
  EXPECT_EQ(*set.get_int("fix.max_rounds"), 1);
  EXPECT_FALSE(c.get_number("run.max_cost_usd").is_ok());  // documented, no default
  EXPECT_FALSE(c.get_int("no.such.key").is_ok());
}

// No call site repeats a default the schema holds: `get_*("key", literal)` is only for keys the
// schema gives no default (so the two cannot drift apart).
TEST(Config, NoCodeDefaultRepeatsTheSchema) {
  const auto root = testing::fixtures_dir().parent_path().parent_path();
  auto schema = ConfigSchema::load_dir(root / "configs" / "schema");
  ASSERT_TRUE(schema.is_ok());
  const std::regex call(R"re(get_(int|number|bool|string)\("([a-z_.]+)",)re");
  size_t calls = 0;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(root / "src")) {
    if (entry.path().extension() != ".cpp") continue;
    std::ifstream in(entry.path());
    std::stringstream ss;
    ss << in.rdbuf();
    const std::string text = ss.str();
    for (std::sregex_iterator it(text.begin(), text.end(), call), end; it != end; ++it) {
      ++calls;
      const ConfigKeySpec* spec = schema->spec_for((*it)[2].str());
      EXPECT_FALSE(spec && !spec->default_value.is_null())
          << entry.path().filename().string() << ": " << (*it)[0].str() << " repeats the schema default "
          << spec->default_value.dump() << " of " << (*it)[2].str();
    }
  }
  EXPECT_GT(calls, 5u);
}

}  // namespace
}  // namespace nl2sql::core
