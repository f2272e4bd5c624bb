// Demonstrations chosen per question (generate/demo_pool.h): the masked question and the schema
// words on hand-worked cases, the ranking against hand-computed scores (the most similar pair
// wins, the same question never appears, the question's own database is left out unless asked),
// the schema weight flipping a choice, and the dc / qp prompts carrying the chosen pairs.
#include <cmath>
#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "generate/demo_pool.h"
#include "nl2sql/generate/generator.h"
#include "nl2sql/llm/client.h"
#include "nl2sql/llm/prompt_template.h"
#include "nl2sql/sim/simulator.h"
#include "support/test_env.h"

namespace nl2sql::generate {
namespace {
namespace fs = std::filesystem;
using nlohmann::json;

// Three small databases of different domains.
class DemoPoolTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new testing::TempDir();
    testing::build_database(db("music"),
                            "CREATE TABLE singer (singer_id INTEGER PRIMARY KEY, name TEXT, country TEXT, age INTEGER);"
                            "INSERT INTO singer VALUES (1, 'Ann', 'France', 30);");
    testing::build_database(db("sport"),
                            "CREATE TABLE team (team_id INTEGER PRIMARY KEY, name TEXT, city TEXT, founded INTEGER);"
                            "INSERT INTO team VALUES (1, 'Hawks', 'Boston', 1950);");
    testing::build_database(db("shop"),
                            "CREATE TABLE product (product_id INTEGER PRIMARY KEY, name TEXT, price REAL, "
                            "category TEXT); INSERT INTO product VALUES (1, 'pen', 2.5, 'office');");
  }
  static void TearDownTestSuite() { delete dir_; }
  static fs::path db(const std::string& id) { return dir_->path() / (id + ".sqlite"); }

  static DemoPair pair(const std::string& id, const std::string& db_id, const std::string& q, const std::string& sql) {
    return DemoPair{id, q, "", sql, db_id, db(db_id)};
  }
  static std::vector<DemoPair> pairs() {
    return {pair("p0", "sport", "How many teams are from Boston?", "SELECT count(*) FROM team WHERE city = 'Boston'"),
            pair("p1", "shop", "What is the average price of products?", "SELECT avg(price) FROM product"),
            pair("p2", "music", "How many singers are from France?", "SELECT count(*) FROM singer WHERE country = 'France'"),
            pair("p3", "shop", "List the name of every product.", "SELECT name FROM product"),
            pair("p4", "music", "What is the name of the oldest singer?",
                 "SELECT name FROM singer ORDER BY age DESC LIMIT 1")};
  }
  // The annotated schema of the music database, as a dataset would give it.
  static data::Schema music_schema() {
    data::Schema s;
    s.db_id = "music";
    data::Table t;
    t.name = "singer";
    for (const char* c : {"singer_id", "name", "country", "age"}) t.columns.push_back(data::Column{c, c, "", "", "", ""});
    s.tables.push_back(t);
    return s;
  }
  static data::Task task(const std::string& q) {
    data::Task t;
    t.question_id = "q";
    t.db_id = "music";
    t.question = q;
    return t;
  }
  static std::vector<std::string> ids(const DemoPool& pool, const std::vector<ScoredDemo>& r) {
    std::vector<std::string> out;
    for (const auto& d : r) out.push_back(pool.pairs()[d.index].question_id);
    return out;
  }

  inline static testing::TempDir* dir_ = nullptr;
};

TEST_F(DemoPoolTest, MaskedQuestionHidesValuesNumbersAndSchemaWords) {
  const std::set<std::string> words = {"singer", "id", "name", "country", "age"};
  EXPECT_EQ(masked_question("How many singers are from 'France' in 2014?", words),
            (std::vector<std::string>{"<num>", "<sch>", "<val>", "are", "from", "how", "in", "many"}));
  // A capitalised word inside the sentence is a value; the first word of a sentence is not.
  EXPECT_EQ(masked_question("Show ages. Which singer's country is Peru?", words),
            (std::vector<std::string>{"<sch>", "<val>", "is", "s", "show", "which"}));
  EXPECT_EQ(mentioned_schema_words("What are the names and ages of singers from Peru?", words),
            (std::set<std::string>{"age", "name", "singer"}));
  EXPECT_EQ(name_words("TeamName_id"), (std::set<std::string>{"id", "name", "team"}));
}

