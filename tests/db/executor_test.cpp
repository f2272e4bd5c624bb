#include "nl2sql/db/executor.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "nl2sql/core/hash.h"
#include "nl2sql/db/result_cache.h"
#include "support/test_env.h"

namespace nl2sql::db {
namespace {

class ExecutorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    db_ = dir_ / "t.sqlite";
    testing::build_database(db_, R"(
      CREATE TABLE t(id INTEGER PRIMARY KEY, name TEXT, score REAL, data BLOB);
      INSERT INTO t VALUES (1, 'a', 1.5, x'00ff'), (2, 'b', NULL, NULL), (3, 'c', 3.0, NULL);
      CREATE TABLE big(x INTEGER);
      WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 2000)
      INSERT INTO big SELECT i FROM n;)");
  }
  testing::TempDir dir_;
  std::filesystem::path db_;
};

TEST_F(ExecutorTest, TypedValuesAreKeptExactly) {
  Executor ex;
  auto r = ex.run(db_, "SELECT id, name, score, data FROM t ORDER BY id");
  ASSERT_TRUE(r.ok()) << r.error;
  ASSERT_EQ(r.result.rows.size(), 3u);
  EXPECT_EQ(r.result.columns, (std::vector<std::string>{"id", "name", "score", "data"}));
  EXPECT_EQ(r.result.rows[0][0].type, ValueType::kInteger);
  EXPECT_EQ(r.result.rows[0][1].type, ValueType::kText);
  EXPECT_EQ(r.result.rows[0][2].type, ValueType::kReal);
  EXPECT_EQ(r.result.rows[0][3].type, ValueType::kBlob);
  EXPECT_EQ(r.result.rows[0][3].s, std::string("\x00\xff", 2));
  EXPECT_EQ(r.result.rows[1][2].type, ValueType::kNull);
  EXPECT_EQ(r.result.rows[2][2].type, ValueType::kReal);  // 3.0 stays REAL
}

// nl2sql_hash (the lineage sample's group key hash): deterministic, equal where GROUP BY sees
// equal keys (1 and 1.0), apart where it does not ('1' and 1), argument boundaries count, and
// it spreads keys over buckets.
TEST_F(ExecutorTest, HashFunctionKeysGroupsLikeGroupBy) {
  Executor ex;
  auto r = ex.run(db_, "SELECT nl2sql_hash(1) = nl2sql_hash(1.0), nl2sql_hash('1') = nl2sql_hash(1), "
                       "nl2sql_hash('ab', 'c') = nl2sql_hash('a', 'bc'), nl2sql_hash(NULL) >= 0, "
                       "nl2sql_hash('x', 2) = nl2sql_hash('x', 2), nl2sql_hash(x'00') = nl2sql_hash('')");
  ASSERT_TRUE(r.ok()) << r.error;
  std::vector<int64_t> got;
  for (const auto& v : r.result.rows[0]) got.push_back(v.i);
  EXPECT_EQ(got, (std::vector<int64_t>{1, 0, 0, 1, 1, 0}));
  Executor other;
  auto a = ex.run(db_, "SELECT nl2sql_hash(name, id) FROM t ORDER BY id");
  auto b = other.run(db_, "SELECT nl2sql_hash(name, id) FROM t ORDER BY id");
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a.result.rows, b.result.rows);
  auto buckets = ex.run(db_, "SELECT nl2sql_hash(x) % 4 AS k, count(*) FROM big GROUP BY k ORDER BY k");
  ASSERT_TRUE(buckets.ok()) << buckets.error;
  ASSERT_EQ(buckets.result.rows.size(), 4u);
  for (const auto& row : buckets.result.rows) {
    EXPECT_GE(row[0].i, 0);
    EXPECT_GT(row[1].i, 400);  // 500 expected of 2000
    EXPECT_LT(row[1].i, 600);
  }
}

TEST_F(ExecutorTest, EveryWriteAttemptIsRefusedAndTheFileIsUnchanged) {
  auto before = core::sha256_file(db_);
  ASSERT_TRUE(before.is_ok());
  Executor ex;
  const char* attempts[] = {
      "INSERT INTO t VALUES (9, 'x', 0, NULL)",
      "UPDATE t SET name = 'z'",
      "DELETE FROM t",
      "DROP TABLE t",
      "CREATE TABLE u(x)",
      "ALTER TABLE t ADD COLUMN y",
      "REPLACE INTO t VALUES (1, 'q', 0, NULL)",
      "VACUUM",
      "ATTACH DATABASE ':memory:' AS other",
      "DETACH DATABASE main",
      "PRAGMA writable_schema = 1",
      "PRAGMA user_version = 7",
      "PRAGMA journal_mode",
      "SELECT load_extension('libfoo')",
      "SELECT 1; DELETE FROM t",
      "SELECT 1; -- trailing comment\n DROP TABLE t",
      "/* comment */ DELETE FROM t",
      "WITH x AS (SELECT 1) DELETE FROM t",
      "INSERT INTO t(name) VALUES ('r') RETURNING id",
      "BEGIN; DELETE FROM t; COMMIT",
      "CREATE TEMP TABLE tmp AS SELECT * FROM t",
      "REINDEX",
      "ANALYZE",
      "SAVEPOINT s",
  };
  for (const char* sql : attempts) {
    auto r = ex.run(db_, sql);
    EXPECT_EQ(r.status, ExecStatus::kRejected) << sql << " -> " << exec_status_name(r.status)
                                                << ": " << r.error;
    EXPECT_FALSE(r.error.empty()) << sql;
  }
  EXPECT_EQ(*core::sha256_file(db_), *before);
  // And the database still answers normally.
  EXPECT_EQ(ex.run(db_, "SELECT count(*) FROM t").result.rows[0][0].i, 3);
}

