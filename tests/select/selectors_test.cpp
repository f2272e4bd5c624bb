// Selectors on hand-built pools: clusters, self-consistency, the pairwise tournament and the
// ranker against the fake OpenAI server, the expert votes against hand-computed weights.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "support/fake_openai_server.h"
#include "support/selection_pool.h"
#include "nl2sql/core/config.h"
#include "nl2sql/llm/client.h"
#include "nl2sql/select/clusters.h"
#include "nl2sql/select/selector.h"
#include "nl2sql/select/weights.h"

namespace nl2sql::select {
namespace {

using llm::testing::completion_body;
using llm::testing::FakeOpenAiServer;
using llm::testing::FakeReply;
using testing::cand;
using testing::fake_client;
using testing::I;
using testing::N;
using testing::rs;
using testing::T;
using testing::Pool;




TEST(SelectClusters, RelaxedIgnoresOrderDuplicatesAndAllNullRowsExactDoesNot) {
  auto a = rs({{I(1), T("x")}, {I(2), T("y")}}, 2);
  auto b = rs({{T("y"), I(2)}, {T("x"), I(1)}, {T("x"), I(1)}, {db::Value::null(), db::Value::null()}}, 2);
  EXPECT_EQ(result_key(a, ResultEquality::kRelaxed), result_key(b, ResultEquality::kRelaxed));
  EXPECT_NE(result_key(a, ResultEquality::kExact), result_key(b, ResultEquality::kExact));
  // Exact: duplicates and row order still do not matter (BIRD compares sets of tuples).
  auto c = rs({{I(2), T("y")}, {I(1), T("x")}, {I(1), T("x")}}, 2);
  EXPECT_EQ(result_key(a, ResultEquality::kExact), result_key(c, ResultEquality::kExact));
  // 1 == 1.0 as in Python.
  EXPECT_EQ(result_key(rs({{I(1)}}), ResultEquality::kExact),
            result_key(rs({{db::Value::real(1.0)}}), ResultEquality::kExact));
}

TEST(SelectClusters, OrdersBySizeThenRepresentativeRank) {
  std::vector<PoolCandidate> pool = {
      cand("os#0", "os", "SELECT 1", rs({{I(1)}})),
      cand("qp#0", "qp", "SELECT 2 + 0", rs({{I(2)}})),
      cand("dc#0", "dc", "SELECT 1 + 0", rs({{I(1)}})),
      cand("dc#1", "dc", "SELEC 2", std::nullopt),
      cand("dc#2", "dc", "SELECT 2", rs({{I(2)}})),
      cand("os#1", "os", "SELECT 3", rs({{I(3)}})),
  };
  auto pc = cluster_pool(pool, ResultEquality::kRelaxed, {"dc", "qp", "os"});
  ASSERT_EQ(pc.clusters.size(), 3u);
  EXPECT_EQ(pc.executable, 5u);
  EXPECT_EQ(pc.cluster_of[3], -1);
  // Within a cluster dc beats os even though its SQL is longer (dc#0 over os#0) and dc beats qp
  // (dc#2 over qp#0). Two clusters of size 2 with dc representatives: the shorter SQL first.
  EXPECT_EQ(pc.clusters[0].representative, 4);  // dc#2 "SELECT 2" (value 2)
  EXPECT_EQ(pc.clusters[1].representative, 2);  // dc#0 "SELECT 1 + 0" (value 1)
  EXPECT_EQ(pc.clusters[2].representative, 5);
}

TEST(SelfConsistency, PicksLargestClusterAndFallsBackWhenNothingRuns) {
  Pool p;
  p.input.candidates = {cand("a", "qp", "SELECT 1", rs({{I(1)}})), cand("b", "os", "SELECT 2", rs({{I(2)}})),
                        cand("c", "os", "SELECT 2 -- again", rs({{I(2)}}))};
  auto sel = make_selector_named("self_consistency", core::Config(), {});
  ASSERT_TRUE(sel.is_ok()) << sel.status().to_string();
  auto s = (*sel)->select(p.input);
  ASSERT_TRUE(s.is_ok());
  EXPECT_EQ(s->chosen, 1);
  EXPECT_EQ(s->llm_calls(), 0);
  EXPECT_EQ(s->explanation["clusters"].size(), 2u);

  p.input.candidates = {cand("a", "os", "SELEC", std::nullopt), cand("b", "qp", "SELEC 2", std::nullopt)};
  s = (*sel)->select(p.input);
  ASSERT_TRUE(s.is_ok());
  EXPECT_EQ(s->chosen, 1);  // qp comes before os in the generator order
}

// A fake selector model: prefers the candidate whose SQL carries the marker "good"; with
// neither or both marked it answers "A" (a pure position bias).
FakeReply pairwise_model(const httplib::Request& req, int64_t) {
  auto body = nlohmann::json::parse(req.body);
  std::string user = body["messages"][1]["content"];
  size_t a = user.find("Candidate A:"), b = user.find("Candidate B:");
  std::string sql_a = user.substr(a, b - a), sql_b = user.substr(b, user.find("Result of B") - b);
  bool ga = sql_a.find("good") != std::string::npos, gb = sql_b.find("good") != std::string::npos;
  std::string w = (gb && !ga) ? "B" : "A";
  return FakeReply(200, completion_body("Looking at both.\n```json\n{\"winner\": \"" + w + "\"}\n```"));
}


std::vector<PoolCandidate> tournament_pool() {
  return {cand("dc#0", "dc", "SELECT 1 -- x", rs({{I(1)}})),
          cand("dc#1", "dc", "SELECT 1", rs({{I(1)}})),
          cand("qp#0", "qp", "SELECT 2 /* good */", rs({{I(2)}})),
          cand("qp#1", "qp", "SELECT 3", rs({{I(3)}}))};
}

core::Config representatives_only(const std::string& extra = "") {
  return core::Config(nlohmann::json::parse(R"({"select":{"tournament":{"representatives_only":true)" + extra + "}}}"));
}

TEST(Tournament, RepresentativesBothOrdersGoodCandidateWins) {
  FakeOpenAiServer server(pairwise_model);
  auto client = fake_client(server);
  Pool p;
  p.input.candidates = tournament_pool();
  auto sel = make_selector_named("tournament", representatives_only(), {client.get(), nullptr, {}, nullptr});
  ASSERT_TRUE(sel.is_ok()) << sel.status().to_string();
  auto s = (*sel)->select(p.input);
  ASSERT_TRUE(s.is_ok()) << s.status().to_string();
  // Three representatives (dc#1, qp#1, qp#0): 3 pairs, each asked in both orders.
  EXPECT_EQ(server.requests(), 6);
  EXPECT_EQ(s->llm_calls(), 6);
  EXPECT_EQ(s->chosen, 2);
  // The good one wins all four of its games; the other pair splits 1–1 (the position bias
  // cancels out).
  EXPECT_EQ(s->explanation["scores"]["qp#0"], 4.0);
  EXPECT_EQ(s->explanation["scores"]["dc#1"], 1.0);
  EXPECT_EQ(s->explanation["scores"]["qp#1"], 1.0);
  EXPECT_EQ(s->calls[0].template_name, "select_pairwise");
}

TEST(Tournament, EqualResultsScoreWithoutModelCall) {
  FakeOpenAiServer server(pairwise_model);
  auto client = fake_client(server);
  Pool p;
  p.input.candidates = tournament_pool();
  // The default: every candidate plays (Algorithm 3).
  auto sel = make_selector_named("tournament", core::Config(), {client.get(), nullptr, {}, nullptr});
  ASSERT_TRUE(sel.is_ok());
  auto s = (*sel)->select(p.input);
  ASSERT_TRUE(s.is_ok());
  // 4 players, 6 pairs; dc#0 vs dc#1 agree → a point for the first of the pair, no call.
  EXPECT_EQ(server.requests(), 10);
  int shortcuts = 0;
  for (const auto& d : s->explanation["decisions"])
    if (d["by"] == "equal_results") {
      ++shortcuts;
      EXPECT_EQ(d["winner"], "dc#1");  // players in rank order: the shorter SQL first
    }
  EXPECT_EQ(shortcuts, 1);
  EXPECT_EQ(s->chosen, 2);
}

TEST(Tournament, TiesFallBackToConsistencyAndCapLimitsCalls) {
  // A model that always says "A": asked in both orders every pair splits, so all scores tie
  // and the largest cluster's representative wins.
  FakeOpenAiServer server([](const httplib::Request&, int64_t) {
    return FakeReply(200, completion_body("A"));
  });
  auto client = fake_client(server);
  Pool p;
  p.input.candidates = {cand("os#0", "os", "SELECT 5", rs({{I(5)}})),
                        cand("qp#0", "qp", "SELECT 4", rs({{I(4)}})),
                        cand("qp#1", "qp", "SELECT 4 -- b", rs({{I(4)}}))};
  auto sel = make_selector_named("tournament", representatives_only(), {client.get(), nullptr, {}, nullptr});
  auto s = (*sel)->select(p.input);
  ASSERT_TRUE(s.is_ok());
  EXPECT_EQ(server.requests(), 2);
  EXPECT_EQ(s->explanation["scores"]["qp#0"], 1.0);
  EXPECT_EQ(s->explanation["scores"]["os#0"], 1.0);
  EXPECT_EQ(s->chosen, 1);

  p.input.candidates.push_back(cand("dc#0", "dc", "SELECT 6", rs({{I(6)}})));
  auto sel2 = make_selector_named("tournament", representatives_only(R"(, "max_pairs": 1)"), {client.get(), nullptr, {}, nullptr});
  auto s2 = (*sel2)->select(p.input);
  ASSERT_TRUE(s2.is_ok());
  EXPECT_EQ(server.requests(), 4);  // one more pair, both orders
  EXPECT_EQ(s2->explanation["pairs_over_cap"], 2);
}

TEST(Tournament, EveryCandidateScoresAndARepeatedSqlPairIsAskedOnce) {
  // Two candidates wrote the same query: the pair (SELECT 2, SELECT 3 good) is asked once in each
  // order, and its verdicts score the second copy's games too (Algorithm 3 with no request sent
  // twice). Both copies and the agreeing pair earn their points.
  FakeOpenAiServer server(pairwise_model);
  auto client = fake_client(server);
  Pool p;
  p.input.candidates = {cand("dc#0", "dc", "SELECT 2", rs({{I(2)}})),
                        cand("dc#1", "dc", "SELECT 2", rs({{I(2)}})),
                        cand("qp#0", "qp", "SELECT 3 /* good */", rs({{I(3)}}))};
  auto sel = make_selector_named("tournament", core::Config(), {client.get(), nullptr, {}, nullptr});
  ASSERT_TRUE(sel.is_ok());
  auto s = (*sel)->select(p.input);
  ASSERT_TRUE(s.is_ok()) << s.status().to_string();
  EXPECT_EQ(server.requests(), 2);
  EXPECT_EQ(s->llm_calls(), 2);
  EXPECT_EQ(s->explanation["model_pairs"], 1);
  EXPECT_EQ(s->explanation["pairs_answered_by_same_sql"], 1);
  // qp#0 wins its 4 games against the two copies; the copies agree: 1 point for the first.
  EXPECT_EQ(s->explanation["scores"]["qp#0"], 4.0);
  EXPECT_EQ(s->explanation["scores"]["dc#0"], 1.0);
  EXPECT_EQ(s->explanation["scores"]["dc#1"], 0.0);
  EXPECT_EQ(s->chosen, 2);
}

TEST(Ranker, BestRankedWinsAndMalformedFallsBack) {
  FakeOpenAiServer server([](const httplib::Request& req, int64_t seq) {
    if (seq > 0) return FakeReply(200, completion_body("I cannot decide."));
    auto body = nlohmann::json::parse(req.body);
    std::string user = body["messages"][1]["content"];
    EXPECT_NE(user.find("Candidate 2:"), std::string::npos);
    return FakeReply(200, completion_body("```json\n{\"ranking\": [2, 0, 1]}\n```"));
  });
  auto client = fake_client(server);
  Pool p;
  p.input.candidates = tournament_pool();
  auto sel = make_selector_named("ranker", core::Config(), {client.get(), nullptr, {}, nullptr});
  auto s = (*sel)->select(p.input);
  ASSERT_TRUE(s.is_ok());
  // Players in cluster order: dc#1, qp#1, qp#0 → index 2 is qp#0.
  EXPECT_EQ(s->chosen, 2);
  auto s2 = (*sel)->select(p.input);
  ASSERT_TRUE(s2.is_ok());
  EXPECT_EQ(s2->chosen, 1);  // consistency: the largest cluster's representative
  EXPECT_TRUE(s2->explanation.contains("fallback"));
}

TEST(WeightStore, UpdatesMatchHandComputedValues) {
  WeightStore w(0.1);
  w.update({{"dc", false}, {"qp", true}}, "q1");
  EXPECT_DOUBLE_EQ(w.weight("dc"), 0.9);
  EXPECT_DOUBLE_EQ(w.weight("qp"), 1.0);
  EXPECT_DOUBLE_EQ(w.weight("never"), 1.0);
  w.update({{"dc", false}, {"qp", false}, {"os", true}}, "q2");
  EXPECT_DOUBLE_EQ(w.weight("dc"), 0.81);
  EXPECT_DOUBLE_EQ(w.weight("qp"), 0.9);
  EXPECT_DOUBLE_EQ(w.weight("os"), 1.0);
  auto t = w.trajectory();
  ASSERT_EQ(t.size(), 2u);
  EXPECT_EQ(t[0].question_id, "q1");
  EXPECT_DOUBLE_EQ(t[0].weights.at("dc"), 0.9);

  auto back = WeightStore::from_json(w.to_json(), "test");
  ASSERT_TRUE(back.is_ok());
  EXPECT_DOUBLE_EQ(back->weight("dc"), 0.81);
  EXPECT_DOUBLE_EQ(back->epsilon(), 0.1);
  EXPECT_EQ(back->trajectory().size(), 2u);
}

TEST(WeightStore, EpsilonFromMistakeBound) {
  EXPECT_NEAR(optimal_epsilon(4, 300), std::sqrt(std::log(4.0) / 300), 1e-12);
  EXPECT_DOUBLE_EQ(optimal_epsilon(4, 1), 0.5);      // clamped: the bound needs ε ≤ 1/2
  EXPECT_DOUBLE_EQ(optimal_epsilon(2, 1e9), 0.01);
  core::Config c(nlohmann::json::parse(R"({"generate":{"generators":[{"name":"dc"},{"name":"qp"}]}})"));
  auto e = configured_epsilon(c);
  ASSERT_TRUE(e.is_ok());
  EXPECT_NEAR(*e, std::sqrt(std::log(2.0) / 300.0), 1e-12);  // 1000 questions × 0.3
  core::Config fixed(nlohmann::json::parse(R"({"select":{"wma":{"epsilon":0.2}}})"));
  EXPECT_DOUBLE_EQ(*configured_epsilon(fixed), 0.2);
}

TEST(ExpertVote, WmaFollowsWeightsNaiveCountsExperts) {
  auto weights = std::make_shared<WeightStore>(0.5);
  Pool p;
  p.input.candidates = {cand("dc#0", "dc", "SELECT 1", rs({{I(1)}})),
                        cand("qp#0", "qp", "SELECT 2", rs({{I(2)}})),
                        cand("os#0", "os", "SELECT 2 -- os", rs({{I(2)}}))};
  SelectorServices services{nullptr, nullptr, {}, weights};
  auto wma = make_selector_named("wma", core::Config(), services);
  auto naive = make_selector_named("naive_vote", core::Config(), services);
  ASSERT_TRUE(wma.is_ok() && naive.is_ok());
  weights->update({{"qp", false}, {"os", false}, {"dc", true}});
  // Mass of result 2 = 0.5 + 0.5 = 1.0 = mass of result 1: the tie keeps the larger cluster.
  auto s = (*wma)->select(p.input);
  ASSERT_TRUE(s.is_ok());
  EXPECT_EQ(s->chosen, 1);
  EXPECT_DOUBLE_EQ(s->explanation["cluster_mass"][0].get<double>(), 1.0);
  weights->update({{"qp", false}});
  s = (*wma)->select(p.input);
  EXPECT_EQ(s->chosen, 0);  // 0.25 + 0.5 = 0.75 < 1
  EXPECT_EQ((*naive)->select(p.input)->chosen, 1);  // two experts against one
  // An expert proposing two candidates splits its weight.
  p.input.candidates.push_back(cand("dc#1", "dc", "SELECT 3", rs({{I(3)}})));
  s = (*wma)->select(p.input);
  EXPECT_EQ(s->chosen, 1);  // result 1: 0.5, result 2: 0.75, result 3: 0.5
}

TEST(ExpertVote, RwmaIsDeterministicPerSeedAndFollowsWeights) {
  auto weights = std::make_shared<WeightStore>(0.5);
  weights->update({{"qp", false}, {"os", false}});
  weights->update({{"qp", false}});
  Pool p;
  p.input.candidates = {cand("dc#0", "dc", "SELECT 1", rs({{I(1)}})),
                        cand("qp#0", "qp", "SELECT 2", rs({{I(2)}})),
                        cand("os#0", "os", "SELECT 2 -- os", rs({{I(2)}}))};
  auto rwma = make_selector_named("rwma", core::Config(), {nullptr, nullptr, {}, weights});
  ASSERT_TRUE(rwma.is_ok());
  int first = 0;
  for (uint64_t seed = 0; seed < 400; ++seed) {
    p.input.seed = seed;
    auto a = (*rwma)->select(p.input);
    auto b = (*rwma)->select(p.input);
    ASSERT_EQ(a->chosen, b->chosen);
    if (a->chosen == 0) ++first;
  }
  // P(result 1) = 1 / (1 + 0.75) ≈ 0.571.
  EXPECT_GT(first, 400 * 0.49);
  EXPECT_LT(first, 400 * 0.65);
}

TEST(Bounds, OracleAndAdversary) {
  EXPECT_TRUE(oracle_bound({false, true}));
  EXPECT_FALSE(adversarial_bound({false, true}));
  EXPECT_TRUE(adversarial_bound({true, true}));
  EXPECT_FALSE(oracle_bound({}));
  EXPECT_FALSE(adversarial_bound({}));
}

TEST(SelectorFactory, NamesTheProblem) {
  auto bad = make_selector_named("best_of", core::Config(), {});
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.status().message().find("select.method"), std::string::npos);
  auto no_client = make_selector_named("tournament", core::Config(), {});
  ASSERT_FALSE(no_client.is_ok());
  EXPECT_NE(no_client.status().message().find("client"), std::string::npos);
  core::Config eq(nlohmann::json::parse(R"({"select":{"self_consistency":{"equality":"fuzzy"}}})"));
  auto e = make_selector_named("self_consistency", eq, {});
  ASSERT_FALSE(e.is_ok());
  EXPECT_NE(e.status().message().find("select.self_consistency.equality"), std::string::npos);
  EXPECT_EQ(selector_methods().size(), 10u);  // with the separating-instance paper's three baselines
}

}  // namespace
}  // namespace nl2sql::select

