// Generators: golden prompt renderings per generator for a fixture question (rewritten with
// NL2SQL_UPDATE_GOLDEN=1), configuration errors naming their key, QP demonstrations built from a
// JSONL of (question, SQL, database) pairs, and the whole stage (all generators + fixer) on the
// bundled mini set with the offline `sim` provider (simulated answers: this checks machinery).
#include <cstdlib>
#include <mutex>
#include <fstream>
#include <set>

#include <gtest/gtest.h>

#include <mutex>
#include <nlohmann/json.hpp>

#include "nl2sql/context/metadata.h"
#include "nl2sql/context/retrieve.h"
#include "nl2sql/context/value_index.h"
#include "nl2sql/core/files.h"
#include "nl2sql/db/result_compare.h"
#include "nl2sql/fix/fixer.h"
#include "nl2sql/generate/generator.h"
#include "generate/qp_demos.h"
#include "nl2sql/llm/client.h"
#include "nl2sql/sim/simulator.h"
#include "support/fake_openai_server.h"
#include "support/test_env.h"

namespace nl2sql::generate {
namespace {
namespace fs = std::filesystem;
using nlohmann::json;

json sim_llm() {
  return json::parse(R"({"models": {"sim": {"provider": "sim"}, "sim2": {"provider": "sim"}},
                         "default_profile": "sim", "cache": {"mode": "off"}})");
}

json all_generators() {
  return json::parse(R"([{"name": "baseline"},
                          {"name": "dc", "samples": 2, "shuffle": true},
                          {"name": "qp"},
                          {"name": "os", "general_examples": 2, "filtered_examples": 2},
                          {"name": "ssev", "profiles": ["sim", "sim2"]}])");
}

class Generators : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new testing::TempDir();
    root_ = testing::build_mini_bird(dir_->path() / "mini");
    data::DatasetSpec spec;
    spec.data_dir = root_;
    auto ds = data::load_dataset(spec);
    ASSERT_TRUE(ds.is_ok()) << ds.status().message();
    ds_ = new data::Dataset(std::move(*ds));
    ex_ = new db::Executor();
    indexes_ = new std::map<std::string, context::ValueIndex>();
    for (const auto& [id, path] : ds_->db_paths) {
      context::IndexOptions o;
      o.index_dir = dir_->path() / "index";
      auto idx = context::open_index(id, path, ds_->schemas.at(id), o, *ex_);
      ASSERT_TRUE(idx.is_ok()) << idx.status().message();
      indexes_->emplace(id, std::move(*idx));
    }
  }
  static void TearDownTestSuite() {
    delete indexes_;
    delete ex_;
    delete ds_;
    delete dir_;
  }

  struct Run {
    std::unique_ptr<llm::Client> client;
    std::vector<std::unique_ptr<Generator>> generators;
  };
  static Run make(const json& generators) {
    core::Config config(json{{"llm", sim_llm()}, {"generate", {{"generators", generators}}}});
    Run r;
    auto c = sim::make_client(config, ds_);
    EXPECT_TRUE(c.is_ok()) << c.status().message();
    r.client = std::move(*c);
    auto g = make_generators(config, r.client.get(), ex_, llm::PromptLibrary::bundled());
    EXPECT_TRUE(g.is_ok()) << g.status().message();
    if (g) r.generators = std::move(*g);
    return r;
  }
  struct Inputs {
    context::Retrieval retrieval;
    GenerationInput in;
  };
  static std::unique_ptr<Inputs> input_for(const data::Question& q) {
    auto p = std::make_unique<Inputs>();
    const auto& schema = ds_->schemas.at(q.db_id);
    const auto& index = indexes_->at(q.db_id);
    p->retrieval = context::retrieve(index, schema, q.question, q.evidence);
    p->in.question = &q;
    p->in.schema = &schema;
    p->in.db_path = ds_->db_paths.at(q.db_id);
    p->in.index = &index;
    p->in.retrieval = &p->retrieval;
    p->in.seed = 42;
    return p;
  }

  static testing::TempDir* dir_;
  static fs::path root_;
  static data::Dataset* ds_;
  static db::Executor* ex_;
  static std::map<std::string, context::ValueIndex>* indexes_;
};
testing::TempDir* Generators::dir_ = nullptr;
fs::path Generators::root_;
data::Dataset* Generators::ds_ = nullptr;
db::Executor* Generators::ex_ = nullptr;
std::map<std::string, context::ValueIndex>* Generators::indexes_ = nullptr;

