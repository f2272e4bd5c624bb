// Nothing is lost under kill -9: `nl2sql run` over the mini set against a fake OpenAI server
// (raw-socket bench server, answers decided by the request's content) with the LLM response
// cache on, killed with SIGKILL at 20 seeded moments — right after the run store gains rows,
// right after the response cache gains rows (so kills land amid both kinds of writes) and at
// random times — then resumed. The final report.json must equal an uninterrupted run's, and the
// run store and the response cache must pass PRAGMA integrity_check.
// Slow tier: about a minute on two cores (22 process starts plus the runs).
#include <gtest/gtest.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <functional>
#include <iostream>
#include <random>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>
#include <sqlite3.h>

#include "nl2sql/core/hash.h"
#include "support/fake_openai_server.h"
#include "support/test_env.h"

namespace nl2sql {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::string quote(const fs::path& p) { return "'" + p.string() + "'"; }

// Rows of a table in a SQLite file another process is writing (-1 while unreadable).
long count_rows(const fs::path& db_path, const std::string& sql) {
  sqlite3* db = nullptr;
  long n = -1;
  if (fs::exists(db_path) &&
      sqlite3_open_v2(db_path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK) {
    sqlite3_busy_timeout(db, 1000);
    sqlite3_stmt* st = nullptr;
    if (sqlite3_prepare_v2(db, sql.c_str(), -1, &st, nullptr) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW)
      n = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
  }
  sqlite3_close(db);
  return n;
}

std::string integrity(const fs::path& db_path) {
  sqlite3* db = nullptr;
  std::string out = "cannot open";
  if (sqlite3_open_v2(db_path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK) {
    sqlite3_stmt* st = nullptr;
    out.clear();
    if (sqlite3_prepare_v2(db, "PRAGMA integrity_check", -1, &st, nullptr) == SQLITE_OK)
      while (sqlite3_step(st) == SQLITE_ROW)
        out += reinterpret_cast<const char*>(sqlite3_column_text(st, 0));
    sqlite3_finalize(st);
  }
  sqlite3_close(db);
  return out;
}

// report.json without what legitimately differs between an interrupted-and-resumed run and an
// uninterrupted one: wall times (latency_s, latency_p50_s…, elapsed_ms), store/manifest timestamps (updated_at,
// created_at), from_cache, request_hash (kept only on answers a server gave) and
// duplicate_requests (a repeat answered from the cache on resume was not sent again) — calls the killed attempts had already made are answered from the
// response cache on resume, with the same text and token counts, so the usage counts them as
// cache hits: folded back (calls + cache_hits, tokens + the hits' tokens) they are the
// uninterrupted run's calls. Prices are 0 in this config so cost_usd is 0 on both sides and
// compared. Everything else is compared as is.
json stable(json j) {
  // Every invocation sends its own preflight (one request per profile): a run resumed 20 times
  // sent 20. They are counted, under their own stage; take them out of the comparison.
  if (j.contains("usage") && j["usage"]["stages"].contains("preflight")) {
    const json pre = j["usage"]["stages"]["preflight"];
    for (const char* k : {"calls", "prompt_tokens", "completion_tokens", "cost_usd"})
      j["usage"]["total"][k] = j["usage"]["total"][k].get<double>() - pre.value(k, 0.0);
    j["usage"]["stages"].erase("preflight");
  }
  std::function<void(json&)> strip = [&](json& v) {
    if (v.is_object()) {
      for (const char* k : {"elapsed_ms", "updated_at", "created_at", "from_cache", "request_hash", "duplicate_requests"})
        v.erase(k);
      if (v.contains("cache_hits") && v.contains("calls")) {
        v["calls"] = v["calls"].get<double>() + v["cache_hits"].get<double>();
        v["prompt_tokens"] = v["prompt_tokens"].get<double>() + v.value("cache_prompt_tokens", 0.0);
        v["completion_tokens"] = v["completion_tokens"].get<double>() + v.value("cache_completion_tokens", 0.0);
        for (const char* k : {"cache_hits", "cache_prompt_tokens", "cache_completion_tokens", "saved_usd"}) v.erase(k);
      }
      for (auto it = v.begin(); it != v.end();) {  // latency_s, latency_p50_s, …
        if (it.key().rfind("latency", 0) == 0) it = v.erase(it);
        else ++it;
      }
      for (auto& [k, x] : v.items()) strip(x);
    } else if (v.is_array()) {
      for (auto& x : v) strip(x);
    }
  };
  strip(j);
  return j;
}

json read_json(const fs::path& p) {
  std::ifstream in(p);
  return json::parse(in, nullptr, false);
}

class HardeningKillResume : public ::testing::Test {
 protected:
  void SetUp() override {
    setenv("NL2SQL_KILL_TEST_KEY", "sk-kill-test", 1);
    data_ = testing::build_mini_bird(dir_ / "mini");
  }
  fs::path write_config(const fs::path& folder, const std::string& base_url) {
    json cfg = json::parse(R"({
      "llm": {"models": {"fake": {"base_url": "", "model": "fake-coder", "api_key_env": "NL2SQL_KILL_TEST_KEY",
                                  "price_in_per_mtok": 0, "price_out_per_mtok": 0}},
              "default_profile": "fake", "cache": {"mode": "read-write", "path": ""},
              "retry": {"max_attempts": 2, "base_delay_s": 0.001, "max_delay_s": 0.002}},
      "context": {"keywords": {"llm": true}},
      "generate": {"generators": [{"name": "baseline", "samples": 2}, {"name": "dc", "samples": 1}]},
      "fix": {"enabled": true, "max_rounds": 2},
      "select": {"method": "tournament"},
      "run": {"selectors": ["tournament", "self_consistency"], "threads": 2, "curve_selector": false}
    })");
    cfg["llm"]["models"]["fake"]["base_url"] = base_url;
    cfg["llm"]["cache"]["path"] = (folder / "llm_cache.sqlite").string();
    fs::create_directories(folder);
    std::ofstream(folder / "config.json") << cfg.dump(2);
    return folder / "config.json";
  }
  std::string args(const fs::path& folder) {
    return "--log-level warn run --config " + quote(folder / "config.json") + " --benchmark bird --data " +
           quote(data_) + " --out " + quote(folder / "run") + " --index-dir " + quote(dir_ / "index") +
           " --progress off";
  }
  testing::TempDir dir_;
  fs::path data_;
};

TEST_F(HardeningKillResume, TwentyKillsThenResumeGiveTheUninterruptedReport) {
  // Content-decided answers: a verdict line, a keyword list and one of a few SQL blocks (one
  // broken, so the fixer runs).
  llm::testing::FakeOpenAiServer server([](const httplib::Request& req, int64_t) {
    static const char* kSql[] = {"SELECT count(*) FROM school", "SELECT name FROM district",
                                 "SELECT nope FROM school"};
    uint64_t h = core::xxh64(req.body);
    std::string text = std::string("Answer: ") + ((h >> 7) % 2 ? "A" : "B") + "\n```json\n[\"school\"]\n```\n```sql\n" +
                       kSql[h % 3] + "\n```";
    return llm::testing::FakeReply(200, llm::testing::completion_body(text), {}, std::chrono::milliseconds(50));
  }, 64);
  fs::path clean = dir_ / "clean", killed = dir_ / "killed";
  write_config(clean, server.base_url());
  write_config(killed, server.base_url());
  auto ref = testing::run_nl2sql(args(clean));
  ASSERT_EQ(ref.exit_code, 0) << ref.out << ref.err;

  const fs::path store = killed / "run" / "run.sqlite", cache = killed / "llm_cache.sqlite";
  auto store_rows = [&] { return count_rows(store, "SELECT count(*) FROM stages"); };
  auto final_rows = [&] { return count_rows(store, "SELECT count(*) FROM stages WHERE stage = 'final'"); };
  auto cache_rows = [&] { return count_rows(cache, "SELECT count(*) FROM responses"); };
  const std::string cmd = std::string(NL2SQL_BINARY) + " " + args(killed);

  std::mt19937 rng(20261122);
  const int kKills = 20;
  int killed_mid_run = 0, by_store = 0, by_cache = 0, by_time = 0;
  for (int attempt = 0; attempt < kKills; ++attempt) {
    // Three kinds of moment, in turn: after the store gained 1-4 rows, after the cache gained
    // 1-10 answers, after 20-400 ms. Answers take 50 ms, so the run lasts a few seconds.
    const int kind = attempt % 3;
    const long store_target = std::max(0L, store_rows()) + std::uniform_int_distribution<long>(1, 4)(rng);
    const long cache_target = std::max(0L, cache_rows()) + std::uniform_int_distribution<long>(1, 10)(rng);
    const auto deadline = std::chrono::steady_clock::now() +
                          std::chrono::milliseconds(std::uniform_int_distribution<int>(20, 400)(rng));
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
    for (int polls = 0; polls < 60000; ++polls) {  // at most about a minute
      if (waitpid(pid, &status, WNOHANG) == pid) {
        exited = true;
        break;
      }
      bool now = kind == 0   ? store_rows() >= store_target
                 : kind == 1 ? cache_rows() >= cache_target
                             : std::chrono::steady_clock::now() >= deadline;
      if (now) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    if (exited) continue;
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
    if (final_rows() < 21) {
      ++killed_mid_run;
      (kind == 0 ? by_store : kind == 1 ? by_cache : by_time)++;
    }
  }
  auto finish = testing::run_nl2sql(args(killed));
  ASSERT_EQ(finish.exit_code, 0) << finish.out << finish.err;

  // The figures for the closing note.
  std::cout << "kill -9: " << killed_mid_run << " of " << kKills << " kills landed mid-run (" << by_store
            << " after store writes, " << by_cache << " after cache writes, " << by_time
            << " at random times); resumed to the end\n";
  EXPECT_GE(killed_mid_run, kKills * 3 / 4) << "most kills should interrupt the run, not miss it";
  EXPECT_GE(by_cache, 1);
  EXPECT_GE(by_store, 1);

  EXPECT_EQ(integrity(store), "ok");
  EXPECT_EQ(integrity(cache), "ok");
  EXPECT_EQ(integrity(clean / "llm_cache.sqlite"), "ok");

  json a = read_json(clean / "run" / "report.json"), b = read_json(killed / "run" / "report.json");
  ASSERT_FALSE(a.is_discarded());
  ASSERT_FALSE(b.is_discarded());
  ASSERT_EQ(a["n_questions"], 21);
  a = stable(a);
  b = stable(b);
  // Per question first (readable failures), then the whole report.
  ASSERT_EQ(a["questions"].size(), b["questions"].size());
  int identical = 0;
  for (size_t i = 0; i < a["questions"].size(); ++i) {
    EXPECT_EQ(a["questions"][i], b["questions"][i]) << a["questions"][i]["question_id"];
    identical += a["questions"][i] == b["questions"][i];
  }
  std::cout << "kill -9: " << identical << " of 21 questions identical to the uninterrupted run\n";
  a.erase("questions");
  b.erase("questions");
  for (const auto& [k, v] : a.items()) EXPECT_EQ(v, b[k]) << "report.json field " << k;
  EXPECT_EQ(a, b);
}

}  // namespace
}  // namespace nl2sql
