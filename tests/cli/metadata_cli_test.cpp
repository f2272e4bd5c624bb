// `nl2sql metadata` and `nl2sql schema` on the bundled mini set: what they print, their JSON, and
// exit 2 for a database that is not there.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "support/test_env.h"

namespace nl2sql {
namespace {

TEST(MetadataCli, MetadataAndSchemaCommands) {
  testing::TempDir dir;
  auto root = testing::build_mini_bird(dir / "mini");
  const std::string common = "--benchmark bird --data '" + root.string() + "' --index-dir '" + (dir / "index").string() + "'";
  auto m = testing::run_nl2sql("metadata " + common + " --db regional_schools --columns");
  ASSERT_EQ(m.exit_code, 0) << m.err;
  EXPECT_NE(m.out.find("regional_schools: 3 tables"), std::string::npos) << m.out;
  EXPECT_NE(m.out.find("2 declared FKs, 0 inferred FKs (built: missing"), std::string::npos) << m.out;
  EXPECT_NE(m.out.find("school.opened:"), std::string::npos) << m.out;
  auto again = testing::run_nl2sql("metadata " + common + " --db regional_schools --json");
  ASSERT_EQ(again.exit_code, 0) << again.err;
  auto j = nlohmann::json::parse(again.out);
  EXPECT_EQ(j[0]["db_id"], "regional_schools");

  auto s = testing::run_nl2sql("schema " + common + " --question-id 0 --examples 1 --stats --columns district.region,school.name");
  ASSERT_EQ(s.exit_code, 0) << s.err;
  EXPECT_NE(s.out.find("-- question 0:"), std::string::npos) << s.out;
  EXPECT_NE(s.out.find("matches question: 'east Bohemia'"), std::string::npos) << s.out;
  EXPECT_NE(s.out.find("distinct"), std::string::npos) << s.out;
  EXPECT_NE(s.out.find("FOREIGN KEY (district_id) REFERENCES district(district_id)"), std::string::npos) << s.out;
  EXPECT_EQ(s.out.find("CREATE TABLE score"), std::string::npos) << s.out;
  auto plain = testing::run_nl2sql("schema " + common + " --db music_store --no-descriptions --examples 0 --shuffle-seed 3");
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  EXPECT_NE(plain.out.find("CREATE TABLE album"), std::string::npos);
  EXPECT_EQ(plain.out.find("--"), std::string::npos) << plain.out;
  EXPECT_EQ(testing::run_nl2sql("schema " + common + " --db nope").exit_code, 2);
  EXPECT_EQ(testing::run_nl2sql("schema " + common).exit_code, 2);
}

}  // namespace
}  // namespace nl2sql
