// `nl2sql models check` and the exit codes of `nl2sql run` against misbehaving endpoints, as a
// user sees them: what the check prints per profile, exit 4 when a profile fails (check and
// run), exit 5 when questions failed.
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "support/fake_openai_server.h"
#include "support/test_env.h"

namespace nl2sql::testing {
namespace {

using llm::testing::completion_body;
using llm::testing::FakeOpenAiServer;
using llm::testing::FakeReply;

std::string write_config(const TempDir& dir, const std::string& good_url, const std::string& bad_url) {
  const auto path = dir / "models.json";
  std::ofstream(path) << R"({
    "llm": {"models": {
      "good": {"base_url": ")" << good_url << R"(", "model": "qwen3", "api_key_env": ""},
      "o3":   {"base_url": ")" << bad_url << R"(", "model": "o3", "api_key_env": ""},
      "sim":  {"provider": "sim"}},
      "default_profile": "good", "roles": {"fix": "o3"}, "cache": {"mode": "off"},
      "retry": {"max_attempts": 1}},
    "generate": {"generators": [{"name": "baseline", "samples": 1}]},
    "select": {"method": "self_consistency"}
  })";
  return path.string();
}

TEST(ModelsCheckCli, PrintsEachUsedProfileAndExitsFourWhenOneFails) {
  FakeOpenAiServer good([](const httplib::Request&, int64_t) { return FakeReply{200, completion_body("OK")}; });
  FakeOpenAiServer bad([](const httplib::Request& req, int64_t) {
    if (!nlohmann::json::parse(req.body).contains("max_tokens")) return FakeReply{200, completion_body("OK")};
    return FakeReply{400, R"({"error":{"message":"Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead.","type":"invalid_request_error","param":"max_tokens","code":"unsupported_parameter"}})"};
  });
  TempDir dir;
  const std::string config = write_config(dir, good.base_url(), bad.base_url());
  auto r = run_nl2sql("models check --config " + config);
  EXPECT_EQ(r.exit_code, 4) << r.out << r.err;
  EXPECT_NE(r.out.find("ok     good"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("FAILED o3"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("Use 'max_completion_tokens' instead"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("fields   max_tokens, model, temperature, top_p"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("sim"), std::string::npos) << "the sim profile serves no role: not checked\n" << r.out;
  EXPECT_EQ(good.requests(), 1);
  EXPECT_EQ(bad.requests(), 1);  // a refusal is not retried

  auto all = run_nl2sql("models check --all --json --config " + config);
  EXPECT_EQ(all.exit_code, 4);
  auto j = nlohmann::json::parse(all.out);
  ASSERT_EQ(j.size(), 3u);
  EXPECT_EQ(j[2]["profile"], "sim");
  EXPECT_TRUE(j[2]["simulated"].get<bool>());

  // Shaped as OpenAI's reasoning models want, the same profile passes.
  auto fixed = run_nl2sql("models check --config " + config +
                          " --set llm.models.o3.max_tokens_field=max_completion_tokens");
  EXPECT_EQ(fixed.exit_code, 0) << fixed.out << fixed.err;
}

TEST(RunCli, AFailedPreflightExitsFourAndFailedQuestionsExitFive) {
  TempDir dir;
  const auto data = build_mini_bird(dir / "mini");
  FakeOpenAiServer down([](const httplib::Request&, int64_t) {
    return FakeReply{404, R"({"error":{"message":"model \"qwen3\" not found, try pulling it first","type":"api_error"}})"};
  });
  const std::string config = write_config(dir, down.base_url(), down.base_url());
  const std::string common = " --benchmark bird --data " + data.string() + " --index-dir " + (dir / "index").string() +
                             " --progress off --questions 0-2";
  auto stopped = run_nl2sql("run --config " + config + common + " --out " + (dir / "a").string());
  EXPECT_EQ(stopped.exit_code, 4) << stopped.out << stopped.err;
  EXPECT_NE(stopped.out.find("not found, try pulling it first"), std::string::npos) << stopped.out;

  // Without the preflight every question fails at the model call: exit 5, said on stdout.
  auto failed = run_nl2sql("run --config " + config + common + " --out " + (dir / "b").string() +
                           " --set llm.preflight=false --set llm.stop_after_repeated_errors=0");
  EXPECT_EQ(failed.exit_code, 5) << failed.out << failed.err;
  EXPECT_NE(failed.out.find("3 of 3 questions FAILED"), std::string::npos) << failed.out;
}

// Record the answers of questions 0-1 from a real (fake) endpoint, then replay 0-3 with the
// endpoint gone: the calls of questions 2-3 were never recorded, so the run stops loudly
// (exit 4) instead of scoring them without their model's answers.
TEST(RunCli, AReplayMissStopsTheRunWithExitCodeFour) {
  TempDir dir;
  const auto data = build_mini_bird(dir / "mini");
  std::string url;
  const std::string common = " --benchmark bird --data " + data.string() + " --index-dir " + (dir / "index").string() +
                             " --progress off --set llm.cache.path=" + (dir / "cache.sqlite").string();
  {
    FakeOpenAiServer up([](const httplib::Request&, int64_t) {
      return FakeReply{200, completion_body("```sql\nSELECT COUNT(*) FROM school\n```")};
    });
    url = up.base_url();
    const std::string config = write_config(dir, url, url);
    auto record = run_nl2sql("run --config " + config + common + " --questions 0-1 --set llm.cache.mode=read-write --out " +
                             (dir / "recorded").string());
    ASSERT_EQ(record.exit_code, 0) << record.out << record.err;
    EXPECT_GT(up.requests(), 0);
  }
  const std::string config = write_config(dir, url, url);  // nothing listens there any more
  auto same = run_nl2sql("run --config " + config + common + " --questions 0-1 --set llm.cache.mode=replay --out " +
                         (dir / "same").string());
  EXPECT_EQ(same.exit_code, 0) << same.out << same.err;  // every call recorded: replays cleanly
  auto miss = run_nl2sql("run --config " + config + common + " --questions 0-3 --set llm.cache.mode=replay --out " +
                         (dir / "miss").string());
  EXPECT_EQ(miss.exit_code, 4) << miss.out << miss.err;
  EXPECT_NE(miss.out.find("stopped early"), std::string::npos) << miss.out;
  EXPECT_NE(miss.out.find("never recorded"), std::string::npos) << miss.out;
}

}  // namespace
}  // namespace nl2sql::testing

