// Selector training data: the JSONL file shape (chat fine-tuning format), pairs only between a
// correct and an incorrect candidate of different clusters, the label matching the position of
// the correct query, and seeded shuffling.
#include <gtest/gtest.h>

#include <fstream>

#include <nlohmann/json.hpp>

#include "nl2sql/context/metadata.h"
#include "nl2sql/core/config.h"
#include "nl2sql/core/files.h"
#include "nl2sql/db/executor.h"
#include "nl2sql/db/schema_info.h"
#include "nl2sql/llm/client.h"
#include "nl2sql/select/selector.h"
#include "nl2sql/select/training_data.h"
#include "support/fake_openai_server.h"
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

// The same question and pair give the tournament's prompt at inference and the exported training
// prompt byte for byte: one function renders both from the same inputs (the union schema as
// CREATE TABLE statements with the metadata's statistics and inferred key, the result rows).
TEST(SelectorTrainingData, PairPromptIsTheTournamentsByteForByte) {
  nl2sql::testing::TempDir tmp;
  const auto db = tmp / "league.sqlite";
  nl2sql::testing::build_database(db, R"(
    CREATE TABLE team (id INTEGER PRIMARY KEY, name TEXT);
    CREATE TABLE hero (id INTEGER PRIMARY KEY, name TEXT, team_id INTEGER);
    INSERT INTO team VALUES (1, 'Owls'), (2, 'Foxes'), (3, 'Bears');
    INSERT INTO hero VALUES (1, 'Ada', 1), (2, 'Bo', 1), (3, 'Cy', 2), (4, 'Di', 3), (5, 'Ed', 2);)");
  data::Schema schema;
  schema.db_id = "league";
  schema.tables = {{"team", "", {{"id", "", "INTEGER", "", "", ""}, {"name", "", "TEXT", "the team's name", "", ""}}, {"id"}},
                   {"hero", "", {{"id", "", "INTEGER", "", "", ""}, {"name", "", "TEXT", "", "", ""},
                                 {"team_id", "", "INTEGER", "", "", ""}}, {"id"}}};
  db::Executor ex;
  auto meta = context::build_metadata("league", db, schema, context::MetadataOptions{}, ex);
  ASSERT_TRUE(meta.is_ok()) << meta.status().message();
  ASSERT_EQ(meta->inferred_fks.size(), 1u);
  const std::string good = "SELECT COUNT(*) FROM hero AS h JOIN team AS t ON h.team_id = t.id WHERE t.name = 'Owls'";
  const std::string bad = "SELECT COUNT(*) FROM hero";
  auto run = [&](const std::string& sql) { return ex.run(db, sql); };
  const auto good_result = run(good), bad_result = run(bad);
  ASSERT_TRUE(good_result.ok() && bad_result.ok());

  // Inference: the tournament asks both orders of the pair.
  std::vector<std::string> sent;
  llm::testing::FakeOpenAiServer server([&](const httplib::Request& req, int64_t) {
    sent.push_back(nlohmann::json::parse(req.body)["messages"][1]["content"]);
    return llm::testing::FakeReply(200, llm::testing::completion_body("```json\n{\"winner\": \"A\"}\n```"));
  });
  llm::LlmSettings ls;
  llm::ModelProfile p;
  p.name = "main";
  p.base_url = server.base_url();
  p.model = "fake-model";
  p.api_key_env = "";
  ls.profiles["main"] = p;
  ls.default_profile = "main";
  ls.retry.max_attempts = 1;
  ls.cache.mode = llm::CacheMode::kOff;
  auto client = llm::Client::create(ls);
  ASSERT_TRUE(client.is_ok());
  data::Question question;
  question.question_id = "q1";
  question.question = "How many heroes play for the Owls?";
  question.evidence = "Owls is a team name";
  SelectionInput in;
  in.question = &question;
  in.schema = &schema;
  in.metadata = &*meta;
  in.db_path = db;
  for (const auto& [id, sql, result] : {std::tuple{"dc#0", good, &good_result}, std::tuple{"qp#0", bad, &bad_result}}) {
    PoolCandidate c;
    c.id = id;
    c.generator = std::string(id).substr(0, 2);
    c.sql = sql;
    c.result = std::make_shared<const db::ExecutionResult>(*result);
    in.candidates.push_back(c);
  }
  auto sel = make_selector_named("tournament", core::Config(), {client->get(), nullptr, {}, nullptr});
  ASSERT_TRUE(sel.is_ok()) << sel.status().to_string();
  ASSERT_TRUE((*sel)->select(in).is_ok());
  ASSERT_EQ(sent.size(), 2u);

  // Training: the same question and pair, from the inputs selector-data gives it.
  auto info = db::inspect_schema(db);
  ASSERT_TRUE(info.is_ok());
  TrainingQuestion q;
  q.question_id = question.question_id;
  q.question = question.question;
  q.evidence = question.evidence;
  q.schema = &schema;
  q.sql_schema = &*info;
  q.metadata = &*meta;
  q.candidates = {{good, 0, true, std::make_shared<const db::ResultSet>(good_result.result)},
                  {bad, 1, false, std::make_shared<const db::ResultSet>(bad_result.result)}};
  auto ex_out = build_selector_training_data({q}, TrainingOptions{}, {});
  ASSERT_TRUE(ex_out.is_ok()) << ex_out.status().to_string();
  ASSERT_EQ(ex_out->size(), 1u);
  const auto line = nlohmann::json::parse((*ex_out)[0].jsonl);
  const std::string user = line["messages"][1]["content"];
  EXPECT_TRUE(user == sent[0] || user == sent[1]) << user << "\n---- sent:\n" << sent[0] << "\n----\n" << sent[1];
  EXPECT_NE(sent[0], sent[1]);
  // The label names the side holding the correct query.
  EXPECT_EQ(user.find("Candidate " + (*ex_out)[0].label + ":\n```sql\n" + good), user.find("Candidate " + (*ex_out)[0].label + ":"));
  EXPECT_EQ(line["messages"][0]["content"], "You are a careful SQLite expert who checks SQL queries against questions about a database.");
  EXPECT_NE(user.find("CREATE TABLE hero ("), std::string::npos) << user;
  EXPECT_NE(user.find("FOREIGN KEY (team_id) REFERENCES team(id) -- inferred: coverage 100.0%"), std::string::npos) << user;
  EXPECT_NE(user.find("team_id INTEGER, -- 5 rows, 3 distinct, range 1..3"), std::string::npos) << user;
  EXPECT_NE(user.find("COUNT(*)\n2\n"), std::string::npos) << user;  // the good query's result rows
}

}  // namespace
}  // namespace nl2sql::select
