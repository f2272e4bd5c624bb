// `nl2sql run` end to end on the bundled mini set with the sim provider: the run folder and its
// records, resume without redoing work, refusal of a changed resume, kill -9 at random points,
// shard + merge, and export re-evaluated by `nl2sql eval`.
#include <gtest/gtest.h>
#include <signal.h>
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <random>
#include <thread>

#include <nlohmann/json.hpp>
#include <sqlite3.h>

#include "nl2sql/run/run_store.h"
#include "nl2sql/run/run_data.h"
#include "support/records.h"
#include "support/test_env.h"

namespace nl2sql {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

fs::path configs_dir() { return testing::fixtures_dir().parent_path().parent_path() / "configs"; }

std::string quote(const fs::path& p) { return "'" + p.string() + "'"; }

// The parts of a record that must not depend on timing or on the process that wrote them.
json stable(json rec) {
  rec.erase("latency_s");
  std::function<void(json&)> strip = [&](json& j) {
    if (j.is_object()) {
      for (const char* k : {"latency_s", "elapsed_ms", "updated_at"}) j.erase(k);
      for (auto& [k, v] : j.items()) strip(v);
    } else if (j.is_array()) {
      for (auto& v : j) strip(v);
    }
  };
  strip(rec);
  return rec;
}

std::vector<json> stable_records(const fs::path& run) {
  auto data = run::load_run(run);
  EXPECT_TRUE(data.is_ok()) << data.status().message();
  std::vector<json> out;
  if (data.is_ok())
    for (const auto& r : testing::written_records(*data)) out.push_back(stable(r));
  return out;
}

class RunCommand : public ::testing::Test {
 protected:
  void SetUp() override { data_ = testing::build_mini_bird(dir_ / "mini"); }
  std::string base_args(const fs::path& out) const {
    return "run --config " + quote(configs_dir() / "quickstart.json") + " --benchmark bird --data " +
           quote(data_) + " --out " + quote(out) + " --index-dir " + quote(dir_ / "index") +
           " --progress off";
  }
  testing::TempDir dir_;
  fs::path data_;
};

TEST_F(RunCommand, RunsEveryQuestionAndResumesWithoutRedoingWork) {
  fs::path out = dir_ / "run";
  auto first = testing::run_nl2sql(base_args(out));
  ASSERT_EQ(first.exit_code, 0) << first.out << first.err;
  EXPECT_NE(first.out.find("SIMULATED"), std::string::npos) << first.out;
  for (const char* f : {"run.sqlite", "manifest.json", "config.resolved.json", "report.json",
                        "report.md", "per_question.csv", "report.html"})
    EXPECT_TRUE(fs::exists(out / f)) << f;

  auto data = run::load_run(out);
  ASSERT_TRUE(data.is_ok()) << data.status().message();
  ASSERT_EQ(data->records.size(), 21u);
  EXPECT_TRUE(data->manifest.value("simulated", false));
  size_t with_candidates = 0, judged = 0;
  for (const auto& r : testing::written_records(*data)) {
    EXPECT_EQ(r.value("status", ""), "ok") << r.dump();
    const auto& cands = r["candidates"];
    with_candidates += cands.size() == 9;
    for (const auto& c : cands) judged += !c["correct"].is_null();
    ASSERT_TRUE(r["selections"].contains("tournament")) << r.dump();
    ASSERT_TRUE(r["selections"].contains("self_consistency"));
    // The prediction is the primary selector's choice and the verdict judges it.
    EXPECT_EQ(r["prediction"], r["selections"]["tournament"]["sql"]);
    ASSERT_TRUE(r["verdict"].is_object());
    EXPECT_EQ(r["verdict"]["verdicts"]["bird"].get<bool>(),
              r["selections"]["tournament"]["correct"].get<bool>())
        << r["question_id"];
    // The oracle bound holds whenever the chosen candidate is right.
    if (r["verdict"]["verdicts"]["bird"].get<bool>()) {
      EXPECT_TRUE(r["bounds"]["oracle"].get<bool>());
    }
    EXPECT_TRUE(r["curves"].contains("1"));
  }
  EXPECT_EQ(with_candidates, 21u);
  EXPECT_GT(judged, 0u);

  // Rerun: every question is resumed, no stage row is rewritten, the records are identical.
  auto store = run::RunStore::open(out, false);
  ASSERT_TRUE(store.is_ok());
  auto rows_before = (*store)->all_rows();
  ASSERT_TRUE(rows_before.is_ok());
  store->reset();
  auto before = stable_records(out);
  auto second = testing::run_nl2sql(base_args(out));
  ASSERT_EQ(second.exit_code, 0) << second.out << second.err;
  EXPECT_NE(second.out.find("21 resumed"), std::string::npos) << second.out;
  auto store2 = run::RunStore::open(out, false);
  ASSERT_TRUE(store2.is_ok());
  auto rows_after = (*store2)->all_rows();
  ASSERT_TRUE(rows_after.is_ok());
  ASSERT_EQ(rows_before->size(), rows_after->size());
  for (size_t i = 0; i < rows_before->size(); ++i)
    EXPECT_EQ((*rows_before)[i].updated_at, (*rows_after)[i].updated_at)
        << (*rows_before)[i].question_id << " " << (*rows_before)[i].stage;
  EXPECT_EQ(before, stable_records(out));
}

TEST_F(RunCommand, ChangedInputsRefuseToResumeUntilForceNew) {
  fs::path out = dir_ / "run";
  auto first = testing::run_nl2sql(base_args(out) + " --questions 0-2");
  ASSERT_EQ(first.exit_code, 0) << first.err;
  auto changed = testing::run_nl2sql(base_args(out) + " --questions 0-2 --set fix.max_rounds=1");
  EXPECT_EQ(changed.exit_code, 2) << changed.out << changed.err;
  EXPECT_NE(changed.err.find("config"), std::string::npos) << changed.err;
  EXPECT_NE(changed.err.find("--force-new"), std::string::npos) << changed.err;
  auto more = testing::run_nl2sql(base_args(out) + " --questions 0-3");
  EXPECT_EQ(more.exit_code, 2);
  EXPECT_NE(more.err.find("1 added"), std::string::npos) << more.err;
  auto forced = testing::run_nl2sql(base_args(out) + " --questions 0-2 --set fix.max_rounds=1 --force-new");
  EXPECT_EQ(forced.exit_code, 0) << forced.err;
  // Operational keys do not block a resume.
  auto threads = testing::run_nl2sql(base_args(out) + " --questions 0-2 --set fix.max_rounds=1 --set run.threads=1");
  EXPECT_EQ(threads.exit_code, 0) << threads.err;
  EXPECT_NE(threads.out.find("3 resumed"), std::string::npos) << threads.out;
}

TEST_F(RunCommand, BudgetStopsSchedulingAndKeepsFinishedWork) {
  fs::path out = dir_ / "budget";
  // The sim provider charges what a model at these prices would for its (estimated) tokens.
  std::string priced = base_args(out) + " --set run.threads=1 --set llm.models.sim.price_in_per_mtok=2000";
  auto r = testing::run_nl2sql(priced + " --max-cost-usd 0.01");
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("budget reached"), std::string::npos) << r.out;
  auto data = run::load_run(out);
  ASSERT_TRUE(data.is_ok());
  EXPECT_GE(data->records.size(), 1u);
  EXPECT_LT(data->records.size(), 21u);
  size_t kept = data->records.size();
  auto rest = testing::run_nl2sql(priced);
  ASSERT_EQ(rest.exit_code, 0) << rest.err;
  EXPECT_NE(rest.out.find(std::to_string(kept) + " resumed"), std::string::npos) << rest.out;
  EXPECT_EQ(run::load_run(out)->records.size(), 21u);
}

