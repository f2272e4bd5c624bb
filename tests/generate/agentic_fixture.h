// Shared fixture of the agentic generator tests (agent_test, recap_test): the bundled mini BIRD
// set loaded once per suite, a fake-server model profile, generators built from a config
// section, and scripted conversations (the replies in order: an agentic generator's calls for
// one question are sequential). One template instance per suite, so each has its own data.
#pragma once

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "support/fake_openai_server.h"
#include "nl2sql/core/config.h"
#include "nl2sql/data/dataset.h"
#include "nl2sql/db/executor.h"
#include "nl2sql/generate/generator.h"
#include "nl2sql/llm/client.h"
#include "nl2sql/llm/prompt_template.h"
#include "nl2sql/sim/simulator.h"
#include "support/test_env.h"

namespace nl2sql::generate::agentic_testing {

// Answers the i-th request with replies[i] (the last one repeats), with the given usage.
inline llm::testing::FakeOpenAiServer::Script scripted(std::vector<std::string> replies,
                                                       int prompt_tokens = 100,
                                                       int completion_tokens = 20) {
  return [replies = std::move(replies), prompt_tokens, completion_tokens](const httplib::Request&,
                                                                         int64_t seq) {
    const std::string& r = replies[std::min(static_cast<size_t>(seq), replies.size() - 1)];
    return llm::testing::FakeReply(
        200, llm::testing::completion_body(r, "stop", prompt_tokens, completion_tokens));
  };
}

// `Generator::kName` is the generator's name and its config section ("agent", "recap").
template <typename Generator>
class AgenticFixture : public ::testing::Test {
 protected:
  using json = nlohmann::json;

  static void SetUpTestSuite() {
    dir_ = new nl2sql::testing::TempDir();
    root_ = nl2sql::testing::build_mini_bird(dir_->path() / "mini");
    data::DatasetSpec spec;
    spec.data_dir = root_;
    auto ds = data::load_dataset(spec);
    ASSERT_TRUE(ds.is_ok()) << ds.status().message();
    ds_ = new data::Dataset(std::move(*ds));
    ex_ = new db::Executor();
  }
  static void TearDownTestSuite() {
    delete ex_;
    delete ds_;
    delete dir_;
  }

  struct Run {
    std::unique_ptr<llm::Client> client;
    std::vector<std::unique_ptr<generate::Generator>> generators;
  };
  // Generators of `generators` (default: just this one) with `options` as its config section.
  static Run make(json llm, json options, json generators = json::array()) {
    if (generators.empty()) generators = json::array({{{"name", Generator::kName}}});
    core::Config config(
        json{{"llm", llm}, {Generator::kName, options}, {"generate", {{"generators", generators}}}});
    Run r;
    auto c = sim::make_client(config, ds_);
    EXPECT_TRUE(c.is_ok()) << c.status().message();
    if (!c) return r;
    r.client = std::move(*c);
    auto g = make_generators(config, r.client.get(), ex_, llm::PromptLibrary::bundled());
    EXPECT_TRUE(g.is_ok()) << g.status().message();
    if (g) r.generators = std::move(*g);
    return r;
  }
  static json fake_llm(const std::string& url) {
    return json{{"models", {{"fake", {{"base_url", url}, {"model", "fake-coder"}}}}},
                {"default_profile", "fake"},
                {"cache", {{"mode", "off"}}},
                {"retry", {{"max_attempts", 1}, {"base_delay_s", 0.01}, {"max_delay_s", 0.01}}}};
  }
  static GenerationInput input_for(const std::string& id) {
    const auto* q = ds_->find_question(id);
    EXPECT_NE(q, nullptr);
    GenerationInput in;
    in.question = q;
    in.schema = &ds_->schemas.at(q->db_id);
    in.db_path = ds_->db_paths.at(q->db_id);
    in.seed = 7;
    return in;
  }
  // One candidate for question "0" of the mini set.
  static Candidate run_one(llm::testing::FakeOpenAiServer& server, json options = json::object()) {
    auto run = make(fake_llm(server.base_url()), options);
    EXPECT_EQ(run.generators.size(), 1u);
    auto cands = run.generators.front()->generate(input_for("0"));
    EXPECT_TRUE(cands.is_ok()) << cands.status().message();
    EXPECT_EQ(cands->size(), 1u);
    return cands->front();
  }
  static std::vector<std::string> stages(const Candidate& c) {
    std::vector<std::string> out;
    for (const auto& call : c.calls) out.push_back(call.stage);
    return out;
  }

  inline static nl2sql::testing::TempDir* dir_ = nullptr;
  inline static std::filesystem::path root_;
  inline static data::Dataset* ds_ = nullptr;
  inline static db::Executor* ex_ = nullptr;
};

}  // namespace nl2sql::generate::agentic_testing
