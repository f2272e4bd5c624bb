// The context stage's model calls: LLM keywords (answer parsing, sim, malformed answers falling
// back to the heuristic), embedding re-ranking against the fake server's /embeddings, column
// filtering (per column with sim, per table with a real profile; join keys kept) and the
// ContextBuilder entry point (JSON shape, one index per database across threads).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#include <gtest/gtest.h>

#include "nl2sql/context/retrieve.h"

#include "support/fake_client.h"
#include "support/fake_openai_server.h"
#include "nl2sql/context/column_filter.h"
#include "nl2sql/context/embedding_rerank.h"
#include "context/llm_calls.h"
#include "nl2sql/context/question_context.h"
#include "nl2sql/db/executor.h"
#include "nl2sql/llm/client.h"
#include "nl2sql/sim/simulator.h"
#include "support/test_env.h"

namespace nl2sql::context {
namespace {
namespace fs = std::filesystem;
using llm::testing::completion_body;
using llm::testing::FakeOpenAiServer;
using llm::testing::FakeReply;
using nlohmann::json;

llm::LlmSettings sim_settings() {
  llm::LlmSettings s;
  llm::ModelProfile p;
  p.name = "sim";
  p.provider = "sim";
  p.base_url = llm::kSimBaseUrl;
  s.profiles["sim"] = p;
  s.default_profile = "sim";
  s.cache.mode = llm::CacheMode::kOff;
  return s;
}

llm::LlmSettings server_settings(const std::string& base_url) {
  return llm::testing::one_profile_settings(base_url, "fake");
}

// A client for `s`; simulated profiles are answered by a simulator holding `ds`'s gold.
std::unique_ptr<llm::Client> client_for(llm::LlmSettings s, const data::Dataset* ds = nullptr) {
  llm::ClientOptions o;
  for (const auto& [name, p] : s.profiles)
    if (p.provider == "sim" && !o.simulator) sim::attach(o, s.sim, ds);
  auto c = llm::Client::create(std::move(s), o);
  EXPECT_TRUE(c.is_ok()) << c.status().message();
  return std::move(c).value();
}

llm::PromptTemplate prompt(const std::string& name) {
  auto t = llm::PromptTemplate::load_named(llm::bundled_prompts_dir(), name);
  EXPECT_TRUE(t.is_ok()) << t.status().message();
  return std::move(t).value();
}

TEST(LlmKeywords, ParsesFencedBareAndListAnswers) {
  auto a = parse_keyword_answer("Sure.\n```json\n{\"keywords\": [\"east Bohemia\", \"schools\", \"EAST BOHEMIA\", 3]}\n```", "q");
  ASSERT_TRUE(a.is_ok()) << a.status().message();
  EXPECT_EQ(*a, (std::vector<std::string>{"east Bohemia", "schools"}));  // duplicate by normalization, non-string dropped
  auto b = parse_keyword_answer("[\"Nordlys\", \"albums\"]", "q");
  ASSERT_TRUE(b.is_ok());
  EXPECT_EQ(b->size(), 2u);
  auto c = parse_keyword_answer("The keywords are {\"keywords\": [\"x ray\"]} as asked.", "q");
  ASSERT_TRUE(c.is_ok());
  EXPECT_EQ(c->front(), "x ray");
  EXPECT_FALSE(parse_keyword_answer("no JSON here", "q 7").is_ok());
  auto d = parse_keyword_answer("{\"words\": []}", "question 7");
  ASSERT_FALSE(d.is_ok());
  EXPECT_NE(d.status().message().find("question 7"), std::string::npos);
}

TEST(LlmKeywords, StopWordsFromTheModelAreDropped) {
  // Models answer "How", "the" and "how many" too; a keyword made only of stop words matches
  // stored values by accident. A phrase with one content word stays as the model wrote it.
  auto a = parse_keyword_answer(R"({"keywords": ["How", "the", "How many", "schools", "the east Bohemia region", "Name"]})", "q");
  ASSERT_TRUE(a.is_ok()) << a.status().message();
  EXPECT_EQ(*a, (std::vector<std::string>{"schools", "the east Bohemia region"}));
  EXPECT_TRUE(only_stop_words("What is the"));
  EXPECT_FALSE(only_stop_words("Pardubice"));
}

TEST(LlmKeywords, SimAnswersAndTraceRecordsTheCall) {
  auto client = client_for(sim_settings());
  llm::LlmCallTrace trace;
  auto k = llm_keywords(*client, prompt("extract_keywords"), "How many schools are in the 'east Bohemia' region?",
                        "", "0", &trace);
  ASSERT_TRUE(k.is_ok()) << k.status().message();
  EXPECT_NE(std::find(k->begin(), k->end(), "east Bohemia"), k->end());
  EXPECT_EQ(trace.provider, "sim");
  EXPECT_EQ(trace.template_name, "extract_keywords");
  EXPECT_NE(trace.prompt.find("east Bohemia"), std::string::npos);
  EXPECT_TRUE(trace.error.empty());
}

class MiniContext : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = testing::build_mini_bird(dir_ / "mini");
    data::DatasetSpec spec;
    spec.data_dir = root_;
    auto ds = data::load_dataset(spec);
    ASSERT_TRUE(ds.is_ok()) << ds.status().message();
    ds_ = std::move(*ds);
  }
  ContextSettings base() {
    ContextSettings s;
    s.index.index_dir = dir_ / "index";
    s.index.threads = 1;
    return s;
  }
  const data::Question& q(const std::string& id) { return *ds_.find_question(id); }
  const data::Schema& schema(const std::string& db) { return ds_.schemas.at(db); }
  testing::TempDir dir_;
  fs::path root_;
  data::Dataset ds_;
  const data::Dataset* ds_ptr() const { return &ds_; }
  db::Executor ex_;
};