// --max-cost-usd and --fail-under are the config keys run.max_cost_usd and run.fail_under: the
// flag wins over the file and over --set, is validated as the key (a bad value names the key),
// and the help text is the key's documentation.
TEST_F(RunCommand, FlagsThatAreConfigKeysSetTheKey) {
  fs::path out = dir_ / "flags";
  auto bad = testing::run_nl2sql(base_args(out) + " --fail-under 101");
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE((bad.out + bad.err).find("run.fail_under"), std::string::npos) << bad.out << bad.err;
  auto under = testing::run_nl2sql(base_args(out) + " --set run.fail_under=0 --fail-under 99.5");
  EXPECT_EQ(under.exit_code, 3) << under.out << under.err;
  EXPECT_NE(under.out.find("is under the bar"), std::string::npos) << under.out;
  auto resumed = testing::run_nl2sql(base_args(out) + " --set run.fail_under=99.5 --fail-under 0");
  EXPECT_EQ(resumed.exit_code, 0) << resumed.out << resumed.err;  // the flag wins over --set
  auto help = testing::run_nl2sql("run --help");
  EXPECT_NE(help.out.find("--max-cost-usd NUMBER"), std::string::npos) << help.out;
  EXPECT_NE(help.out.find("(sets config key run.max_cost_usd)"), std::string::npos) << help.out;
}

