// Issue 22: a run keeps a large result compactly (its first fix.keep_rows rows and the digest of
// the whole answer, db::QueryLimits::hash_rows_after). Everything that compares results —
// clustering, the baselines' grouping and their validity test, judging against gold, prompts'
// previews, the fixer's summary — must decide on the hashed result exactly as on the whole one.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "nl2sql/db/executor.h"
#include "nl2sql/eval/evaluator.h"
#include "nl2sql/feedback/feedback.h"
#include "nl2sql/fix/execution_memo.h"
#include "nl2sql/fix/fixer.h"
#include "nl2sql/select/clusters.h"
#include "select/prompt_parts.h"
#include "select/selector_parts.h"
#include "support/jsonl_dataset.h"
#include "support/test_env.h"

namespace nl2sql::select {
namespace {

namespace fs = std::filesystem;
using Shared = std::shared_ptr<const db::ExecutionResult>;

constexpr size_t kKeep = 10;

// t: 300 rows (id 1..300, name 'n<id>'); n: 40 rows whose first 30 are all NULL.
const char* kScript = R"(
CREATE TABLE t(id INTEGER, name TEXT);
WITH RECURSIVE k(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM k WHERE i < 300)
INSERT INTO t SELECT i, 'n' || i FROM k;
CREATE TABLE n(a INTEGER, b TEXT);
WITH RECURSIVE k(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM k WHERE i < 40)
INSERT INTO n SELECT CASE WHEN i > 30 THEN i END, CASE WHEN i > 30 THEN 'v' || i END FROM k;
)";

class CompactResults : public ::testing::Test {
 protected:
  void SetUp() override {
    fs::create_directories(dir_ / "dbs" / "d");
    db_ = dir_ / "dbs" / "d" / "d.sqlite";
    testing::build_database(db_, kScript);
  }
  // The whole result (keep = 0) or the compact one (first `keep` rows and the digest).
  Shared run(const std::string& sql, size_t keep) const {
    db::QueryLimits limits;
    limits.hash_rows_after = keep;
    auto e = std::make_shared<const db::ExecutionResult>(executor_.run(db_, sql, limits));
    EXPECT_TRUE(e->ok()) << sql << ": " << e->error;
    return e;
  }
  testing::TempDir dir_;
  fs::path db_;
  db::Executor executor_;
};

const std::vector<std::string> kQueries = {
    "SELECT id, name FROM t",                                                      // 0
    "SELECT id, name FROM t ORDER BY id DESC",                                     // 1: = 0 as a set
    "SELECT name, id FROM t",                                                      // 2: = 0 relaxed only
    "SELECT id, name FROM t WHERE id <> 250",                                      // 3: one row fewer, past the kept rows
    "SELECT id, CASE WHEN id = 250 THEN 'zz' ELSE name END FROM t",                // 4: one cell differs, past them
    "SELECT id, name FROM t UNION ALL SELECT id, name FROM t WHERE id > 200",      // 5: = 0 (duplicates)
    "SELECT id, name FROM t WHERE id <= 5",                                        // 6: small, never hashed
    "SELECT a, b FROM n",                                                          // 7: 30 all-NULL rows first
    "SELECT a, b FROM n WHERE a IS NOT NULL",                                      // 8: = 7 relaxed only
    "SELECT id, id FROM t",                                                        // 9
    "SELECT id FROM t",                                                            // 10: = 9 relaxed only
};

TEST_F(CompactResults, HashedResultsKeepTheirFirstRowsAndTheWholeRowCount) {
  auto whole = run(kQueries[0], 0);
  auto compact = run(kQueries[0], kKeep);
  EXPECT_EQ(whole->result.rows.size(), 300u);
  EXPECT_EQ(whole->digest, nullptr);
  ASSERT_NE(compact->digest, nullptr);
  EXPECT_EQ(compact->result.rows.size(), kKeep);
  EXPECT_EQ(compact->row_count(), 300u);
  EXPECT_EQ(compact->digest->rows(), 300u);
  for (size_t i = 0; i < kKeep; ++i) EXPECT_EQ(compact->result.rows[i], whole->result.rows[i]);
  auto small = run(kQueries[6], kKeep);
  EXPECT_EQ(small->digest, nullptr);
  EXPECT_EQ(small->result.rows.size(), 5u);
}

TEST_F(CompactResults, ClusterKeysOfHashedResultsAreThoseOfWholeResults) {
  std::vector<Shared> whole, compact;
  for (const auto& q : kQueries) {
    whole.push_back(run(q, 0));
    compact.push_back(run(q, kKeep));
  }
  for (auto eq : {ResultEquality::kExact, ResultEquality::kRelaxed}) {
    for (size_t i = 0; i < kQueries.size(); ++i) {
      // The key does not depend on how much of the answer is held.
      EXPECT_EQ(result_key(*whole[i], eq), result_key(*compact[i], eq)) << kQueries[i];
      for (size_t j = 0; j < kQueries.size(); ++j) {
        // Same partition as the row-based key of the whole answers.
        const bool same_rows = result_key(whole[i]->result, eq) == result_key(whole[j]->result, eq);
        EXPECT_EQ(result_key(*compact[i], eq) == result_key(*compact[j], eq), same_rows)
            << kQueries[i] << " / " << kQueries[j] << (eq == ResultEquality::kExact ? " exact" : " relaxed");
        EXPECT_EQ(result_key(*compact[i], eq) == result_key(*whole[j], eq), same_rows)
            << kQueries[i] << " / " << kQueries[j];
      }
    }
  }
  // Hand-checked cases.
  auto key = [&](size_t i, ResultEquality eq) { return result_key(*compact[i], eq); };
  const auto X = ResultEquality::kExact, R = ResultEquality::kRelaxed;
  EXPECT_EQ(key(0, X), key(1, X));
  EXPECT_EQ(key(0, X), key(5, X));
  EXPECT_NE(key(0, X), key(2, X));
  EXPECT_EQ(key(0, R), key(2, R));
  EXPECT_NE(key(0, X), key(3, X));
  EXPECT_NE(key(0, R), key(3, R));
  EXPECT_NE(key(0, X), key(4, X));
  EXPECT_NE(key(0, R), key(4, R));
  EXPECT_NE(key(7, X), key(8, X));
  EXPECT_EQ(key(7, R), key(8, R));
  EXPECT_NE(key(9, X), key(10, X));
  EXPECT_EQ(key(9, R), key(10, R));
}

PoolCandidate candidate(size_t i, const std::string& sql, Shared result) {
  PoolCandidate c;
  c.id = "c" + std::to_string(i);
  c.generator = i % 2 ? "a" : "b";
  c.sql = sql;
  c.result = std::move(result);
  return c;
}

TEST_F(CompactResults, ClustersAndGroupsOfAHashedPoolAreThoseOfTheWholePool) {
  std::vector<PoolCandidate> whole, compact;
  for (size_t i = 0; i < kQueries.size(); ++i) {
    whole.push_back(candidate(i, kQueries[i], run(kQueries[i], 0)));
    compact.push_back(candidate(i, kQueries[i], run(kQueries[i], kKeep)));
  }
  const std::vector<std::string> order = {"a", "b"};
  for (auto eq : {ResultEquality::kExact, ResultEquality::kRelaxed}) {
    auto w = cluster_pool(whole, eq, order);
    auto c = cluster_pool(compact, eq, order);
    EXPECT_EQ(w.cluster_of, c.cluster_of);
    ASSERT_EQ(w.clusters.size(), c.clusters.size());
    for (size_t k = 0; k < w.clusters.size(); ++k) {
      EXPECT_EQ(w.clusters[k].members, c.clusters[k].members);
      EXPECT_EQ(w.clusters[k].representative, c.clusters[k].representative);
    }
  }
  // Relaxed: {0, 1, 2, 5} together, {7, 8} together, {9, 10} together; the rest alone.
  auto r = cluster_pool(compact, ResultEquality::kRelaxed, order);
  EXPECT_EQ(r.clusters.size(), 6u);
  EXPECT_EQ(r.clusters[0].members, (std::vector<int>{0, 1, 2, 5}));
  auto x = cluster_pool(compact, ResultEquality::kExact, order);
  EXPECT_EQ(x.clusters.size(), 9u);
  EXPECT_EQ(x.clusters[0].members, (std::vector<int>{0, 1, 5}));

  // The baselines' grouping and validity test (a row with a non-NULL value): the first 30 rows
  // of n are all NULL, so the kept rows alone would call the answer invalid.
  SelectionInput in_whole, in_compact;
  in_whole.candidates = whole;
  in_compact.candidates = compact;
  auto gw = detail::result_groups(in_whole, ResultEquality::kExact, detail::has_non_null_row);
  auto gc = detail::result_groups(in_compact, ResultEquality::kExact, detail::has_non_null_row);
  EXPECT_EQ(gw.groups, gc.groups);
  EXPECT_EQ(gw.total, gc.total);
  EXPECT_EQ(gc.total, kQueries.size());
  EXPECT_TRUE(compact[7].result->digest != nullptr);
  EXPECT_TRUE(detail::has_non_null_row(*compact[7].result));
  auto all_null = run("SELECT a, b FROM n WHERE a IS NULL", kKeep);
  ASSERT_NE(all_null->digest, nullptr);
  EXPECT_FALSE(detail::has_non_null_row(*all_null));
}

TEST_F(CompactResults, PreviewsAndSummariesCountTheWholeAnswer) {
  auto whole = run(kQueries[0], 0);
  auto compact = run(kQueries[0], kKeep);
  EXPECT_EQ(detail::result_preview(*compact), detail::result_preview(whole->result));
  EXPECT_NE(detail::result_preview(*compact).find("(300 rows in total)"), std::string::npos);
  auto sw = feedback::summarize_execution(*whole, 5), sc = feedback::summarize_execution(*compact, 5);
  EXPECT_EQ(sc.rows, 300u);
  EXPECT_EQ(sc.preview, sw.preview);
  EXPECT_NE(sc.preview.find("(300 rows)"), std::string::npos);
}

TEST_F(CompactResults, TheMemoKeepsAtMostTheKeptRowsPerResult) {
  db::QueryLimits limits;
  limits.hash_rows_after = kKeep;
  fix::ExecutionMemo memo(executor_, db_, limits);
  for (const auto& q : kQueries) {
    auto r = memo.run(q);
    ASSERT_TRUE(r->ok()) << q;
    EXPECT_LE(r->result.rows.size(), kKeep) << q;
    EXPECT_EQ(r->row_count(), run(q, 0)->result.rows.size()) << q;
  }
  // The pipeline's kept rows: fix.keep_rows, never fewer than the prompts show; 0 keeps all.
  fix::FixOptions o;
  o.keep_rows = 1;
  o.preview_rows = 7;
  EXPECT_EQ(fix::kept_rows(o), 7u);
  o.preview_rows = 2;
  EXPECT_EQ(fix::kept_rows(o), 5u);
  o.keep_rows = 100;
  EXPECT_EQ(fix::kept_rows(o), 100u);
  o.keep_rows = 0;
  EXPECT_EQ(fix::kept_rows(o), 0u);
}

// Judging against gold: a hashed candidate handed to the judge gets the verdicts (bird, relaxed,
// spider-ts with and without ORDER BY), Soft-F1, outcome and row count of the whole one.
TEST_F(CompactResults, AJudgeGivenTheHashedResultGivesTheVerdictsOfTheWholeOne) {
  const std::vector<std::string> golds = {"SELECT id, name FROM t", "SELECT id, name FROM t ORDER BY id DESC"};
  std::vector<std::string> qs;
  for (size_t g = 0; g < golds.size(); ++g)
    qs.push_back(R"({"question_id": "g)" + std::to_string(g) + R"(", "db_id": "d", "sql": ")" + golds[g] + "\"}");
  const data::Dataset ds = testing::jsonl_dataset(dir_.path(), qs);
  ASSERT_EQ(ds.questions.size(), 2u);
  eval::EvalOptions opts;
  opts.metrics = {eval::Metric::kBird, eval::Metric::kSpiderTs, eval::Metric::kRelaxed};
  const auto path = ds.db_paths.at("d");
  const auto fp = *db::database_fingerprint(path);
  std::vector<std::string> preds = kQueries;
  preds.push_back("SELECT id, name FROM t ORDER BY id");
  size_t ts = 0, bird = 0;
  for (const auto& q : ds.questions) {
    for (const auto& sql : preds) {
      eval::ItemJudge plain(ds.benchmark, opts), given(ds.benchmark, opts);
      const eval::Prediction pred{sql, true, ""};
      auto expected = plain.judge({.question = q, .db_path = path, .fingerprint = fp, .prediction = pred}).item;
      auto compact = run(sql, kKeep);
      auto item = given
                      .judge({.question = q,
                              .db_path = path,
                              .fingerprint = fp,
                              .prediction = pred,
                              .known_prediction = compact.get()})
                      .item;
      EXPECT_EQ(item.verdicts, expected.verdicts) << q.gold_sql << " / " << sql;
      EXPECT_DOUBLE_EQ(item.soft_f1, expected.soft_f1) << sql;
      EXPECT_EQ(item.outcome, expected.outcome) << sql;
      EXPECT_EQ(item.pred_rows, expected.pred_rows) << sql;
      EXPECT_TRUE(item.pred_cached);
      EXPECT_EQ(given.executions(), 1u) << "gold only: the prediction is not run again";
      ts += item.verdicts.at("spider_ts");
      bird += item.verdicts.at("bird");
    }
  }
  // By hand. BIRD (sets of ordered tuples): queries 0, 1, 5 and "ORDER BY id", for both golds.
  // Spider-ts (multisets, columns permuted): unordered gold: 0, 1, 2 and "ORDER BY id" (5 has
  // duplicates); gold ordered by id DESC: query 1 only.
  EXPECT_EQ(bird, 8u);
  EXPECT_EQ(ts, 5u);
}

}  // namespace
}  // namespace nl2sql::select