// Reasoning models: a draft written while thinking (before a lone </think>, or in a <think>
// block) is never the answer.
TEST(LlmKeywords, DraftInTheReasoningIsNotTaken) {
  auto a = parse_keyword_answer("Draft: {\"keywords\": [\"draft\"]}\n</think>\n{\"keywords\": [\"final\"]}", "q");
  ASSERT_TRUE(a.is_ok()) << a.status().message();
  EXPECT_EQ(*a, (std::vector<std::string>{"final"}));
  auto b = parse_keyword_answer("<think>[\"draft\"]</think>\n```json\n[\"final\",]\n```", "q");
  ASSERT_TRUE(b.is_ok()) << b.status().message();
  EXPECT_EQ(*b, (std::vector<std::string>{"final"}));
  EXPECT_FALSE(parse_keyword_answer("<think>{\"keywords\": [\"draft\"]}</think>", "q").is_ok());
}

TEST(ColumnFilter, DraftInTheReasoningIsNotTaken) {
  std::vector<std::string> cols = {"name", "region"};
  auto a = parse_column_filter_answer(
      "<think>{\"relevant\": [\"name\"]} — no, the region is what is filtered.</think>\n{\"relevant\": [\"region\"]}", cols, "t");
  ASSERT_TRUE(a.is_ok()) << a.status().message();
  EXPECT_EQ(*a, (std::set<std::string>{"region"}));
  auto b = parse_column_filter_answer("{'relevant': ['name']}\n</think>\n{'relevant': ['region', 'name',]}", cols, "t");
  ASSERT_TRUE(b.is_ok()) << b.status().message();
  EXPECT_EQ(*b, (std::set<std::string>{"region", "name"}));
}

// The trace keeps what the model thought; the answer after it is what is parsed.
TEST_F(MiniContext, KeywordTraceKeepsTheReasoning) {
  FakeOpenAiServer server([](const httplib::Request&, int64_t) {
    return FakeReply{200, completion_body("The user asks about schools. Draft: {\"keywords\": [\"draft\"]}\n</think>\n\n"
                                          "{\"keywords\": [\"east Bohemia\"]}")};
  });
  auto client = client_for(server_settings(server.base_url()));
  llm::LlmCallTrace trace;
  const auto& question = q("0");
  auto kws = llm_keywords(*client, prompt("extract_keywords"), question.question, question.evidence,
                          question.question_id, &trace);
  ASSERT_TRUE(kws.is_ok()) << kws.status().message();
  EXPECT_EQ(*kws, (std::vector<std::string>{"east Bohemia"}));
  EXPECT_NE(trace.reasoning.find("Draft"), std::string::npos) << trace.reasoning;
  EXPECT_EQ(client->accounting().question(question.question_id).parse_failures, 0);
}