namespace nl2sql::select {
namespace {

// The pipeline decides by a selector's traits (weight store, curve repeats, the roles a run's
// preflight checks), never by its name: every method's row must state what its built selector
// states, or a new selector would be wired wrongly without a test noticing.
TEST(SelectorTraits, EveryMethodStatesWhatItsSelectorDoes) {
  FakeOpenAiServer server([](const httplib::Request&, int64_t) { return FakeReply(200, completion_body("A")); });
  auto client = fake_client(server);
  db::Executor executor;
  SelectorServices services;
  services.client = client.get();
  services.executor = &executor;
  for (const auto& method : selector_methods()) {
    SCOPED_TRACE(method);
    auto declared = method_traits(method);
    ASSERT_TRUE(declared.is_ok()) << declared.status().message();
    auto built = make_selector_named(method, core::Config(), services);
    ASSERT_TRUE(built.is_ok()) << built.status().message();
    EXPECT_EQ((*built)->name(), method);
    EXPECT_TRUE((*built)->traits() == *declared);
    // A selector that asks a model names the role whose profile it asks.
    EXPECT_EQ(declared->calls_model, !declared->model_role.empty());
  }
  // What the pipeline relies on, method by method.
  EXPECT_TRUE(method_traits("wma")->uses_expert_weights);
  EXPECT_FALSE(method_traits("tournament")->uses_expert_weights);
  EXPECT_TRUE(method_traits("self_consistency")->deterministic());
  EXPECT_TRUE(method_traits("alphasql_consistency")->deterministic());
  EXPECT_FALSE(method_traits("rwma")->deterministic());  // its draw follows the seed
  EXPECT_FALSE(method_traits("deepeye_selection")->deterministic());
  EXPECT_EQ(method_traits("ranker")->model_role, "rank");
  EXPECT_EQ(method_traits("separating_instances")->model_role, "nl_eval");
  auto unknown = method_traits("best_of");
  ASSERT_FALSE(unknown.is_ok());
  EXPECT_NE(unknown.status().message().find("tournament"), std::string::npos);
}

// The factory's table: a method is built only with the services its traits name — an LLM client
// for one that calls a model, an executor for one that reads the database — and an unknown
// method is refused with the known ones listed.
TEST(SelectorTraits, TheFactoryRefusesAMethodWithoutTheServicesItsTraitsName) {
  FakeOpenAiServer server([](const httplib::Request&, int64_t) { return FakeReply(200, completion_body("A")); });
  auto client = fake_client(server);
  auto weights = std::make_shared<WeightStore>(0.5);
  for (const auto& method : selector_methods()) {
    SCOPED_TRACE(method);
    const SelectorTraits traits = *method_traits(method);
    auto without_client = make_selector_named(method, core::Config(), {nullptr, nullptr, {}, weights});
    if (traits.calls_model) {
      ASSERT_FALSE(without_client.is_ok());
      EXPECT_EQ(without_client.status().message(), "select method " + method + " calls a model: it needs an LLM client");
    } else {
      EXPECT_TRUE(without_client.is_ok()) << without_client.status().message();
    }
    auto without_executor = make_selector_named(method, core::Config(), {client.get(), nullptr, {}, weights});
    if (traits.reads_database) {
      ASSERT_FALSE(without_executor.is_ok());
      EXPECT_EQ(without_executor.status().message(),
                "select method " + method + " reads the database: it needs an executor");
    } else {
      EXPECT_TRUE(without_executor.is_ok()) << without_executor.status().message();
    }
  }
  EXPECT_TRUE(method_traits("separating_instances")->reads_database);
  auto unknown = make_selector_named("best_of", core::Config(), {client.get(), nullptr, {}, weights});
  ASSERT_FALSE(unknown.is_ok());
  EXPECT_NE(unknown.status().message().find("config key \"select.method\": unknown method \"best_of\""),
            std::string::npos);
  EXPECT_NE(unknown.status().message().find("deepeye_selection"), std::string::npos);
}

}  // namespace
}  // namespace nl2sql::select