namespace nl2sql::testing {
namespace {

// A full disk, made deterministic with a file-size limit (writes past it fail with EFBIG, as
// on a full filesystem): the run says what it could not record and exits 1; after "freeing
// space" the same command redoes exactly those questions and nothing finished is lost.
TEST(RunCli, WritesRefusedByAFullDiskAreSaidAndRedoneByTheRerun) {
  TempDir dir;
  const auto data = build_mini_bird(dir / "mini");
  const auto config = dir / "sim.json";
  std::ofstream(config) << R"({"llm": {"models": {"sim": {"provider": "sim"}}, "default_profile": "sim",
    "cache": {"mode": "off"}}, "generate": {"generators": [{"name": "baseline", "samples": 1}]},
    "fix": {"enabled": false}, "select": {"method": "self_consistency"},
    "run": {"curve_points": [1], "threads": 1}})";
  const std::string args = "run --config " + config.string() + " --benchmark bird --data " + data.string() +
                           " --index-dir " + (dir / "index").string() + " --progress off --out " +
                           (dir / "run").string();
  // The value index first, without a limit: it is a cache outside the run folder.
  ASSERT_EQ(run_nl2sql(args + "-warm").exit_code, 0);
  const std::string limited = "sh -c \"trap '' XFSZ; ulimit -f 300; exec '" + std::string(NL2SQL_BINARY) + "' " +
                              args + "\" >'" + (dir / "out.txt").string() + "' 2>&1";
  int rc = std::system(limited.c_str());
  ASSERT_TRUE(WIFEXITED(rc));
  EXPECT_EQ(WEXITSTATUS(rc), 1);
  std::ifstream in(dir / "out.txt");
  std::stringstream out;
  out << in.rdbuf();
  EXPECT_NE(out.str().find("could not be RECORDED"), std::string::npos) << out.str();

  auto rerun = run_nl2sql(args);
  EXPECT_EQ(rerun.exit_code, 0) << rerun.out << rerun.err;
  EXPECT_NE(rerun.out.find("(21/21 questions finished"), std::string::npos) << rerun.out;
}

}  // namespace
}  // namespace nl2sql::testing
