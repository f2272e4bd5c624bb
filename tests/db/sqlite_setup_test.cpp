// exec_setup retries set-up statements that SQLite refuses with SQLITE_BUSY while another
// connection holds the file (the busy handler is not called for a WAL switch), and gives up at
// its timeout.
#include "nl2sql/db/sqlite_setup.h"

#include <gtest/gtest.h>
#include <sqlite3.h>

#include <chrono>
#include <thread>

#include "support/test_env.h"

namespace nl2sql::db {
namespace {

sqlite3* open_rw(const std::filesystem::path& p) {
  sqlite3* db = nullptr;
  EXPECT_EQ(sqlite3_open_v2(p.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nullptr), SQLITE_OK);
  return db;
}

TEST(SqliteSetup, RetriesWhileAnotherConnectionHoldsTheFile) {
  nl2sql::testing::TempDir tmp;
  const auto path = tmp / "shared.sqlite";
  sqlite3* holder = open_rw(path);
  sqlite3* other = open_rw(path);
  std::string error;
  ASSERT_EQ(exec_setup(holder, "CREATE TABLE t(x); BEGIN EXCLUSIVE; INSERT INTO t VALUES (1);", error), SQLITE_OK)
      << error;
  // Held: a short timeout gives up with BUSY, after retrying, and says so.
  int attempts = 0;
  EXPECT_EQ(exec_setup(other, "PRAGMA journal_mode=WAL", error, 60, &attempts) & 0xff, SQLITE_BUSY);
  EXPECT_GE(attempts, 2);
  EXPECT_NE(error.find("locked"), std::string::npos) << error;
  // Released after 150 ms: the retry succeeds without the caller seeing the contention.
  std::thread release([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(150));
    std::string e;
    exec_setup(holder, "COMMIT", e);
  });
  EXPECT_EQ(exec_setup(other, "PRAGMA journal_mode=WAL; CREATE TABLE IF NOT EXISTS u(y);", error, 5000), SQLITE_OK)
      << error;
  release.join();
  // Errors other than contention are returned at once, without a retry.
  EXPECT_EQ(exec_setup(other, "SELECT * FROM nowhere", error, 5000, &attempts), SQLITE_ERROR);
  EXPECT_EQ(attempts, 1);
  EXPECT_NE(error.find("nowhere"), std::string::npos);
  sqlite3_close(other);
  sqlite3_close(holder);
}

}  // namespace
}  // namespace nl2sql::db
