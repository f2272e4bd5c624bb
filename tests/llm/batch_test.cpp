// Batch profiles (llm.models.*.batch) against the fake Batch API (support/fake_batch_server.h):
// requests of concurrent callers gathered into one job, its states followed, lines answered out
// of order by custom_id through the synchronous reader and priced at batch_discount; lines in
// the error file, an expired job and a job failing validation answered by one synchronous call
// each; an input over max_bytes split into two jobs; a job left running at a stop picked up by
// the next client instead of submitted again; the API key only in the Authorization header.
#include <gtest/gtest.h>

#include <atomic>
#include <fstream>
#include <mutex>
#include <sstream>
#include <thread>

#include "nl2sql/core/config.h"
#include "nl2sql/core/log.h"
#include "nl2sql/llm/client.h"
#include "support/fake_batch_server.h"
#include "support/test_env.h"

namespace nl2sql::llm {
namespace {

using testing::BatchKnobs;
using testing::completion_body;
using testing::FakeBatchServer;
using testing::FakeReply;
using nlohmann::json;
using namespace std::chrono_literals;

// Answers each request from its body alone (the last user message, echoed as SQL), so a line
// answered in a batch and the same request sent synchronously get the same answer.
FakeReply echo(const httplib::Request& req, int64_t) {
  const json body = json::parse(req.body);
  const std::string user = body["messages"].back()["content"];
  return FakeReply(200, completion_body("```sql\nSELECT '" + user + "'\n```", "stop", 1000, 100));
}

LlmSettings batch_settings(const std::string& base_url) {
  LlmSettings s;
  ModelProfile p;
  p.name = "main";
  p.base_url = base_url;
  p.model = "fake-model";
  p.price_in_per_mtok = 2.0;
  p.price_out_per_mtok = 8.0;
  p.timeout_s = 5;
  p.batch.enabled = true;
  p.batch.gather_ms = 150;
  p.batch.poll_s = 0.005;
  p.batch.poll_max_s = 0.02;
  p.batch_discount = 0.5;
  s.profiles["main"] = p;
  s.default_profile = "main";
  s.retry.max_attempts = 2;
  s.retry.base_delay_s = 0.001;
  s.retry.max_delay_s = 0.001;
  s.cache.mode = CacheMode::kOff;
  return s;
}

std::unique_ptr<Client> make_client(const LlmSettings& settings) {
  auto c = Client::create(settings, {});
  EXPECT_TRUE(c.is_ok()) << c.status().to_string();
  return std::move(c).value();
}

ChatRequest ask(const std::string& text) {
  ChatRequest r;
  r.role = "generate";
  r.messages = {{"system", "You write SQL."}, {"user", text}};
  r.stage = "generate";
  r.question_id = text;
  return r;
}

// n callers at once ("q0" … "q{n-1}"); their results in that order.
std::vector<Result<ChatResponse>> ask_together(Client& client, int n) {
  std::vector<Result<ChatResponse>> out(static_cast<size_t>(n), internal_error("not asked"));
  std::vector<std::thread> threads;
  for (int i = 0; i < n; ++i)
    threads.emplace_back([&, i] { out[static_cast<size_t>(i)] = client.chat(ask("q" + std::to_string(i))); });
  for (auto& t : threads) t.join();
  return out;
}

const double kFullCost = (1000 * 2.0 + 100 * 8.0) / 1e6;

void expect_echoed(const std::vector<Result<ChatResponse>>& rs) {
  for (size_t i = 0; i < rs.size(); ++i) {
    ASSERT_TRUE(rs[i].is_ok()) << rs[i].status().to_string();
    EXPECT_EQ(rs[i]->text(), "```sql\nSELECT 'q" + std::to_string(i) + "'\n```");
  }
}

TEST(BatchProfile, ConcurrentCallsFormOneJobAnsweredOutOfOrderAtTheDiscount) {
  FakeBatchServer server(echo, BatchKnobs{.latency = 200ms});
  auto client = make_client(batch_settings(server.base_url()));
  auto rs = ask_together(*client, 8);
  expect_echoed(rs);
  EXPECT_EQ(server.batches_created(), 1);
  EXPECT_EQ(client->batch_jobs(), 1);
  EXPECT_EQ(server.chat().requests(), 0);  // no synchronous call
  // The job went through every state, in order, and the client read it only once it ended.
  const auto shown = server.statuses_shown("batch_1");
  const std::vector<std::string> order = {"validating", "in_progress", "finalizing", "completed"};
  size_t at = 0;
  for (const auto& st : shown) {
    while (at < order.size() && order[at] != st) ++at;
    ASSERT_LT(at, order.size()) << "status " << st << " out of order";
  }
  EXPECT_EQ(shown.back(), "completed");
  EXPECT_NE(std::find(shown.begin(), shown.end(), "in_progress"), shown.end());
  // The input file: one line per request, the body the synchronous call would send.
  const auto uploads = server.uploads();
  ASSERT_EQ(uploads.size(), 1u);
  std::istringstream lines(uploads[0]);
  std::string line;
  int n = 0;
  while (std::getline(lines, line)) {
    const json j = json::parse(line);
    EXPECT_EQ(j["method"], "POST");
    EXPECT_EQ(j["url"], "/v1/chat/completions");
    EXPECT_EQ(j["body"]["model"], "fake-model");
    ++n;
  }
  EXPECT_EQ(n, 8);
  for (const auto& r : rs) {
    EXPECT_NEAR(r->cost_usd, 0.5 * kFullCost, 1e-12);
    EXPECT_EQ(r->usage.prompt_tokens, 1000);
    EXPECT_EQ(r->attempts, 1);
  }
  const UsageTotals total = client->accounting().total();
  EXPECT_EQ(total.calls, 8);
  EXPECT_EQ(total.errors, 0);
  EXPECT_NEAR(total.cost_usd, 8 * 0.5 * kFullCost, 1e-12);
}

TEST(BatchProfile, ErrorFileLinesAreAskedOnceSynchronouslyAtFullPrice) {
  FakeBatchServer server(echo, BatchKnobs{.latency = 40ms, .error_every = 3});
  auto client = make_client(batch_settings(server.base_url()));
  auto rs = ask_together(*client, 6);
  expect_echoed(rs);
  EXPECT_EQ(server.batches_created(), 1);
  EXPECT_EQ(server.chat().requests(), 2);  // lines 3 and 6 of the input
  int full = 0, discounted = 0;
  for (const auto& r : rs) {
    if (std::abs(r->cost_usd - kFullCost) < 1e-12) ++full;
    if (std::abs(r->cost_usd - 0.5 * kFullCost) < 1e-12) ++discounted;
  }
  EXPECT_EQ(full, 2);
  EXPECT_EQ(discounted, 4);
}

TEST(BatchProfile, AnExpiredJobsUnansweredRequestsAreAskedSynchronously) {
  FakeBatchServer server(echo, BatchKnobs{.latency = 40ms, .expire = true});
  auto client = make_client(batch_settings(server.base_url()));
  auto rs = ask_together(*client, 6);
  expect_echoed(rs);
  EXPECT_EQ(server.batches_created(), 1);
  EXPECT_EQ(server.statuses_shown("batch_1").back(), "expired");
  EXPECT_EQ(server.chat().requests(), 3);  // the half the job did not answer
}

TEST(BatchProfile, AJobThatFailsValidationIsAnsweredSynchronously) {
  FakeBatchServer server(echo, BatchKnobs{.latency = 40ms, .fail_validation = true});
  auto client = make_client(batch_settings(server.base_url()));
  auto rs = ask_together(*client, 4);
  expect_echoed(rs);
  EXPECT_EQ(server.statuses_shown("batch_1").back(), "failed");
  EXPECT_EQ(server.chat().requests(), 4);
}

TEST(BatchProfile, ALineThatFailsTwiceFailsTheCallAsASynchronousOneWould) {
  // Every line errs and the synchronous endpoint refuses: the call fails loudly, with the
  // server's refusal, after one synchronous attempt.
  FakeBatchServer server([](const httplib::Request&, int64_t) {
    return FakeReply(400, R"({"error":{"message":"Unsupported parameter: 'seed'","type":"invalid_request_error"}})");
  }, BatchKnobs{.latency = 40ms});
  auto client = make_client(batch_settings(server.base_url()));
  auto r = client->chat(ask("q0"));
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(call_error_kind(r.status()), CallErrorKind::kHttpClient) << r.status().to_string();
  EXPECT_NE(r.status().message().find("Unsupported parameter"), std::string::npos);
  EXPECT_EQ(server.chat().requests(), 1);
}

TEST(BatchProfile, AnInputOverMaxBytesIsSplitIntoTwoJobs) {
  // The server refuses a file over its limit; the client keeps each job's file under its own.
  BatchKnobs knobs{.latency = 40ms};
  LlmSettings settings = batch_settings("");
  FakeBatchServer probe(echo, knobs);
  {
    auto c = make_client(batch_settings(probe.base_url()));
    ASSERT_TRUE(c->chat(ask("q0")).is_ok());
  }
  const size_t line_bytes = probe.uploads().at(0).size();  // one line and its newline
  knobs.max_file_bytes = line_bytes * 3;                   // room for three lines, not six
  FakeBatchServer server(echo, knobs);
  settings = batch_settings(server.base_url());
  settings.profiles["main"].batch.max_bytes = static_cast<int64_t>(line_bytes * 3);
  auto client = make_client(settings);
  auto rs = ask_together(*client, 6);
  expect_echoed(rs);
  EXPECT_EQ(server.batches_created(), 2);
  EXPECT_EQ(server.chat().requests(), 0);
  for (const auto& file : server.uploads()) EXPECT_LE(file.size(), line_bytes * 3);
}

TEST(BatchProfile, AJobOverMaxRequestsIsSplit) {
  FakeBatchServer server(echo, BatchKnobs{.latency = 40ms});
  LlmSettings settings = batch_settings(server.base_url());
  settings.profiles["main"].batch.max_requests = 4;
  auto client = make_client(settings);
  expect_echoed(ask_together(*client, 8));
  EXPECT_EQ(server.batches_created(), 2);
}

// A journal in memory, shared by two clients as two processes share a run folder.
struct MemoryJournal : BatchJournal {
  std::mutex mu;
  std::vector<RecordedBatchJob> jobs;  // guarded by mu
  Status record(const RecordedBatchJob& job) override {
    std::lock_guard lock(mu);
    jobs.push_back(job);
    return Status::ok();
  }
  Status finish(const std::string& id) override {
    std::lock_guard lock(mu);
    std::erase_if(jobs, [&](const RecordedBatchJob& j) { return j.batch_id == id; });
    return Status::ok();
  }
  std::vector<RecordedBatchJob> unfinished() override {
    std::lock_guard lock(mu);
    return jobs;
  }
};

TEST(BatchProfile, ARerunPicksUpTheJobAStopLeftRunningInsteadOfSubmittingAgain) {
  FakeBatchServer server(echo, BatchKnobs{.latency = 600ms});
  auto journal = std::make_shared<MemoryJournal>();
  {
    auto client = make_client(batch_settings(server.base_url()));
    client->set_batch_journal(journal);
    std::vector<Result<ChatResponse>> rs;
    std::thread asking([&] { rs = ask_together(*client, 4); });
    for (int i = 0; i < 400 && server.batches_created() == 0; ++i) std::this_thread::sleep_for(5ms);
    ASSERT_EQ(server.batches_created(), 1);
    std::this_thread::sleep_for(20ms);
    client->cancel();  // Ctrl-C
    asking.join();
    for (const auto& r : rs) EXPECT_EQ(call_error_kind(r.status()), CallErrorKind::kCancelled);
  }
  ASSERT_EQ(journal->unfinished().size(), 1u);
  EXPECT_EQ(journal->unfinished()[0].custom_ids.size(), 4u);
  auto client = make_client(batch_settings(server.base_url()));
  client->set_batch_journal(journal);
  expect_echoed(ask_together(*client, 4));
  EXPECT_EQ(server.batches_created(), 1);  // not paid twice
  EXPECT_EQ(client->batch_jobs(), 0);
  EXPECT_EQ(server.chat().requests(), 0);
  EXPECT_TRUE(journal->unfinished().empty());
  // A request the recorded job does not hold goes into a job of its own.
  ASSERT_TRUE(client->chat(ask("new")).is_ok());
  EXPECT_EQ(server.batches_created(), 2);
}

TEST(BatchProfile, IdenticalRequestsGetLinesOfTheirOwn) {
  FakeBatchServer server(echo, BatchKnobs{.latency = 40ms});
  auto client = make_client(batch_settings(server.base_url()));
  std::vector<std::thread> threads;
  std::atomic<int> ok{0};
  for (int i = 0; i < 3; ++i)
    threads.emplace_back([&] { ok += client->chat(ask("same")).is_ok() ? 1 : 0; });
  for (auto& t : threads) t.join();
  EXPECT_EQ(ok.load(), 3);
  EXPECT_EQ(server.batches_created(), 1);
  EXPECT_EQ(server.lines_answered(), 3);
  EXPECT_EQ(server.chat().requests(), 0);
}

std::string slurp(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

TEST(BatchProfile, TheApiKeyIsOnlyInTheAuthorizationHeader) {
  const std::string key = "sk-batch-9Xr2LqP7wM3vT5nZ";
  ::setenv("NL2SQL_TEST_BATCH_KEY", key.c_str(), 1);
  nl2sql::testing::TempDir tmp;
  core::init_logging({"debug", false, (tmp / "run.log").string()});
  {
    FakeBatchServer server(echo, BatchKnobs{.latency = 40ms, .error_every = 2});
    core::Config config(json::parse(R"({"llm":{"models":{"main":{
        "base_url":")" + server.base_url() + R"(","model":"m","api_key_env":"NL2SQL_TEST_BATCH_KEY",
        "batch":{"gather_ms":150,"poll_s":0.005},"batch_discount":0.5}},
        "retry":{"max_attempts":2,"base_delay_s":0.001},
        "cache":{"mode":"read-write","path":")" + (tmp / "cache.sqlite").string() + R"("}}})"));
    auto client = Client::from_config(config, {});
    ASSERT_TRUE(client.is_ok()) << client.status().to_string();
    expect_echoed(ask_together(**client, 4));
    EXPECT_EQ(server.batches_created(), 1);
    for (const auto& a : server.authorizations()) EXPECT_EQ(a, "Bearer " + key);
    EXPECT_GE(server.authorizations().size(), 4u);  // upload, create, polls, files
    for (const auto& file : server.uploads()) EXPECT_EQ(file.find(key), std::string::npos);
    spdlog::default_logger()->flush();
  }
  core::init_logging({"warn", false, ""});
  for (const auto& entry : std::filesystem::recursive_directory_iterator(tmp.path())) {
    if (entry.is_regular_file()) {
      EXPECT_EQ(slurp(entry.path()).find(key), std::string::npos) << entry.path();
    }
  }
  EXPECT_NE(slurp(tmp / "run.log").find("batch job batch_1 submitted"), std::string::npos);
  ::unsetenv("NL2SQL_TEST_BATCH_KEY");
}

