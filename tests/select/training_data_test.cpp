// Selector training data: the JSONL file shape (chat fine-tuning format), pairs only between a
// correct and an incorrect candidate of different clusters, the label matching the position of
// the correct query, and seeded shuffling.
#include <gtest/gtest.h>

#include <fstream>

#include <nlohmann/json.hpp>

#include "nl2sql/core/files.h"
#include "nl2sql/select/training_data.h"
#include "support/test_env.h"

namespace nl2sql::select {
namespace {

const data::Schema& hero_schema() {
  static const data::Schema schema = [] {
    data::Schema s;
    s.db_id = "heroes";
    data::Table t;
    t.name = "hero";
    t.columns = {{"id", "", "INTEGER", "", "", ""}, {"name", "", "TEXT", "", "", ""}};
    t.primary_key = {"id"};
    s.tables.push_back(t);
    return s;
  }();
  return schema;
}

std::shared_ptr<const db::ResultSet> count(int64_t n) {
  auto r = std::make_shared<db::ResultSet>();
  r->columns = {"COUNT(*)"};
  r->rows = {{db::Value::integer(n)}};
  return r;
}

std::vector<TrainingQuestion> questions() {
  TrainingQuestion q1;
  q1.question_id = "q1";
  q1.question = "How many heroes are there?";
  q1.schema = &hero_schema();
  q1.candidates = {{"SELECT COUNT(*) FROM hero", 0, true, count(12)},
                   {"SELECT COUNT(id) FROM hero", 0, true, nullptr},
                   {"SELECT COUNT(DISTINCT name) FROM hero", 1, false, count(11)},
                   {"SELECT COUNT(*) FROM hero WHERE id > 1", 2, false, count(11)},
                   {"SELEC nonsense", -1, false, nullptr}};
  TrainingQuestion q2 = q1;
  q2.question_id = "q2";
  for (auto& c : q2.candidates) c.correct = c.cluster != 2;  // a correct candidate outside a cluster
  q2.candidates.pop_back();
  TrainingQuestion q3 = q1;
  q3.question_id = "q3";
  for (auto& c : q3.candidates) c.correct = true;  // nothing wrong: no pair
  return {q1, q2, q3};
}

TEST(SelectorTrainingData, FileShapeAndLabels) {
  TrainingOptions o;
  o.seed = 5;
  auto ex = build_selector_training_data(questions(), o, {});
  ASSERT_TRUE(ex.is_ok()) << ex.status().to_string();
  // q1: cluster pairs (0,1) and (0,2); q2: correct clusters 0 and 1 against cluster 2.
  ASSERT_EQ(ex->size(), 4u);
  nl2sql::testing::TempDir tmp;
  ASSERT_TRUE(write_training_jsonl(*ex, tmp / "pairs.jsonl").is_ok());
  auto text = core::read_file(tmp / "pairs.jsonl");
  ASSERT_TRUE(text.is_ok());
  std::istringstream lines(*text);
  std::string line;
  size_t n = 0;
  while (std::getline(lines, line)) {
    const auto& e = (*ex)[n++];
    auto j = nlohmann::json::parse(line);
    ASSERT_EQ(j.size(), 1u);
    const auto& m = j.at("messages");
    ASSERT_EQ(m.size(), 3u);
    EXPECT_EQ(m[0]["role"], "system");
    EXPECT_EQ(m[1]["role"], "user");
    EXPECT_EQ(m[2]["role"], "assistant");
    const std::string user = m[1]["content"], answer = m[2]["content"];
    EXPECT_NE(user.find("How many heroes"), std::string::npos);
    EXPECT_NE(user.find("CREATE TABLE hero"), std::string::npos);
    EXPECT_EQ(user.find("SELEC nonsense"), std::string::npos);
    EXPECT_NE(answer.find("{\"winner\":\"" + e.label + "\"}"), std::string::npos);
    // The labelled side holds a correct query.
    size_t a = user.find("Candidate A:"), b = user.find("Candidate B:");
    std::string side = e.label == "A" ? user.substr(a, b - a) : user.substr(b);
    const auto qs = questions();
    const auto& q = e.question_id == "q1" ? qs[0] : qs[1];
    bool correct_there = false;
    for (const auto& c : q.candidates)
      if (side.find("```sql\n" + c.sql + "\n```") != std::string::npos) correct_there = c.correct;
    EXPECT_TRUE(correct_there) << line;
  }
  EXPECT_EQ(n, 4u);
  auto again = build_selector_training_data(questions(), o, {});
  for (size_t i = 0; i < ex->size(); ++i) EXPECT_EQ((*again)[i].jsonl, (*ex)[i].jsonl);
  // Over many seeds both labels occur (the order is shuffled, not fixed).
  std::set<std::string> labels;
  for (uint64_t seed = 0; seed < 16; ++seed) {
    o.seed = seed;
    auto built = build_selector_training_data(questions(), o, {});
    ASSERT_TRUE(built.is_ok());
    for (const auto& e : *built) labels.insert(e.label);
  }
  EXPECT_EQ(labels.size(), 2u);
  o.max_pairs_per_question = 1;
  EXPECT_EQ(build_selector_training_data(questions(), o, {})->size(), 2u);
}

}  // namespace
}  // namespace nl2sql::select
