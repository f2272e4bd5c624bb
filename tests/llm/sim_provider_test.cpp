// The offline `sim` provider: each mistake of the taxonomy, determinism, and the configured
// rates (generators, fixer, selectors, hallucination) over thousands of draws.
#include "nl2sql/llm/sim_provider.h"

#include <gtest/gtest.h>

#include "nl2sql/llm/answer.h"
#include "nl2sql/llm/client.h"
#include "support/test_env.h"

namespace nl2sql::llm {
namespace {

const std::vector<std::string> kGold = {
    "SELECT T1.name FROM schools AS T1 INNER JOIN scores AS T2 ON T1.cds = T2.cds_code "
    "WHERE T2.avg_math > 560 AND T1.county = 'Alameda'",
    "SELECT COUNT(DISTINCT driverId) FROM results WHERE raceId = 18",
    "SELECT AVG(amount) FROM loan WHERE date BETWEEN '1997-01-01' AND '1997-12-31'",
    "SELECT name, MAX(height) FROM player GROUP BY name ORDER BY name LIMIT 3",
    "SELECT * FROM t",
};

SqlMistake mistake_at(int i) { return static_cast<SqlMistake>(i); }

TEST(SimMistakes, EachMistakeIsASmallRealisticEdit) {
  SimRng rng(1);
  const std::string join = kGold[0];
  auto distinct = apply_mistake(join, SqlMistake::kDistinctToggle, rng);
  ASSERT_TRUE(distinct);
  EXPECT_EQ(distinct->rfind("SELECT DISTINCT T1.name FROM", 0), 0u) << *distinct;
  // DISTINCT over a lone aggregate would change nothing: not offered as a mistake.
  EXPECT_FALSE(apply_mistake(kGold[1], SqlMistake::kDistinctToggle, rng));
  EXPECT_EQ(*apply_mistake("SELECT DISTINCT a FROM t", SqlMistake::kDistinctToggle, rng),
            "SELECT a FROM t");

  auto lit = apply_mistake(join, SqlMistake::kLiteralCase, rng);
  ASSERT_TRUE(lit);
  EXPECT_NE(lit->find("'alameda'"), std::string::npos) << *lit;

  auto key = apply_mistake(join, SqlMistake::kWrongJoinKey, rng);
  ASSERT_TRUE(key);
  EXPECT_NE(key->find("ON T1.cds_code = T2.cds"), std::string::npos) << *key;

  auto dropped = apply_mistake(join, SqlMistake::kDroppedCondition, rng);
  ASSERT_TRUE(dropped);
  bool one_left = (dropped->find("avg_math") == std::string::npos) !=
                  (dropped->find("'Alameda'") == std::string::npos);
  EXPECT_TRUE(one_left) << *dropped;
  EXPECT_NE(dropped->find("WHERE "), std::string::npos) << *dropped;
  // A BETWEEN is one condition: dropping it removes the WHERE clause.
  EXPECT_EQ(*apply_mistake(kGold[2], SqlMistake::kDroppedCondition, rng), "SELECT AVG(amount) FROM loan");

  auto agg = apply_mistake(kGold[2], SqlMistake::kWrongAggregate, rng);
  ASSERT_TRUE(agg);
  EXPECT_EQ(agg->find("AVG("), std::string::npos) << *agg;
  EXPECT_NE(agg->find("(amount)"), std::string::npos) << *agg;

  auto extra = apply_mistake(join, SqlMistake::kExtraColumn, rng);
  ASSERT_TRUE(extra);
  EXPECT_EQ(extra->rfind("SELECT T1.name, ", 0), 0u) << *extra;

  auto col = apply_mistake(join, SqlMistake::kWrongColumn, rng);
  ASSERT_TRUE(col);
  EXPECT_NE(*col, join);
  EXPECT_EQ(col->size() == join.size() && *col == join, false);

  auto syntax = apply_mistake(join, SqlMistake::kSyntaxError, rng);
  ASSERT_TRUE(syntax);
  EXPECT_NE(*syntax, join);
}

TEST(SimMistakes, InapplicableMistakesSaySo) {
  SimRng rng(2);
  EXPECT_FALSE(apply_mistake("SELECT * FROM t", SqlMistake::kWrongAggregate, rng));
  EXPECT_FALSE(apply_mistake("SELECT COUNT(*) FROM t", SqlMistake::kWrongAggregate, rng));
  EXPECT_FALSE(apply_mistake("SELECT a FROM t", SqlMistake::kWrongJoinKey, rng));
  EXPECT_FALSE(apply_mistake("SELECT a FROM t", SqlMistake::kDroppedCondition, rng));
  EXPECT_FALSE(apply_mistake("SELECT a FROM t WHERE b = 1", SqlMistake::kLiteralCase, rng));
  EXPECT_FALSE(apply_mistake("SELECT * FROM t", SqlMistake::kWrongColumn, rng));
}

TEST(SimMistakes, MutationAlwaysChangesTheQueryAndCoversTheTaxonomy) {
  std::set<SqlMistake> seen;
  for (const auto& gold : kGold) {
    for (uint64_t seed = 0; seed < 200; ++seed) {
      SimRng rng(seed);
      auto [sql, mistake] = mutate_sql(gold, rng);
      ASSERT_NE(sql, gold) << sql_mistake_name(mistake);
      seen.insert(mistake);
    }
  }
  EXPECT_EQ(seen.size(), static_cast<size_t>(kSqlMistakeCount));
  for (int i = 0; i < kSqlMistakeCount; ++i) EXPECT_STRNE(sql_mistake_name(mistake_at(i)), "?");
}

ChatRequest generate_request(const std::string& qid, const std::string& gold, int64_t sample = 0,
                     const std::string& generator = "divide_conquer",
                     const std::string& difficulty = "simple") {
  ChatRequest r;
  r.messages = {{"user", "write SQL"}};
  r.sim.task = SimTask::kGenerate;
  r.sim.question_id = qid;
  r.sim.question = "Which schools in Alameda score above 560 in math?";
  r.sim.gold_sql = gold;
  r.sim.generator = generator;
  r.sim.difficulty = difficulty;
  r.sim.sample_index = sample;
  return r;
}

TEST(SimProviderTest, DeterministicFromSeedQuestionGeneratorAndSample) {
  SimSettings s;
  s.p_correct = 0.5;
  SimProvider sim(s);
  int differing = 0;
  for (int i = 0; i < 50; ++i) {
    auto a = sim.answer(generate_request("q" + std::to_string(i), kGold[0], 0));
    auto b = sim.answer(generate_request("q" + std::to_string(i), kGold[0], 0));
    auto c = sim.answer(generate_request("q" + std::to_string(i), kGold[0], 1));
    ASSERT_TRUE(a.is_ok() && b.is_ok() && c.is_ok());
    EXPECT_EQ(a->text(), b->text());
    differing += a->text() != c->text();
  }
  EXPECT_GT(differing, 5);  // samples are diverse
  s.seed = 99;
  SimProvider reseeded(s);
  int changed = 0;
  for (int i = 0; i < 50; ++i)
    changed += reseeded.answer(generate_request("q" + std::to_string(i), kGold[0]))->text() !=
               sim.answer(generate_request("q" + std::to_string(i), kGold[0]))->text();
  EXPECT_GT(changed, 5);
}

double gold_rate(const SimProvider& sim, int n, const std::string& generator,
                 const std::string& difficulty) {
  int correct = 0;
  for (int i = 0; i < n; ++i) {
    const auto& gold = kGold[static_cast<size_t>(i) % kGold.size()];
    auto r = sim.answer(generate_request("q" + std::to_string(i), gold, 0, generator, difficulty));
    EXPECT_TRUE(r.is_ok());
    correct += extract_sql(r->text()).sql == gold;
  }
  return static_cast<double>(correct) / n;
}

TEST(SimProviderTest, GeneratorAccuracyMatchesConfiguredRates) {
  SimSettings s;
  s.p_correct = 0.7;
  s.p_correct_by["query_plan"] = 0.4;
  s.p_correct_by["query_plan/challenging"] = 0.2;
  SimProvider sim(s);
  // 2,000 draws: the standard error is about 0.01, so +-0.04 is a 4-sigma band.
  EXPECT_NEAR(gold_rate(sim, 2000, "divide_conquer", "simple"), 0.7, 0.04);
  EXPECT_NEAR(gold_rate(sim, 2000, "query_plan", "simple"), 0.4, 0.04);
  EXPECT_NEAR(gold_rate(sim, 2000, "query_plan", "challenging"), 0.2, 0.04);
}

TEST(SimProviderTest, AnswersLookLikeAModelsAndAreLabelled) {
  SimProvider sim(SimSettings{});
  auto r = sim.answer(generate_request("q1", kGold[1]));
  ASSERT_TRUE(r.is_ok());
  EXPECT_EQ(r->provider, "sim");
  EXPECT_TRUE(r->simulated());
  EXPECT_NE(r->text().find("```sql\n"), std::string::npos);
  EXPECT_FALSE(extract_sql(r->text()).sql.empty());
  ChatRequest none;
  none.messages = {{"user", "x"}};
  auto refused = sim.answer(none);
  ASSERT_FALSE(refused.is_ok());
  EXPECT_EQ(refused.status().code(), ErrorCode::kInvalidInput);
}

nlohmann::json json_block(const std::string& text) {
  auto start = text.find("```json\n");
  EXPECT_NE(start, std::string::npos) << text;
  auto end = text.find("```", start + 8);
  return nlohmann::json::parse(text.substr(start + 8, end - start - 8));
}

TEST(SimProviderTest, PairwiseSelectorPicksGoldWithPSel) {
  SimSettings s;  // p_sel defaults to 0.71
  SimProvider sim(s);
  int right = 0;
  const int n = 2000;
  for (int i = 0; i < n; ++i) {
    ChatRequest r;
    r.sim.task = SimTask::kSelectPair;
    r.sim.question_id = "q" + std::to_string(i);
    r.sim.candidates = {"SELECT 1", "SELECT 2"};
    bool gold_is_a = i % 2 == 0;
    r.sim.candidate_matches_gold = {gold_is_a, !gold_is_a};
    auto a = sim.answer(r);
    ASSERT_TRUE(a.is_ok());
    std::string winner = json_block(a->text())["winner"];
    right += (winner == "A") == gold_is_a;
  }
  EXPECT_NEAR(static_cast<double>(right) / n, 0.71, 0.04);
}

TEST(SimProviderTest, RankerPutsGoldFirstWithPSel) {
  SimSettings s;
  s.p_sel = 0.6;
  SimProvider sim(s);
  int right = 0;
  const int n = 2000;
  for (int i = 0; i < n; ++i) {
    ChatRequest r;
    r.sim.task = SimTask::kRank;
    r.sim.question_id = "q" + std::to_string(i);
    r.sim.candidates = {"a", "b", "c", "d"};
    r.sim.candidate_matches_gold = {false, false, false, false};
    size_t gold = static_cast<size_t>(i % 4);
    r.sim.candidate_matches_gold[gold] = true;
    auto a = sim.answer(r);
    ASSERT_TRUE(a.is_ok());
    auto ranking = json_block(a->text())["ranking"].get<std::vector<size_t>>();
    ASSERT_EQ(ranking.size(), 4u);
    EXPECT_EQ(std::set<size_t>(ranking.begin(), ranking.end()).size(), 4u);
    right += ranking[0] == gold;
  }
  EXPECT_NEAR(static_cast<double>(right) / n, 0.6, 0.04);
}

TEST(SimProviderTest, FixerAndHallucinationRates) {
  SimSettings s;
  s.p_fix = 0.5;
  s.p_hallucinate = 0.25;
  SimProvider sim(s);
  int fixed = 0, perturbed = 0;
  const int n = 2000;
  for (int i = 0; i < n; ++i) {
    ChatRequest fix;
    fix.sim.task = SimTask::kFix;
    fix.sim.question_id = "q" + std::to_string(i);
    fix.sim.gold_sql = "SELECT a FROM t";
    fix.sim.failing_sql = "SELECT a FORM t";
    fix.sim.failure = "syntax_error";
    fixed += extract_sql(sim.answer(fix)->text()).sql == "SELECT a FROM t";
    ChatRequest ev;
    ev.sim.task = SimTask::kNlEval;
    ev.sim.question_id = "q" + std::to_string(i);
    ev.sim.gold_answer = "Alameda | 42\nFresno | 7";
    auto t = sim.answer(ev)->text();
    perturbed += t.find("```text\nAlameda | 42\nFresno | 7\n```") == std::string::npos;
  }
  EXPECT_NEAR(static_cast<double>(fixed) / n, 0.5, 0.04);
  EXPECT_NEAR(static_cast<double>(perturbed) / n, 0.25, 0.04);
}

TEST(SimProviderTest, KeywordsAndColumnFilter) {
  SimProvider sim(SimSettings{});
  ChatRequest k;
  k.sim.task = SimTask::kKeywords;
  k.sim.question = "How many schools in 'Alameda' have a free meal count above 500?";
  k.sim.evidence = "free meal count refers to `Free Meal Count (K-12)`";
  auto kws = nlohmann::json::parse(sim.answer(k)->text())["keywords"].get<std::vector<std::string>>();
  auto has = [&](const std::string& w) { return std::find(kws.begin(), kws.end(), w) != kws.end(); };
  EXPECT_TRUE(has("Alameda"));
  EXPECT_TRUE(has("free meal count"));
  EXPECT_TRUE(has("schools"));
  EXPECT_TRUE(has("500"));
  EXPECT_FALSE(has("How"));
  EXPECT_FALSE(has("many"));

  SimSettings perfect;
  perfect.p_sel = 1.0;
  SimProvider oracle(perfect);
  ChatRequest c;
  c.sim.task = SimTask::kColumnFilter;
  c.sim.gold_sql = kGold[0];
  c.sim.column = "county";
  EXPECT_TRUE(json_block(oracle.answer(c)->text())["relevant"].get<bool>());
  c.sim.column = "phone";
  EXPECT_FALSE(json_block(oracle.answer(c)->text())["relevant"].get<bool>());
}


// Agentic roles: plans and fact sheets from gold's tables and clauses; critics that approve or
// name a real defect; a validator that accepts iff the caller says the result equals gold's.
TEST(SimProviderTest, AgenticRolesDeriveFromGold) {
  SimSettings perfect;
  perfect.p_sel = 1.0;
  SimProvider sim(perfect);
  ChatRequest r;
  r.sim.question_id = "q1";
  r.sim.gold_sql = kGold[0];
  r.sim.evidence = "avg_math is the average math score";

  r.sim.task = SimTask::kLedger;
  auto ledger = json_block(sim.answer(r)->text());
  EXPECT_EQ(ledger["required_tables"], nlohmann::json({"schools", "scores"}));
  EXPECT_EQ(ledger["join_paths"], nlohmann::json({"T1.cds = T2.cds_code"}));
  EXPECT_EQ(ledger["filters"], nlohmann::json({"T2.avg_math > 560", "T1.county = 'Alameda'"}));
  EXPECT_EQ(ledger["output_columns"], nlohmann::json({"T1.name"}));
  EXPECT_EQ(ledger["business_rules"].size(), 1u);

  r.sim.task = SimTask::kPlan;
  auto plan = json_block(sim.answer(r)->text());
  EXPECT_EQ(plan["expected_columns"], nlohmann::json({"T1.name"}));
  EXPECT_EQ(plan["steps"].front(), "Read table(s) schools, scores.");

  r.sim.gold_sql = kGold[3];
  plan = json_block(sim.answer(r)->text());
  std::string steps = plan["steps"].dump();
  EXPECT_NE(steps.find("Group by name"), std::string::npos) << steps;
  EXPECT_NE(steps.find("Order by name, limit 3"), std::string::npos) << steps;
  r.sim.gold_sql = kGold[0];

  r.sim.task = SimTask::kPlanCritique;
  r.sim.current_plan = "1. Read schools.\n2. Keep county = 'Alameda'.";
  auto pc = json_block(sim.answer(r)->text());
  EXPECT_FALSE(pc["approved"].get<bool>());
  EXPECT_NE(pc["issues"].dump().find("scores"), std::string::npos);
  r.sim.current_plan = "1. Read schools and scores.";
  EXPECT_TRUE(json_block(sim.answer(r)->text())["approved"].get<bool>());

  r.sim.task = SimTask::kSqlCritique;
  r.sim.current_sql = "SELECT T1.name FROM schools AS T1 INNER JOIN scores AS T2 ON T1.cds = T2.cds_code "
                      "WHERE T2.avg_math > 560 AND T1.county = 'alameda'";
  r.sim.current_matches_gold = false;
  auto sc = json_block(sim.answer(r)->text());
  EXPECT_FALSE(sc["approved"].get<bool>());
  EXPECT_NE(sc["issues"].dump().find("T1.county = 'Alameda'"), std::string::npos) << sc.dump();
  r.sim.current_sql = "SELECT T1.name FROM schools AS T1 WHERE T1.county = 'Alameda'";
  EXPECT_NE(json_block(sim.answer(r)->text())["issues"].dump().find("table scores"), std::string::npos);
  r.sim.current_matches_gold = true;
  EXPECT_TRUE(json_block(sim.answer(r)->text())["approved"].get<bool>());

  r.sim.task = SimTask::kValidate;
  r.sim.current_sql = "SELECT T1.name, T1.county FROM schools AS T1 INNER JOIN scores AS T2 ON T1.cds = T2.cds_code "
                      "WHERE T2.avg_math > 560 AND T1.county = 'Alameda'";
  r.sim.current_matches_gold = false;
  auto v = json_block(sim.answer(r)->text());
  EXPECT_FALSE(v["valid_result"].get<bool>());
  EXPECT_EQ(v["columns_not_needed"], nlohmann::json({"T1.county"}));
  EXPECT_NE(v["suggest_fix"].get<std::string>().find("1 column"), std::string::npos) << v.dump();
  r.sim.current_matches_gold = true;
  v = json_block(sim.answer(r)->text());
  EXPECT_TRUE(v["valid_result"].get<bool>());
  EXPECT_EQ(v["suggest_fix"], "");

  // Without gold the agentic tasks refuse, naming the question.
  r.sim.gold_sql.clear();
  for (SimTask t : {SimTask::kLedger, SimTask::kPlan, SimTask::kPlanCritique, SimTask::kSqlCritique, SimTask::kValidate}) {
    r.sim.task = t;
    auto a = sim.answer(r);
    ASSERT_FALSE(a.is_ok());
    EXPECT_NE(a.status().message().find("q1"), std::string::npos);
  }
}

TEST(SimProviderTest, SqlCriticIsRightWithPSel) {
  SimSettings s;
  s.p_sel = 0.7;
  SimProvider sim(s);
  int right = 0;
  const int n = 2000;
  for (int i = 0; i < n; ++i) {
    ChatRequest r;
    r.sim.task = SimTask::kSqlCritique;
    r.sim.question_id = "q" + std::to_string(i);
    r.sim.gold_sql = kGold[0];
    r.sim.current_sql = kGold[1];
    r.sim.current_matches_gold = i % 2 == 0;
    bool approved = json_block(sim.answer(r)->text())["approved"].get<bool>();
    right += approved == r.sim.current_matches_gold;
  }
  EXPECT_NEAR(static_cast<double>(right) / n, 0.7, 0.04);
}

class CountingTransport : public Transport {
 public:
  Result<HttpResponse> post(const HttpRequest&) override {
    ++posts;
    return Status(ErrorCode::kUnavailable, "no network in this test");
  }
  std::atomic<int> posts{0};
};

TEST(SimProviderTest, ClientRoutesSimProfilesOfflineAndLabelsThem) {
  nl2sql::testing::TempDir tmp;
  core::Config config(nlohmann::json::parse(R"({"llm":{
      "models":{"offline":{"provider":"sim"}},
      "roles":{"generate":"offline"},
      "cache":{"mode":"read-write","path":")" + (tmp / "c.sqlite").string() + R"("},
      "sim":{"seed":7,"p_correct":1.0}}})"));
  auto transport = std::make_shared<CountingTransport>();
  ClientOptions o;
  o.transport = transport;
  auto client = Client::from_config(config, o);
  ASSERT_TRUE(client.is_ok()) << client.status().to_string();
  EXPECT_TRUE((*client)->any_simulated());
  auto req = generate_request("q1", kGold[3]);
  req.role = "generate";
  req.stage = "generate";
  auto r = (*client)->chat(req);
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_TRUE(r->simulated());
  EXPECT_EQ(r->profile, "offline");
  EXPECT_EQ(extract_sql(r->text()).sql, kGold[3]);  // p_correct = 1
  EXPECT_GT(r->usage.completion_tokens, 0);
  EXPECT_EQ(r->cost_usd, 0.0);
  EXPECT_EQ(transport->posts.load(), 0);
  EXPECT_EQ((*client)->accounting().total().simulated, 1);
  EXPECT_EQ(ResponseCache::open(tmp / "c.sqlite", true).value()->stats()->entries, 0);
}

}  // namespace
}  // namespace nl2sql::llm