TEST(BatchProfile, ConfigKeysAreReadAndChecked) {
  auto load = [](const std::string& profile) {
    return load_llm_settings(core::Config(json::parse(R"({"llm":{"models":{"main":)" + profile + "}}}")));
  };
  auto plain = load(R"({"model":"m","batch":true})");
  ASSERT_TRUE(plain.is_ok()) << plain.status().to_string();
  EXPECT_TRUE(plain->profiles["main"].batch.enabled);
  EXPECT_EQ(plain->profiles["main"].batch.window, "24h");
  EXPECT_EQ(plain->profiles["main"].batch.max_requests, 50000);
  EXPECT_EQ(plain->profiles["main"].batch_discount, 1.0);
  auto shaped = load(R"({"model":"m","batch":{"max_requests":10,"max_bytes":5000,"gather_ms":5},"batch_discount":0.5})");
  ASSERT_TRUE(shaped.is_ok()) << shaped.status().to_string();
  EXPECT_EQ(shaped->profiles["main"].batch.max_requests, 10);
  EXPECT_EQ(shaped->profiles["main"].batch.max_bytes, 5000);
  EXPECT_EQ(shaped->profiles["main"].batch.gather_ms, 5);
  EXPECT_EQ(shaped->profiles["main"].batch_discount, 0.5);
  EXPECT_FALSE(load(R"({"model":"m"})")->profiles["main"].batch.enabled);
  auto streamed = load(R"({"model":"m","batch":true,"stream":true})");
  ASSERT_FALSE(streamed.is_ok());
  EXPECT_NE(streamed.status().message().find("llm.models.main.batch"), std::string::npos);
  auto unknown = load(R"({"model":"m","batch":{"windows":"24h"}})");
  ASSERT_FALSE(unknown.is_ok());
  EXPECT_NE(unknown.status().message().find("llm.models.main.batch.windows"), std::string::npos);
  EXPECT_FALSE(load(R"({"model":"m","batch_discount":0})").is_ok());
}

}  // namespace
}  // namespace nl2sql::llm
