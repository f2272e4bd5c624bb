// Databases with committed rows still in their -wal file: the rows are visible, nothing is
// written beside the user's files (no -shm, no new -wal), a read-only folder works, and the
// fingerprint (the result cache's key) follows the -wal's content. Schemas are read the same way,
// a WAL-mode file without its -wal needs no side file, and an unreadable file is named with the
// reason. (A read-only mount, which stops root too: tests/cli/eval_cli_test.cpp.)
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <fstream>
#include <set>

#include "nl2sql/core/hash.h"
#include "nl2sql/db/executor.h"
#include "nl2sql/db/schema_info.h"
#include "support/test_env.h"

namespace nl2sql::db {
namespace {

std::set<std::string> names_in(const std::filesystem::path& dir) {
  std::set<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(dir)) out.insert(e.path().filename());
  return out;
}

// A writer that keeps its WAL database open (so the -wal is never checkpointed away) and copies
// the main file and its -wal, as they are, to another folder: that copy is the user's database.
class WalDatabase : public ::testing::Test {
 protected:
  void SetUp() override {
    std::filesystem::create_directories(dir_ / "src");
    std::filesystem::create_directories(dir_ / "user");
    src_ = dir_ / "src" / "w.sqlite";
    db_ = dir_ / "user" / "w.sqlite";
    ASSERT_EQ(sqlite3_open(src_.c_str(), &writer_), SQLITE_OK);
    exec("PRAGMA journal_mode=WAL; PRAGMA wal_autocheckpoint=0; CREATE TABLE t (x INTEGER);");
    exec("PRAGMA wal_checkpoint(TRUNCATE);");  // the table is in the main file, rows are not
    exec("INSERT INTO t VALUES (1), (2), (3);");
    publish();
  }
  void TearDown() override {
    sqlite3_close(writer_);
    chmod((dir_ / "user").c_str(), 0755);
  }
  void exec(const char* sql) {
    char* err = nullptr;
    ASSERT_EQ(sqlite3_exec(writer_, sql, nullptr, nullptr, &err), SQLITE_OK) << (err ? err : "");
  }
  void publish() {
    const auto opt = std::filesystem::copy_options::overwrite_existing;
    std::filesystem::copy_file(src_, db_, opt);
    std::filesystem::copy_file(src_.string() + "-wal", db_.string() + "-wal", opt);
  }
  int64_t count(const std::filesystem::path& db) {
    Executor ex;
    auto r = ex.run(db, "SELECT COUNT(*) FROM t");
    EXPECT_TRUE(r.ok()) << r.error;
    return r.ok() ? r.result.rows.at(0).at(0).i : -1;
  }
  testing::TempDir dir_;
  std::filesystem::path src_, db_;
  sqlite3* writer_ = nullptr;
};

TEST_F(WalDatabase, RowsInTheWalAreVisibleAndNothingIsWrittenBesideIt) {
  ASSERT_GT(std::filesystem::file_size(db_.string() + "-wal"), 0u);
  const auto before = names_in(dir_ / "user");
  ASSERT_EQ(before, (std::set<std::string>{"w.sqlite", "w.sqlite-wal"}));
  EXPECT_EQ(count(db_), 3);
  auto raw = open_read_only(db_);
  ASSERT_TRUE(raw) << raw.status().message();
  sqlite3_close_v2(*raw);
  EXPECT_EQ(names_in(dir_ / "user"), before);
}

TEST_F(WalDatabase, ReadOnlyFolderWorks) {
  ASSERT_EQ(chmod((dir_ / "user").c_str(), 0555), 0);
  if (access((dir_ / "user").c_str(), W_OK) == 0)
    GTEST_SKIP() << "running as root: chmod 555 does not make the folder read-only";
  EXPECT_EQ(count(db_), 3);
  EXPECT_EQ(names_in(dir_ / "user"), (std::set<std::string>{"w.sqlite", "w.sqlite-wal"}));
}

// The dataset loader reads every schema with inspect_schema: a table created after the last
// checkpoint exists only in the -wal, and is seen there without writing beside the file.
TEST_F(WalDatabase, SchemaInTheWalIsReadWithoutWritingBesideIt) {
  exec("CREATE TABLE u (y TEXT); INSERT INTO u VALUES ('only in the wal');");
  publish();
  auto schema = inspect_schema(db_);
  ASSERT_TRUE(schema) << schema.status().message();
  EXPECT_NE(schema->find("u"), nullptr);
  EXPECT_EQ(names_in(dir_ / "user"), (std::set<std::string>{"w.sqlite", "w.sqlite-wal"}));
}

// A WAL-mode file shipped without its -wal (checkpointed, side files left behind) holds every
// row in the main file; read in place it would need a -shm beside it. It opens immutable.
TEST_F(WalDatabase, AWalModeFileWithoutItsWalIsReadWithNoSideFile) {
  exec("PRAGMA wal_checkpoint(TRUNCATE);");
  std::filesystem::remove(db_.string() + "-wal");
  std::filesystem::copy_file(src_, db_, std::filesystem::copy_options::overwrite_existing);
  std::ifstream in(db_, std::ios::binary);
  char header[20];
  ASSERT_TRUE(in.read(header, sizeof header));
  ASSERT_EQ(header[18], 2) << "the copy should still say WAL mode";
  EXPECT_EQ(count(db_), 3);
  auto schema = inspect_schema(db_);
  ASSERT_TRUE(schema) << schema.status().message();
  EXPECT_EQ(names_in(dir_ / "user"), (std::set<std::string>{"w.sqlite"}));
}

// A file that is not a database at all: the error names it, the reason and what to do.
TEST(UnreadableDatabase, IsNamedWithTheReason) {
  testing::TempDir dir;
  const auto bad = dir / "bad.sqlite";
  std::ofstream(bad) << "this is not a database, it is a text file of some length ......................."
                        "..............................................................";
  auto schema = inspect_schema(bad);
  ASSERT_FALSE(schema);
  EXPECT_NE(schema.status().message().find(bad.string()), std::string::npos) << schema.status().message();
  EXPECT_NE(schema.status().message().find("not an SQLite 3 database"), std::string::npos) << schema.status().message();
}

TEST_F(WalDatabase, FingerprintFollowsTheWal) {
  auto first = database_fingerprint(db_);
  ASSERT_TRUE(first) << first.status().message();
  exec("INSERT INTO t VALUES (4);");
  publish();  // the main file is unchanged; only the -wal grew
  auto second = database_fingerprint(db_);
  ASSERT_TRUE(second) << second.status().message();
  EXPECT_NE(*first, *second);
  EXPECT_EQ(count(db_), 4);  // a fresh executor reads the new snapshot
}

TEST(DatabaseFingerprint, WithoutAWalIsTheMainFilesHash) {
  testing::TempDir dir;
  auto db = dir / "p.sqlite";
  testing::build_database(db, "CREATE TABLE t (x INTEGER); INSERT INTO t VALUES (1);");
  auto fp = database_fingerprint(db);
  auto h = core::xxh128_file(db);
  ASSERT_TRUE(fp && h);
  EXPECT_EQ(*fp, *h);
}

}  // namespace
}  // namespace nl2sql::db
