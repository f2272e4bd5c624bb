// fix::ExecutionMemo (issue 22): the normalization keeps what SQLite runs, each distinct query is
// executed once however many candidates and threads ask for it, and what they get back is the
// query's result.
#include "nl2sql/fix/execution_memo.h"

#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "nl2sql/db/result_digest.h"
#include "nl2sql/fix/fixer.h"
#include "nl2sql/generate/candidate.h"
#include "support/test_env.h"

namespace nl2sql::fix {
namespace {

TEST(NormalizeSql, CollapsesBlanksOutsideLiteralsIdentifiersAndComments) {
  EXPECT_EQ(normalize_sql("  SELECT   a ,\tb\n\n FROM t  ;  "), "SELECT a , b FROM t ;");
  // Inside a literal or a quoted identifier the blanks are data.
  EXPECT_EQ(normalize_sql("SELECT 'a   b'  FROM \"my   t\""), "SELECT 'a   b' FROM \"my   t\"");
  EXPECT_EQ(normalize_sql("SELECT 'it''s   x'   FROM [a  b]"), "SELECT 'it''s   x' FROM [a  b]");
  // A line comment still ends at its newline: the run of blanks holding it becomes "\n".
  EXPECT_EQ(normalize_sql("SELECT a -- the 'x\n   FROM t"), "SELECT a -- the 'x\nFROM t");
  // A quote inside a comment does not start a literal.
  EXPECT_EQ(normalize_sql("SELECT /* it's */   a   FROM t WHERE b = 'p  q'"),
            "SELECT /* it's */ a FROM t WHERE b = 'p  q'");
  EXPECT_EQ(normalize_sql("SELECT 1"), normalize_sql("\n SELECT\t 1 \n"));
  EXPECT_NE(normalize_sql("SELECT 'a b'"), normalize_sql("SELECT 'a  b'"));
}

TEST(ExecutionMemo, EachDistinctQueryRunsOnceAcrossThreads) {
  std::atomic<int> executed{0};
  ExecutionMemo memo([&](const std::string& sql) {
    ++executed;
    db::ExecutionResult r;
    r.result.columns = {"sql"};
    r.result.rows = {{db::Value::text(normalize_sql(sql))}};
    return r;
  });
  const std::vector<std::string> asked = {"SELECT 1", " SELECT  1 ", "SELECT 2", "SELECT\n1", "SELECT 2;"};
  std::vector<std::thread> threads;
  std::vector<std::vector<ExecutionMemo::Shared>> seen(8);
  for (size_t t = 0; t < 8; ++t)
    threads.emplace_back([&, t] {
      for (const auto& sql : asked) seen[t].push_back(memo.run(sql));
    });
  for (auto& t : threads) t.join();
  // "SELECT 1" (three layouts), "SELECT 2", "SELECT 2;": three distinct normalized queries.
  EXPECT_EQ(executed.load(), 3);
  EXPECT_EQ(memo.executions(), 3u);
  EXPECT_EQ(memo.requests(), 40u);
  for (const auto& s : seen) {
    ASSERT_EQ(s.size(), asked.size());
    EXPECT_EQ(s[0].get(), seen[0][0].get()) << "one shared result per query";
    EXPECT_EQ(s[0].get(), s[1].get());
    EXPECT_EQ(s[0].get(), s[3].get());
    EXPECT_NE(s[0].get(), s[2].get());
    EXPECT_EQ(s[2]->result.rows[0][0], db::Value::text("SELECT 2"));
    EXPECT_EQ(s[4]->result.rows[0][0], db::Value::text("SELECT 2;"));
  }
  EXPECT_EQ(memo.find("SELECT   2").get(), seen[0][2].get());
  EXPECT_EQ(memo.find("SELECT 3"), nullptr);
  EXPECT_EQ(executed.load(), 3) << "find() never executes";
}

class MemoOnDatabase : public ::testing::Test {
 protected:
  void SetUp() override {
    db_ = dir_ / "t.sqlite";
    testing::build_database(db_, "CREATE TABLE t(a INTEGER, b TEXT);"
                                 "INSERT INTO t VALUES (1, 'x'), (2, 'y'), (3, 'y');");
  }
  testing::TempDir dir_;
  std::filesystem::path db_;
  db::Executor executor_;
};

TEST_F(MemoOnDatabase, CandidatesSharingAQueryShareOneExecutionAndSeeItsRows) {
  std::atomic<int> executed{0};
  ExecutionMemo memo([&](const std::string& sql) {
    ++executed;
    return executor_.run(db_, sql);
  });
  const std::vector<std::string> sqls = {"SELECT count(*) FROM t WHERE b = 'y'",
                                         "SELECT count(*)\n  FROM t WHERE b = 'y'",
                                         "SELECT a FROM t ORDER BY a",
                                         "SELECT count(*) FROM t WHERE b = 'y'",
                                         "SELECT nope FROM t",
                                         "DELETE FROM t"};
  std::vector<generate::Candidate> cands(sqls.size());
  for (size_t i = 0; i < sqls.size(); ++i) {
    cands[i].id = "c" + std::to_string(i);
    cands[i].sql = sqls[i];
    cands[i].extraction_ok = true;
  }
  for (auto& c : cands) execute_candidate(c, memo);
  // count (two layouts), the ordered list, the error; DELETE is rejected before it runs.
  EXPECT_EQ(executed.load(), 3);
  for (size_t i : {0u, 1u, 3u}) {
    EXPECT_TRUE(cands[i].execution.ok()) << i;
    EXPECT_EQ(cands[i].execution.rows, 1u) << i;
  }
  EXPECT_TRUE(cands[2].execution.ok());
  EXPECT_EQ(cands[2].execution.rows, 3u);
  EXPECT_FALSE(cands[4].execution.ok());
  EXPECT_NE(cands[4].execution.error.find("nope"), std::string::npos) << cands[4].execution.error;
  EXPECT_TRUE(cands[5].rejected);
  EXPECT_FALSE(cands[5].execution.executed);
  // The shared result is the query's own.
  auto r = memo.find(sqls[2]);
  ASSERT_NE(r, nullptr);
  ASSERT_EQ(r->result.rows.size(), 3u);
  EXPECT_EQ(r->result.rows[0][0], db::Value::integer(1));
  EXPECT_EQ(r->result.rows[2][0], db::Value::integer(3));
  EXPECT_EQ(memo.find(sqls[0])->result.rows[0][0], db::Value::integer(2));
}


// --- DISTINCT twins --------------------------------------------------------------------------

TEST(WithoutDistinct, DropsATopLevelDistinctOnlyWhereRepeatsAreAllItRemoves) {
  auto plain = [](std::string_view sql) -> std::string {
    auto p = without_distinct(sql);
    return p ? normalize_sql(*p) : std::string("-");
  };
  EXPECT_EQ(plain("SELECT DISTINCT a FROM t"), "SELECT a FROM t");
  EXPECT_EQ(plain("select distinct a, b from t where b = 'SELECT DISTINCT x'"),
            "select a, b from t where b = 'SELECT DISTINCT x'");
  EXPECT_EQ(plain("SELECT DISTINCT T1.name FROM t AS T1 GROUP BY T1.name HAVING count(*) > 1"),
            "SELECT T1.name FROM t AS T1 GROUP BY T1.name HAVING count(*) > 1");
  EXPECT_EQ(plain("WITH x AS (SELECT DISTINCT a FROM t) SELECT DISTINCT a FROM x"),
            "WITH x AS (SELECT DISTINCT a FROM t) SELECT a FROM x");
  // ORDER BY terms that are result columns: by expression, alias or position.
  EXPECT_EQ(plain("SELECT DISTINCT a, b FROM t ORDER BY b DESC, T.a"), "-");  // T.a is not a result column's text
  EXPECT_EQ(plain("SELECT DISTINCT a, b FROM t ORDER BY B DESC, a"), "SELECT a, b FROM t ORDER BY B DESC, a");
  EXPECT_EQ(plain("SELECT DISTINCT a + 1 AS n FROM t ORDER BY n"), "SELECT a + 1 AS n FROM t ORDER BY n");
  EXPECT_EQ(plain("SELECT DISTINCT a, b FROM t ORDER BY 2"), "SELECT a, b FROM t ORDER BY 2");
  // Where dropping repeats is not what DISTINCT does, or not all it does.
  EXPECT_EQ(plain("SELECT DISTINCT a FROM t ORDER BY b"), "-");  // which b is an engine's choice
  EXPECT_EQ(plain("SELECT DISTINCT a, b FROM t ORDER BY 3"), "-");
  EXPECT_EQ(plain("SELECT DISTINCT * FROM t ORDER BY 1"), "-");
  EXPECT_EQ(plain("SELECT DISTINCT a FROM t LIMIT 3"), "-");  // counts rows after DISTINCT
  EXPECT_EQ(plain("SELECT DISTINCT a FROM t LIMIT 3 OFFSET 1"), "-");
  EXPECT_EQ(plain("SELECT DISTINCT a FROM t UNION SELECT b FROM u"), "-");
  EXPECT_EQ(plain("SELECT DISTINCT a FROM t WHERE a = 'x' COLLATE NOCASE"), "-");
  EXPECT_EQ(plain("SELECT a FROM t"), "-");
  EXPECT_EQ(plain("SELECT count(DISTINCT a) FROM t"), "-");
  EXPECT_EQ(plain("SELECT a FROM (SELECT DISTINCT a FROM t)"), "-");
  EXPECT_EQ(plain("SELECT DISTINCT a FROM"), "-");  // does not parse
}

class DistinctTwin : public ::testing::Test {
 protected:
  void SetUp() override {
    db_ = dir_ / "t.sqlite";
    // Values DISTINCT tells apart or not: 1 and 1.0 and -0.0 and 0 are equal, '1' and 1 and
    // x'31' are not, NULLs are one value, text by its bytes ('a' and 'A' apart).
    testing::build_database(db_,
                            "CREATE TABLE t(a, b TEXT, c REAL);"
                            "INSERT INTO t VALUES (1, 'x', 0.0), (1.0, 'x', -0.0), ('1', 'x', 2.5), (x'31', 'y', 2.5),"
                            " (NULL, 'y', NULL), (NULL, 'y', NULL), (2, 'A', 1.0), (2, 'a', 1), (3, 'z', 7.25),"
                            " (3, 'z', 7.25), (1, 'x', 0);"
                            "CREATE TABLE r(v TEXT);"
                            "INSERT INTO r VALUES ('x'), ('x'), ('x'), ('x'), ('x'), ('y'), ('z');");
  }
  // The executor's result of `sql` with hash_rows_after = `keep` (and keep_first_distinct =
  // `keep` when `firsts`).
  db::ExecutionResult run(const std::string& sql, size_t keep, bool firsts = false) const {
    db::QueryLimits limits = executor_.options().limits;
    limits.hash_rows_after = keep;
    if (firsts) limits.keep_first_distinct = keep;
    return executor_.run(db_, sql, limits);
  }
  testing::TempDir dir_;
  std::filesystem::path db_;
  db::Executor executor_;
};

TEST_F(DistinctTwin, TheRowsMadeFromThePlainQueryAreTheDistinctQuerysOwn) {
  const std::vector<std::string> queries = {
      "SELECT DISTINCT a FROM t",
      "SELECT DISTINCT a, b FROM t",
      "SELECT DISTINCT c FROM t",
      "SELECT DISTINCT b FROM t ORDER BY b",
      "SELECT DISTINCT b, count(*) FROM t GROUP BY b",
      "SELECT DISTINCT a, c FROM t ORDER BY 2 DESC, 1",
      "SELECT DISTINCT v FROM r",
      "SELECT DISTINCT v FROM r WHERE v = 'none'",
  };
  for (size_t keep : {size_t{0}, size_t{2}, size_t{100}})
    for (bool firsts : {false, true})
    for (const auto& d : queries) {
      SCOPED_TRACE(d + " keep_rows " + std::to_string(keep) + (firsts ? " keeping the first of each kind" : ""));
      const auto p = without_distinct(d);
      ASSERT_TRUE(p.has_value());
      const db::ExecutionResult plain = run(*p, keep, firsts);
      const db::ExecutionResult own = run(d, keep);
      ASSERT_TRUE(own.ok()) << own.error;
      const auto made = distinct_of(plain, keep);
      // Only when the plain result kept too few rows to show the first distinct ones; never
      // when it kept the first of each kind past them.
      if (firsts) {
        ASSERT_TRUE(made.has_value());
      }
      if (!made) {
        EXPECT_TRUE(plain.digest != nullptr);
        continue;
      }
      EXPECT_TRUE(made->from_plain_twin);
      EXPECT_EQ(made->row_count(), own.row_count());
      EXPECT_EQ(made->result.rows.size(), own.result.rows.size());
      EXPECT_EQ(made->digest != nullptr, own.digest != nullptr);
      EXPECT_EQ(made->result.columns, own.result.columns);
      const db::ResultDigest made_all = made->digest ? *made->digest : db::digest_of(made->result);
      const db::ResultDigest own_all = own.digest ? *own.digest : db::digest_of(own.result);
      EXPECT_TRUE(db::bird_equal(made_all, own_all));
      EXPECT_TRUE(db::spider_ts_equal(own_all, made_all, false));
      // Ordered queries without ties on their keys come out in the same order.
      if (d.find("ORDER BY") != std::string::npos) {
        EXPECT_TRUE(db::spider_ts_equal(own_all, made_all, true));
      }
      // The rows shown are the DISTINCT query's own first rows.
      EXPECT_EQ(made->result.rows, own.result.rows);
    }
  // r's first five rows repeat one value: with two rows kept, the plain result does not hold
  // the second distinct row, and nothing is made — unless it kept the first of each kind past
  // them: row 5 ('y'), and no more once two kinds are known.
  EXPECT_FALSE(distinct_of(run("SELECT v FROM r", 2), 2).has_value());
  EXPECT_TRUE(distinct_of(run("SELECT v FROM r", 0), 0).has_value());
  const db::ExecutionResult r2 = run("SELECT v FROM r", 2, true);
  ASSERT_EQ(r2.later_firsts.size(), 1u);
  EXPECT_EQ(r2.later_firsts[0].first, 5u);
  EXPECT_EQ(r2.result.rows.size(), 2u);
  const auto made_r = distinct_of(r2, 2);
  ASSERT_TRUE(made_r.has_value());
  ASSERT_EQ(made_r->result.rows.size(), 2u);
  EXPECT_EQ(made_r->result.rows[1][0].s, "y");
  EXPECT_EQ(made_r->row_count(), 3u);
  db::ExecutionResult failed = run("SELECT nope FROM t", 0);
  EXPECT_FALSE(distinct_of(failed, 0).has_value());
}

// A whole answer reshaped as a run under other limits gives what that run gives: the memo
// hands gold's run (made whole for the judge) to a candidate that wrote gold's text.
TEST_F(DistinctTwin, AWholeAnswerShapedAsARunUnderLimitsIsThatRunsResult) {
  const std::vector<std::string> queries = {"SELECT a, b FROM t", "SELECT v FROM r", "SELECT c FROM t ORDER BY c",
                                            "SELECT v FROM r WHERE v = 'none'"};
  for (const auto& sql : queries)
    for (size_t keep : {size_t{0}, size_t{2}, size_t{5}})
      for (size_t kinds : {size_t{0}, size_t{2}, size_t{3}})
        for (size_t cap : {size_t{0}, size_t{3}, size_t{7}}) {
          SCOPED_TRACE(sql + " keep " + std::to_string(keep) + " kinds " + std::to_string(kinds) + " cap " +
                       std::to_string(cap));
          db::QueryLimits limits = executor_.options().limits;
          limits.hash_rows_after = keep;
          limits.keep_first_distinct = keep > 0 ? kinds : 0;
          limits.row_cap = cap;
          db::QueryLimits whole_limits = executor_.options().limits;
          whole_limits.row_cap = 0;
          const db::ExecutionResult own = executor_.run(db_, sql, limits);
          const db::ExecutionResult whole = executor_.run(db_, sql, whole_limits);
          const auto shaped = shaped_as(whole, limits);
          ASSERT_TRUE(shaped.has_value());
          EXPECT_EQ(shaped->status, own.status);
          EXPECT_EQ(shaped->error, own.error);
          EXPECT_EQ(shaped->result.columns, own.result.columns);
          EXPECT_EQ(shaped->result.rows, own.result.rows);
          EXPECT_EQ(shaped->row_count(), own.row_count());
          ASSERT_EQ(shaped->digest != nullptr, own.digest != nullptr);
          if (own.digest) {
            EXPECT_TRUE(db::bird_equal(*shaped->digest, *own.digest));
            EXPECT_TRUE(db::spider_ts_equal(*own.digest, *shaped->digest, true));
          }
          ASSERT_EQ(shaped->later_firsts.size(), own.later_firsts.size());
          for (size_t k = 0; k < own.later_firsts.size(); ++k) {
            EXPECT_EQ(shaped->later_firsts[k].first, own.later_firsts[k].first);
            EXPECT_EQ(shaped->later_firsts[k].second, own.later_firsts[k].second);
          }
        }
  // What a whole answer cannot tell: a failed run, one slower than the limits allow.
  db::QueryLimits limits = executor_.options().limits;
  EXPECT_FALSE(shaped_as(executor_.run(db_, "SELECT nope FROM t", limits), limits).has_value());
  db::ExecutionResult slow = executor_.run(db_, "SELECT a FROM t", limits);
  slow.elapsed_ms = limits.timeout_s * 1000 + 1;
  EXPECT_FALSE(shaped_as(slow, limits).has_value());
}

TEST_F(DistinctTwin, TheMemoAnswersADistinctQueryFromItsAnnouncedPlainTwin) {
  std::vector<std::string> executed;
  std::mutex mu;
  auto runner = [&](const std::string& sql) {
    std::lock_guard lock(mu);
    executed.push_back(normalize_sql(sql));
    return executor_.run(db_, sql);
  };
  {
    ExecutionMemo memo(runner);
    memo.derive_distinct(0);
    memo.expect("SELECT a, b FROM t");
    auto d = memo.run("SELECT DISTINCT a, b FROM t");
    auto p = memo.run("SELECT  a, b FROM t");
    EXPECT_EQ(executed, std::vector<std::string>{"SELECT a, b FROM t"});
    EXPECT_EQ(memo.executions(), 1u);
    EXPECT_EQ(memo.derived(), 1u);
    EXPECT_EQ(memo.requests(), 2u);
    EXPECT_TRUE(d->from_plain_twin);
    EXPECT_FALSE(p->from_plain_twin);
    EXPECT_EQ(d->result.rows.size(), 7u);  // 1, '1', x'31', NULL, (2, 'A'), (2, 'a'), 3
    EXPECT_EQ(p->result.rows.size(), 11u);
    // Found without running anything once the plain twin has run.
    auto found = memo.find("SELECT DISTINCT b FROM t ORDER BY b");
    EXPECT_EQ(found, nullptr) << "its plain twin never ran";
    memo.run("SELECT b FROM t ORDER BY b");
    found = memo.find("SELECT DISTINCT b FROM t ORDER BY b");
    ASSERT_NE(found, nullptr);
    EXPECT_EQ(found->result.rows.size(), 5u);
    EXPECT_EQ(memo.executions(), 2u);
  }
  executed.clear();
  {
    // Not announced: the DISTINCT query runs on its own; nor when derivation is off, or the
    // plain twin fails.
    ExecutionMemo memo(runner);
    memo.derive_distinct(0);
    memo.run("SELECT DISTINCT a FROM t");
    memo.expect("SELECT nope FROM t");
    memo.run("SELECT DISTINCT nope FROM t");
    EXPECT_EQ(executed, (std::vector<std::string>{"SELECT DISTINCT a FROM t", "SELECT nope FROM t",
                                                  "SELECT DISTINCT nope FROM t"}));
    EXPECT_EQ(memo.derived(), 0u);
    ExecutionMemo off(runner);
    off.expect("SELECT a FROM t");
    EXPECT_FALSE(off.run("SELECT DISTINCT a FROM t")->from_plain_twin);
    EXPECT_EQ(off.derived(), 0u);
  }
}

}  // namespace
}  // namespace nl2sql::fix