TEST_F(Generators, GoldenPromptRenderings) {
  auto run = make(all_generators());
  ASSERT_EQ(run.generators.size(), 5u);
  const auto* q = ds_->find_question("0");
  ASSERT_NE(q, nullptr);
  auto inputs = input_for(*q);
  for (const auto& g : run.generators) {
    SCOPED_TRACE(g->name());
    auto cands = g->generate(inputs->in);
    ASSERT_TRUE(cands.is_ok()) << cands.status().message();
    ASSERT_FALSE(cands->empty());
    // The calls of the first candidate, and for ssev the first PostSQL's too.
    std::vector<const LlmCallTrace*> calls;
    for (const auto& c : cands->front().calls) calls.push_back(&c);
    for (const auto& c : *cands)
      if (c.generator == "postsql") {
        calls.push_back(&c.calls.front());
        break;
      }
    std::string text;
    for (const auto* c : calls) {
      EXPECT_EQ(c->provider, "sim");
      EXPECT_FALSE(c->template_hash.empty());
      text += "==== " + c->stage + " (" + c->template_name + ")\n" + c->prompt + "\n";
    }
    const fs::path golden = testing::fixtures_dir().parent_path() / "generate" / "golden" / (g->name() + ".txt");
    if (std::getenv("NL2SQL_UPDATE_GOLDEN")) {
      ASSERT_TRUE(core::write_file_atomic(golden, text).is_ok());
    }
    auto want = core::read_file(golden);
    ASSERT_TRUE(want.is_ok()) << want.status().message() << " (NL2SQL_UPDATE_GOLDEN=1 writes it)";
    EXPECT_EQ(text, *want);
    // Every prompt carries the question and the rendered schema.
    EXPECT_NE(text.find("CREATE TABLE"), std::string::npos);
  }
}

// SSEV (issue 40, item 5): when schema linking leaves the prompt as it was (the PreSQL links
// nothing, so PostSQL would see the full schema), the PostSQL requests would repeat the PreSQL
// ones byte for byte: none is sent and each PostSQL candidate shares its expert's answer. When
// linking prunes the schema, PostSQL is asked. Three experts behind a fake server that counts
// requests; every request it sees must be distinct.
TEST_F(Generators, SsevPostSqlSharesPreSqlWhenLinkingChangesNothing) {
  const auto* q = ds_->find_question("0");
  ASSERT_NE(q, nullptr);
  auto inputs = input_for(*q);
  auto run_ssev = [&](const std::string& sql) {
    llm::testing::FakeOpenAiServer server([&](const httplib::Request&, int64_t) {
      return llm::testing::FakeReply(200, llm::testing::completion_body("```sql\n" + sql + "\n```"));
    });
    json models = json::object();
    for (const char* p : {"a", "b", "c"}) models[p] = {{"base_url", server.base_url()}, {"model", std::string("model-") + p}};
    json llm = {{"models", models}, {"default_profile", "a"}, {"cache", {{"mode", "off"}}},
                {"retry", {{"max_attempts", 1}, {"base_delay_s", 0.01}, {"max_delay_s", 0.01}}}};
    core::Config config(json{{"llm", llm}, {"generate", {{"generators", json::parse(R"([{"name": "ssev", "profiles": ["a", "b", "c"]}])")}}}});
    auto c = sim::make_client(config, ds_);
    EXPECT_TRUE(c.is_ok()) << c.status().message();
    auto g = make_generators(config, c->get(), ex_, llm::PromptLibrary::bundled());
    EXPECT_TRUE(g.is_ok()) << g.status().message();
    auto cands = g->front()->generate(inputs->in);
    EXPECT_TRUE(cands.is_ok()) << cands.status().message();
    auto bodies = server.bodies();
    EXPECT_EQ(std::set<std::string>(bodies.begin(), bodies.end()).size(), bodies.size()) << "a request was repeated";
    return std::make_pair(server.requests(), cands.is_ok() ? *cands : std::vector<Candidate>{});
  };

  auto [unlinked_requests, unlinked] = run_ssev("SELECT 1");  // references no column
  EXPECT_EQ(unlinked_requests, 3);
  ASSERT_EQ(unlinked.size(), 6u);  // 3 PreSQL (kept) + 3 PostSQL
  std::set<std::string> models;
  for (size_t i = 3; i < 6; ++i) {
    const Candidate& post = unlinked[i];
    const Candidate& pre = unlinked[i - 3];
    EXPECT_EQ(post.generator, "postsql");
    EXPECT_EQ(post.id, "ssev.postsql#" + std::to_string(i - 3));
    EXPECT_EQ(post.generation_shared_with, pre.id);
    EXPECT_TRUE(post.calls.empty());
    EXPECT_EQ(post.sql, "SELECT 1");
    EXPECT_EQ(post.profile, pre.profile);
    EXPECT_NE(post.reasoning.find("PostSQL shares PreSQL's answers"), std::string::npos) << post.reasoning;
    models.insert(pre.calls.front().model);
  }
  EXPECT_EQ(models.size(), 3u);
  auto round_trip = candidate_from_json(to_json(unlinked[3]));
  ASSERT_TRUE(round_trip.is_ok());
  EXPECT_EQ(round_trip->generation_shared_with, "ssev.presql#0");

  auto [linked_requests, linked] = run_ssev(q->gold_sql);  // references some columns only
  EXPECT_EQ(linked_requests, 6);
  ASSERT_EQ(linked.size(), 6u);
  for (size_t i = 3; i < 6; ++i) {
    EXPECT_EQ(linked[i].generation_shared_with, "");
    ASSERT_EQ(linked[i].calls.size(), 1u);
    EXPECT_NE(linked[i].calls.front().prompt, linked[i - 3].calls.front().prompt);
  }
}