TEST_F(DemoPoolTest, RanksByHandComputedScoresAndNeverTheSameQuestion) {
  auto pool = DemoPool::from_pairs(pairs(), DemoPoolOptions{3, 0.3, true});
  ASSERT_TRUE(pool.is_ok()) << pool.status().message();
  // Q = {<sch>, <val>, are, from, how, many}; schema words mentioned: {singer}.
  // p0 masks to the same six tokens (J = 1), its SQL reads {team, city} (J = 0): 0.7.
  // p3 {<sch>, every, list, of, the}: J = 1/10, schema 0: 0.07.
  // p1 {<sch>, average, is, of, the, what}: J = 1/11, schema 0: 0.7/11.
  // p2 is the same question and p4 is on the question's database: never ranked.
  auto ranked = (*pool)->rank(task("How many singers are from France?"), music_schema());
  ASSERT_EQ(ids(**pool, ranked), (std::vector<std::string>{"p0", "p3", "p1"}));
  EXPECT_NEAR(ranked[0].score, 0.7, 1e-12);
  EXPECT_NEAR(ranked[1].score, 0.07, 1e-12);
  EXPECT_NEAR(ranked[2].score, 0.7 / 11, 1e-12);
  EXPECT_NEAR(ranked[0].question_similarity, 1.0, 1e-12);
  EXPECT_EQ(ids(**pool, (*pool)->choose(task("How many singers are from France?"), music_schema())),
            (std::vector<std::string>{"p0", "p3", "p1"}));

  // A near-copy of p0 on p0's database ties with it: choose() takes the next database's best
  // first, and the near-copy only when no other database is left.
  auto with_copy = pairs();
  with_copy.push_back(pair("p5", "sport", "How many teams are from Paris?", "SELECT count(*) FROM team WHERE city = 'Paris'"));
  auto copies = DemoPool::from_pairs(with_copy, DemoPoolOptions{2, 0.3, true});
  ASSERT_TRUE(copies.is_ok());
  EXPECT_EQ(ids(**copies, (*copies)->rank(task("How many singers are from France?"), music_schema())),
            (std::vector<std::string>{"p0", "p5", "p3", "p1"}));
  EXPECT_EQ(ids(**copies, (*copies)->choose(task("How many singers are from France?"), music_schema())),
            (std::vector<std::string>{"p0", "p3"}));
  auto all_four = DemoPool::from_pairs(with_copy, DemoPoolOptions{4, 0.3, true});
  ASSERT_TRUE(all_four.is_ok());
  EXPECT_EQ(ids(**all_four, (*all_four)->choose(task("How many singers are from France?"), music_schema())),
            (std::vector<std::string>{"p0", "p3", "p5", "p1"}));

  // The same database allowed: p4 joins, the same question (p2) still does not.
  auto open = DemoPool::from_pairs(pairs(), DemoPoolOptions{5, 0.3, false});
  ASSERT_TRUE(open.is_ok());
  auto all = ids(**open, (*open)->rank(task("How many singers are from France?"), music_schema()));
  EXPECT_EQ(all.size(), 4u);
  EXPECT_EQ(std::count(all.begin(), all.end(), "p2"), 0);
  EXPECT_EQ(std::count(all.begin(), all.end(), "p4"), 1);
}