TEST_F(RunCommand, SweepRunsEveryConfigWithOneCacheAndCompares) {
  fs::path out = dir_ / "sweep";
  auto r = testing::run_nl2sql("sweep " + quote(configs_dir() / "quickstart.json") + " " +
                               quote(configs_dir() / "quickstart.json") + " --set fix.enabled=false" +
                               " --benchmark bird --data " + quote(data_) + " --questions 0-5 --out " +
                               quote(out) + " --index-dir " + quote(dir_ / "index"));
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  // Two run folders (the second name made unique), one comparison naming both.
  EXPECT_EQ(run::load_run(out / "quickstart")->records.size(), 6u);
  EXPECT_EQ(run::load_run(out / "quickstart-1")->records.size(), 6u);
  std::ifstream in(out / "comparison.json");
  ASSERT_TRUE(in.good());
  json cmp = json::parse(in);
  ASSERT_EQ(cmp["runs"].size(), 2u);
  EXPECT_EQ(cmp["common_questions"], 6);
  EXPECT_NE(r.out.find("quickstart-1"), std::string::npos) << r.out;
}

TEST_F(RunCommand, BadConfigKeysAreNamed) {
  auto r = testing::run_nl2sql(base_args(dir_ / "bad") + " --set fix.max_roundz=2");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("fix.max_roundz"), std::string::npos) << r.err;
}