// The prompt budget (llm.models.*.context_tokens) with metadata on: the first rung of the ladder
// drops the statistics (with the example values), keeping every table and column. Found by
// bisecting the context window down to where the full prompt stops fitting.
TEST_F(Generators, MetadataStatisticsAreTheFirstCutOfThePromptBudget) {
  llm::testing::FakeOpenAiServer server([](const httplib::Request&, int64_t) {
    return llm::testing::FakeReply(200, llm::testing::completion_body("```sql\nSELECT 1\n```"));
  });
  const auto* q = ds_->find_question("0");
  ASSERT_NE(q, nullptr);
  auto inputs = input_for(*q);
  auto meta = context::build_metadata(q->db_id, inputs->in.db_path, *inputs->in.schema, context::MetadataOptions{}, *ex_);
  ASSERT_TRUE(meta.is_ok()) << meta.status().message();
  inputs->in.metadata = &*meta;
  auto first_call = [&](int64_t context_tokens) {
    json llm = {{"models", {{"fake", {{"base_url", server.base_url()}, {"model", "fake-coder"}, {"max_tokens", 100}}}}},
                {"default_profile", "fake"}, {"cache", {{"mode", "off"}}},
                {"retry", {{"max_attempts", 1}, {"base_delay_s", 0.01}, {"max_delay_s", 0.01}}}};
    if (context_tokens > 0) llm["models"]["fake"]["context_tokens"] = context_tokens;
    core::Config config(json{{"llm", llm}, {"generate", {{"generators", json::parse(R"([{"name": "dc"}])")}}}});
    auto c = sim::make_client(config, ds_);
    EXPECT_TRUE(c.is_ok()) << c.status().message();
    auto g = make_generators(config, c->get(), ex_, llm::PromptLibrary::bundled());
    EXPECT_TRUE(g.is_ok()) << g.status().message();
    auto cands = g->front()->generate(inputs->in);
    EXPECT_TRUE(cands.is_ok() && !cands->empty());
    return cands->front().calls.front();
  };
  const auto unbounded = first_call(0);
  ASSERT_EQ(unbounded.prompt_rung, 0);
  ASSERT_NE(unbounded.prompt.find(" rows, "), std::string::npos);
  int64_t lo = 300, hi = 200000;  // rung > 0 at lo, rung 0 at hi
  ASSERT_GT(first_call(lo).prompt_rung, 0);
  ASSERT_EQ(first_call(hi).prompt_rung, 0);
  while (hi - lo > 1) {
    const int64_t mid = (lo + hi) / 2;
    (first_call(mid).prompt_rung == 0 ? hi : lo) = mid;
  }
  EXPECT_EQ(first_call(hi).prompt, unbounded.prompt);
  const auto cut = first_call(lo);
  EXPECT_EQ(cut.prompt_rung, 1);
  EXPECT_EQ(cut.prompt.find(" rows, "), std::string::npos) << cut.prompt;
  for (const auto& t : inputs->in.schema->tables)
    for (const auto& c : t.columns) EXPECT_NE(cut.prompt.find("  " + c.name + " "), std::string::npos) << c.name;
}

