// Selection explanations, typed per selector family: every selector's explanation (run here on
// hand-built pools, the model ones against a fake server) reads into its family's struct and
// writes back the same bytes; a key a family does not declare — one renamed on the writing side
// — is refused, naming it; every built-in method has a family of its own.
#include "nl2sql/select/explanation.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "nl2sql/core/config.h"
#include "nl2sql/select/selector.h"
#include "nl2sql/select/weights.h"
#include "support/explanation_check.h"
#include "support/fake_openai_server.h"
#include "support/selection_pool.h"

namespace nl2sql::select {
namespace {

using json = nlohmann::json;
using llm::testing::completion_body;
using llm::testing::FakeOpenAiServer;
using llm::testing::FakeReply;
using nl2sql::testing::expect_explanation_round_trips;
using testing::cand;
using testing::fake_client;
using testing::I;
using testing::Pool;
using testing::rs;

std::vector<PoolCandidate> three_results() {
  return {cand("dc#0", "dc", "SELECT 1", rs({{I(1)}})), cand("dc#1", "dc", "SELECT 1 -- again", rs({{I(1)}})),
          cand("qp#0", "qp", "SELECT 2", rs({{I(2)}})), cand("os#0", "os", "SELECT 3", rs({{I(3)}})),
          cand("os#1", "os", "SELEC 4", std::nullopt)};
}

// Runs `method` on the pool and on a pool with nothing executable, checking both explanations.
void check_method(const std::string& method, const json& config, const SelectorServices& services) {
  auto sel = make_selector_named(method, core::Config(config), services);
  ASSERT_TRUE(sel.is_ok()) << method << ": " << sel.status().to_string();
  for (int variant = 0; variant < 3; ++variant) {
    Pool p("q1", 11);
    if (variant == 0) p.input.candidates = three_results();
    if (variant == 1) p.input.candidates = {cand("dc#0", "dc", "SELEC", std::nullopt)};
    if (variant == 2) p.input.candidates = {cand("dc#0", "dc", "SELECT 1", rs({{I(1)}}))};
    auto s = (*sel)->select(p.input);
    ASSERT_TRUE(s.is_ok()) << method << ": " << s.status().to_string();
    SCOPED_TRACE(method + " variant " + std::to_string(variant));
    expect_explanation_round_trips(s->explanation, method);
  }
}

TEST(Explanation, SelectorsWithoutAModelWriteWhatTheirFamilyReads) {
  auto weights = std::make_shared<WeightStore>(0.5);
  weights->update({{"qp", false}, {"dc", true}});
  const SelectorServices services{nullptr, nullptr, {}, weights};
  for (const char* method : {"self_consistency", "wma", "rwma", "naive_vote", "alphasql_consistency"})
    check_method(method, json::object(), services);
  check_method("self_consistency", json::parse(R"({"select":{"self_consistency":{"equality":"exact"}}})"), services);
  check_method("wma", json::parse(R"({"select":{"wma":{"experts":"profile"}}})"), services);
}

// One answer every model-calling selector reads: a pairwise winner, a ranking and a chosen SQL
// (each reader takes its key); every other request gets an answer no reader can use.
FakeReply any_selector_model(const httplib::Request&, int64_t seq) {
  if (seq % 3 == 2) return FakeReply(200, completion_body("I cannot decide."));
  return FakeReply(200, completion_body("```json\n" +
                                        json{{"winner", seq % 2 ? "B" : "A"}, {"ranking", {1, 0, 2}}, {"sql", "SELECT 2"}}
                                            .dump() +
                                        "\n```"));
}

TEST(Explanation, ModelSelectorsWriteWhatTheirFamilyReads) {
  FakeOpenAiServer server(any_selector_model);
  auto client = fake_client(server);
  const SelectorServices services{client.get(), nullptr, {}, nullptr};
  for (const char* method : {"tournament", "ranker", "alphasql_naive", "deepeye_selection"}) {
    check_method(method, json::object(), services);
    check_method(method, json::object(), services);  // other answers: the unusable ones too
  }
  check_method("tournament", json::parse(R"({"select":{"tournament":{"representatives_only":true}}})"), services);
  check_method("deepeye_selection", json::parse(R"({"select":{"deepeye_selection":{"threshold":1.0}}})"), services);
}

TEST(Explanation, EveryBuiltInMethodHasAFamilyOfItsOwn) {
  for (const auto& method : selector_methods())
    EXPECT_NE(explanation_family(method), ExplanationFamily::kOutside) << method << " has no explanation family";
  EXPECT_EQ(explanation_family("my_outside_selector"), ExplanationFamily::kOutside);
}

// Each family with every key it declares, as its selectors write them.
json duels_written() {
  return json::parse(R"({
    "scores": {"c0": 1.5, "c1": 0.5}, "decided_by": "duels", "note": "n",
    "clusters": [{"members": ["c0", "c2"], "representative": "c0"}],
    "decisions": [{"a": "c0", "b": "c1", "by": "model", "winner": "c0"},
                  {"a": "c1", "b": "c0", "by": "model", "error": "no winner"}],
    "model_pairs": 2, "pairs_answered_by_same_sql": 0, "pairs_over_cap": 1,
    "duels": [{"a": "c0", "b": "c1", "outcome": "a",
               "lineage": {"a": {"over_approximated": ["EXISTS"], "sampled": ["GROUP BY x"]}},
               "instance": {"found": true, "attempts": 3, "rows": 2, "rows_before_shrink": 5, "on_sample": true,
                            "instance": {"account": [{"account_id": 13, "frequency": "weekly", "x": null, "r": 0.5}]},
                            "answer_a": "[0]", "answer_b": "[1]"},
               "model_answers": ["[0]", {"error": "HTTP 500"}], "majority": "[0]", "gold_answer": "[0]",
               "model_agrees_with_gold": true},
              {"a": "c0", "b": "c2", "outcome": "draw", "draw": "too_large", "why": "separating instance too large",
               "instance": {"found": false, "attempts": 42, "failure": "none", "too_large_rows": 9, "timed_out": true}}]
  })");
}

TEST(Explanation, EachFamilyWritesBackTheBytesItRead) {
  expect_explanation_round_trips(duels_written(), "separating_instances");
  expect_explanation_round_trips(json::parse(R"({"equality": "relaxed", "executable": 3,
      "clusters": [{"members": ["a"], "representative": "a"}], "weights": {"dc": 0.5}, "cluster_mass": [1.0, 0.25],
      "chosen_cluster": 0, "experts": "generator", "draw": 0.125, "note": "x",
      "groups": [{"members": ["a", "b"], "score": 0.5}], "grouped": 2, "valid_results_only": true,
      "listed": ["a", "b"], "answers": ["a", {"error": "e"}, {"unmatched": "SELECT 9"}], "unmatched": 1,
      "decided_by": "votes"})"),
                                 "alphasql_naive");
  expect_explanation_round_trips(json::parse(R"({"kept": [{"candidate": "a", "confidence": 0.6}], "groups": 2,
      "non_empty_results_only": false, "decided_by": "pairwise", "note": "n",
      "pairs": [{"a": "a", "b": "b", "votes": ["A", {"error": "e"}], "a_win_rate": 1.0}], "scores": {"a": 0.25}})"),
                                 "deepeye_selection");
  expect_explanation_round_trips(json::parse(R"({"ranking": [2, 0, 1], "candidates": ["a", "b", "c"],
      "fallback": "consistency: x", "note": "n"})"),
                                 "ranker");
  // An outside selector's explanation is the program's: any JSON, kept as it answered.
  expect_explanation_round_trips(json::parse(R"({"program": "py", "chosen": "c1",
      "explanation": {"executed": 2, "why": [1, "two", null]}})"),
                                 "last");
  expect_explanation_round_trips(json::parse(R"({"program": "py", "chosen": "c1", "explanation": null})"), "last");
  expect_explanation_round_trips(json(nullptr), "tournament");
}

