// core/text.h: the string helpers every layer shares (case mapping that leaves UTF-8 alone,
// identifier mentions, whitespace, SQL identifier quoting that SQLite reads back).
#include "nl2sql/core/text.h"

#include <gtest/gtest.h>
#include <sqlite3.h>

namespace nl2sql::core {
namespace {

TEST(CoreText, CaseMappingLeavesUtf8Alone) {
  EXPECT_EQ(lower("SELECT Ünïcode ÄB"), "select Ünïcode Äb");
  EXPECT_EQ(upper("hradec králové"), "HRADEC KRáLOVé");
}

TEST(CoreText, MentionsIdentifierNeedsWholeNames) {
  EXPECT_TRUE(mentions_identifier("SELECT T1.county FROM t", "COUNTY"));
  EXPECT_FALSE(mentions_identifier("SELECT county_name FROM t", "county"));
  EXPECT_FALSE(mentions_identifier("SELECT accounty FROM t", "county"));
  EXPECT_FALSE(mentions_identifier("anything", ""));
}

TEST(CoreText, WhitespaceTrimAndSquash) {
  EXPECT_EQ(trim(" \t\n a  b \r\n"), "a  b");
  EXPECT_EQ(trim("   "), "");
  EXPECT_EQ(trim(""), "");
  EXPECT_EQ(squash_spaces("  a \n\t b  c "), "a b c");
}

TEST(CoreText, QuotedIdentifiersReadBackAsThemselvesInSqlite) {
  EXPECT_EQ(quote_sql_identifier("name"), "\"name\"");
  EXPECT_EQ(quote_sql_identifier("my \"odd\" col"), "\"my \"\"odd\"\" col\"");
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(":memory:", &db), SQLITE_OK);
  for (std::string name : {"order", "my \"odd\" col", "School Name", "naïve", "a;b--c"}) {
    const std::string q = quote_sql_identifier(name);
    const std::string sql = "CREATE TABLE " + q + " (" + q + " INTEGER); SELECT " + q + " FROM " + q + ";";
    char* err = nullptr;
    EXPECT_EQ(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err), SQLITE_OK) << name << ": " << (err ? err : "");
    sqlite3_free(err);
    sqlite3_stmt* st = nullptr;
    ASSERT_EQ(sqlite3_prepare_v2(db, ("SELECT " + q + " FROM " + q).c_str(), -1, &st, nullptr), SQLITE_OK);
    EXPECT_EQ(std::string(sqlite3_column_name(st, 0)), name);
    sqlite3_finalize(st);
  }
  sqlite3_close(db);
}

}  // namespace
}  // namespace nl2sql::core