// The online synthetic examples are checked through the caller's shared executions (the
// pipeline's question memo) when it gives them: each example's SQL is asked for there, never run
// by the generator, and an example passes when its whole answer ran without error to at most
// 1000 rows in at most 5 s of statement time.
TEST_F(Generators, OnlineSyntheticExamplesAreCheckedThroughTheSharedExecutions) {
  const auto& q = ds_->questions.front();
  auto r = make(json::parse(R"([{"name": "os", "samples": 1, "general_examples": 2, "filtered_examples": 2}])"));
  ASSERT_EQ(r.generators.size(), 1u);
  auto kept = [&](size_t rows, double statement_ms, db::ExecStatus status) {
    auto inputs = input_for(q);
    std::mutex mu;
    size_t asked = 0;
    inputs->in.execute = [&](const std::string&) {
      std::lock_guard lock(mu);
      ++asked;
      auto e = std::make_shared<db::ExecutionResult>();
      e->status = status;
      e->result.columns = {"x"};
      e->result.rows.assign(rows, db::Row{db::Value::integer(1)});
      e->statement_ms = statement_ms;
      return std::shared_ptr<const db::ExecutionResult>(std::move(e));
    };
    auto c = r.generators[0]->generate(inputs->in);
    EXPECT_TRUE(c.is_ok() && !c->empty());
    EXPECT_GT(asked, 0u);
    return c.is_ok() && !c->empty() ? c->front().reasoning : std::string();
  };
  const std::string none = "[os examples: 0 general + 0 filtered";
  EXPECT_EQ(kept(1000, 10, db::ExecStatus::kOk).find(none), std::string::npos);
  EXPECT_NE(kept(1001, 10, db::ExecStatus::kOk).find(none), std::string::npos);
  EXPECT_NE(kept(1, 5001, db::ExecStatus::kOk).find(none), std::string::npos);
  EXPECT_NE(kept(1, 10, db::ExecStatus::kError).find(none), std::string::npos);
}

TEST_F(Generators, ShuffleVariesSchemaOrderAcrossSamples) {
  auto run = make(json::parse(R"([{"name": "dc", "samples": 3, "shuffle": true}])"));
  const auto* q = ds_->find_question("5");
  auto inputs = input_for(*q);
  auto cands = run.generators.front()->generate(inputs->in);
  ASSERT_TRUE(cands.is_ok());
  ASSERT_EQ(cands->size(), 3u);
  std::set<std::string> prompts;
  for (const auto& c : *cands) prompts.insert(c.calls.front().prompt);
  EXPECT_GE(prompts.size(), 2u);
  EXPECT_EQ((*cands)[2].id, "dc#2");
  // Same seed, same prompts.
  auto again = run.generators.front()->generate(inputs->in);
  ASSERT_TRUE(again.is_ok());
  for (size_t i = 0; i < 3; ++i) EXPECT_EQ((*again)[i].calls.front().prompt, (*cands)[i].calls.front().prompt);
}

