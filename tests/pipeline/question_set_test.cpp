#include "nl2sql/pipeline/question_set.h"

#include <gtest/gtest.h>

#include <set>

namespace nl2sql::pipeline {
namespace {

data::Dataset make_dataset(size_t n) {
  data::Dataset ds;
  for (size_t i = 0; i < n; ++i) {
    data::Question q;
    q.question_id = "q" + std::to_string(i);
    q.index = i;
    q.db_id = i % 3 == 0 ? "a" : "b";
    ds.questions.push_back(q);
  }
  ds.db_paths["a"] = "a.sqlite";
  ds.db_paths["b"] = "b.sqlite";
  return ds;
}

TEST(QuestionSet, RangesAreInclusiveSortedAndChecked) {
  auto r = parse_ranges("5, 0-2,2,9", 10);
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  EXPECT_EQ(*r, (std::vector<size_t>{0, 1, 2, 5, 9}));
  EXPECT_FALSE(parse_ranges("3-1", 10).is_ok());
  EXPECT_FALSE(parse_ranges("0-10", 10).is_ok());
  EXPECT_FALSE(parse_ranges("x", 10).is_ok());
  auto err = parse_ranges("1,,2", 10);
  ASSERT_FALSE(err.is_ok());
  EXPECT_NE(err.status().message().find("--questions"), std::string::npos);
}

TEST(QuestionSet, ShardParsing) {
  auto s = parse_shard("1/4");
  ASSERT_TRUE(s.is_ok());
  EXPECT_EQ(s->index, 1u);
  EXPECT_EQ(s->count, 4u);
  EXPECT_FALSE(parse_shard("4/4").is_ok());
  EXPECT_FALSE(parse_shard("1").is_ok());
  EXPECT_FALSE(parse_shard("a/b").is_ok());
}

TEST(QuestionSet, ShardsPartitionTheSelection) {
  auto ds = make_dataset(23);
  std::set<size_t> seen;
  size_t total = 0;
  for (size_t i = 0; i < 3; ++i) {
    QuestionFilter f;
    f.ranges = "2-20";
    f.shard = Shard{i, 3};
    auto r = select_questions(ds, f);
    ASSERT_TRUE(r.is_ok());
    total += r->size();
    seen.insert(r->begin(), r->end());
  }
  EXPECT_EQ(total, 19u);
  EXPECT_EQ(seen.size(), 19u);
  EXPECT_EQ(*seen.begin(), 2u);
  EXPECT_EQ(*seen.rbegin(), 20u);
}

TEST(QuestionSet, SampleIsSeededAndStableAndDbFilters) {
  auto ds = make_dataset(50);
  QuestionFilter f;
  f.sample = 10;
  f.seed = 7;
  auto a = select_questions(ds, f);
  auto b = select_questions(ds, f);
  ASSERT_TRUE(a.is_ok());
  EXPECT_EQ(a->size(), 10u);
  EXPECT_EQ(*a, *b);
  EXPECT_TRUE(std::is_sorted(a->begin(), a->end()));
  f.seed = 8;
  EXPECT_NE(*select_questions(ds, f), *a);

  QuestionFilter by_db;
  by_db.db_id = "a";
  auto only_a = select_questions(ds, by_db);
  ASSERT_TRUE(only_a.is_ok());
  EXPECT_EQ(only_a->size(), 17u);
  for (size_t i : *only_a) EXPECT_EQ(ds.questions[i].db_id, "a");
  by_db.db_id = "zzz";
  EXPECT_FALSE(select_questions(ds, by_db).is_ok());
}

}  // namespace
}  // namespace nl2sql::pipeline
