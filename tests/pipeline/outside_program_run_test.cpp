// Outside programs as generators and selectors (generate.generators[].name = "command",
// select.external.<label>) through a whole run over the mini set: their candidates and picks in
// the records, and every fault — a crash, a hang past timeout_s, a line that is not JSON, an
// answer for another question, an {"error"} answer — failing that question alone, with the
// program's stderr in the record, the run going on (exit 5's count), and a rerun finishing it.
#include <gtest/gtest.h>

#include <signal.h>

#include <atomic>
#include <cerrno>
#include <fstream>
#include <thread>

#include "nl2sql/core/config.h"
#include "nl2sql/core/config_schema.h"
#include "nl2sql/data/dataset.h"
#include "nl2sql/pipeline/pipeline.h"
#include "nl2sql/run/run_data.h"
#include "support/mini_run.h"
#include "support/test_env.h"

namespace nl2sql::pipeline {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// Answers every question with two queries; for question `target`, misbehaves as `mode` says
// until the file `healed` exists.
constexpr const char* kGenerator = R"PY(
import json, os, sys, time
mode, target, healed = sys.argv[1], sys.argv[2], sys.argv[3]
for line in sys.stdin:
    req = json.loads(line)
    qid = req["question_id"]
    assert req["kind"] == "generate" and req["schema"] and req["db_path"], req
    for k in ("protocol", "question", "evidence", "db_id", "db_uri", "retrieved_values", "filtered_columns",
              "samples", "temperature", "seed", "base_url", "api_key", "model"):
        assert k in req, k
    assert req["protocol"] == "nl2sql.outside.v1" and req["samples"] == 1 and req["temperature"] is None
    assert "CREATE TABLE" in req["schema"] and req["db_uri"].endswith("?mode=ro")
    if qid == target and not os.path.exists(healed):
        print("about to fail on", qid, file=sys.stderr, flush=True)
        if mode == "crash":
            raise SystemExit(7)
        if mode == "hang":
            time.sleep(600)
        if mode == "hang_pid":
            with open(healed + ".pid", "w") as f:
                f.write(str(os.getpid()))
            time.sleep(600)
        if mode == "garbage":
            print("this is not json", flush=True)
            continue
        if mode == "wrong_id":
            print(json.dumps({"question_id": qid + "-other", "candidates": []}), flush=True)
            continue
        if mode == "error":
            print(json.dumps({"question_id": qid, "error": "cannot do this one"}), flush=True)
            continue
    out = {"question_id": qid, "candidates": [{"sql": "SELECT 1", "reasoning": "one"},
                                              {"sql": "SELECT 2"}]}
    print(json.dumps(out), flush=True)
)PY";

// Picks the last candidate, and says how many it saw with a result.
constexpr const char* kSelector = R"PY(
import json, sys
for line in sys.stdin:
    req = json.loads(line)
    cands = req["candidates"]
    seen = sum(1 for c in cands if c["result"]["error"] is None)
    print(json.dumps({"question_id": req["question_id"], "chosen": cands[-1]["id"],
                      "explanation": {"executed": seen}}), flush=True)
)PY";

class OutsideProgramRun : public ::testing::Test {
 protected:
  void SetUp() override {
    auto ds = testing::load_mini_bird(dir_ / "mini");
    ASSERT_TRUE(ds.is_ok()) << ds.status().message();
    data_ = dir_ / "mini";
    ds_ = std::move(*ds);
    std::ofstream(dir_ / "gen.py") << kGenerator;
    std::ofstream(dir_ / "sel.py") << kSelector;
  }
  core::Config config(const std::string& mode, const std::string& target, double timeout_s = 60) const {
    core::Config c(json::parse(R"({
      "llm": {"models": {"sim": {"provider": "sim"}}, "default_profile": "sim", "cache": {"mode": "off"}},
      "fix": {"enabled": false}, "run": {"curve_points": [1, 2], "selectors": ["self_consistency"]}
    })"));
    c.set("generate.generators",
          json::array({{{"name", "command"},
                        {"label", "py"},
                        {"workers", 2},
                        {"timeout_s", timeout_s},
                        {"argv", {"python3", (dir_ / "gen.py").string(), mode, target, (dir_ / "healed").string()}}}}));
    return c;
  }
  RunOptions options(const core::Config& c, const fs::path& out) const {
    return testing::mini_run_options(c, data_, out, dir_ / "index");
  }
  // Runs with `mode` misbehaving on the second question, then heals the program and reruns.
  void fails_one_question_then_reruns(const std::string& mode, double timeout_s, const std::string& said) {
    const std::string target = ds_.questions[1].question_id;
    const fs::path out = dir_ / ("run-" + mode);
    auto first = run(options(config(mode, target, timeout_s), out));
    ASSERT_TRUE(first.is_ok()) << first.status().message();
    EXPECT_EQ(first->failed, 1u);
    auto data = run::load_run(out);
    ASSERT_TRUE(data.is_ok()) << data.status().message();
    size_t ok = 0;
    for (const auto& r : data->records) {
      if (r.question_id != target) {
        ok += r.ok;
        continue;
      }
      EXPECT_FALSE(r.ok);
      EXPECT_NE(r.error.find("generate stage"), std::string::npos) << r.error;
      EXPECT_NE(r.error.find(said), std::string::npos) << r.error;
    }
    EXPECT_EQ(ok, ds_.questions.size() - 1);
    std::ofstream(dir_ / "healed") << "";
    auto second = run(options(config(mode, target, timeout_s), out));
    ASSERT_TRUE(second.is_ok()) << second.status().message();
    EXPECT_EQ(second->failed, 0u);
    data = run::load_run(out);
    ASSERT_TRUE(data.is_ok());
    for (const auto& r : data->records) EXPECT_TRUE(r.ok) << r.question_id << ": " << r.error;
    fs::remove(dir_ / "healed");
  }
  testing::TempDir dir_;
  fs::path data_;
  data::Dataset ds_;
};

