// The printer's identifiers: a name is printed bare only when SQLite reads it back as that name.
#include "nl2sql/sql/printer.h"

#include <gtest/gtest.h>
#include <sqlite3.h>

#include <string>

namespace nl2sql::sql {
namespace {

// For every keyword SQLite knows, a column with that name, printed as the printer prints a bare
// name, reads that column (a syntax error or the CURRENT_DATE function would not give 42).
TEST(SqlPrinter, EveryKeywordNamedColumnPrintsAsSqliteReadsIt) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(":memory:", &db), SQLITE_OK);
  const int n = sqlite3_keyword_count();
  ASSERT_GT(n, 100);
  int bare = 0;
  for (int i = 0; i < n; ++i) {
    const char* name = nullptr;
    int len = 0;
    ASSERT_EQ(sqlite3_keyword_name(i, &name, &len), SQLITE_OK);
    const std::string word(name, static_cast<size_t>(len));
    const std::string table = "\"t_" + word + "\"";
    ASSERT_EQ(sqlite3_exec(db, ("CREATE TABLE " + table + "(\"" + word + "\"); INSERT INTO " + table + " VALUES (42);").c_str(),
                           nullptr, nullptr, nullptr),
              SQLITE_OK)
        << word;
    Ident id;
    id.name = word;  // written bare
    const std::string printed = quote_identifier(id);
    bare += printed == word;
    const std::string sql = "SELECT " + printed + " FROM " + table;
    sqlite3_stmt* stmt = nullptr;
    ASSERT_EQ(sqlite3_prepare_v2(db, sql.c_str(), -1, &stmt, nullptr), SQLITE_OK) << sql << ": " << sqlite3_errmsg(db);
    ASSERT_EQ(sqlite3_step(stmt), SQLITE_ROW) << sql;
    EXPECT_EQ(sqlite3_column_type(stmt, 0), SQLITE_INTEGER) << sql;
    EXPECT_EQ(sqlite3_column_int(stmt, 0), 42) << sql;
    sqlite3_finalize(stmt);
  }
  sqlite3_close(db);
  EXPECT_GT(bare, 40);  // words SQLite takes as names (KEY, YEAR-like keywords) stay bare
}

TEST(SqlPrinter, QuotedNamesStayQuotedAndQuotesDouble) {
  Ident plain;
  plain.name = "School Name";
  EXPECT_EQ(quote_identifier(plain), "\"School Name\"");
  Ident written;
  written.name = "city";
  written.quote = '"';
  EXPECT_EQ(quote_identifier(written), "\"city\"");  // a "x" that resolves to nothing is a string
  Ident q;
  q.name = "a\"b";
  EXPECT_EQ(quote_identifier(q), "\"a\"\"b\"");
  Ident upper;
  upper.name = "Name";
  EXPECT_EQ(quote_identifier(upper, /*lower=*/true), "name");
}

}  // namespace
}  // namespace nl2sql::sql
