// `--prompts DIR` as a user runs it: `nl2sql run` sends the folder's templates to the endpoint
// (a logging fake server sees them) and its manifest names them; `nl2sql config show` lists the
// effective templates; a template whose placeholders do not fit stops the command with exit 2,
// naming file, line and placeholder, before any request.
#include <gtest/gtest.h>

#include <fstream>
#include <mutex>

#include "nl2sql/llm/prompt_template.h"
#include "support/fake_openai_server.h"
#include "support/test_env.h"

namespace nl2sql::testing {
namespace {

namespace fs = std::filesystem;
using llm::testing::completion_body;
using llm::testing::FakeOpenAiServer;
using llm::testing::FakeReply;

constexpr const char* kMarker = "CLI-PROMPTS-FOLDER-MARKER";

std::string write_config(const TempDir& dir, const std::string& url) {
  const auto path = dir / "c.json";
  std::ofstream(path) << R"({
    "llm": {"models": {"fake": {"base_url": ")" << url << R"(", "model": "fake", "api_key_env": ""}},
            "default_profile": "fake", "cache": {"mode": "off"}, "retry": {"max_attempts": 1}},
    "generate": {"generators": [{"name": "baseline", "samples": 1}]},
    "fix": {"enabled": false},
    "select": {"method": "self_consistency"}
  })";
  return path.string();
}

std::string bundled(const std::string& name) {
  return llm::PromptTemplate::load_named(llm::bundled_prompts_dir(), name).value().text();
}

TEST(PromptsCli, RunSendsTheFolderTemplatesAndItsManifestNamesThem) {
  TempDir dir;
  const auto data = build_mini_bird(dir / "mini");
  std::mutex mu;
  std::vector<std::string> bodies;
  FakeOpenAiServer server([&](const httplib::Request& req, int64_t) {
    std::lock_guard lock(mu);
    bodies.push_back(req.body);
    return FakeReply{200, completion_body("```sql\nSELECT 1\n```")};
  });
  const fs::path prompts = dir / "prompts";
  fs::create_directories(prompts);
  std::ofstream(prompts / "generate_baseline.txt") << kMarker << "\n" << bundled("generate_baseline");
  const std::string config = write_config(dir, server.base_url());
  const std::string common = " --benchmark bird --data " + data.string() + " --index-dir " + (dir / "index").string() +
                             " --progress off --questions 0-1";
  auto r = run_nl2sql("run --config " + config + " --prompts " + prompts.string() + common + " --out " +
                      (dir / "run").string());
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  size_t with_marker = 0;
  for (const auto& b : bodies) with_marker += b.find(kMarker) != std::string::npos;
  EXPECT_EQ(with_marker, 2u);  // one generation per question, from the folder's template

  const auto manifest = read_json_file(dir / "run" / "manifest.json");
  size_t named = 0;
  for (const auto& t : manifest["templates"]) {
    if (t["name"] != "generate_baseline") {
      EXPECT_EQ(t["source"], "bundled") << t.dump();  // the rest stay bundled
      continue;
    }
    ++named;
    EXPECT_EQ(t["source"], (prompts / "generate_baseline.txt").string());
  }
  EXPECT_EQ(named, 1u) << manifest.dump();

  // config show: the resolved config on stdout as before, the effective templates with --templates.
  auto show = run_nl2sql("config show --config " + config + " --prompts " + prompts.string() + " --templates");
  ASSERT_EQ(show.exit_code, 0) << show.err;
  EXPECT_NE(show.out.find((prompts / "generate_baseline.txt").string()), std::string::npos) << show.out;
  EXPECT_NE(show.out.find("fix_sql"), std::string::npos) << show.out;  // the bundled ones too
  auto plain = run_nl2sql("config show --config " + config + " --prompts " + prompts.string());
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  EXPECT_EQ(nlohmann::json::parse(plain.out)["prompts"]["dir"], prompts.string());
  EXPECT_NE(plain.err.find("generate_baseline"), std::string::npos) << plain.err;

  // A placeholder the bundled template does not have: exit 2 before any request.
  std::ofstream(prompts / "generate_baseline.txt") << "{{question}} {{evidence}}\n{{schema}} {{dialect}}\n";
  const size_t before = bodies.size();
  auto bad = run_nl2sql("run --config " + config + " --prompts " + prompts.string() + common + " --out " +
                        (dir / "bad").string());
  EXPECT_EQ(bad.exit_code, 2) << bad.out << bad.err;
  EXPECT_NE(bad.err.find((prompts / "generate_baseline.txt").string() + ":2: unknown placeholder {{dialect}}"),
            std::string::npos)
      << bad.err;
  EXPECT_EQ(bodies.size(), before);
  auto bad_show = run_nl2sql("config show --config " + config + " --prompts " + prompts.string() + " --templates");
  EXPECT_EQ(bad_show.exit_code, 2);
  EXPECT_NE(bad_show.err.find("{{dialect}}"), std::string::npos) << bad_show.err;
}

}  // namespace
}  // namespace nl2sql::testing