TEST_F(MiniContext, MalformedKeywordAnswerFallsBackToHeuristic) {
  FakeOpenAiServer server([](const httplib::Request&, int64_t) { return FakeReply{200, completion_body("I think: schools, regions")}; });
  auto client = client_for(server_settings(server.base_url()));
  auto s = base();
  s.llm_keywords = true;
  auto b = ContextBuilder::create(s, client.get(), ex_);
  ASSERT_TRUE(b.is_ok()) << b.status().message();
  const auto& question = q("0");
  auto ctx = (*b)->build(question, schema(question.db_id), ds_.db_paths.at(question.db_id), 1);
  ASSERT_TRUE(ctx.is_ok()) << ctx.status().message();
  ASSERT_EQ(ctx->errors.size(), 1u);
  EXPECT_NE(ctx->errors[0].find("heuristic keywords only"), std::string::npos);
  ASSERT_EQ(ctx->calls.size(), 1u);
  EXPECT_FALSE(ctx->calls[0].error.empty());
  EXPECT_EQ(ctx->calls[0].response, "I think: schools, regions");
  // The call succeeded, the answer could not be read: a parse failure of stage "keywords".
  const auto usage = client->accounting().question(question.question_id);
  EXPECT_EQ(usage.errors, 0);
  EXPECT_EQ(usage.parse_failures, 1);
  EXPECT_EQ(usage.parse_failures_by_stage.at("keywords"), 1);
  ASSERT_FALSE(ctx->retrieval.values.empty());
  EXPECT_EQ(ctx->retrieval.values[0].value, "east Bohemia");  // heuristic retrieval still works
}

TEST_F(MiniContext, LlmKeywordsAreMergedWithTheirSource) {
  FakeOpenAiServer server([](const httplib::Request&, int64_t) {
    return FakeReply{200, completion_body("```json\n{\"keywords\": [\"Nordlys\", \"Marta Kubisova\"]}\n```")};
  });
  auto client = client_for(server_settings(server.base_url()));
  auto s = base();
  s.llm_keywords = true;
  auto b = ContextBuilder::create(s, client.get(), ex_);
  ASSERT_TRUE(b.is_ok()) << b.status().message();
  const auto& question = q("11");
  auto ctx = (*b)->build(question, schema(question.db_id), ds_.db_paths.at(question.db_id), 1);
  ASSERT_TRUE(ctx.is_ok()) << ctx.status().message();
  EXPECT_TRUE(ctx->errors.empty());
  EXPECT_EQ(ctx->llm_keywords, (std::vector<std::string>{"Nordlys", "Marta Kubisova"}));
  auto source_of = [&](const std::string& t) {
    for (const auto& k : ctx->retrieval.keywords)
      if (k.text == t) return k.source;
    return std::string("-");
  };
  EXPECT_EQ(source_of("Nordlys"), "capitalized");  // the heuristic had it first
  EXPECT_EQ(source_of("Marta Kubisova"), "llm");
  EXPECT_TRUE(std::any_of(ctx->retrieval.values.begin(), ctx->retrieval.values.end(),
                          [](const ValueMatch& v) { return v.value == "Marta Kubišová" && v.keyword == "Marta Kubisova"; }));
}

// Deterministic embeddings: one axis per concept; "car" and "automobile" share an axis.
std::vector<float> fake_vector(const std::string& text) {
  static const std::vector<std::vector<std::string>> axes = {{"car", "automobile"}, {"east bohemia"}, {"cart"}};
  std::vector<float> v(axes.size() + 1, 0.0f);
  std::string t = text;
  for (auto& c : t) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  for (size_t i = 0; i < axes.size(); ++i)
    if (std::find(axes[i].begin(), axes[i].end(), t) != axes[i].end()) v[i] = 1.0f;
  if (std::all_of(v.begin(), v.end(), [](float x) { return x == 0; })) v.back() = 1.0f;
  return v;
}