TEST_F(Generators, ConfigErrorsNameTheKey) {
  auto client = sim::make_client(core::Config(json{{"llm", sim_llm()}}), ds_);
  ASSERT_TRUE(client.is_ok());
  auto err = [&](const char* gens) {
    core::Config config(json{{"generate", {{"generators", json::parse(gens)}}}});
    auto g = make_generators(config, client->get(), ex_, llm::PromptLibrary::bundled());
    EXPECT_FALSE(g.is_ok());
    return g.is_ok() ? std::string() : g.status().message();
  };
  EXPECT_NE(err(R"([{"name": "magic"}])").find("generate.generators[0].name"), std::string::npos);
  EXPECT_NE(err(R"([{"name": "dc", "sampels": 2}])").find("generate.generators[0].sampels"), std::string::npos);
  EXPECT_NE(err(R"([{"name": "dc", "samples": 0}])").find("samples"), std::string::npos);
  EXPECT_NE(err(R"([{"name": "dc"}, {"name": "dc"}])").find("generate.generators[1].label"), std::string::npos);
  EXPECT_NE(err(R"([{"name": "qp", "demos": {"count": 0}}])").find("generate.generators[0].demos.count"), std::string::npos);
  EXPECT_NE(err(R"([{"name": "qp", "demos": {"choose": "best"}}])").find("generate.generators[0].demos.choose"),
            std::string::npos);
  EXPECT_NE(err(R"([{"name": "dc", "demos": {"schema_weight": 2}}])").find("generate.generators[0].demos.schema_weight"),
            std::string::npos);
  EXPECT_NE(err(R"([{"name": "qp", "demos": {"data": "somewhere"}}])").find("generate.generators[0].demos"),
            std::string::npos);
  EXPECT_NE(err(R"([{"samples": 2}])").find("generate.generators[0].name"), std::string::npos);
}

TEST_F(Generators, QueryPlanDemosBuiltFromJsonl) {
  const fs::path jsonl = dir_->path() / "pairs.jsonl";
  {
    std::ofstream out(jsonl);
    for (const auto& q : ds_->questions)
      out << json{{"question", q.question}, {"sql", q.gold_sql}, {"db_path", ds_->db_paths.at(q.db_id).string()}}.dump()
          << "\n";
  }
  QpDemoSource src;
  src.jsonl = jsonl;
  src.count = 4;
  auto demos = build_qp_demos(src, *ex_);
  ASSERT_TRUE(demos.is_ok()) << demos.status().message();
  ASSERT_EQ(demos->size(), 4u);
  std::set<std::string> sqls;
  for (const auto& d : *demos) {
    sqls.insert(d.sql);
    EXPECT_NE(d.plan_text.find("Preparation: open the tables"), std::string::npos);
    EXPECT_NE(d.plan_text.find("Deliver"), std::string::npos);
  }
  EXPECT_EQ(sqls.size(), 4u);
  const std::string text = format_qp_demos(*demos);
  EXPECT_NE(text.find("Example 4"), std::string::npos);
  EXPECT_NE(text.find("```sql\n"), std::string::npos);

  // Through the config (the fixed choice): the built demonstrations reach the prompt.
  auto run = make(json::parse(R"([{"name": "qp", "demos": {"jsonl": ")" + jsonl.string() +
                              R"(", "count": 2, "choose": "fixed"}}])"));
  ASSERT_EQ(run.generators.size(), 1u);
  auto inputs = input_for(*ds_->find_question("1"));
  auto cands = run.generators.front()->generate(inputs->in);
  ASSERT_TRUE(cands.is_ok());
  const std::string& prompt = cands->front().calls.front().prompt;
  EXPECT_NE(prompt.find((*demos)[0].sql), std::string::npos);
  EXPECT_EQ(prompt.find("Example 3 ("), std::string::npos);

  QpDemoSource bad;
  bad.jsonl = dir_->path() / "missing.jsonl";
  EXPECT_FALSE(build_qp_demos(bad, *ex_).is_ok());
}

