// Every gold query of Spider dev and BIRD dev (databases present in NL2SQL_DATA) whose answer
// the evaluator takes from its tie probe (`… ORDER BY keys LIMIT 1`, first row unique): the
// answer is exactly what gold's own text returns, row for row and value for value.
#include <gtest/gtest.h>

#include "nl2sql/data/dataset.h"
#include "nl2sql/db/executor.h"
#include "nl2sql/eval/evaluator.h"
#include "support/test_env.h"

namespace nl2sql::eval {
namespace {

void check_dataset(const data::Dataset& ds, size_t* derived, size_t* checked) {
  db::Executor plain;
  for (const auto& q : ds.questions) {
    const auto path = ds.db_paths.at(q.db_id);
    const auto fp = db::database_fingerprint(path);
    ASSERT_TRUE(fp.is_ok());
    ItemJudge judge(ds.benchmark, EvalOptions{});
    const auto g = judge.gold(q, path, *fp);
    if (!g.result.ok()) continue;
    ++*checked;
    if (judge.executions() != 1 || !g.tie_checked || g.tie_dependent) continue;
    // One query ran and the tie fact is known: the probe answered for gold (gold without a tie
    // check leaves tie_checked unset; a gold that ran beside its probe counts two queries).
    ++*derived;
    const auto direct = plain.run(path, q.gold_sql, EvalOptions{}.gold_limits);
    ASSERT_TRUE(direct.ok()) << q.question_id;
    EXPECT_EQ(g.result.result.rows, direct.result.rows) << q.question_id << ": " << q.gold_sql;
    EXPECT_EQ(g.result.result.columns.size(), direct.result.columns.size()) << q.question_id;
  }
}

TEST(TieProbeAnswers, GoldsAnswerFromTheProbeIsGoldsOwnOnSpiderAndBirdDev) {
  NL2SQL_REQUIRE_DATA(data);
  size_t derived = 0, checked = 0;
  for (auto [benchmark, dir] : {std::pair{data::Benchmark::kSpider, data / "spider"},
                                std::pair{data::Benchmark::kBird, data / "bird"}}) {
    data::DatasetSpec spec;
    spec.benchmark = benchmark;
    spec.data_dir = dir;
    auto ds = data::load_dataset(spec);
    ASSERT_TRUE(ds.is_ok()) << ds.status().message();
    check_dataset(*ds, &derived, &checked);
  }
  RecordProperty("answered_by_probe", static_cast<int>(derived));
  RecordProperty("gold_queries", static_cast<int>(checked));
  EXPECT_GT(derived, 100u) << "of " << checked << " gold queries";
}

}  // namespace
}  // namespace nl2sql::eval