TEST(EmbeddingRerank, CosineAndEditSimilarityCombine) {
  std::atomic<int> embed_calls{0};
  FakeOpenAiServer server([&](const httplib::Request& req, int64_t) {
    auto body = json::parse(req.body);
    ++embed_calls;
    json data = json::array();
    size_t i = 0;
    for (const auto& in : body.at("input")) data.push_back({{"index", i++}, {"embedding", fake_vector(in.get<std::string>())}});
    return FakeReply{200, json{{"data", data}, {"usage", {{"prompt_tokens", 7}}}}.dump()};
  });
  auto client = client_for(server_settings(server.base_url()));
  EmbeddingRerankOptions eo;
  eo.profile = "main";
  eo.min_score = 0.3;
  EmbeddingReranker rr(*client, eo);
  // "automobile" (edit 0.4 vs "car"... but the same concept) must overtake "cart" (edit 0.75, other concept).
  Retrieval r;
  r.keywords = {{"car", "ngram"}};
  r.values = {{"vehicle", "kind", "cart", 0.75, "car", 1}, {"vehicle", "kind", "automobile", 0.45, "car", 2},
              {"vehicle", "kind", "bus", 0.0, "car", 3}};
  RetrievalOptions limits;
  llm::LlmCallTrace trace;
  ASSERT_TRUE(rr.rerank(r, limits, "q1", &trace).is_ok());
  ASSERT_EQ(r.values.size(), 2u);  // "bus": 0.5 * 0 + 0.5 * 0 < min_score 0.3
  EXPECT_EQ(r.values[0].value, "automobile");
  EXPECT_NEAR(r.values[0].score, 0.5 * 0.45 + 0.5 * 1.0, 1e-9);
  EXPECT_EQ(r.values[1].value, "cart");
  EXPECT_NEAR(r.values[1].score, 0.5 * 0.75 + 0.5 * 0.0, 1e-9);
  EXPECT_EQ(trace.stage, "embeddings");
  EXPECT_TRUE(trace.error.empty());
  EXPECT_EQ(embed_calls.load(), 1);
  // Texts already embedded are memoized: a second question with the same texts makes no call.
  Retrieval again;
  again.keywords = {{"car", "ngram"}};
  again.values = {{"vehicle", "kind", "automobile", 0.45, "car", 2}};
  ASSERT_TRUE(rr.rerank(again, limits, "q2").is_ok());
  EXPECT_EQ(embed_calls.load(), 1);
  EXPECT_NEAR(cosine_similarity({1, 0}, {1, 0}), 1.0, 1e-12);
  EXPECT_NEAR(cosine_similarity({1, 0}, {0, 1}), 0.0, 1e-12);
}

TEST(EmbeddingRerank, FailedCallKeepsEditRanking) {
  FakeOpenAiServer server([](const httplib::Request&, int64_t) { return FakeReply{400, "{\"error\": \"no\"}"}; });
  auto client = client_for(server_settings(server.base_url()));
  EmbeddingRerankOptions eo;
  eo.profile = "main";
  EmbeddingReranker rr(*client, eo);
  Retrieval r;
  r.keywords = {{"car", "ngram"}};
  r.values = {{"t", "c", "cart", 0.75, "car", 1}, {"t", "c", "carton", 0.5, "car", 2}};
  Status s = rr.rerank(r, RetrievalOptions{}, "q1");
  EXPECT_FALSE(s.is_ok());
  ASSERT_EQ(r.values.size(), 1u);  // cut at min_similarity 0.6
  EXPECT_EQ(r.values[0].value, "cart");
}

TEST(ColumnFilter, ParsesListsAndYesNo) {
  std::vector<std::string> cols = {"name", "Region", "population"};
  auto a = parse_column_filter_answer("```json\n{\"relevant\": [\"region\", \"district.name\", \"nope\"]}\n```", cols, "t");
  ASSERT_TRUE(a.is_ok()) << a.status().message();
  EXPECT_EQ(*a, (std::set<std::string>{"Region", "name"}));
  auto yes = parse_column_filter_answer("{\"relevant\": true}", {"kind"}, "t");
  ASSERT_TRUE(yes.is_ok());
  EXPECT_EQ(*yes, (std::set<std::string>{"kind"}));
  EXPECT_FALSE(parse_column_filter_answer("{\"relevant\": true}", cols, "t").is_ok());
  EXPECT_FALSE(parse_column_filter_answer("maybe", cols, "t").is_ok());
}

TEST_F(MiniContext, JoinKeysAndBridgeTablesAreKept) {
  const auto& s = schema("regional_schools");
  // district and score are only connected through school: school's keys come along.
  std::set<std::string> added;
  std::vector<std::string> dropped;
  auto sel = close_over_join_keys(s, s.foreign_keys, {"district.region", "score.avg_math"}, &added, &dropped);
  for (const auto* c : {"district.region", "score.avg_math", "district.district_id", "school.school_id",
                        "school.district_id", "score.school_id", "score.year"})
    EXPECT_TRUE(sel.count(c)) << c;
  EXPECT_FALSE(sel.count("school.name"));
  EXPECT_TRUE(added.count("school.district_id"));
  EXPECT_TRUE(dropped.empty());
  std::vector<std::string> dropped2;
  auto one = close_over_join_keys(s, s.foreign_keys, {"district.region"}, nullptr, &dropped2);
  EXPECT_EQ(one, (std::set<std::string>{"district.region", "district.district_id"}));
  EXPECT_EQ(dropped2, (std::vector<std::string>{"school", "score"}));
}

