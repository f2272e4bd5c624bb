// The offline simulator: each mistake of the taxonomy, determinism, the configured rates
// (generators, fixer, selectors, hallucination) over thousands of draws, and gold looked up by
// the simulator itself (requests carry only a tag).
#include "nl2sql/sim/simulator.h"

#include <gtest/gtest.h>

#include "nl2sql/llm/answer.h"
#include "nl2sql/llm/client.h"
#include "nl2sql/llm/response_cache.h"
#include "support/test_env.h"

namespace nl2sql::sim {
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

using llm::CallTask;
using llm::ChatRequest;
using llm::SimSettings;
using llm::extract_sql;

// The SQL an answer holds ("" when none can be read).
std::string sql_of(const std::string& answer) {
  auto ex = extract_sql(answer);
  return ex ? ex->sql : "";
}

data::Question question(const std::string& qid, const std::string& gold, const std::string& difficulty = "simple") {
  data::Question q;
  q.question_id = qid;
  q.question = "Which schools in Alameda score above 560 in math?";
  q.gold_sql = gold;
  q.difficulty = difficulty;
  return q;
}

ChatRequest generate_request(const std::string& qid, int64_t sample = 0,
                             const std::string& generator = "divide_conquer") {
  ChatRequest r;
  r.messages = {{"user", "write SQL"}};
  r.tag.task = CallTask::kGenerate;
  r.tag.question_id = qid;
  r.tag.question = "Which schools in Alameda score above 560 in math?";
  r.tag.generator = generator;
  r.tag.sample_index = sample;
  return r;
}

TEST(SimulatorTest, DeterministicFromSeedQuestionGeneratorAndSample) {
  SimSettings s;
  s.p_correct = 0.5;
  Simulator sim(s);
  s.seed = 99;
  Simulator reseeded(s);
  for (int i = 0; i < 50; ++i) {
    sim.add(question("q" + std::to_string(i), kGold[0]));
    reseeded.add(question("q" + std::to_string(i), kGold[0]));
  }
  int differing = 0;
  for (int i = 0; i < 50; ++i) {
    auto a = sim.answer(generate_request("q" + std::to_string(i), 0));
    auto b = sim.answer(generate_request("q" + std::to_string(i), 0));
    auto c = sim.answer(generate_request("q" + std::to_string(i), 1));
    ASSERT_TRUE(a.is_ok() && b.is_ok() && c.is_ok());
    EXPECT_EQ(a->text(), b->text());
    differing += a->text() != c->text();
  }
  EXPECT_GT(differing, 5);  // samples are diverse
  int changed = 0;
  for (int i = 0; i < 50; ++i)
    changed += reseeded.answer(generate_request("q" + std::to_string(i)))->text() !=
               sim.answer(generate_request("q" + std::to_string(i)))->text();
  EXPECT_GT(changed, 5);
}

double gold_rate(SimSettings s, int n, const std::string& generator, const std::string& difficulty) {
  Simulator sim(std::move(s));
  for (int i = 0; i < n; ++i)
    sim.add(question("q" + std::to_string(i), kGold[static_cast<size_t>(i) % kGold.size()], difficulty));
  int correct = 0;
  for (int i = 0; i < n; ++i) {
    auto r = sim.answer(generate_request("q" + std::to_string(i), 0, generator));
    EXPECT_TRUE(r.is_ok());
    correct += sql_of(r->text()) == kGold[static_cast<size_t>(i) % kGold.size()];
  }
  return static_cast<double>(correct) / n;
}

TEST(SimulatorTest, GeneratorAccuracyMatchesConfiguredRates) {
  SimSettings s;
  s.p_correct = 0.7;
  s.p_correct_by["query_plan"] = 0.4;
  s.p_correct_by["query_plan/challenging"] = 0.2;
  // 2,000 draws: the standard error is about 0.01, so +-0.04 is a 4-sigma band. The
  // difficulty is the simulator's own lookup (no request carries it).
  EXPECT_NEAR(gold_rate(s, 2000, "divide_conquer", "simple"), 0.7, 0.04);
  EXPECT_NEAR(gold_rate(s, 2000, "query_plan", "simple"), 0.4, 0.04);
  EXPECT_NEAR(gold_rate(s, 2000, "query_plan", "challenging"), 0.2, 0.04);
}

TEST(SimulatorTest, AnswersLookLikeAModelsAndAreLabelled) {
  Simulator sim(SimSettings{});
  sim.add(question("q1", kGold[1]));
  auto r = sim.answer(generate_request("q1"));
  ASSERT_TRUE(r.is_ok());
  EXPECT_EQ(r->provider, "sim");
  EXPECT_TRUE(r->simulated());
  EXPECT_NE(r->text().find("```sql\n"), std::string::npos);
  EXPECT_FALSE(sql_of(r->text()).empty());
  ChatRequest none;
  none.messages = {{"user", "x"}};
  auto refused = sim.answer(none);
  ASSERT_FALSE(refused.is_ok());
  EXPECT_EQ(refused.status().code(), ErrorCode::kInvalidInput);
  // A question it was not given: refused, naming the question (gold never comes with a request).
  auto unknown = sim.answer(generate_request("q9"));
  ASSERT_FALSE(unknown.is_ok());
  EXPECT_NE(unknown.status().message().find("q9"), std::string::npos);
}

nlohmann::json json_block(const std::string& text) {
  auto start = text.find("```json\n");
  EXPECT_NE(start, std::string::npos) << text;
  auto end = text.find("```", start + 8);
  return nlohmann::json::parse(text.substr(start + 8, end - start - 8));
}

// The judge a pipeline sets: here, a candidate is correct when its text is the gold SQL.
void judge_by_text(Simulator& sim, std::map<std::string, std::string> gold) {
  sim.set_judge([gold = std::move(gold)](const std::string& qid, const std::string& sql) {
    auto it = gold.find(qid);
    return it != gold.end() && it->second == sql;
  });
}

TEST(SimulatorTest, PairwiseSelectorPicksGoldWithPSel) {
  Simulator sim(SimSettings{});  // p_sel defaults to 0.71
  std::map<std::string, std::string> gold;
  const int n = 2000;
  for (int i = 0; i < n; ++i) {
    std::string qid = "q" + std::to_string(i);
    gold[qid] = i % 2 == 0 ? "SELECT 1" : "SELECT 2";
    sim.add(question(qid, gold[qid]));
  }
  judge_by_text(sim, gold);
  int right = 0;
  for (int i = 0; i < n; ++i) {
    ChatRequest r;
    r.tag.task = CallTask::kSelectPair;
    r.tag.question_id = "q" + std::to_string(i);
    r.tag.candidates = {"SELECT 1", "SELECT 2"};
    auto a = sim.answer(r);
    ASSERT_TRUE(a.is_ok());
    std::string winner = json_block(a->text())["winner"];
    right += (winner == "A") == (i % 2 == 0);
  }
  EXPECT_NEAR(static_cast<double>(right) / n, 0.71, 0.04);
}

TEST(SimulatorTest, RankerPutsGoldFirstWithPSel) {
  SimSettings s;
  s.p_sel = 0.6;
  Simulator sim(s);
  const std::vector<std::string> cands = {"a", "b", "c", "d"};
  std::map<std::string, std::string> gold;
  const int n = 2000;
  for (int i = 0; i < n; ++i) {
    std::string qid = "q" + std::to_string(i);
    gold[qid] = cands[static_cast<size_t>(i % 4)];
    sim.add(question(qid, gold[qid]));
  }
  judge_by_text(sim, gold);
  int right = 0;
  for (int i = 0; i < n; ++i) {
    ChatRequest r;
    r.tag.task = CallTask::kRank;
    r.tag.question_id = "q" + std::to_string(i);
    r.tag.candidates = cands;
    auto a = sim.answer(r);
    ASSERT_TRUE(a.is_ok());
    auto ranking = json_block(a->text())["ranking"].get<std::vector<size_t>>();
    ASSERT_EQ(ranking.size(), 4u);
    EXPECT_EQ(std::set<size_t>(ranking.begin(), ranking.end()).size(), 4u);
    right += ranking[0] == static_cast<size_t>(i % 4);
  }
  EXPECT_NEAR(static_cast<double>(right) / n, 0.6, 0.04);
}

TEST(SimulatorTest, FixerAndHallucinationRates) {
  SimSettings s;
  s.p_fix = 0.5;
  s.p_hallucinate = 0.25;
  Simulator sim(s);
  const int n = 2000;
  for (int i = 0; i < n; ++i) sim.add(question("q" + std::to_string(i), "SELECT a FROM t"));
  int fixed = 0, perturbed = 0, asked_gold = 0;
  for (int i = 0; i < n; ++i) {
    ChatRequest fix;
    fix.tag.task = CallTask::kFix;
    fix.tag.question_id = "q" + std::to_string(i);
    fix.tag.failing_sql = "SELECT a FORM t";
    fix.tag.failure = "syntax_error";
    fixed += sql_of(sim.answer(fix)->text()) == "SELECT a FROM t";
    ChatRequest ev;
    ev.tag.task = CallTask::kNlEval;
    ev.tag.question_id = "q" + std::to_string(i);
    // The selector hands over a way to run SQL on its instance; the simulator runs gold on it.
    ev.tag.answer_on_instance = [&](const std::string& sql) -> Result<std::string> {
      asked_gold += sql == "SELECT a FROM t";
      return std::string("Alameda | 42\nFresno | 7");
    };
    auto t = sim.answer(ev)->text();
    perturbed += t.find("```text\nAlameda | 42\nFresno | 7\n```") == std::string::npos;
  }
  EXPECT_EQ(asked_gold, n);
  EXPECT_NEAR(static_cast<double>(fixed) / n, 0.5, 0.04);
  EXPECT_NEAR(static_cast<double>(perturbed) / n, 0.25, 0.04);
}

TEST(SimulatorTest, KeywordsAndColumnFilter) {
  Simulator sim(SimSettings{});
  ChatRequest k;
  k.tag.task = CallTask::kKeywords;
  k.tag.question = "How many schools in 'Alameda' have a free meal count above 500?";
  k.tag.evidence = "free meal count refers to `Free Meal Count (K-12)`";
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
  Simulator oracle(perfect);
  oracle.add(question("q1", kGold[0]));
  ChatRequest c;
  c.tag.task = CallTask::kColumnFilter;
  c.tag.question_id = "q1";
  c.tag.column = "county";
  EXPECT_TRUE(json_block(oracle.answer(c)->text())["relevant"].get<bool>());
  c.tag.column = "phone";
  EXPECT_FALSE(json_block(oracle.answer(c)->text())["relevant"].get<bool>());
}

// A tiny database for the critics and the validator, which execute the SQL under review and
// gold themselves.
std::filesystem::path schools_db(const std::filesystem::path& dir) {
  auto path = dir / "schools.sqlite";
  nl2sql::testing::build_database(path, R"(
    CREATE TABLE schools (cds TEXT, name TEXT, county TEXT);
    CREATE TABLE scores (cds_code TEXT, avg_math INTEGER);
    INSERT INTO schools VALUES ('1', 'Lincoln', 'Alameda'), ('2', 'Grant', 'Fresno');
    INSERT INTO scores VALUES ('1', 600), ('2', 580);)");
  return path;
}

// Agentic roles: plans and fact sheets from gold's tables and clauses; critics that approve or
// name a real defect; a validator that accepts iff the result equals gold's (executed here).
TEST(SimulatorTest, AgenticRolesDeriveFromGold) {
  nl2sql::testing::TempDir tmp;
  SimSettings perfect;
  perfect.p_sel = 1.0;
  Simulator sim(perfect);
  auto db = schools_db(tmp.path());
  sim.add(question("q1", kGold[0]), db);
  sim.add(question("q3", kGold[3]), db);
  ChatRequest r;
  r.tag.question_id = "q1";
  r.tag.evidence = "avg_math is the average math score";

  r.tag.task = CallTask::kLedger;
  auto ledger = json_block(sim.answer(r)->text());
  EXPECT_EQ(ledger["required_tables"], nlohmann::json({"schools", "scores"}));
  EXPECT_EQ(ledger["join_paths"], nlohmann::json({"T1.cds = T2.cds_code"}));
  EXPECT_EQ(ledger["filters"], nlohmann::json({"T2.avg_math > 560", "T1.county = 'Alameda'"}));
  EXPECT_EQ(ledger["output_columns"], nlohmann::json({"T1.name"}));
  EXPECT_EQ(ledger["business_rules"].size(), 1u);

  r.tag.task = CallTask::kPlan;
  auto plan = json_block(sim.answer(r)->text());
  EXPECT_EQ(plan["expected_columns"], nlohmann::json({"T1.name"}));
  EXPECT_EQ(plan["steps"].front(), "Read table(s) schools, scores.");

  r.tag.question_id = "q3";
  plan = json_block(sim.answer(r)->text());
  std::string steps = plan["steps"].dump();
  EXPECT_NE(steps.find("Group by name"), std::string::npos) << steps;
  EXPECT_NE(steps.find("Order by name, limit 3"), std::string::npos) << steps;
  r.tag.question_id = "q1";

  r.tag.task = CallTask::kPlanCritique;
  r.tag.current_plan = "1. Read schools.\n2. Keep county = 'Alameda'.";
  auto pc = json_block(sim.answer(r)->text());
  EXPECT_FALSE(pc["approved"].get<bool>());
  EXPECT_NE(pc["issues"].dump().find("scores"), std::string::npos);
  r.tag.current_plan = "1. Read schools and scores.";
  EXPECT_TRUE(json_block(sim.answer(r)->text())["approved"].get<bool>());

  r.tag.task = CallTask::kSqlCritique;
  r.tag.current_sql = "SELECT T1.name FROM schools AS T1 INNER JOIN scores AS T2 ON T1.cds = T2.cds_code "
                      "WHERE T2.avg_math > 560 AND T1.county = 'alameda'";  // no rows: wrong
  auto sc = json_block(sim.answer(r)->text());
  EXPECT_FALSE(sc["approved"].get<bool>());
  EXPECT_NE(sc["issues"].dump().find("T1.county = 'Alameda'"), std::string::npos) << sc.dump();
  r.tag.current_sql = "SELECT T1.name FROM schools AS T1 WHERE T1.county = 'Fresno'";
  EXPECT_NE(json_block(sim.answer(r)->text())["issues"].dump().find("table scores"), std::string::npos);
  r.tag.current_sql = "SELECT name FROM schools WHERE county = 'Alameda'";  // same rows as gold
  EXPECT_TRUE(json_block(sim.answer(r)->text())["approved"].get<bool>());

  r.tag.task = CallTask::kValidate;
  r.tag.current_sql = "SELECT T1.name, T1.county FROM schools AS T1 INNER JOIN scores AS T2 ON T1.cds = T2.cds_code "
                      "WHERE T2.avg_math > 560 AND T1.county = 'Alameda'";
  auto v = json_block(sim.answer(r)->text());
  EXPECT_FALSE(v["valid_result"].get<bool>());
  EXPECT_EQ(v["columns_not_needed"], nlohmann::json({"T1.county"}));
  EXPECT_NE(v["suggest_fix"].get<std::string>().find("1 column"), std::string::npos) << v.dump();
  r.tag.current_sql = "SELECT name FROM schools WHERE county = 'Alameda'";
  v = json_block(sim.answer(r)->text());
  EXPECT_TRUE(v["valid_result"].get<bool>());
  EXPECT_EQ(v["suggest_fix"], "");

  // A question the simulator was not given: the agentic tasks refuse, naming it.
  r.tag.question_id = "q7";
  for (CallTask t : {CallTask::kLedger, CallTask::kPlan, CallTask::kPlanCritique, CallTask::kSqlCritique,
                     CallTask::kValidate}) {
    r.tag.task = t;
    auto a = sim.answer(r);
    ASSERT_FALSE(a.is_ok());
    EXPECT_NE(a.status().message().find("q7"), std::string::npos);
  }
}

TEST(SimulatorTest, SqlCriticIsRightWithPSel) {
  nl2sql::testing::TempDir tmp;
  SimSettings s;
  s.p_sel = 0.7;
  Simulator sim(s);
  auto db = schools_db(tmp.path());
  const int n = 2000;
  for (int i = 0; i < n; ++i) sim.add(question("q" + std::to_string(i), kGold[0]), db);
  int right = 0;
  for (int i = 0; i < n; ++i) {
    ChatRequest r;
    r.tag.task = CallTask::kSqlCritique;
    r.tag.question_id = "q" + std::to_string(i);
    const bool correct = i % 2 == 0;
    r.tag.current_sql = correct ? "SELECT name FROM schools WHERE county = 'Alameda'" : "SELECT name FROM schools";
    bool approved = json_block(sim.answer(r)->text())["approved"].get<bool>();
    right += approved == correct;
  }
  EXPECT_NEAR(static_cast<double>(right) / n, 0.7, 0.04);
}

class CountingTransport : public llm::Transport {
 public:
  Result<llm::HttpResponse> post(const llm::HttpRequest&) override {
    ++posts;
    return Status(ErrorCode::kUnavailable, "no network in this test");
  }
  std::atomic<int> posts{0};
};

TEST(SimulatorTest, ClientRoutesSimProfilesOfflineAndLabelsThem) {
  nl2sql::testing::TempDir tmp;
  core::Config config(nlohmann::json::parse(R"({"llm":{
      "models":{"offline":{"provider":"sim"}},
      "roles":{"generate":"offline"},
      "cache":{"mode":"read-write","path":")" + (tmp / "c.sqlite").string() + R"("},
      "sim":{"seed":7,"p_correct":1.0}}})"));
  auto transport = std::make_shared<CountingTransport>();
  llm::ClientOptions o;
  o.transport = transport;
  // Without a simulator attached, a sim profile's call is a configuration error.
  {
    auto bare = llm::Client::from_config(config, o);
    ASSERT_TRUE(bare.is_ok());
    auto req = generate_request("q1");
    req.role = "generate";
    auto r = (*bare)->chat(req);
    ASSERT_FALSE(r.is_ok());
    EXPECT_EQ(llm::call_error_kind(r.status()), llm::CallErrorKind::kConfig);
    EXPECT_NE(r.status().message().find("no simulator"), std::string::npos) << r.status().message();
  }
  auto sim = attach(o, llm::load_llm_settings(config)->sim);
  sim->add(question("q1", kGold[3]));
  auto client = llm::Client::from_config(config, o);
  ASSERT_TRUE(client.is_ok()) << client.status().to_string();
  EXPECT_TRUE((*client)->any_simulated());
  auto req = generate_request("q1");
  req.role = "generate";
  req.stage = "generate";
  auto r = (*client)->chat(req);
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_TRUE(r->simulated());
  EXPECT_EQ(r->profile, "offline");
  EXPECT_EQ(sql_of(r->text()), kGold[3]);  // p_correct = 1
  EXPECT_GT(r->usage.completion_tokens, 0);
  EXPECT_EQ(r->cost_usd, 0.0);
  EXPECT_EQ(transport->posts.load(), 0);
  EXPECT_EQ((*client)->accounting().total().simulated, 1);
  EXPECT_EQ(llm::ResponseCache::open(tmp / "c.sqlite", true).value()->stats()->entries, 0);
}

}  // namespace
}  // namespace nl2sql::sim
