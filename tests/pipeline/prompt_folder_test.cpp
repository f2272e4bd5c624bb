// A run with a prompts folder (config key prompts.dir) over real HTTP: the fake server sees the
// overridden texts and the files `template` keys name, the manifest names every template used
// with its source and hash, an unchanged folder resumes and a changed template is refused like
// a config change.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <fstream>
#include <map>
#include <mutex>
#include <sstream>

#include "nl2sql/core/config.h"
#include "nl2sql/llm/prompt_template.h"
#include "nl2sql/pipeline/pipeline.h"
#include "nl2sql/run/run_data.h"
#include "support/fake_openai_server.h"
#include "support/mini_run.h"
#include "support/test_env.h"

namespace nl2sql::pipeline {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using llm::testing::FakeOpenAiServer;
using llm::testing::FakeReply;

constexpr const char* kGenMarker = "PROMPT-FOLDER-GENERATE-MARKER";
constexpr const char* kFixMarker = "PROMPT-FOLDER-FIX-MARKER";
constexpr const char* kPairMarker = "PROMPT-FOLDER-PAIRWISE-MARKER";
constexpr const char* kTerseMarker = "PROMPT-FOLDER-TERSE-MARKER";

std::string bundled_text(const std::string& name) {
  auto t = llm::PromptTemplate::load_named(llm::bundled_prompts_dir(), name);
  EXPECT_TRUE(t.is_ok()) << t.status().message();
  return t.is_ok() ? t->text() : "";
}

void write(const fs::path& p, const std::string& text) { std::ofstream(p, std::ios::binary) << text; }

// Every user message the server received, in order.
class RecordingServer {
 public:
  RecordingServer()
      : server_([this](const httplib::Request& req, int64_t) {
          std::string prompt;
          auto body = json::parse(req.body, nullptr, false);
          if (!body.is_discarded())
            for (const auto& m : body.value("messages", json::array())) prompt += m.value("content", "") + "\n";
          std::string sql;
          {
            std::lock_guard lock(mu_);
            prompts_.push_back(prompt);
            // The first answer to a prompt fails to execute (so the fixer runs), the second
            // (the question's other sample) does not; the fix differs from it, so the tournament
            // has two clusters to compare.
            if (prompt.find(kFixMarker) != std::string::npos) sql = "SELECT count(*) FROM school";
            else sql = (seen_[prompt]++ == 0) ? "SELECT no_such_column FROM school" : "SELECT name FROM district";
          }
          return FakeReply(200, llm::testing::completion_body("Answer: A\n```json\n{\"winner\": \"A\"}\n```\n```sql\n" +
                                                              sql + "\n```"));
        }) {}
  std::string base_url() const { return server_.base_url(); }
  size_t count(const std::string& marker) const {
    std::lock_guard lock(mu_);
    size_t n = 0;
    for (const auto& p : prompts_) n += p.find(marker) != std::string::npos;
    return n;
  }
  size_t requests() const {
    std::lock_guard lock(mu_);
    return prompts_.size();
  }