TEST_F(DemoPoolTest, SchemaOverlapCanDecideTheChoice) {
  // Q = {<sch>, are, of, the, what}; mentioned {name, singer}.
  // p1: question J = 4/7, schema J({name, singer}, {product, price}) = 0.
  // p3: question J = 3/7, schema J({name, singer}, {product, name}) = 1/3.
  const std::string q = "What are the names of singers?";
  auto words_only = DemoPool::from_pairs(pairs(), DemoPoolOptions{1, 0.0, true});
  ASSERT_TRUE(words_only.is_ok());
  auto a = (*words_only)->rank(task(q), music_schema());
  EXPECT_EQ(ids(**words_only, a)[0], "p1");
  EXPECT_NEAR(a[0].score, 4.0 / 7, 1e-12);
  auto half = DemoPool::from_pairs(pairs(), DemoPoolOptions{1, 0.5, true});
  ASSERT_TRUE(half.is_ok());
  auto b = (*half)->rank(task(q), music_schema());
  ASSERT_EQ(ids(**half, b)[0], "p3");
  EXPECT_NEAR(b[0].score, 0.5 * 3 / 7 + 0.5 / 3, 1e-12);
  EXPECT_NEAR(b[1].score, 0.5 * 4 / 7, 1e-12);
  EXPECT_NEAR(b[0].schema_similarity, 1.0 / 3, 1e-12);
}

TEST_F(DemoPoolTest, QpDemosArePlannedAndSkipPairsThatDoNotPlan) {
  auto ps = pairs();
  // The best pair's query does not plan (no such table): the next ones are taken.
  ps[0].sql = "SELECT count(*) FROM teams_missing";
  auto pool = DemoPool::from_pairs(ps, DemoPoolOptions{2, 0.3, true});
  ASSERT_TRUE(pool.is_ok());
  db::Executor ex;
  auto demos = (*pool)->qp_demos(task("How many singers are from France?"), music_schema(), ex);
  ASSERT_EQ(demos.size(), 2u);
  EXPECT_EQ(demos[0].sql, "SELECT name FROM product");
  EXPECT_EQ(demos[1].sql, "SELECT avg(price) FROM product");
  EXPECT_NE(demos[0].plan_text.find("Preparation: open the tables product"), std::string::npos);
  // Memoized: the same answer again.
  auto again = (*pool)->qp_demos(task("How many singers are from France?"), music_schema(), ex);
  ASSERT_EQ(again.size(), 2u);
  EXPECT_EQ(again[1].plan_text, demos[1].plan_text);
}