TEST_F(OutsideProgramRun, AProgramsCandidatesGoThroughTheRun) {
  const fs::path out = dir_ / "run";
  auto summary = run(options(config("none", "-"), out));
  ASSERT_TRUE(summary.is_ok()) << summary.status().message();
  EXPECT_EQ(summary->failed, 0u);
  auto data = run::load_run(out);
  ASSERT_TRUE(data.is_ok()) << data.status().message();
  ASSERT_EQ(data->records.size(), ds_.questions.size());
  const auto& rec = data->records[0];
  ASSERT_EQ(rec.candidates.size(), 2u);
  EXPECT_EQ(rec.candidates[0].id, "py#0");
  EXPECT_EQ(rec.candidates[0].sql, "SELECT 1");
  EXPECT_EQ(rec.candidates[0].trace["reasoning"], "one");
  EXPECT_EQ(rec.candidates[1].id, "py#1");
}

TEST_F(OutsideProgramRun, ACrashFailsThatQuestionWithTheStderrAndARerunFinishesIt) {
  fails_one_question_then_reruns("crash", 60, "about to fail on");
}

TEST_F(OutsideProgramRun, AHangPastTheTimeoutFailsThatQuestion) {
  // 5 s: long enough for the other questions' answers (and a restarted interpreter) on a loaded machine.
  fails_one_question_then_reruns("hang", 5, "no answer within timeout_s");
}

TEST_F(OutsideProgramRun, ALineThatIsNotJsonFailsThatQuestion) {
  fails_one_question_then_reruns("garbage", 60, "not a JSON object");
}

TEST_F(OutsideProgramRun, AnAnswerForAnotherQuestionFailsThatQuestion) {
  fails_one_question_then_reruns("wrong_id", 60, "not for this question");
}

TEST_F(OutsideProgramRun, AnErrorAnswerFailsThatQuestion) {
  fails_one_question_then_reruns("error", 60, "cannot do this one");
}

