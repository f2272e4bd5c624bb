// The recall benchmark as a library call (context/recall_bench.h) on the bundled mini set: its
// cases come from the gold SQL's column = 'literal' comparisons the database confirms, every
// mode scores the same cases, and the typo sets count what they ask.
#include <gtest/gtest.h>

#include "nl2sql/context/recall_bench.h"
#include "nl2sql/context/text_match.h"
#include "support/mini_run.h"
#include "support/test_env.h"

namespace nl2sql::context {
namespace {

TEST(RecallBench, ReadsColumnLiteralComparisonsOfAnySpelling) {
  auto pairs = column_literal_comparisons(
      "SELECT * FROM t AS T1 WHERE T1.name = 'O''Brien' AND \"first name\" = \"Ann\" AND [c] = 'x' AND n = 3");
  ASSERT_EQ(pairs.size(), 3u);
  EXPECT_EQ(pairs[0].column, "name");
  EXPECT_EQ(pairs[0].literal, "O'Brien");
  EXPECT_EQ(pairs[1].column, "first name");
  EXPECT_EQ(pairs[1].literal, "Ann");
  EXPECT_EQ(pairs[2].column, "c");
}

TEST(RecallBench, TyposAreOneLetterOffAndReproducible) {
  for (int kind = 0; kind < 4; ++kind) {
    auto a = make_typo("Gotham City", kind, 42);
    auto b = make_typo("Gotham City", kind, 42);
    ASSERT_TRUE(a.has_value()) << kind;
    EXPECT_EQ(*a, *b);
    EXPECT_NE(normalize_text(*a), normalize_text("Gotham City"));
    const long diff = static_cast<long>(a->size()) - static_cast<long>(std::string("Gotham City").size());
    EXPECT_EQ(diff, kind == 0 ? -1 : kind == 2 ? 1 : 0) << *a;
  }
  EXPECT_FALSE(make_typo("ab", 0, 1).has_value());  // too short to misspell
}

TEST(RecallBench, EveryModeScoresTheSameCasesOfTheMiniSet) {
  testing::TempDir dir;
  auto ds = testing::load_mini_bird(dir / "mini");
  ASSERT_TRUE(ds.is_ok()) << ds.status().message();
  db::Executor executor;
  RecallBenchOptions o;
  o.index.index_dir = dir / "index";
  o.index.threads = 1;
  o.typos = true;
  std::vector<std::string> misses;
  o.on_miss = [&](const std::string& line) { misses.push_back(line); };
  auto bench = run_recall_bench(*ds, o, executor);
  ASSERT_TRUE(bench.is_ok()) << bench.status().message();
  ASSERT_GT(bench->pairs, 0u);
  ASSERT_EQ(bench->modes, (std::vector<std::string>{"index", "lsh_only", "exhaustive"}));
  for (const auto& tally : bench->sets[0]) {
    EXPECT_EQ(tally.cases, bench->pairs);
    EXPECT_LE(tally.hits[0], tally.hits[1]);  // recall grows with k
    EXPECT_LE(tally.hits[1], tally.hits[2]);
  }
  // Literals written in the question are found by the exhaustive scan.
  EXPECT_GT(bench->sets[0][2].recall(2), 50.0);
  EXPECT_EQ(bench->typo_pairs + bench->pairs_not_in_text, bench->pairs);
  size_t typos = 0;
  for (const auto& [kind, n] : bench->typo_kinds) typos += n;
  EXPECT_EQ(bench->sets[1][0].cases, typos);
  EXPECT_EQ(bench->sets[3][2].cases, typos);
  // The layout the bench script and the slow tests read.
  auto j = bench->to_json();
  EXPECT_EQ(j["pairs"], bench->pairs);
  EXPECT_TRUE(j["index"].contains("recall@20"));
  EXPECT_TRUE(j["typos"]["lowercased"]["exhaustive"].contains("p95_ms"));
  EXPECT_GT(j["time_ratio"].get<double>(), 0.0);
  EXPECT_NE(bench->summary().find("one-letter typos"), std::string::npos);

  // The timing run's layout: no exhaustive baseline, at most one question.
  o.exhaustive_baseline = false;
  o.typos = false;
  o.max_questions = 1;
  auto one = run_recall_bench(*ds, o, executor);
  ASSERT_TRUE(one.is_ok());
  EXPECT_EQ(one->questions, 1u);
  EXPECT_EQ(one->modes.size(), 2u);
  EXPECT_EQ(one->time_ratio(), 0.0);
  EXPECT_FALSE(one->to_json().contains("typos"));
}

}  // namespace
}  // namespace nl2sql::context