TEST_F(RunCommand, KilledAtRandomPointsFinishesLikeAnUninterruptedRun) {
  fs::path clean = dir_ / "clean";
  auto ref = testing::run_nl2sql(base_args(clean) + " --set run.threads=2");
  ASSERT_EQ(ref.exit_code, 0) << ref.err;

  fs::path out = dir_ / "killed";
  std::string cmd = std::string(NL2SQL_BINARY) + " " + base_args(out) + " --set run.threads=2";
  // Each attempt is killed once the store has gained a random number of new stage rows, so the
  // kills land mid-run (between and during stage writes), not before or after it.
  auto rows_in_store = [&]() -> long {
    sqlite3* db = nullptr;
    long n = -1;
    if (sqlite3_open_v2((out / "run.sqlite").c_str(), &db, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK) {
      sqlite3_busy_timeout(db, 1000);
      sqlite3_stmt* st = nullptr;
      if (sqlite3_prepare_v2(db, "SELECT count(*) FROM stages", -1, &st, nullptr) == SQLITE_OK &&
          sqlite3_step(st) == SQLITE_ROW)
        n = sqlite3_column_int64(st, 0);
      sqlite3_finalize(st);
    }
    sqlite3_close(db);
    return n;
  };
  const long total_rows = 21 * 5;  // context, generate, fix, select, final per question
  std::mt19937 rng(7);
  std::uniform_int_distribution<long> step(3, 20);
  int killed_mid_run = 0;
  for (int attempt = 0; attempt < 4; ++attempt) {
    long before = std::max(0L, rows_in_store());
    long target = before + step(rng);
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      int devnull = open("/dev/null", O_WRONLY);
      dup2(devnull, STDOUT_FILENO);
      dup2(devnull, STDERR_FILENO);
      execl("/bin/sh", "sh", "-c", ("exec " + cmd).c_str(), static_cast<char*>(nullptr));
      _exit(127);
    }
    int status = 0;
    bool exited = false;
    for (int polls = 0; polls < 6000; ++polls) {
      if (waitpid(pid, &status, WNOHANG) == pid) {
        exited = true;
        break;
      }
      if (rows_in_store() >= target) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    if (!exited) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      if (rows_in_store() < total_rows) ++killed_mid_run;
    }
  }
  EXPECT_GE(killed_mid_run, 2) << "the kills should interrupt the run, not miss it";
  auto finish = testing::run_nl2sql(base_args(out) + " --set run.threads=2");
  ASSERT_EQ(finish.exit_code, 0) << finish.err;
  auto store = run::RunStore::open(out, false);
  ASSERT_TRUE(store.is_ok());
  auto integrity = (*store)->integrity_check();
  ASSERT_TRUE(integrity.is_ok());
  EXPECT_EQ(*integrity, "ok");
  auto a = stable_records(clean), b = stable_records(out);
  ASSERT_EQ(a.size(), 21u);
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_EQ(a[i], b[i]) << a[i]["question_id"];
}

TEST_F(RunCommand, ShardsMergeIntoTheUnshardedRunAndExportReevaluates) {
  fs::path whole = dir_ / "whole";
  ASSERT_EQ(testing::run_nl2sql(base_args(whole)).exit_code, 0);
  for (int i = 0; i < 2; ++i) {
    auto r = testing::run_nl2sql(base_args(dir_ / ("shard" + std::to_string(i))) + " --shard " +
                                 std::to_string(i) + "/2");
    ASSERT_EQ(r.exit_code, 0) << r.err;
  }
  auto merged = testing::run_nl2sql("merge " + quote(dir_ / "shard0") + " " + quote(dir_ / "shard1") +
                                    " --out " + quote(dir_ / "merged"));
  ASSERT_EQ(merged.exit_code, 0) << merged.out << merged.err;
  auto a = stable_records(whole), b = stable_records(dir_ / "merged");
  ASSERT_EQ(a.size(), 21u);
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_EQ(a[i], b[i]) << a[i]["question_id"];

  // Export in BIRD format and evaluate it with `nl2sql eval`: same EX as the run.
  auto exp = testing::run_nl2sql("export --run " + quote(whole) + " --format bird --out " +
                                 quote(dir_ / "predict_dev.json"));
  ASSERT_EQ(exp.exit_code, 0) << exp.err;
  auto ev = testing::run_nl2sql("eval --benchmark bird --data " + quote(data_) + " --pred " +
                                quote(dir_ / "predict_dev.json") + " --out " + quote(dir_ / "eval") +
                                " --no-cache");
  ASSERT_EQ(ev.exit_code, 0) << ev.err;
  std::ifstream in(dir_ / "eval" / "eval.json");
  json eval_report = json::parse(in);
  auto data = run::load_run(whole);
  ASSERT_TRUE(data.is_ok());
  size_t correct = 0;
  for (const auto& r : data->records) correct += r.correct("bird");
  size_t eval_correct = 0;
  for (const auto& item : eval_report["items"]) eval_correct += item["verdicts"]["bird"].get<bool>();
  EXPECT_EQ(correct, eval_correct);
}

}  // namespace
}  // namespace nl2sql