TEST_F(MiniContext, SimFiltersPerColumnAndKeepsJoinKeys) {
  auto client = client_for(sim_settings(), ds_ptr());
  const auto& question = q("0");  // school JOIN district WHERE region = 'east Bohemia'
  ColumnFilterOptions o;
  auto r = filter_columns(*client, prompt("filter_columns"), question, schema(question.db_id), o);
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  EXPECT_EQ(r->mode, "column");
  size_t columns = 0;
  for (const auto& t : schema(question.db_id).tables) columns += t.columns.size();
  EXPECT_EQ(r->calls.size(), columns);  // one call per column for sim
  EXPECT_TRUE(r->errors.empty());
  // Whatever sim judged (71% right per column), the kept tables stay joinable and every
  // relevant column is selected.
  for (const auto& c : r->relevant) EXPECT_TRUE(r->selected.count(c)) << c;
  if (r->selected.count("district.region") && r->selected.count("school.name")) {
    EXPECT_TRUE(r->selected.count("school.district_id"));
    EXPECT_TRUE(r->selected.count("district.district_id"));
  }
  for (const auto& c : r->calls) EXPECT_EQ(c.provider, "sim");
}

TEST_F(MiniContext, RealProfileFiltersPerTable) {
  std::atomic<int> calls{0};
  FakeOpenAiServer server([&](const httplib::Request& req, int64_t) {
    ++calls;
    std::string content = json::parse(req.body)["messages"][0]["content"].get<std::string>();
    // Answer per table from the table shown in the prompt.
    if (content.find("CREATE TABLE district") != std::string::npos)
      return FakeReply{200, completion_body("{\"relevant\": [\"region\"]}")};
    if (content.find("CREATE TABLE score") != std::string::npos) return FakeReply{200, completion_body("not json")};
    return FakeReply{200, completion_body("{\"relevant\": []}")};
  });
  auto client = client_for(server_settings(server.base_url()));
  const auto& question = q("0");
  auto r = filter_columns(*client, prompt("filter_columns"), question, schema(question.db_id), ColumnFilterOptions{});
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  EXPECT_EQ(r->mode, "table");
  EXPECT_EQ(calls.load(), 3);
  // score could not be judged: kept whole; school only bridges district and score.
  ASSERT_EQ(r->errors.size(), 1u);
  EXPECT_NE(r->errors[0].find("table score"), std::string::npos);
  EXPECT_TRUE(r->selected.count("district.region"));
  EXPECT_TRUE(r->selected.count("score.avg_reading"));
  EXPECT_TRUE(r->selected.count("school.school_id"));
  EXPECT_TRUE(r->selected.count("school.district_id"));
  EXPECT_FALSE(r->selected.count("school.name"));
  EXPECT_FALSE(r->selected.count("district.population"));
}

// Issue 22: the per-table requests do not depend on each other and go out together. The server
// holds every request until all three tables' requests are in flight at once (a request issued
// only after the previous answer would never see the others: it gives up after 10 s and the
// count shows it); the answers are then read back in schema order.
TEST_F(MiniContext, RealProfileSendsItsPerTableRequestsTogether) {
  std::mutex mu;
  std::condition_variable cv;
  int in_flight = 0, most = 0;
  std::vector<std::string> tables_seen;
  FakeOpenAiServer server([&](const httplib::Request& req, int64_t) {
    std::string content = json::parse(req.body)["messages"][0]["content"].get<std::string>();
    std::unique_lock lock(mu);
    ++in_flight;
    most = std::max(most, in_flight);
    cv.notify_all();
    cv.wait_for(lock, std::chrono::seconds(10), [&] { return most >= 3; });
    --in_flight;
    if (content.find("CREATE TABLE district") != std::string::npos)
      return FakeReply{200, completion_body("{\"relevant\": [\"region\"]}")};
    return FakeReply{200, completion_body("{\"relevant\": []}")};
  });
  auto settings = server_settings(server.base_url());
  settings.profiles["main"].timeout_s = 30;
  auto client = client_for(settings);
  const auto& question = q("0");
  const auto& sch = schema(question.db_id);
  ASSERT_EQ(sch.tables.size(), 3u);
  auto r = filter_columns(*client, prompt("filter_columns"), question, sch, ColumnFilterOptions{});
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  EXPECT_EQ(most, 3) << "the three per-table requests were not in flight together";
  ASSERT_EQ(r->calls.size(), 3u);
  // Traces in schema order, whatever order the answers came in.
  for (size_t i = 0; i < 3; ++i)
    EXPECT_NE(r->calls[i].prompt.find("CREATE TABLE " + sch.tables[i].name), std::string::npos) << i;
  EXPECT_TRUE(r->errors.empty());
  EXPECT_EQ(r->relevant, (std::set<std::string>{"district.region"}));
}

