// db::inspect_schema: the one reader of a SQLite file's physical schema.
#include "nl2sql/db/schema_info.h"

#include <gtest/gtest.h>

#include <fstream>

#include "nl2sql/data/dataset.h"
#include "support/test_env.h"

namespace nl2sql::db {
namespace {

class SchemaInfoTest : public ::testing::Test {
 protected:
  void SetUp() override {
    db_ = dir_ / "s.sqlite";
    testing::build_database(db_, R"(
      CREATE TABLE owner(id INTEGER PRIMARY KEY, name TEXT);
      CREATE TABLE "pet's"(owner_id integer, tag TEXT, kind TEXT, PRIMARY KEY (tag, owner_id),
                           FOREIGN KEY (owner_id) REFERENCES owner);
      CREATE TABLE kv(k TEXT PRIMARY KEY, v BLOB) WITHOUT ROWID;
      CREATE VIEW named AS SELECT name FROM owner;)");
  }
  testing::TempDir dir_;
  std::filesystem::path db_;
};

TEST_F(SchemaInfoTest, TablesViewsKeysAndRowidAlias) {
  auto s = inspect_schema(db_);
  ASSERT_TRUE(s.is_ok()) << s.status().to_string();
  ASSERT_EQ(s->tables.size(), 4u);
  EXPECT_EQ(s->tables[0].name, "owner");  // creation order
  const TableInfo* owner = s->find("OWNER");  // case-insensitive
  ASSERT_NE(owner, nullptr);
  EXPECT_EQ(owner->rowid_alias, 0);
  EXPECT_EQ(owner->find_column("Name")->type, "TEXT");

  const TableInfo* pet = s->find("pet's");
  ASSERT_NE(pet, nullptr);
  EXPECT_EQ(pet->primary_key(), (std::vector<std::string>{"tag", "owner_id"}));  // key order, not column order
  EXPECT_EQ(pet->rowid_alias, -1);  // a composite key is no rowid alias
  ASSERT_EQ(pet->foreign_keys.size(), 1u);
  EXPECT_EQ(pet->foreign_keys[0].from_column, "owner_id");
  EXPECT_EQ(pet->foreign_keys[0].to_table, "owner");
  EXPECT_EQ(pet->foreign_keys[0].to_column, "");  // declared without a column

  EXPECT_TRUE(s->find("kv")->without_rowid);
  EXPECT_EQ(s->find("kv")->rowid_alias, -1);
  const TableInfo* view = s->find("named");
  ASSERT_NE(view, nullptr);
  EXPECT_TRUE(view->is_view);
  EXPECT_NE(view->create_sql.find("CREATE VIEW"), std::string::npos);
}

// The benchmark's annotated schema, built from the same reader: views left out, an FK without a
// target column pointed at the target's primary key.
TEST_F(SchemaInfoTest, DatasetSchemaIsBuiltFromIt) {
  auto s = data::read_schema_from_database(db_, "pets");
  ASSERT_TRUE(s.is_ok()) << s.status().to_string();
  EXPECT_EQ(s->db_id, "pets");
  ASSERT_EQ(s->tables.size(), 3u);
  EXPECT_EQ(s->find_table("named"), nullptr);
  EXPECT_EQ(s->find_table("pet's")->primary_key, (std::vector<std::string>{"tag", "owner_id"}));
  ASSERT_EQ(s->foreign_keys.size(), 1u);
  EXPECT_EQ(s->foreign_keys[0].from_table, "pet's");
  EXPECT_EQ(s->foreign_keys[0].to_column, "id");
}

TEST_F(SchemaInfoTest, MissingOrUnreadableFilesAreNamed) {
  auto missing = inspect_schema(dir_ / "none.sqlite");
  ASSERT_FALSE(missing.is_ok());
  EXPECT_EQ(missing.status().code(), ErrorCode::kNotFound);
  EXPECT_NE(missing.status().message().find("none.sqlite"), std::string::npos);
  std::ofstream(dir_ / "junk.sqlite") << std::string(4096, 'x');
  auto junk = inspect_schema(dir_ / "junk.sqlite");
  ASSERT_FALSE(junk.is_ok());
  EXPECT_NE(junk.status().message().find("junk.sqlite"), std::string::npos) << junk.status().message();
}

}  // namespace
}  // namespace nl2sql::db