TEST_F(ExecutorTest, TrailingCommentsAndSemicolonsAreOneStatement) {
  Executor ex;
  EXPECT_TRUE(ex.run(db_, "SELECT 1;").ok());
  EXPECT_TRUE(ex.run(db_, "SELECT 1; -- done").ok());
  EXPECT_TRUE(ex.run(db_, "SELECT 1 /* x */ ;  ").ok());
  EXPECT_EQ(ex.run(db_, "SELECT 1; SELECT 2").status, ExecStatus::kRejected);
  EXPECT_EQ(ex.run(db_, "   ").status, ExecStatus::kRejected);
}

TEST_F(ExecutorTest, SyntaxAndSchemaErrorsAreErrors) {
  Executor ex;
  auto r = ex.run(db_, "SELEC name FROM t");
  EXPECT_EQ(r.status, ExecStatus::kError);
  EXPECT_NE(r.error.find("syntax"), std::string::npos);
  r = ex.run(db_, "SELECT nope FROM t");
  EXPECT_EQ(r.status, ExecStatus::kError);
  EXPECT_NE(r.error.find("no such column"), std::string::npos);
}

TEST_F(ExecutorTest, RunawayQueryTimesOutAndTheWorkerIsReused) {
  Executor ex;
  QueryLimits limits;
  limits.timeout_s = 0.2;
  limits.row_cap = 0;
  auto r = ex.run(db_, "SELECT count(*) FROM big a, big b, big c", limits);
  EXPECT_EQ(r.status, ExecStatus::kTimeout);  // (a missed deadline would run for minutes)
  r = ex.run(db_, "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n) "
                  "SELECT max(i) FROM n", limits);
  EXPECT_EQ(r.status, ExecStatus::kTimeout);
  EXPECT_TRUE(ex.run(db_, "SELECT count(*) FROM big", limits).ok());
}

TEST_F(ExecutorTest, RowCapIsADistinctStatus) {
  Executor ex;
  QueryLimits limits;
  limits.row_cap = 100;
  auto r = ex.run(db_, "SELECT x FROM big", limits);
  EXPECT_EQ(r.status, ExecStatus::kRowCap);
  EXPECT_TRUE(r.result.rows.empty());
  limits.row_cap = 2000;
  EXPECT_TRUE(ex.run(db_, "SELECT x FROM big", limits).ok());
  limits.row_cap = 0;
  limits.max_result_bytes = 1000;
  EXPECT_EQ(ex.run(db_, "SELECT x FROM big", limits).status, ExecStatus::kRowCap);
}

// Rows handed to a sink one at a time: the same rows in the same order as a kept result, none
// kept; the row cap counts the rows handed over (2,000 rows: a cap of 100 stops after 100, a cap
// of 2,000 lets all through); a temporary B-tree in memory gives the same DISTINCT answer.
TEST_F(ExecutorTest, RowsStreamToASinkUnderTheRowCap) {
  Executor ex;
  QueryLimits limits;
  limits.row_cap = 0;
  const std::string sql = "SELECT x % 7 FROM big";
  auto kept = ex.run(db_, sql, limits);
  ASSERT_TRUE(kept.ok());
  std::vector<Row> seen;
  auto streamed = ex.run(db_, sql, limits, [&](const Row& r) { seen.push_back(r); });
  ASSERT_TRUE(streamed.ok()) << streamed.error;
  EXPECT_TRUE(streamed.result.rows.empty());
  EXPECT_EQ(streamed.result.columns, kept.result.columns);
  ASSERT_EQ(seen.size(), 2000u);
  EXPECT_EQ(seen, kept.result.rows);

  size_t count = 0;
  limits.row_cap = 100;
  auto capped = ex.run(db_, sql, limits, [&](const Row&) { ++count; });
  EXPECT_EQ(capped.status, ExecStatus::kRowCap);
  EXPECT_EQ(count, 100u);
  limits.row_cap = 2000;
  count = 0;
  EXPECT_TRUE(ex.run(db_, sql, limits, [&](const Row&) { ++count; }).ok());
  EXPECT_EQ(count, 2000u);

  limits.row_cap = 0;
  const std::string distinct = "SELECT DISTINCT x % 7 FROM big";
  auto on_file = ex.run(db_, distinct, limits);
  limits.temp_store_memory = true;
  std::vector<Row> in_memory;
  ASSERT_TRUE(ex.run(db_, distinct, limits, [&](const Row& r) { in_memory.push_back(r); }).ok());
  ASSERT_EQ(in_memory.size(), 7u);
  EXPECT_EQ(in_memory, on_file.result.rows);
  // The connection goes back to the pool and serves a query without the setting as before.
  limits.temp_store_memory = false;
  EXPECT_EQ(ex.run(db_, distinct, limits).result.rows, on_file.result.rows);
}