TEST_F(MiniContext, BuilderJsonAndOneIndexPerDatabaseAcrossThreads) {
  auto client = client_for(sim_settings(), ds_ptr());
  auto s = base();
  s.llm_keywords = true;
  s.column_filter = true;
  auto b = ContextBuilder::create(s, client.get(), ex_);
  ASSERT_TRUE(b.is_ok()) << b.status().message();
  std::vector<Result<QuestionContext>> out(ds_.questions.size(), Status(ErrorCode::kInternal, "not run"));
  std::vector<std::thread> threads;
  for (size_t w = 0; w < 4; ++w)
    threads.emplace_back([&, w] {
      for (size_t i = w; i < ds_.questions.size(); i += 4) {
        const auto& question = ds_.questions[i];
        out[i] = (*b)->build(question, schema(question.db_id), ds_.db_paths.at(question.db_id), 7);
      }
    });
  for (auto& t : threads) t.join();
  std::map<std::string, const ValueIndex*> seen;
  for (size_t i = 0; i < out.size(); ++i) {
    ASSERT_TRUE(out[i].is_ok()) << out[i].status().message();
    const auto& ctx = *out[i];
    auto [it, inserted] = seen.emplace(ctx.db_id, ctx.index.get());
    EXPECT_EQ(it->second, ctx.index.get()) << "one index object per database";
    json j = ctx.to_json();
    for (const auto* key : {"keywords", "values", "columns", "selected_columns", "calls"}) EXPECT_TRUE(j.contains(key)) << key;
    EXPECT_GE(j["calls"].size(), 2u);
    EXPECT_EQ(j["calls"][0]["stage"], "keywords");
    EXPECT_EQ(j["calls"][0]["provider"], "sim");
  }
  EXPECT_EQ(seen.size(), 2u);
}

TEST(ContextSettings, ReadsKeysAndNamesBadOnes) {
  core::Config c;
  ASSERT_TRUE(c.apply_overrides({"context.retrieval.min_similarity=0.7", "context.keywords.llm=true",
                                 "context.index.bands=32", "context.metadata.enabled=true",
                                 "context.embeddings.profile=emb"}).is_ok());
  auto s = load_context_settings(c);
  ASSERT_TRUE(s.is_ok()) << s.status().message();
  EXPECT_DOUBLE_EQ(s->retrieval.min_similarity, 0.7);
  EXPECT_TRUE(s->llm_keywords);
  EXPECT_EQ(s->index.params.bands, 32);
  EXPECT_TRUE(s->metadata);
  EXPECT_EQ(s->embeddings.profile, "emb");
  core::Config bad;
  ASSERT_TRUE(bad.apply_overrides({"context.column_filter.mode=sometimes"}).is_ok());
  auto e = load_context_settings(bad);
  ASSERT_FALSE(e.is_ok());
  EXPECT_NE(e.status().message().find("context.column_filter.mode"), std::string::npos);
  core::Config bands;
  ASSERT_TRUE(bands.apply_overrides({"context.index.bands=200"}).is_ok());
  EXPECT_FALSE(load_context_settings(bands).is_ok());
  // A model feature without a client is refused at create().
  db::Executor ex;
  ContextSettings needs;
  needs.column_filter = true;
  auto b = ContextBuilder::create(needs, nullptr, ex);
  ASSERT_FALSE(b.is_ok());
  EXPECT_NE(b.status().message().find("context.column_filter.enabled"), std::string::npos);
}

}  // namespace
}  // namespace nl2sql::context