TEST(Explanation, ARenamedKeyIsRefusedNamingIt) {
  json j = duels_written();
  j["duels"][0]["model_agrees"] = j["duels"][0]["model_agrees_with_gold"];
  j["duels"][0].erase("model_agrees_with_gold");
  auto bad = explanation_from_json(j, "separating_instances", "question 3, selection \"separating_instances\"");
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.status().message().find("\"model_agrees\""), std::string::npos) << bad.status().message();
  EXPECT_NE(bad.status().message().find("question 3"), std::string::npos) << bad.status().message();
  // The same explanation read as another family's is refused too (tournament keys in a ranking).
  EXPECT_FALSE(explanation_from_json(duels_written(), "ranker", "x").is_ok());
  // A wrong type is named.
  json k = duels_written();
  k["model_pairs"] = 1.5;
  auto fraction = explanation_from_json(k, "tournament", "x");
  ASSERT_FALSE(fraction.is_ok());
  EXPECT_NE(fraction.status().message().find("model_pairs"), std::string::npos);
}

TEST(Explanation, DuelsOfReadsTheSeparatingDuels) {
  auto e = explanation_from_json(duels_written(), "separating_instances", "x");
  ASSERT_TRUE(e.is_ok());
  ASSERT_EQ(duels_of(*e).size(), 2u);
  EXPECT_EQ(duels_of(*e)[0].model_agrees_with_gold, true);
  EXPECT_EQ(duels_of(*e)[1].draw, "too_large");
  EXPECT_TRUE(duels_of(Explanation{RankingExplanation{}}).empty());
}

}  // namespace
}  // namespace nl2sql::select