 private:
  mutable std::mutex mu_;
  std::vector<std::string> prompts_;  // guarded by mu_
  std::map<std::string, int> seen_;   // guarded by mu_: answers per prompt
  FakeOpenAiServer server_;
};

class PromptFolderRun : public ::testing::Test {
 protected:
  void SetUp() override {
    data_ = testing::build_mini_bird(dir_ / "mini");
    fs::create_directories(prompts_);
    write(prompts_ / "generate_baseline.txt", std::string(kGenMarker) + "\n" + bundled_text("generate_baseline"));
    write(prompts_ / "my_fix.txt", std::string(kFixMarker) + "\n" + bundled_text("fix_sql"));
    write(prompts_ / "terse_baseline.txt", std::string(kTerseMarker) + "\n" + bundled_text("generate_baseline"));
    write(prompts_ / "my_pairwise.txt", std::string(kPairMarker) + "\n" + bundled_text("select_pairwise"));
  }
  RunOptions options(const std::string& base_url, const fs::path& out) {
    core::Config config(json::parse(R"({
      "llm": {"models": {"fake": {"base_url": "", "model": "fake-coder", "api_key_env": ""}},
              "default_profile": "fake", "cache": {"mode": "off"},
              "retry": {"max_attempts": 1, "base_delay_s": 0.01, "max_delay_s": 0.01}},
      "generate": {"generators": [{"name": "baseline", "samples": 2},
                                  {"name": "baseline", "label": "terse", "template": "terse_baseline"}]},
      "fix": {"enabled": true, "max_rounds": 1, "template": "my_fix"},
      "select": {"method": "tournament", "tournament": {"template": "my_pairwise.txt"}},
      "run": {"selectors": ["tournament"], "threads": 2}
    })"));
    config.set("llm.models.fake.base_url", base_url);
    config.set("prompts.dir", prompts_.string());
    auto o = testing::mini_run_options(config, data_, out, dir_ / "index");
    o.filter.ranges = "0-3";
    return o;
  }
  testing::TempDir dir_;
  fs::path data_;
  fs::path prompts_ = dir_ / "my_prompts";
};

TEST_F(PromptFolderRun, SendsTheChangedPromptsAndTheManifestNamesThem) {
  RecordingServer server;
  const fs::path out = dir_ / "run";
  auto summary = run(options(server.base_url(), out));
  ASSERT_TRUE(summary.is_ok()) << summary.status().message();
  EXPECT_EQ(summary->finished, 4u);
  EXPECT_EQ(summary->failed, 0u);
  EXPECT_EQ(server.count(kGenMarker), 8u);  // 4 questions × 2 samples, every one from the override
  EXPECT_EQ(server.count(kTerseMarker), 4u);  // the second generator's `template`
  EXPECT_GT(server.count(kFixMarker), 0u);
  EXPECT_GT(server.count(kPairMarker), 0u);

  auto data = run::load_run(out);
  ASSERT_TRUE(data.is_ok()) << data.status().message();
  std::map<std::string, json> by_name;  // by the name of the template a file stands in for, and the file
  for (const auto& t : data->manifest["templates"])
    by_name[t["name"].get<std::string>() + (t.contains("file") ? " as " + t["file"].get<std::string>() : "")] = t;
  ASSERT_EQ(by_name.size(), 4u) << data->manifest["templates"].dump();
  EXPECT_EQ(by_name["generate_baseline as terse_baseline"]["source"], (prompts_ / "terse_baseline.txt").string());
  EXPECT_EQ(by_name["generate_baseline"]["source"], (prompts_ / "generate_baseline.txt").string());
  EXPECT_FALSE(by_name["generate_baseline"].contains("file"));
  EXPECT_EQ(by_name["fix_sql as my_fix"]["source"], (prompts_ / "my_fix.txt").string());
  EXPECT_EQ(by_name["select_pairwise as my_pairwise"]["source"], (prompts_ / "my_pairwise.txt").string());
  auto gen = llm::PromptTemplate::load(prompts_ / "generate_baseline.txt");
  ASSERT_TRUE(gen.is_ok());
  EXPECT_EQ(by_name["generate_baseline"]["hash"], gen->hash());

  // The same templates resume, even from another folder (where the folder is is not part of
  // the config hash; the templates' texts are): nothing is asked again.
  const size_t before = server.requests();
  fs::copy(prompts_, dir_ / "moved");
  prompts_ = dir_ / "moved";
  auto again = run(options(server.base_url(), out));
  ASSERT_TRUE(again.is_ok()) << again.status().message();
  EXPECT_EQ(again->resumed, 4u);
  EXPECT_EQ(server.requests(), before);

  // A changed template is refused like a changed config, naming it.
  write(prompts_ / "generate_baseline.txt", std::string(kGenMarker) + " (edited)\n" + bundled_text("generate_baseline"));
  auto changed = run(options(server.base_url(), out));
  ASSERT_FALSE(changed.is_ok());
  EXPECT_EQ(changed.status().code(), ErrorCode::kInvalidInput);
  const std::string msg = changed.status().message();
  EXPECT_NE(msg.find("cannot resume"), std::string::npos) << msg;
  EXPECT_NE(msg.find("prompts: generate_baseline"), std::string::npos) << msg;
  EXPECT_EQ(msg.find("fix_sql"), std::string::npos) << msg;  // unchanged ones are not named
}

TEST_F(PromptFolderRun, ABadTemplateStopsTheRunBeforeAnyRequest) {
  RecordingServer server;
  write(prompts_ / "generate_baseline.txt", "{{question}}\n{{schema}}\n{{evidence}} {{hint}}\n");
  auto summary = run(options(server.base_url(), dir_ / "run"));
  ASSERT_FALSE(summary.is_ok());
  EXPECT_NE(summary.status().message().find((prompts_ / "generate_baseline.txt").string() +
                                            ":3: unknown placeholder {{hint}}"),
            std::string::npos)
      << summary.status().message();
  EXPECT_EQ(server.requests(), 0u);

  // A `template` key's file is checked against the template it replaces, naming the key.
  write(prompts_ / "generate_baseline.txt", bundled_text("generate_baseline"));
  write(prompts_ / "my_fix.txt", "Fix {{sql}}\n");
  auto bad_key = run(options(server.base_url(), dir_ / "run2"));
  ASSERT_FALSE(bad_key.is_ok());
  EXPECT_NE(bad_key.status().message().find("config key \"fix.template\""), std::string::npos)
      << bad_key.status().message();
  EXPECT_NE(bad_key.status().message().find("my_fix.txt: missing placeholder {{question}}"), std::string::npos)
      << bad_key.status().message();
}

// A manifest written before templates were recorded holds every bundled template's hash by
// name: unchanged templates resume, a changed one is named.
TEST(PromptFolderManifest, AnOldManifestIsComparedByTemplateName) {
  const json old = {{"prompt_hashes", {{"generate_baseline", "aaa"}, {"fix_sql", "bbb"}, {"select_rank", "ccc"}}}};
  json now = {{"templates", json::array({json{{"name", "generate_baseline"}, {"source", "bundled"}, {"hash", "aaa"}},
                                         json{{"name", "fix_sql"}, {"source", "bundled"}, {"hash", "bbb"}}})}};
  EXPECT_TRUE(manifest_differences(old, now).empty());
  now["templates"][1]["hash"] = "changed";
  now["templates"][1]["source"] = "mine/fix_sql.txt";
  auto diffs = manifest_differences(old, now);
  ASSERT_EQ(diffs.size(), 1u);
  EXPECT_NE(diffs[0].find("prompts: fix_sql (was bundled, now mine/fix_sql.txt)"), std::string::npos) << diffs[0];

  // Between new manifests: added, removed and changed templates are named.
  json later = now;
  later["templates"][0]["hash"] = "other";
  later["templates"].push_back(json{{"name", "fix_sql"}, {"file", "terse"}, {"source", "bundled"}, {"hash", "t"}});
  diffs = manifest_differences(now, later);
  ASSERT_EQ(diffs.size(), 1u);
  EXPECT_NE(diffs[0].find("generate_baseline"), std::string::npos) << diffs[0];
  EXPECT_NE(diffs[0].find("fix_sql as terse (new)"), std::string::npos) << diffs[0];
  EXPECT_TRUE(manifest_differences(later, later).empty());
}

}  // namespace
}  // namespace nl2sql::pipeline