TEST_F(OutsideProgramRun, StoppingTheRunKillsAProgramThatIsWorking) {
  const std::string target = ds_.questions[0].question_id;
  const fs::path pid_file = dir_ / "healed.pid";
  std::atomic<bool> cancel{false};
  RunOptions o = options(config("hang_pid", target, 600), dir_ / "run-stop");
  o.cancel = &cancel;
  Result<RunSummary> summary = internal_error("not run");
  std::thread runner([&] { summary = run(o); });
  // The program says when it is stuck in the question (its pid); then Ctrl-C's flag is set.
  for (int i = 0; i < 6000 && !fs::exists(pid_file); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  std::string pid_text;
  for (int i = 0; i < 500 && pid_text.empty(); ++i) {
    std::ifstream(pid_file) >> pid_text;
    if (pid_text.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  cancel = true;
  runner.join();
  ASSERT_FALSE(pid_text.empty()) << "the program never reached the question";
  ASSERT_TRUE(summary.is_ok()) << summary.status().message();
  EXPECT_TRUE(summary->cancelled);
  // Killed and reaped: no such process any more.
  EXPECT_EQ(::kill(static_cast<pid_t>(std::stol(pid_text)), 0), -1);
  EXPECT_EQ(errno, ESRCH);
}

TEST_F(OutsideProgramRun, AnOutsideSelectorChoosesByIdAndIsUsableByLabel) {
  core::Config c = config("none", "-");
  c.set("select.external", json{{"last", {{"argv", {"python3", (dir_ / "sel.py").string()}}}}});
  c.set("select.method", "last");
  const fs::path out = dir_ / "run-sel";
  auto summary = run(options(c, out));
  ASSERT_TRUE(summary.is_ok()) << summary.status().message();
  EXPECT_EQ(summary->failed, 0u);
  auto data = run::load_run(out);
  ASSERT_TRUE(data.is_ok()) << data.status().message();
  for (const auto& r : data->records) {
    ASSERT_TRUE(r.selections.count("last")) << r.question_id;
    const auto& s = r.selections.at("last");
    EXPECT_EQ(s.candidate_id, "py#1");
    EXPECT_EQ(s.sql, "SELECT 2");
    EXPECT_EQ(s.explanation["explanation"]["executed"], 2);
    EXPECT_TRUE(r.selections.count("self_consistency"));
  }
}

TEST_F(OutsideProgramRun, ASelectorThatDiesFailsThatQuestionsSelectStage) {
  const std::string target = ds_.questions[2].question_id;
  std::ofstream(dir_ / "dying_sel.py") << "import json, sys\n"
                                          "for line in sys.stdin:\n"
                                          "    req = json.loads(line)\n"
                                          "    if req['question_id'] == '" + target + "':\n"
                                          "        sys.exit('selector gave up on ' + req['question_id'])\n"
                                          "    print(json.dumps({'question_id': req['question_id'], 'chosen': req['candidates'][0]['id']}), flush=True)\n";
  core::Config c = config("none", "-");
  c.set("select.external", json{{"first", {{"argv", {"python3", (dir_ / "dying_sel.py").string()}}}}});
  c.set("select.method", "first");
  const fs::path out = dir_ / "run-dying-sel";
  auto summary = run(options(c, out));
  ASSERT_TRUE(summary.is_ok()) << summary.status().message();
  EXPECT_EQ(summary->failed, 1u);
  auto data = run::load_run(out);
  ASSERT_TRUE(data.is_ok());
  for (const auto& r : data->records) {
    if (r.question_id != target) {
      EXPECT_TRUE(r.ok) << r.error;
      EXPECT_EQ(r.selections.at("first").candidate_id, "py#0");
      continue;
    }
    EXPECT_FALSE(r.ok);
    EXPECT_NE(r.error.find("select stage"), std::string::npos) << r.error;
    EXPECT_NE(r.error.find("selector gave up on " + target), std::string::npos) << r.error;
  }
}

TEST_F(OutsideProgramRun, ABadEntryIsRefusedNamingTheKey) {
  core::Config c = config("none", "-");
  c.set("generate.generators", json::array({{{"name", "command"}, {"argv", json::array()}}}));
  auto r = run(options(c, dir_ / "bad"));
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("generate.generators[0].argv"), std::string::npos) << r.status().message();
  c = config("none", "-");
  c.set("select.external", json{{"tournament", {{"argv", {"true"}}}}});
  c.set("select.method", "tournament");
  r = run(options(c, dir_ / "bad2"));
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("built-in selector"), std::string::npos) << r.status().message();
  // The schema no longer lists the methods (labels are the user's): a misspelt select.method is
  // still refused, even when run.selectors does not use it.
  c = config("none", "-");
  c.set("select.method", "tournamnt");
  c.set("run.selectors", json::array({"self_consistency"}));
  c.set("run.primary_selector", "self_consistency");
  r = run(options(c, dir_ / "bad3"));
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("config key select.method: unknown selector method \"tournamnt\""),
            std::string::npos)
      << r.status().message();
}

TEST(OutsideProgramConfig, TheExampleConfigValidatesAgainstTheSchema) {
  const fs::path root(NL2SQL_SOURCE_DIR);
  auto schema = core::ConfigSchema::load_dir(root / "configs" / "schema");
  ASSERT_TRUE(schema.is_ok()) << schema.status().message();
  auto config = core::Config::load(root / "examples" / "outside_methods.json");
  ASSERT_TRUE(config.is_ok()) << config.status().message();
  auto errors = schema->validate(config->json());
  EXPECT_TRUE(errors.empty()) << errors.front();
  // A key the entry does not know is named.
  errors = schema->validate(json::parse(R"({"select": {"external": {"x": {"argv": ["a"], "worker": 2}}}})"));
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_NE(errors[0].find("select.external.x.worker"), std::string::npos) << errors[0];
}

}  // namespace
}  // namespace nl2sql::pipeline