// Through make_generators on the mini set: the pool is a JSONL of the pairs above plus one pair
// that is the mini set's question "0" itself; dc and qp prompts show the most similar pair and
// never question "0".
TEST_F(DemoPoolTest, DcAndQpPromptsCarryThePerQuestionChoice) {
  auto root = testing::build_mini_bird(dir_->path() / "mini");
  data::DatasetSpec spec;
  spec.data_dir = root;
  auto ds = data::load_dataset(spec);
  ASSERT_TRUE(ds.is_ok()) << ds.status().message();
  const data::Question* q0 = ds->find_question("0");
  ASSERT_NE(q0, nullptr);
  const fs::path jsonl = dir_->path() / "pool.jsonl";
  {
    std::ofstream out(jsonl);
    for (const auto& p : pairs())
      out << json{{"question", p.question}, {"sql", p.sql}, {"db_path", p.db_path.string()}}.dump() << "\n";
    // The evaluated question itself (on another database file, so only the text rule excludes it).
    out << json{{"question", q0->question}, {"sql", "SELECT 'leak' FROM product"}, {"db_path", db("shop").string()}}.dump()
        << "\n";
  }
  json gens = json::array({{{"name", "dc"}, {"demos", {{"jsonl", jsonl.string()}, {"count", 1}}}},
                           {{"name", "qp"}, {"demos", {{"jsonl", jsonl.string()}, {"count", 1}}}}});
  core::Config config(json{{"llm", {{"models", {{"sim", {{"provider", "sim"}}}}}, {"default_profile", "sim"},
                                    {"cache", {{"mode", "off"}}}}},
                           {"generate", {{"generators", gens}}}});
  auto client = sim::make_client(config, &*ds);
  ASSERT_TRUE(client.is_ok()) << client.status().message();
  db::Executor ex;
  auto g = make_generators(config, client->get(), &ex, llm::PromptLibrary::bundled(), &spec);
  ASSERT_TRUE(g.is_ok()) << g.status().message();
  ASSERT_EQ(g->size(), 2u);
  GenerationInput in;
  in.question = q0;
  in.schema = &ds->schemas.at(q0->db_id);
  in.db_path = ds->db_paths.at(q0->db_id);
  // "How many schools are in the east Bohemia region?": p0 "How many teams are from Boston?"
  // shares how/many/are/<sch>/<val> and is the most similar pair.
  for (const auto& gen : *g) {
    SCOPED_TRACE(gen->name());
    auto cands = gen->generate(in);
    ASSERT_TRUE(cands.is_ok()) << cands.status().message();
    const std::string& prompt = cands->front().calls.front().prompt;
    EXPECT_NE(prompt.find("SELECT count(*) FROM team WHERE city = 'Boston'"), std::string::npos);
    EXPECT_NE(prompt.find("How many teams are from Boston?"), std::string::npos);
    EXPECT_EQ(prompt.find("'leak'"), std::string::npos);
    EXPECT_EQ(prompt.find("SELECT avg(price) FROM product"), std::string::npos);  // count 1
    EXPECT_NE(cands->front().reasoning.find("[demos: "), std::string::npos);
  }
  EXPECT_NE((*g)[0]->generate(in)->front().calls.front().prompt.find("=== Solved questions that resemble yours"),
            std::string::npos);
}

// A BIRD run has no train split here: dc and qp fall back to their fixed demonstrations and
// every candidate says so.
TEST_F(DemoPoolTest, BirdRunFallsBackToTheHandWrittenDemonstrations) {
  auto root = testing::build_mini_bird(dir_->path() / "mini_fallback");
  data::DatasetSpec spec;
  spec.data_dir = root;
  auto ds = data::load_dataset(spec);
  ASSERT_TRUE(ds.is_ok());
  json gens = json::array({{{"name", "dc"}}, {{"name", "qp"}}});
  core::Config config(json{{"llm", {{"models", {{"sim", {{"provider", "sim"}}}}}, {"default_profile", "sim"},
                                    {"cache", {{"mode", "off"}}}}},
                           {"generate", {{"generators", gens}}}});
  auto client = sim::make_client(config, &*ds);
  ASSERT_TRUE(client.is_ok());
  db::Executor ex;
  auto g = make_generators(config, client->get(), &ex, llm::PromptLibrary::bundled(), &spec);
  ASSERT_TRUE(g.is_ok()) << g.status().message();
  auto hand = llm::PromptTemplate::load_named(llm::bundled_prompts_dir(), "generate_query_plan_demos");
  ASSERT_TRUE(hand.is_ok());
  GenerationInput in;
  in.question = ds->find_question("0");
  in.schema = &ds->schemas.at(in.question->db_id);
  in.db_path = ds->db_paths.at(in.question->db_id);
  for (const auto& gen : *g) {
    SCOPED_TRACE(gen->name());
    auto cands = gen->generate(in);
    ASSERT_TRUE(cands.is_ok());
    EXPECT_NE(cands->front().reasoning.find("[demos: hand-written (the bird benchmark has no train split"),
              std::string::npos)
        << cands->front().reasoning;
    const std::string& prompt = cands->front().calls.front().prompt;
    EXPECT_EQ(prompt.find("Solved questions that resemble yours"), std::string::npos);
    if (gen->name() == "qp") {
      EXPECT_NE(prompt.find(hand->text()), std::string::npos);
    }
  }
}

}  // namespace
}  // namespace nl2sql::generate
