// The separating-instance paper's three baselines on hand-built pools with hand-computed picks:
// AlphaSQL's consistency score, the naive selection of the unofficial AlphaSQL implementation
// and DeepEye-SQL's consistency-aware selection (the last two against a fake model server).
#include <gtest/gtest.h>

#include <mutex>
#include <nlohmann/json.hpp>
#include <set>

#include "nl2sql/core/config.h"
#include "nl2sql/llm/client.h"
#include "nl2sql/select/selector.h"
#include "support/fake_openai_server.h"
#include "support/selection_pool.h"
#include "select/selector_parts.h"

namespace nl2sql::select {
namespace {

using json = nlohmann::json;
using llm::testing::completion_body;
using llm::testing::FakeOpenAiServer;
using llm::testing::FakeReply;
using testing::cand;
using testing::fake_client;
using testing::I;
using testing::N;
using testing::rs;
using testing::T;



struct Pool : testing::Pool {
  Pool() : testing::Pool("q1", 11) {}
};


std::string user_prompt(const httplib::Request& req) {
  return json::parse(req.body)["messages"][1]["content"].get<std::string>();
}

// ---- AlphaSQL's consistency score ----

Result<Selection> alphasql(const SelectionInput& in) {
  auto sel = make_selector_named("alphasql_consistency", core::Config(), {});
  if (!sel.is_ok()) return sel.status();
  return (*sel)->select(in);
}

TEST(AlphaSqlConsistency, GroupsValidResultsOnlyAndScoresByShare) {
  Pool p;
  // Three NULL-only answers would win a plain majority; AlphaSQL groups valid results only:
  // {a} 1/3 and {b, c} 2/3 → b, the first member of the larger group.
  p.input.candidates = {cand("a", "dc", "SELECT 1", rs({{I(1)}})),
                        cand("b", "os", "SELECT 2", rs({{I(2)}})),
                        cand("c", "dc", "SELECT 2 + 0", rs({{I(2)}})),
                        cand("d", "dc", "SELECT NULL", rs({{N()}})),
                        cand("e", "dc", "SELECT NULL -- e", rs({{N()}})),
                        cand("f", "dc", "SELECT NULL -- f", rs({{N()}})),
                        cand("g", "dc", "SELEC", std::nullopt)};
  auto s = alphasql(p.input);
  ASSERT_TRUE(s.is_ok()) << s.status().to_string();
  EXPECT_EQ(s->chosen, 1);
  EXPECT_EQ(s->llm_calls(), 0);
  EXPECT_EQ(s->explanation["grouped"], 3);
  EXPECT_TRUE(s->explanation["valid_results_only"].get<bool>());
  ASSERT_EQ(s->explanation["groups"].size(), 2u);
  EXPECT_DOUBLE_EQ(s->explanation["groups"][0]["score"].get<double>(), 1.0 / 3);
  EXPECT_DOUBLE_EQ(s->explanation["groups"][1]["score"].get<double>(), 2.0 / 3);
}

TEST(AlphaSqlConsistency, EqualScoresGoToTheGroupSeenFirstAndRowsAreOrderedTuples) {
  Pool p;
  // {a, d} and {b, c} both 2/4: a's group appeared first (self-consistency's generator-order
  // tie-break would take b's, written by dc).
  p.input.candidates = {cand("a", "os", "SELECT 1", rs({{I(1)}})),
                        cand("b", "dc", "SELECT 2", rs({{I(2)}})),
                        cand("c", "dc", "SELECT 2 -- c", rs({{I(2)}})),
                        cand("d", "qp", "SELECT 1 -- d", rs({{I(1)}}))};
  auto s = alphasql(p.input);
  ASSERT_TRUE(s.is_ok());
  EXPECT_EQ(s->chosen, 0);
  auto sc = make_selector_named("self_consistency", core::Config(), {});
  ASSERT_TRUE(sc.is_ok());
  EXPECT_EQ((*(*sc)->select(p.input)).chosen, 1);

  // (1, 'x') and ('x', 1) differ as tuples: three groups of one, the first wins.
  p.input.candidates = {cand("a", "os", "SELECT 1, 'x'", rs({{I(1), T("x")}}, 2)),
                        cand("b", "dc", "SELECT 'x', 1", rs({{T("x"), I(1)}}, 2)),
                        cand("c", "dc", "SELECT 'x', 1 -- c", rs({{T("x"), I(1)}}, 2))};
  s = alphasql(p.input);
  ASSERT_TRUE(s.is_ok());
  EXPECT_EQ(s->explanation["groups"].size(), 2u);
  EXPECT_EQ(s->chosen, 1);  // {b, c} 2/3
}

TEST(AlphaSqlConsistency, FallsBackToEverySuccessfulResultThenToNoPick) {
  Pool p;
  // No valid result: empty and NULL-only answers are grouped instead; {a, b} (empty) 2/3.
  p.input.candidates = {cand("a", "os", "SELECT 1 WHERE 0", rs({})),
                        cand("b", "dc", "SELECT 2 WHERE 0", rs({})),
                        cand("c", "dc", "SELECT NULL", rs({{N()}}))};
  auto s = alphasql(p.input);
  ASSERT_TRUE(s.is_ok());
  EXPECT_EQ(s->chosen, 0);
  EXPECT_FALSE(s->explanation["valid_results_only"].get<bool>());
  // Nothing executed: AlphaSQL has no query to give.
  p.input.candidates = {cand("a", "os", "SELEC", std::nullopt)};
  s = alphasql(p.input);
  ASSERT_TRUE(s.is_ok());
  EXPECT_EQ(s->chosen, -1);
}

// ---- The naive selection (Appendix C) ----

// A pool of three result groups: {x} (size 1, first seen), {y1, y2} (size 2), {z} (size 1).
// Listed largest first, equal sizes in order of first appearance: y1, x, z.
std::vector<PoolCandidate> naive_pool() {
  return {cand("x", "dc", "SELECT 'x'", rs({{T("x")}})),
          cand("y1", "qp", "SELECT 'y'", rs({{T("y")}})),
          cand("y2", "os", "SELECT   'y'  ;", rs({{T("y")}})),
          cand("z", "dc", "SELECT 'z'", rs({{T("z")}})), cand("bad", "dc", "SELEC", std::nullopt)};
}

// Answers the naive prompt with the scripted SQL texts, in request order.
struct ScriptedChooser {
  std::vector<std::string> answers;
  // The seed of each sample, in sample order: the samples are asked together, so an answer goes
  // to the sample whose seed the request carries; without them, to the request's arrival.
  std::vector<int64_t> seeds;
  std::mutex mu;
  std::vector<json> bodies;  // guarded by mu
  FakeReply operator()(const httplib::Request& req, int64_t seq) {
    const json body = json::parse(req.body);
    {
      std::lock_guard lock(mu);
      bodies.push_back(body);
    }
    size_t k = static_cast<size_t>(seq);
    if (auto it = std::find(seeds.begin(), seeds.end(), body.value("seed", int64_t{-1})); it != seeds.end())
      k = static_cast<size_t>(it - seeds.begin());
    const std::string& a = answers[k % answers.size()];
    if (a == "garbage") return FakeReply(200, completion_body("I cannot decide."));
    return FakeReply(
        200, completion_body("Checking in order.\n```json\n" +
                             json{{"principles", "p"}, {"reasoning", "r"}, {"sql", a}}.dump() +
                             "\n```"));
  }
};

Result<Selection> naive(llm::Client* client, const SelectionInput& in,
                        const std::string& cfg = "{}") {
  auto sel = make_selector_named("alphasql_naive", core::Config(json::parse(cfg)),
                                 {client, nullptr, {}, nullptr});
  if (!sel.is_ok()) return sel.status();
  return (*sel)->select(in);
}

TEST(AlphaSqlNaive, ListsRepresentativesLargestFirstAndTakesTheMode) {
  auto script = std::make_shared<ScriptedChooser>();
  // z, then x (written with other spacing and a semicolon), then x again: the mode is x.
  script->answers = {"SELECT 'z'", "SELECT  'x';", "SELECT 'x'"};
  FakeOpenAiServer server(
      [script](const httplib::Request& r, int64_t seq) { return (*script)(r, seq); });
  auto client = fake_client(server);
  Pool p;
  p.input.candidates = naive_pool();
  auto s = naive(client.get(), p.input);
  ASSERT_TRUE(s.is_ok()) << s.status().to_string();
  EXPECT_EQ(server.requests(), 3);
  EXPECT_EQ(s->chosen, 0);  // x
  EXPECT_EQ(s->explanation["listed"], json::array({"y1", "x", "z"}));
  EXPECT_EQ(s->explanation["decided_by"], "votes");
  // The prompt lists the representatives in that order, numbered from 1.
  const std::string prompt = script->bodies[0]["messages"][1]["content"];
  const size_t c1 = prompt.find("Candidate 1:\n```sql\nSELECT 'y'"),
               c2 = prompt.find("Candidate 2:\n```sql\nSELECT 'x'"),
               c3 = prompt.find("Candidate 3:\n```sql\nSELECT 'z'");
  ASSERT_NE(c1, std::string::npos) << prompt;
  EXPECT_LT(c1, c2);
  EXPECT_LT(c2, c3);
  EXPECT_EQ(s->calls[0].template_name, "select_naive");
  // Three sampled asks: temperature 0.7, three distinct seeds.
  std::set<int64_t> seeds;
  for (const auto& b : script->bodies) {
    EXPECT_DOUBLE_EQ(b["temperature"].get<double>(), 0.7);
    seeds.insert(b["seed"].get<int64_t>());
  }
  EXPECT_EQ(seeds.size(), 3u);
}

TEST(AlphaSqlNaive, EqualVotesGoToTheFirstVotedAndNoVoteToTheFirstListed) {
  Pool p;
  p.input.candidates = naive_pool();
  std::vector<int64_t> seeds;  // the three samples' seeds, in sample order
  for (int64_t k = 0; k < 3; ++k) seeds.push_back(detail::ask_seed(p.input, "alphasql_naive", k));
  {
    // z, y, garbage: one vote each for z and y → z, voted first.
    auto script = std::make_shared<ScriptedChooser>();
    script->answers = {"SELECT 'z'", "SELECT 'y'", "garbage"};
    script->seeds = seeds;
    FakeOpenAiServer server(
        [script](const httplib::Request& r, int64_t seq) { return (*script)(r, seq); });
    auto client = fake_client(server);
    auto s = naive(client.get(), p.input);
    ASSERT_TRUE(s.is_ok());
    EXPECT_EQ(s->chosen, 3);
  }
  {
    // A query that is not listed is no vote; none left: the first listed (y1).
    auto script = std::make_shared<ScriptedChooser>();
    script->answers = {"SELECT 'w'", "garbage", "SELECT 'w' -- again"};
    script->seeds = seeds;
    FakeOpenAiServer server(
        [script](const httplib::Request& r, int64_t seq) { return (*script)(r, seq); });
    auto client = fake_client(server);
    auto s = naive(client.get(), p.input);
    ASSERT_TRUE(s.is_ok());
    EXPECT_EQ(s->chosen, 1);
    EXPECT_EQ(s->explanation["unmatched"], 2);
    EXPECT_EQ(s->explanation["decided_by"], "no usable vote: the first listed");
  }
}

TEST(AlphaSqlNaive, OneResultNeedsNoCallAndTemperatureZeroAsksOnce) {
  auto script = std::make_shared<ScriptedChooser>();
  script->answers = {"SELECT 'z'"};
  FakeOpenAiServer server(
      [script](const httplib::Request& r, int64_t seq) { return (*script)(r, seq); });
  auto client = fake_client(server);
  Pool p;
  p.input.candidates = {cand("a", "dc", "SELECT 1", rs({{I(1)}})),
                        cand("b", "qp", "SELECT 1 -- b", rs({{I(1)}}))};
  auto s = naive(client.get(), p.input);
  ASSERT_TRUE(s.is_ok());
  EXPECT_EQ(s->chosen, 0);
  EXPECT_EQ(server.requests(), 0);

  p.input.candidates = naive_pool();
  s = naive(client.get(), p.input, R"({"select": {"alphasql_naive": {"temperature": 0}}})");
  ASSERT_TRUE(s.is_ok());
  EXPECT_EQ(server.requests(), 1);
  EXPECT_EQ(s->chosen, 3);
  EXPECT_FALSE(script->bodies[0].contains("seed"));
}

// ---- DeepEye-SQL's consistency-aware selection ----

// Answers the pairwise prompts with the scripted winners, in request order.
FakeOpenAiServer::Script pair_script(std::vector<std::string> winners) {
  return [winners](const httplib::Request&, int64_t seq) {
    return FakeReply(
        200, completion_body("Comparing.\n```json\n{\"winner\": \"" +
                             winners[static_cast<size_t>(seq) % winners.size()] + "\"}\n```"));
  };
}

Result<Selection> deepeye(llm::Client* client, const SelectionInput& in,
                          const std::string& cfg = "{}") {
  auto sel = make_selector_named("deepeye_selection", core::Config(json::parse(cfg)),
                                 {client, nullptr, {}, nullptr});
  if (!sel.is_ok()) return sel.status();
  return (*sel)->select(in);
}

// {a1, a2} 2/4, {b} 1/4, {c} 1/4 — below the 0.6 shortcut; kept: a1 (0.5) and b (0.25).
std::vector<PoolCandidate> deepeye_pool() {
  return {cand("a1", "os", "SELECT 1", rs({{I(1)}})), cand("b", "dc", "SELECT 2", rs({{I(2)}})),
          cand("a2", "dc", "SELECT 1 -- a2", rs({{I(1)}})),
          cand("c", "dc", "SELECT 3", rs({{I(3)}}))};
}

TEST(DeepEyeSelection, ShortcutAboveTheThresholdWithoutACall) {
  FakeOpenAiServer server(pair_script({"B"}));
  auto client = fake_client(server);
  Pool p;
  // {a, b, d} 3/5 = 0.6 >= 0.6: the shortcut. Empty results are left out while others have rows.
  p.input.candidates = {
      cand("a", "os", "SELECT 1", rs({{I(1)}})),  cand("b", "dc", "SELECT 1 -- b", rs({{I(1)}})),
      cand("c", "dc", "SELECT 2", rs({{I(2)}})),  cand("d", "dc", "SELECT 1 -- d", rs({{I(1)}})),
      cand("e", "dc", "SELECT 3", rs({{I(3)}})),  cand("f", "dc", "SELECT 4 WHERE 0", rs({})),
      cand("g", "dc", "SELECT 5 WHERE 0", rs({}))};
  auto s = deepeye(client.get(), p.input);
  ASSERT_TRUE(s.is_ok()) << s.status().to_string();
  EXPECT_EQ(s->chosen, 0);
  EXPECT_EQ(s->explanation["decided_by"], "shortcut");
  EXPECT_EQ(server.requests(), 0);
}

TEST(DeepEyeSelection, WinRateTimesConfidenceWithTiesToTheMoreConfident) {
  Pool p;
  p.input.candidates = deepeye_pool();
  {
    // Votes B, B, A: W[a][b] = 1/3, W[b][a] = 2/3. Scores: a (1/3)/2 · (0.5/0.75) = 1/9,
    // b (2/3)/2 · (0.25/0.75) = 1/9 — equal: the more confident a1.
    FakeOpenAiServer server(pair_script({"B", "B", "A"}));
    auto client = fake_client(server);
    auto s = deepeye(client.get(), p.input);
    ASSERT_TRUE(s.is_ok()) << s.status().to_string();
    EXPECT_EQ(server.requests(), 3);
    EXPECT_EQ(s->chosen, 0);
    EXPECT_NEAR(s->explanation["scores"]["a1"].get<double>(), 1.0 / 9, 1e-12);
    EXPECT_NEAR(s->explanation["scores"]["b"].get<double>(), 1.0 / 9, 1e-12);
    EXPECT_EQ(s->calls[0].template_name, "select_deepeye_pair");
  }
  {
    // Votes B, B, B: a 0, b (3/3)/2 · 1/3 = 1/6 → b.
    FakeOpenAiServer server(pair_script({"B"}));
    auto client = fake_client(server);
    auto s = deepeye(client.get(), p.input);
    ASSERT_TRUE(s.is_ok());
    EXPECT_EQ(s->chosen, 1);
    EXPECT_NEAR(s->explanation["scores"]["b"].get<double>(), 1.0 / 6, 1e-12);
  }
}

TEST(DeepEyeSelection, TopThreeAdjudicatesEveryPairWithAAsTheMoreConfident) {
  std::mutex mu;
  std::vector<std::string> prompts;
  FakeOpenAiServer server([&](const httplib::Request& req, int64_t) {
    std::lock_guard lock(mu);
    prompts.push_back(user_prompt(req));
    return FakeReply(200, completion_body("```json\n{\"winner\": \"B\"}\n```"));
  });
  auto client = fake_client(server);
  Pool p;
  p.input.candidates = deepeye_pool();
  auto s = deepeye(client.get(), p.input, R"({"select": {"deepeye_selection": {"top_k": 3}}})");
  ASSERT_TRUE(s.is_ok()) << s.status().to_string();
  // 3 pairs × 3 votes. B always wins: W[b][a] = W[c][a] = W[c][b] = 1.
  // a: 0; b: (1/3) · (0.25/1) = 1/12; c: (2/3) · (0.25/1) = 1/6 → c.
  EXPECT_EQ(server.requests(), 9);
  EXPECT_EQ(s->chosen, 3);
  EXPECT_NEAR(s->explanation["scores"]["c"].get<double>(), 1.0 / 6, 1e-12);
  // The first pair shows the larger group's query as A (the pairs' votes go out together, so
  // the pair is found by its queries, not by when it arrived).
  auto first_pair = std::find_if(prompts.begin(), prompts.end(), [](const std::string& t) {
    return t.find("SELECT 1") != std::string::npos && t.find("SELECT 2") != std::string::npos;
  });
  ASSERT_NE(first_pair, prompts.end());
  EXPECT_LT(first_pair->find("SELECT 1"), first_pair->find("SELECT 2")) << *first_pair;
}

TEST(DeepEyeSelection, NothingExecutedTakesTheFirstCandidateWithSql) {
  FakeOpenAiServer server(pair_script({"A"}));
  auto client = fake_client(server);
  Pool p;
  p.input.candidates = {cand("a", "os", "", std::nullopt), cand("b", "os", "SELEC 1", std::nullopt),
                        cand("c", "dc", "SELEC 2", std::nullopt)};
  auto s = deepeye(client.get(), p.input);
  ASSERT_TRUE(s.is_ok());
  EXPECT_EQ(s->chosen, 1);
}

// ---- Determinism per seed ----

TEST(PaperBaselines, SameSeedSameRequestsAndPicksOtherSeedOtherSamples) {
  // A model whose choice follows the request's seed, so a pick depends on the seeds sent.
  std::mutex mu;
  std::vector<int64_t> seen;
  FakeOpenAiServer server([&](const httplib::Request& req, int64_t) {
    auto body = json::parse(req.body);
    const int64_t seed = body.value("seed", int64_t{0});
    {
      std::lock_guard lock(mu);
      seen.push_back(seed);
    }
    const std::string prompt = body["messages"][1]["content"];
    if (prompt.find("Candidate queries:") != std::string::npos) {
      static const char* kSql[] = {"SELECT 'x'", "SELECT 'y'", "SELECT 'z'"};
      return FakeReply(
          200, completion_body("```json\n" + json{{"sql", kSql[seed % 3]}}.dump() + "\n```"));
    }
    return FakeReply(200, completion_body(std::string("```json\n{\"winner\": \"") +
                                          (seed % 2 ? "A" : "B") + "\"}\n```"));
  });
  auto client = fake_client(server);
  auto run = [&](const std::string& method, uint64_t seed, std::vector<PoolCandidate> pool) {
    Pool p;
    p.input.candidates = std::move(pool);
    p.input.seed = seed;
    {
      std::lock_guard lock(mu);
      seen.clear();
    }
    auto sel = make_selector_named(method, core::Config(), {client.get(), nullptr, {}, nullptr});
    EXPECT_TRUE(sel.is_ok());
    auto s = (*sel)->select(p.input);
    EXPECT_TRUE(s.is_ok());
    std::lock_guard lock(mu);
    // The samples go out together: the seeds sent, not the order they arrived in.
    std::vector<int64_t> sent = seen;
    std::sort(sent.begin(), sent.end());
    return std::make_pair(s->chosen, sent);
  };
  for (const auto& [method, pool] :
       {std::make_pair(std::string("alphasql_naive"), naive_pool()),
        std::make_pair(std::string("deepeye_selection"), deepeye_pool())}) {
    auto first = run(method, 5, pool);
    auto again = run(method, 5, pool);
    auto other = run(method, 6, pool);
    EXPECT_EQ(first.first, again.first) << method;
    EXPECT_EQ(first.second, again.second) << method;
    ASSERT_EQ(first.second.size(), 3u) << method;
    EXPECT_NE(first.second, other.second) << method;
    EXPECT_EQ(std::set<int64_t>(first.second.begin(), first.second.end()).size(), 3u) << method;
  }
}

TEST(PaperBaselines, AQuestionsMemoSendsNoRequestTwice) {
  // The curves re-run a selector on prefixes of the pool; a prefix that shows the model the same
  // prompt with the same seed is answered from the question's memo, not asked again.
  FakeOpenAiServer server(pair_script({"B", "B", "A"}));
  auto client = fake_client(server);
  Pool p;
  // {a1, a2} 2/5, {b}, {c}, {d} 1/5 each: the top two are a1 and b.
  p.input.candidates = deepeye_pool();
  p.input.candidates.push_back(cand("d", "dc", "SELECT 4", rs({{I(4)}})));
  p.input.ask_memo = std::make_shared<AskMemo>();
  auto first = deepeye(client.get(), p.input);
  ASSERT_TRUE(first.is_ok());
  EXPECT_EQ(server.requests(), 3);
  // The first four candidates keep the same top two ({a1, a2} 2/4, {b} 1/4, still below the
  // shortcut), so the pair's prompts and seeds are the same: no request.
  SelectionInput prefix = p.input;
  prefix.candidates.resize(4);
  auto again = deepeye(client.get(), prefix);
  ASSERT_TRUE(again.is_ok());
  EXPECT_EQ(server.requests(), 3);
  EXPECT_EQ(again->llm_calls(), 0);
  EXPECT_EQ(again->explanation["pairs"][0]["votes"], first->explanation["pairs"][0]["votes"]);
  // Another seed samples anew.
  prefix.seed = 12;
  auto other = deepeye(client.get(), prefix);
  ASSERT_TRUE(other.is_ok());
  EXPECT_EQ(server.requests(), 6);
}

TEST(PaperBaselines, BadOptionsAreNamed) {
  FakeOpenAiServer server(pair_script({"A"}));
  auto client = fake_client(server);
  auto sel = make_selector_named(
      "deepeye_selection",
      core::Config(json::parse(R"({"select": {"deepeye_selection": {"top_k": 1}}})")),
      {client.get(), nullptr, {}, nullptr});
  ASSERT_FALSE(sel.is_ok());
  EXPECT_NE(sel.status().message().find("select.deepeye_selection.top_k"), std::string::npos);
  sel = make_selector_named("alphasql_naive", core::Config(), {});
  ASSERT_FALSE(sel.is_ok());
  EXPECT_NE(sel.status().message().find("needs an LLM client"), std::string::npos);
}

}  // namespace
}  // namespace nl2sql::select