TEST_F(ExecutorTest, MissingDatabaseIsAnError) {
  Executor ex;
  auto r = ex.run(dir_ / "nope.sqlite", "SELECT 1");
  EXPECT_EQ(r.status, ExecStatus::kError);
  EXPECT_NE(r.error.find("nope.sqlite"), std::string::npos);
  EXPECT_FALSE(std::filesystem::exists(dir_ / "nope.sqlite"));
}

TEST_F(ExecutorTest, FaultInjectorFailsChosenCalls) {
  Executor ex;
  std::vector<std::string> seen;
  ex.set_fault_injector([&](uint64_t n, std::string_view sql) {
    seen.emplace_back(sql);
    return n == 2 ? Status(ErrorCode::kIo, "disk on fire") : Status::ok();
  });
  EXPECT_TRUE(ex.run(db_, "SELECT 1").ok());
  auto r = ex.run(db_, "SELECT 2");
  EXPECT_EQ(r.status, ExecStatus::kError);
  EXPECT_NE(r.error.find("disk on fire"), std::string::npos);
  EXPECT_TRUE(ex.run(db_, "SELECT 3").ok());
  EXPECT_EQ(seen, (std::vector<std::string>{"SELECT 1", "SELECT 2", "SELECT 3"})) << "the injector sees each call's SQL";
}

TEST_F(ExecutorTest, ParallelRunsShareThePoolSafely) {
  Executor ex;
  std::vector<std::thread> threads;
  std::atomic<int> ok{0};
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&] {
      for (int i = 0; i < 50; ++i)
        if (ex.run(db_, "SELECT sum(x) FROM big").result.rows.at(0).at(0).i == 2001000) ++ok;
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(ok.load(), 200);
}

TEST(ResultCache, RoundTripAndRowCapSemantics) {
  testing::TempDir dir;
  auto cache = ResultCache::open(dir / "c.sqlite");
  ASSERT_TRUE(cache.is_ok());
  CachedExecution e;
  e.result.result.columns = {"a", "b"};
  e.result.result.rows = {{Value::integer(1), Value::text("x")},
                          {Value::real(2.5), Value::blob(std::string("\0\1", 2))},
                          {Value::null(), Value::text("")}};
  e.tie_dependent = true;
  e.tie_checked = true;
  auto key = ResultCache::key("fp", "SELECT 1");
  (*cache)->put(key, e);
  auto got = (*cache)->get(key, 0);
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->result.result.rows, e.result.result.rows);
  EXPECT_TRUE(got->tie_dependent);
  auto capped = (*cache)->get(key, 2);
  ASSERT_TRUE(capped.has_value());
  EXPECT_EQ(capped->result.status, ExecStatus::kRowCap);
  (*cache)->flush();
  // survives reopening
  cache->reset();
  auto again = ResultCache::open(dir / "c.sqlite");
  ASSERT_TRUE(again.is_ok());
  ASSERT_TRUE((*again)->get(key, 0).has_value());
  EXPECT_FALSE((*again)->get(ResultCache::key("fp", "SELECT 2"), 0).has_value());
  // timeouts are never stored
  CachedExecution t;
  t.result.status = ExecStatus::kTimeout;
  (*again)->put(ResultCache::key("fp", "slow"), t);
  EXPECT_FALSE((*again)->get(ResultCache::key("fp", "slow"), 0).has_value());
  // corrupt bytes are a miss, not a crash
  EXPECT_FALSE(ResultCache::deserialize("garbage").has_value());
}

TEST_F(ExecutorTest, MaxConcurrentBoundsQueriesRunningAtOnce) {
  ExecutorOptions options;
  options.max_concurrent = 2;
  Executor bounded(options);
  const std::string slow =
      "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 300000) "
      "SELECT count(*) FROM c";
  std::vector<std::thread> threads;
  std::atomic<int> ok{0};
  for (int t = 0; t < 6; ++t)
    threads.emplace_back([&] {
      if (bounded.run(db_, slow).ok()) ++ok;
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(ok.load(), 6);
  EXPECT_GE(bounded.peak_concurrent(), 1u);
  EXPECT_LE(bounded.peak_concurrent(), 2u);
}

}  // namespace
}  // namespace nl2sql::db