TEST_F(Generators, SimEndToEndOnTheMiniSet) {
  auto run = make(all_generators());
  core::Config fix_config;
  auto fixer = fix::Fixer::create(fix_config, run.client.get(), llm::PromptLibrary::bundled());
  ASSERT_TRUE(fixer.is_ok()) << fixer.status().message();
  size_t total = 0, exec_before = 0, exec_after = 0, matches = 0, questions_with_match = 0;
  for (const auto& q : ds_->questions) {
    SCOPED_TRACE(q.question_id);
    auto inputs = input_for(q);
    auto gold = ex_->run(inputs->in.db_path, q.gold_sql);
    ASSERT_TRUE(gold.ok()) << gold.error;
    bool any = false;
    size_t per_question = 0;
    for (const auto& g : run.generators) {
      auto cands = g->generate(inputs->in);
      ASSERT_TRUE(cands.is_ok()) << cands.status().message();
      for (auto& c : *cands) {
        ++total;
        ++per_question;
        EXPECT_TRUE(c.extraction_ok) << c.extraction_error;
        if (c.generation_shared_with.empty()) EXPECT_EQ(c.calls.back().provider, "sim");
        else EXPECT_TRUE(c.calls.empty());
        Candidate unfixed = c;
        fix::execute_candidate(unfixed, *ex_, inputs->in.db_path);
        exec_before += unfixed.execution.ok();
        fix::FixInput fin{&q, inputs->in.schema, inputs->in.db_path, inputs->in.index, inputs->in.retrieval, ex_, 1};
        ASSERT_TRUE(fixer->fix(c, fin).is_ok());
        exec_after += c.execution.ok();
        EXPECT_LE(c.fix_rounds.size(), 3u);
        EXPECT_EQ(c.still_failing, !c.execution.ok() || c.execution.rows == 0);
        if (c.generator == "postsql") {
          EXPECT_NE(c.reasoning.find("linked schema"), std::string::npos);
        }
        auto r = ex_->run(inputs->in.db_path, c.sql);
        if (r.ok() && db::bird_equal(r.result, gold.result)) {
          ++matches;
          any = true;
        }
      }
    }
    EXPECT_EQ(per_question, 9u);  // 1 + 2 + 1 + 1 + (2 PreSQL + 2 PostSQL)
    questions_with_match += any;
  }
  EXPECT_EQ(total, 9u * ds_->questions.size());
  EXPECT_GE(exec_after, exec_before);
  EXPECT_GT(matches, 0u);
  // With p_correct 0.6 and 9 candidates, nearly every question has a gold-equal candidate.
  EXPECT_GE(questions_with_match, ds_->questions.size() - 2);
}

// A generator's `template` key replaces its main template with another file (checked against
// the one it replaces); agent and recap, which have several, refuse it naming the key.
TEST_F(Generators, TemplateKeyPicksAnotherFileForTheMainTemplate) {
  const auto folder = dir_->path() / "template_key";
  std::filesystem::create_directories(folder);
  auto bundled = llm::PromptTemplate::load_named(llm::bundled_prompts_dir(), "generate_divide_conquer");
  ASSERT_TRUE(bundled.is_ok());
  std::ofstream(folder / "my_dc.txt") << "MY-DC\n" << bundled->text();
  std::ofstream(folder / "bad_dc.txt") << "{{question}}\n";
  auto lib = llm::PromptLibrary::open(folder);
  ASSERT_TRUE(lib.is_ok()) << lib.status().message();
  auto build = [&](const json& item) {
    core::Config config(json{{"llm", sim_llm()}, {"generate", {{"generators", json::array({item})}}}});
    auto c = sim::make_client(config, ds_);
    EXPECT_TRUE(c.is_ok());
    return make_generators(config, c->get(), ex_, *lib).status();
  };
  EXPECT_TRUE(build({{"name", "dc"}, {"template", "my_dc"}}).is_ok());
  auto used = lib->used();
  ASSERT_EQ(used.size(), 1u);
  EXPECT_EQ(used[0].name, "generate_divide_conquer");
  EXPECT_EQ(used[0].file, "my_dc");
  EXPECT_EQ(used[0].source, (folder / "my_dc.txt").string());

  Status bad = build({{"name", "dc"}, {"template", "bad_dc"}});
  EXPECT_NE(bad.message().find("config key \"generate.generators[0].template\""), std::string::npos) << bad.message();
  EXPECT_NE(bad.message().find("missing placeholder {{schema}}"), std::string::npos) << bad.message();
  Status agent = build({{"name", "agent"}, {"template", "my_dc"}});
  EXPECT_EQ(agent.code(), ErrorCode::kInvalidInput);
  EXPECT_NE(agent.message().find("generate.generators[0].template"), std::string::npos) << agent.message();
  EXPECT_NE(agent.message().find("several templates"), std::string::npos) << agent.message();
}

}  // namespace
}  // namespace nl2sql::generate
