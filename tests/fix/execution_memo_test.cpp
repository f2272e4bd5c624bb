// fix::ExecutionMemo (issue 22): the normalization keeps what SQLite runs, each distinct query is
// executed once however many candidates and threads ask for it, and what they get back is the
// query's result.
#include "nl2sql/fix/execution_memo.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

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

}  // namespace
}  // namespace nl2sql::fix
