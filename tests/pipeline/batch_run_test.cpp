// A run whose profile is a batch endpoint (llm.models.*.batch) against the fake Batch API gives
// the report a synchronous run gives with the same answers — the same candidates, selections
// and verdicts, the same calls and tokens — at batch_discount times its cost; and the run store
// keeps a submitted job until it ended (pipeline/batch_journal.h).
#include <gtest/gtest.h>

#include <atomic>
#include <functional>
#include <set>
#include <sstream>
#include <thread>

#include "pipeline/batch_journal.h"
#include "nl2sql/core/config.h"
#include "nl2sql/pipeline/pipeline.h"
#include "nl2sql/run/run_data.h"
#include "support/fake_batch_server.h"
#include "support/mini_run.h"
#include "support/test_env.h"

namespace nl2sql::pipeline {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using llm::testing::BatchKnobs;
using llm::testing::FakeBatchServer;
using llm::testing::FakeReply;

// The answer and its usage follow from the request's body alone: a batch line and the same
// request sent synchronously are answered alike.
FakeReply answer_of(const httplib::Request& req, int64_t) {
  const size_t h = std::hash<std::string>{}(req.body);
  const int in = static_cast<int>(req.body.size() % 997) + 50, out = static_cast<int>(h % 7) + 3;
  const std::string sql = h % 3 == 0 ? "SELECT count(*) FROM school" : h % 3 == 1 ? "SELECT name FROM district"
                                                                                  : "SELECT name FROM school";
  return FakeReply(200, llm::testing::completion_body(
                            "Answer: A\n```json\n[\"school\"]\n```\n```sql\n" + sql + "\n```", "stop", in, out));
}

core::Config config_for(const std::string& base_url, bool batch) {
  core::Config config(json::parse(R"({
    "llm": {"models": {"fake": {"base_url": "", "model": "fake-coder", "api_key_env": "",
                                "price_in_per_mtok": 3.0, "price_out_per_mtok": 15.0}},
            "default_profile": "fake", "preflight": false, "cache": {"mode": "off"},
            "retry": {"max_attempts": 2, "base_delay_s": 0.01, "max_delay_s": 0.01}},
    "context": {"keywords": {"llm": true}},
    "generate": {"generators": [{"name": "baseline", "samples": 2}, {"name": "dc", "samples": 2}]},
    "fix": {"enabled": true, "max_rounds": 1},
    "select": {"method": "tournament"},
    "run": {"selectors": ["tournament", "self_consistency"], "threads": 3}
  })"));
  config.set("llm.models.fake.base_url", base_url);
  if (batch) {
    config.set("llm.models.fake.batch", json{{"gather_ms", 80}, {"poll_s", 0.01}, {"poll_max_s", 0.02}});
    config.set("llm.models.fake.batch_discount", 0.5);
  }
  return config;
}

// What a run decided per question: candidates (SQL and verdicts), selections, prediction, verdict.
json decisions(const fs::path& dir) {
  auto store = run::RunStore::open(dir, false);
  EXPECT_TRUE(store.is_ok()) << store.status().message();
  auto records = run::read_final_records(**store, dir);
  EXPECT_TRUE(records.is_ok()) << records.status().message();
  json out = json::array();
  for (const auto& r : *records) {
    json q = {{"id", r.question_id}, {"ok", r.ok}, {"prediction", r.prediction},
              {"verdict", r.verdict ? json(r.verdict->verdicts) : json()}};
    for (const auto& c : r.candidates)
      q["candidates"].push_back({c.id, c.sql, c.judged ? json(c.judged->verdicts) : json()});
    for (const auto& [name, s] : r.selections) q["selections"][name] = {s.candidate_id, s.sql, s.llm_calls};
    out.push_back(q);
  }
  return out;
}

TEST(BatchRun, ReportEqualsTheSynchronousRunsAtTheBatchDiscount) {
  testing::TempDir dir;
  const fs::path data = testing::build_mini_bird(dir.path() / "mini");
  FakeBatchServer sync_server(answer_of), batch_server(answer_of, BatchKnobs{.latency = std::chrono::milliseconds(30)});

  RunOptions sync = testing::mini_run_options(config_for(sync_server.base_url(), false), data, dir.path() / "sync",
                                              dir.path() / "index");
  sync.filter.ranges = "0-5";
  auto a = testing::run_and_report(sync);
  ASSERT_TRUE(a.is_ok()) << a.status().message();
  RunOptions batched = testing::mini_run_options(config_for(batch_server.base_url(), true), data,
                                                 dir.path() / "batch", dir.path() / "index");
  batched.filter.ranges = "0-5";
  auto b = testing::run_and_report(batched);
  ASSERT_TRUE(b.is_ok()) << b.status().message();

  EXPECT_EQ(sync_server.batches_created(), 0);
  EXPECT_GT(batch_server.batches_created(), 0);
  EXPECT_EQ(batch_server.chat().requests(), 0);  // every answer came from a job
  // Jobs gather the requests of all questions in flight: far fewer jobs than requests.
  EXPECT_LT(batch_server.batches_created() * 3, batch_server.lines_answered());
  const json da = decisions(dir.path() / "sync"), db = decisions(dir.path() / "batch");
  ASSERT_EQ(da.size(), 6u);
  EXPECT_EQ(da, db);

  const json ta = testing::read_json_file(dir.path() / "sync" / "report.json").at("usage").at("total");
  const json tb = testing::read_json_file(dir.path() / "batch" / "report.json").at("usage").at("total");
  EXPECT_EQ(ta.at("calls"), tb.at("calls"));
  EXPECT_EQ(tb.at("calls").get<double>(), static_cast<double>(batch_server.lines_answered()));
  EXPECT_EQ(ta.at("prompt_tokens"), tb.at("prompt_tokens"));
  EXPECT_EQ(ta.at("completion_tokens"), tb.at("completion_tokens"));
  EXPECT_NEAR(tb.at("cost_usd").get<double>(), 0.5 * ta.at("cost_usd").get<double>(), 1e-9);
  // Every job ended: none is left for a rerun to pick up.
  auto store = run::RunStore::open(dir.path() / "batch", false);
  ASSERT_TRUE(store.is_ok());
  RunStoreBatchJournal journal(**store);
  EXPECT_TRUE(journal.unfinished().empty());
}

// Every custom_id of every uploaded input file, in upload order.
std::vector<std::string> submitted_ids(FakeBatchServer& server) {
  std::vector<std::string> ids;
  for (const auto& file : server.uploads()) {
    std::istringstream lines(file);
    std::string line;
    while (std::getline(lines, line)) ids.push_back(json::parse(line).at("custom_id").get<std::string>());
  }
  return ids;
}

TEST(BatchRun, AStoppedRunsJobIsPickedUpByTheRerunNotSubmittedAgain) {
  testing::TempDir dir;
  const fs::path data = testing::build_mini_bird(dir.path() / "mini");
  FakeBatchServer sync_server(answer_of), server(answer_of, BatchKnobs{.latency = std::chrono::milliseconds(500)});
  RunOptions sync = testing::mini_run_options(config_for(sync_server.base_url(), false), data, dir.path() / "sync",
                                              dir.path() / "index");
  sync.filter.ranges = "0-5";
  ASSERT_TRUE(testing::run_and_report(sync).is_ok());

  std::atomic<bool> cancel{false};
  RunOptions o = testing::mini_run_options(config_for(server.base_url(), true), data, dir.path() / "batch",
                                           dir.path() / "index");
  o.filter.ranges = "0-5";
  o.cancel = &cancel;
  std::thread stopper([&] {  // Ctrl-C while the first job runs on the server
    for (int i = 0; i < 2000 && server.batches_created() == 0; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    cancel = true;
  });
  auto stopped = testing::run_and_report(o);
  stopper.join();
  ASSERT_TRUE(stopped.is_ok()) << stopped.status().message();
  ASSERT_EQ(server.batches_created(), 1);
  {
    auto store = run::RunStore::open(dir.path() / "batch", false);
    ASSERT_TRUE(store.is_ok());
    RunStoreBatchJournal journal(**store);
    ASSERT_EQ(journal.unfinished().size(), 1u);
    EXPECT_EQ(journal.unfinished()[0].batch_id, "batch_1");
  }

  cancel = false;
  o.cancel = nullptr;
  auto resumed = testing::run_and_report(o);
  ASSERT_TRUE(resumed.is_ok()) << resumed.status().message();
  // No request was submitted twice, and every answer came from a job.
  const auto ids = submitted_ids(server);
  EXPECT_EQ(std::set<std::string>(ids.begin(), ids.end()).size(), ids.size());
  EXPECT_EQ(static_cast<int64_t>(ids.size()), server.lines_answered());
  EXPECT_EQ(server.chat().requests(), 0);
  EXPECT_EQ(decisions(dir.path() / "sync"), decisions(dir.path() / "batch"));
  auto store = run::RunStore::open(dir.path() / "batch", false);
  ASSERT_TRUE(store.is_ok());
  EXPECT_TRUE(RunStoreBatchJournal(**store).unfinished().empty());
}

TEST(BatchRun, TheRunStoreKeepsAJobUntilItEnded) {
  testing::TempDir dir;
  {
    auto store = run::RunStore::open(dir.path(), true);
    ASSERT_TRUE(store.is_ok());
    RunStoreBatchJournal journal(**store);
    ASSERT_TRUE(journal.record({"batch_1", "fake", {"a", "b"}}).is_ok());
    ASSERT_TRUE(journal.record({"batch_2", "other", {"c"}}).is_ok());
    ASSERT_TRUE(journal.finish("batch_2").is_ok());
  }
  auto store = run::RunStore::open(dir.path(), false);  // another process, later
  ASSERT_TRUE(store.is_ok());
  RunStoreBatchJournal journal(**store);
  const auto jobs = journal.unfinished();
  ASSERT_EQ(jobs.size(), 1u);
  EXPECT_EQ(jobs[0].batch_id, "batch_1");
  EXPECT_EQ(jobs[0].profile, "fake");
  EXPECT_EQ(jobs[0].custom_ids, (std::vector<std::string>{"a", "b"}));
}

}  // namespace
}  // namespace nl2sql::pipeline
