// Issue 22, over a whole run against the in-process fake server: per question each distinct
// query (after normalization) is executed once through the run's executor, and the candidates,
// the fixer, judging and selection all see its result; the fix loops of a question's candidates
// run side by side, none waiting for another's rounds.
#include <gtest/gtest.h>

#include <atomic>

#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <set>

#include "nl2sql/core/config.h"
#include "nl2sql/fix/execution_memo.h"
#include "nl2sql/pipeline/pipeline.h"
#include "nl2sql/run/run_data.h"
#include "support/fake_openai_server.h"
#include "support/mini_run.h"
#include "support/records.h"
#include "support/test_env.h"

namespace nl2sql::pipeline {
namespace {

namespace fs = std::filesystem;
using llm::testing::completion_body;
using llm::testing::FakeOpenAiServer;
using llm::testing::FakeReply;
using nlohmann::json;

// Six baseline samples per question, the fixer (2 rounds), self-consistency; no other model call.
core::Config sharing_config(const std::string& base_url) {
  core::Config config(json::parse(R"({
    "llm": {"models": {"fake": {"base_url": "", "model": "fake-coder", "api_key_env": ""}},
            "default_profile": "fake", "cache": {"mode": "off"}, "preflight": false,
            "retry": {"max_attempts": 1, "base_delay_s": 0.01, "max_delay_s": 0.01}},
    "context": {"keywords": {"llm": false}},
    "generate": {"generators": [{"name": "baseline", "samples": 6}]},
    "fix": {"enabled": true, "max_rounds": 2},
    "run": {"selectors": ["self_consistency"], "primary_selector": "self_consistency", "threads": 1}
  })"));
  config.set("llm.models.fake.base_url", base_url);
  return config;
}

std::string content_of(const httplib::Request& req) {
  const json body = json::parse(req.body);
  std::string out;
  for (const auto& m : body["messages"]) out += m["content"].get<std::string>();
  return out;
}

bool is_fix(const std::string& content) { return content.find("The query that was tried:") != std::string::npos; }

FakeReply sql_reply(const std::string& sql) { return FakeReply{200, completion_body("```sql\n" + sql + "\n```")}; }

const char* kCount = "SELECT count(*) FROM school";
const char* kCountRelaid = "SELECT  count(*)\n   FROM school ";
const char* kBroken = "SELECT name FROM no_such_table";
const char* kFixed = "SELECT name FROM school";

class ExecutionSharing : public ::testing::Test {
 protected:
  void SetUp() override { data_ = testing::build_mini_bird(dir_ / "mini"); }
  RunOptions options(const core::Config& config, const fs::path& out) {
    auto o = testing::mini_run_options(config, data_, out, dir_ / "index");
    o.filter.db_id = "regional_schools";
    o.filter.ranges = "0-3";
    return o;
  }
  // The same, counting the run's own executions (the executor's fault hook) into `executed`.
  RunOptions counting(const core::Config& config, const fs::path& out, std::atomic<int>& executed) {
    RunOptions o = options(config, out);
    o.db_fault_injector = [&executed](uint64_t, std::string_view) {
      ++executed;
      return Status::ok();
    };
    return o;
  }
  // Question 0 alone, with `selector` as the only and primary selector.
  RunOptions one_question_with(const std::string& base_url, const std::string& selector) {
    core::Config config = sharing_config(base_url);
    config.set("run.selectors", json::array({selector}));
    config.set("run.primary_selector", selector);
    auto o = options(config, dir_ / ("run-" + selector));
    o.filter.ranges = "0";
    return o;
  }
  // Question 0 alone under `config`, in `out`: its written record, or null (with the failure
  // reported) when the run did not finish it.
  json question_zero(const core::Config& config, const fs::path& out) {
    auto o = options(config, out);
    o.filter.ranges = "0";
    auto summary = run(o);
    EXPECT_TRUE(summary.is_ok()) << summary.status().message();
    if (!summary.is_ok() || summary->finished != 1u) return json();
    auto data = run::load_run(out);
    EXPECT_TRUE(data.is_ok()) << data.status().message();
    if (!data.is_ok()) return json();
    auto records = testing::written_records(*data);
    EXPECT_EQ(records.size(), 1u);
    return records.size() == 1 ? records[0] : json();
  }
  testing::TempDir dir_;
  fs::path data_;
};

TEST_F(ExecutionSharing, EachDistinctQueryRunsOncePerQuestionAndEveryStageSeesItsResult) {
  // Questions run one at a time; each gets six samples: the count query twice, the same query
  // laid out differently twice, and a broken query twice, which the fixer turns into kFixed.
  std::mutex mu;
  int generated = 0;
  std::atomic<int> fix_requests{0};
  FakeOpenAiServer server([&](const httplib::Request& req, int64_t) {
    const std::string content = content_of(req);
    if (is_fix(content)) {
      ++fix_requests;
      return sql_reply(kFixed);
    }
    std::lock_guard lock(mu);
    const int k = generated++ % 3;
    return sql_reply(k == 0 ? kCount : k == 1 ? kCountRelaid : kBroken);
  });
  // A first run builds the value index and the metadata (their queries go through the same
  // executor, once per database); the counted run reuses them.
  auto warm = run(options(sharing_config(server.base_url()), dir_ / "warm"));
  ASSERT_TRUE(warm.is_ok()) << warm.status().message();
  ASSERT_EQ(generated, 24);
  // The two broken candidates of a question are fixed once: one fix request per question.
  EXPECT_EQ(fix_requests.load(), 4);
  std::atomic<uint64_t> executions{0};
  auto o = options(sharing_config(server.base_url()), dir_ / "run");
  o.db_fault_injector = [&](uint64_t, std::string_view) {
    ++executions;
    return Status::ok();
  };
  auto summary = run(o);
  ASSERT_TRUE(summary.is_ok()) << summary.status().message();
  ASSERT_EQ(summary->finished, 4u);
  ASSERT_EQ(summary->failed, 0u);
  EXPECT_EQ(generated, 48);
  // Per question: the count query, the broken one and its fix, and gold (run for the judge from
  // the question's start, through the same executor). Executed once per candidate and round, as
  // before the memo, it would be 6 + 2 + 1 = 9.
  EXPECT_EQ(executions.load(), 4u * 4u);

  auto data = run::load_run(dir_ / "run");
  ASSERT_TRUE(data.is_ok()) << data.status().message();
  auto records = testing::written_records(*data);
  ASSERT_EQ(records.size(), 4u);
  for (const auto& r : records) {
    const std::string qid = r.value("question_id", "");
    const auto& cands = r["candidates"];
    ASSERT_EQ(cands.size(), 6u) << qid;
    std::set<int> count_clusters, fixed_clusters;
    size_t fixed = 0, shared = 0;
    for (const auto& c : cands) {
      const std::string sql = fix::normalize_sql(c.value("sql", ""));
      EXPECT_TRUE(c.value("executable_after_fix", false)) << qid << " " << sql;
      if (sql == fix::normalize_sql(kCount)) {
        count_clusters.insert(c.value("cluster", -2));
        EXPECT_TRUE(c.value("fix_rounds", json::array()).empty()) << qid;
      } else {
        EXPECT_EQ(sql, kFixed) << qid;
        ++fixed;
        fixed_clusters.insert(c.value("cluster", -2));
        const auto& rounds = c["fix_rounds"];
        if (c.contains("fix_shared_with")) {  // fixed once with the other broken candidate
          ++shared;
          EXPECT_TRUE(rounds.empty()) << qid;
          continue;
        }
        ASSERT_EQ(rounds.size(), 1u) << qid;
        EXPECT_EQ(rounds[0].value("failure_class", ""), "no_such_table") << qid;
        // The fixer saw the fixed query's rows (the mini set has schools).
        EXPECT_GT(rounds[0]["execution_after"].value("rows", 0), 0) << qid;
      }
    }
    EXPECT_EQ(fixed, 2u) << qid;
    EXPECT_EQ(shared, 1u) << qid;
    // Judging and clustering saw one result per query: the four count candidates form one
    // cluster, the two fixed ones another.
    ASSERT_EQ(count_clusters.size(), 1u) << qid;
    ASSERT_EQ(fixed_clusters.size(), 1u) << qid;
    EXPECT_NE(*count_clusters.begin(), *fixed_clusters.begin()) << qid;
    EXPECT_GE(*count_clusters.begin(), 0) << qid;
    // Selection: self-consistency takes the larger cluster.
    EXPECT_EQ(fix::normalize_sql(r["selections"]["self_consistency"].value("sql", "")), kCount) << qid;
  }
}

TEST_F(ExecutionSharing, ACandidatesFixRoundsDoNotWaitForOtherCandidates) {
  // All six candidates fail; each fix request is held until every candidate's first fix request
  // has arrived. Fix loops started in waves would never have six at once: the held requests give
  // up after 10 s and the count below shows it.
  std::mutex mu;
  std::condition_variable cv;
  int fixing = 0, most = 0, generated = 0;
  FakeOpenAiServer server([&](const httplib::Request& req, int64_t) {
    const std::string content = content_of(req);
    std::unique_lock lock(mu);
    // Six different broken queries (the same one would be fixed once for all six).
    if (!is_fix(content)) return sql_reply(std::string(kBroken) + " -- sample " + std::to_string(generated++));
    ++fixing;
    most = std::max(most, fixing);
    cv.notify_all();
    cv.wait_for(lock, std::chrono::seconds(10), [&] { return most >= 6; });
    --fixing;
    return sql_reply(kFixed);
  });
  const json record = question_zero(sharing_config(server.base_url()), dir_ / "run");
  ASSERT_FALSE(record.is_null());
  EXPECT_EQ(most, 6) << "the six candidates' fix rounds were not in flight together";
  for (const auto& c : record["candidates"]) EXPECT_EQ(c.value("sql", ""), kFixed);
}

// Two one-sample generators, told apart by temperature: "first" (0.1) and "second" (0.9).
core::Config two_generators_config(const std::string& base_url) {
  core::Config config = sharing_config(base_url);
  config.set("generate.generators", json::parse(R"([{"name": "baseline", "label": "first", "samples": 1, "temperature": 0.1},
                                                     {"name": "baseline", "label": "second", "samples": 1, "temperature": 0.9}])"));
  return config;
}

bool is_second(const httplib::Request& req) { return json::parse(req.body).value("temperature", 0.0) > 0.5; }

TEST_F(ExecutionSharing, AGeneratorsCandidatesAreFixedWhileALaterGeneratorStillWaits) {
  // The second generator's request is held until a fix request has arrived (10 s at most): fix
  // loops that start only when every generator is done never send one in time.
  std::mutex mu;
  std::condition_variable cv;
  bool fix_seen = false, second_answered = false, fixed_before_second = false;
  FakeOpenAiServer server([&](const httplib::Request& req, int64_t) {
    std::unique_lock lock(mu);
    if (is_fix(content_of(req))) {
      fix_seen = true;
      fixed_before_second = !second_answered;
      cv.notify_all();
      return sql_reply(kFixed);
    }
    if (!is_second(req)) return sql_reply(kBroken);
    cv.wait_for(lock, std::chrono::seconds(10), [&] { return fix_seen; });
    second_answered = true;
    return sql_reply(kCount);
  });
  const json record = question_zero(two_generators_config(server.base_url()), dir_ / "run");
  ASSERT_FALSE(record.is_null());
  EXPECT_TRUE(fixed_before_second) << "the first generator's candidate was fixed only after the second answered";
  std::map<std::string, std::string> sql_of;
  for (const auto& c : record["candidates"]) sql_of[c.value("id", "")] = c.value("sql", "");
  EXPECT_EQ(sql_of["first#0"], kFixed);
  EXPECT_EQ(sql_of["second#0"], kCount);
}

TEST_F(ExecutionSharing, TheFirstCandidateInPoolOrderIsFixedWhicheverGeneratorAnswersFirst) {
  // Both generators write the same broken query; the first generator answers only after the
  // second has (10 s at most). The first generator's candidate is still the one fixed, and the
  // second's takes its outcome: one fix request, as when the whole pool starts at once.
  std::mutex mu;
  std::condition_variable cv;
  bool second_answered = false;
  int fix_requests = 0;
  FakeOpenAiServer server([&](const httplib::Request& req, int64_t) {
    std::unique_lock lock(mu);
    const std::string content = content_of(req);
    if (is_fix(content)) {
      ++fix_requests;
      return sql_reply(kFixed);
    }
    if (is_second(req)) {
      second_answered = true;
      cv.notify_all();
    } else {
      cv.wait_for(lock, std::chrono::seconds(10), [&] { return second_answered; });
    }
    return sql_reply(kBroken);
  });
  const json record = question_zero(two_generators_config(server.base_url()), dir_ / "run");
  ASSERT_FALSE(record.is_null());
  EXPECT_EQ(fix_requests, 1);
  std::map<std::string, json> by_id;
  for (const auto& c : record["candidates"]) by_id[c.value("id", "")] = c;
  ASSERT_EQ(by_id.size(), 2u);
  EXPECT_EQ(by_id["first#0"].value("fix_shared_with", ""), "");
  EXPECT_FALSE(by_id["first#0"].value("fix_rounds", json::array()).empty());
  EXPECT_EQ(by_id["second#0"].value("fix_shared_with", ""), "first#0");
  EXPECT_EQ(by_id["second#0"].value("sql", ""), kFixed);
}

// Requests of one kind in flight, each held until `want` of them have been in flight at once
// (10 s at most): requests sent one after another never get there, and `most` shows it.
struct HeldTogether {
  int want = 0, now = 0, most = 0;
  void hold(std::unique_lock<std::mutex>& lock, std::condition_variable& cv) {
    ++now;
    most = std::max(most, now);
    cv.notify_all();
    cv.wait_for(lock, std::chrono::seconds(10), [&] { return most >= want; });
    --now;
  }
};

TEST_F(ExecutionSharing, AGeneratorsSamplesAndTheTournamentsDuelsGoOutTogether) {
  // Six samples of one generator, then three results for the tournament (three pairs, both
  // orders: six duels), each kind held until six are in flight.
  std::mutex mu;
  std::condition_variable cv;
  HeldTogether generating{6}, dueling{6};
  int sample = 0;
  FakeOpenAiServer server([&](const httplib::Request& req, int64_t) {
    const std::string content = content_of(req);
    std::unique_lock lock(mu);
    if (content.find("Two SQLite queries were written for the same question") != std::string::npos) {
      dueling.hold(lock, cv);
      return FakeReply{200, completion_body("Candidate A answers the question.\n\nWinner: A")};
    }
    generating.hold(lock, cv);
    return sql_reply("SELECT name FROM school WHERE school_id = " + std::to_string(1 + sample++ % 3));
  });
  auto summary = run(one_question_with(server.base_url(), "tournament"));
  ASSERT_TRUE(summary.is_ok()) << summary.status().message();
  ASSERT_EQ(summary->finished, 1u);
  EXPECT_EQ(generating.most, 6) << "the generator's samples were not in flight together";
  EXPECT_EQ(dueling.most, 6) << "the tournament's duels were not in flight together";
}

TEST_F(ExecutionSharing, TheSeparatingInstanceDuelsAsksGoOutTogether) {
  // Three results make three duels, each asking the model three times about its instance, held
  // until six asks are in flight: duel after duel would never be more than three at once.
  std::mutex mu;
  std::condition_variable cv;
  HeldTogether asking{6};
  int sample = 0;
  FakeOpenAiServer server([&](const httplib::Request& req, int64_t) {
    const std::string content = content_of(req);
    std::unique_lock lock(mu);
    if (content.find("Answer a question about a database by reading its data yourself") != std::string::npos) {
      asking.hold(lock, cv);
      return FakeReply{200, completion_body("```json\n[\"Lipová Primary\"]\n```")};
    }
    return sql_reply("SELECT name FROM school WHERE school_id = " + std::to_string(1 + sample++ % 3));
  });
  auto summary = run(one_question_with(server.base_url(), "separating_instances"));
  ASSERT_TRUE(summary.is_ok()) << summary.status().message();
  ASSERT_EQ(summary->finished, 1u);
  EXPECT_GE(asking.most, 6) << "the duels' asks were not in flight together";
}

TEST_F(ExecutionSharing, GoldRunsOnceFromTheStartAndACandidateWithItsTextTakesThatRun) {
  // Every sample answers its question's gold query, laid out differently (blanks only). Gold
  // runs from the question's start through the run's executor (questions 0-3 of
  // regional_schools: four gold queries), the judge takes it and runs only question 2's tie
  // probe (ORDER BY population DESC LIMIT 1), and the candidates take gold's run: nothing else
  // runs. With another answer, gold runs all the same and the candidates' query once per
  // question.
  const json dev = testing::read_json_file(data_ / "dev.json");
  auto gold_of = [&](const std::string& content) -> std::string {
    for (const auto& q : dev)
      if (q.value("db_id", "") == "regional_schools" && content.find(q.value("question", "")) != std::string::npos)
        return q.value("SQL", "");
    return "";
  };
  bool answer_gold = true;
  FakeOpenAiServer server([&](const httplib::Request& req, int64_t) {
    const std::string gold = gold_of(content_of(req));
    if (!answer_gold || gold.empty()) return sql_reply(kFixed);
    std::string relaid = gold;  // no literal of these queries holds " FROM "
    relaid.replace(relaid.find(" FROM "), 6, "\n    FROM  ");
    return sql_reply(relaid);
  });
  std::atomic<int> executed{0};
  auto counted = [&](const core::Config& config, const fs::path& out) { return counting(config, out, executed); };
  // A first run builds the value index (the run's executor scans the database for it).
  ASSERT_TRUE(run(options(sharing_config(server.base_url()), dir_ / "warm")).is_ok());
  auto same = run(counted(sharing_config(server.base_url()), dir_ / "same"));
  ASSERT_TRUE(same.is_ok()) << same.status().message();
  ASSERT_EQ(same->finished, 4u);
  EXPECT_EQ(same->correct, 4u);  // gold's answer, whichever way it came
  EXPECT_EQ(same->eval_executions, 1u);
  EXPECT_EQ(executed.load(), 4);
  answer_gold = false;
  executed = 0;
  auto other = run(counted(sharing_config(server.base_url()), dir_ / "other"));
  ASSERT_TRUE(other.is_ok()) << other.status().message();
  ASSERT_EQ(other->finished, 4u);
  EXPECT_EQ(other->eval_executions, 1u);
  EXPECT_EQ(executed.load(), 8);  // gold and kFixed, once per question
}

TEST_F(ExecutionSharing, ADistinctGoldRunsAsItsPlainTwinWhichAnswersBothForms) {
  // Question 16 (music_store) has a DISTINCT gold. Half the samples write it, half write it
  // without DISTINCT: gold's one run (its plain twin, repeats dropped for the judge) answers
  // both forms, and nothing else runs. Gold's verdict is its own.
  const json dev = testing::read_json_file(data_ / "dev.json");
  std::string gold;
  for (const auto& q : dev)
    if (q.is_object() && q.contains("question_id") && q["question_id"] == 16) gold = q["SQL"].get<std::string>();
  ASSERT_NE(gold.find("SELECT DISTINCT "), std::string::npos);
  std::string plain = gold;
  plain.replace(plain.find("SELECT DISTINCT "), 16, "SELECT ");
  std::atomic<int> sample{0};
  FakeOpenAiServer server([&](const httplib::Request&, int64_t) { return sql_reply(sample++ % 2 ? plain : gold); });
  std::atomic<int> executed{0};
  auto in_music_store = [&](const fs::path& out, std::atomic<int>* count) {
    RunOptions o = count ? counting(sharing_config(server.base_url()), out, *count)
                         : options(sharing_config(server.base_url()), out);
    o.filter.db_id = "music_store";
    o.filter.ranges = "16";
    return o;
  };
  ASSERT_TRUE(run(in_music_store(dir_ / "warm", nullptr)).is_ok());  // builds the value index
  auto summary = run(in_music_store(dir_ / "run", &executed));
  ASSERT_TRUE(summary.is_ok()) << summary.status().message();
  ASSERT_EQ(summary->finished, 1u);
  EXPECT_EQ(executed.load(), 1);
  auto data = run::load_run(dir_ / "run");
  ASSERT_TRUE(data.is_ok()) << data.status().message();
  auto records = testing::written_records(*data);
  ASSERT_EQ(records.size(), 1u);
  int gold_form = 0;
  for (const auto& c : records[0]["candidates"]) {
    if (c.value("sql", "") != gold) continue;
    ++gold_form;
    EXPECT_EQ(c.value("correct", json()), json(true)) << c.dump();
  }
  EXPECT_EQ(gold_form, 3);
}

TEST_F(ExecutionSharing, ACandidateTakesGoldsRunShapedAsItsOwnWouldBe) {
  // fix.keep_rows 1: question 1's answer (three charter schools) is kept as its first row plus
  // the digest of the whole answer, as the candidate's own run would keep it: gold's run is
  // handed to the candidates as it is. Nothing but gold runs (and question 2's tie probe).
  const json dev = testing::read_json_file(data_ / "dev.json");
  FakeOpenAiServer server([&](const httplib::Request& req, int64_t) {
    const std::string content = content_of(req);
    for (const auto& q : dev)
      if (q.value("db_id", "") == "regional_schools" && content.find(q.value("question", "")) != std::string::npos)
        return sql_reply(q.value("SQL", ""));
    return sql_reply(kFixed);
  });
  std::atomic<int> executed{0};
  auto counted = [&](const core::Config& config, const fs::path& out) { return counting(config, out, executed); };
  core::Config config = sharing_config(server.base_url());
  config.set("fix.keep_rows", 1);
  ASSERT_TRUE(run(options(config, dir_ / "warm")).is_ok());  // builds the value index
  auto r = run(counted(config, dir_ / "hashed"));
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  ASSERT_EQ(r->finished, 4u);
  EXPECT_EQ(r->correct, 4u);
  EXPECT_EQ(r->eval_executions, 1u);
  EXPECT_EQ(executed.load(), 4);
  const run::QuestionRecord* q1 = nullptr;
  for (const auto& rec : r->records)
    if (rec.index == 1) q1 = &rec;
  ASSERT_NE(q1, nullptr);
  ASSERT_FALSE(q1->candidates.empty());
  const auto& execution = q1->candidates[0].execution;
  EXPECT_EQ(execution.rows, 3u) << generate::to_json(execution).dump();
  EXPECT_TRUE(execution.error.empty()) << generate::to_json(execution).dump();

  // eval.row_cap 2: question 1's answer is larger than the cap, so each candidate that wrote
  // gold's text sees what its own run would: stopped at the row cap, which the fixer is told
  // (its answer, gold's text again, ends the rounds). Gold, judged without the cap, runs once,
  // and those candidates are judged on it: nothing else runs.
  config.set("eval.row_cap", 2);
  executed = 0;
  auto capped = run(counted(config, dir_ / "capped"));
  ASSERT_TRUE(capped.is_ok()) << capped.status().message();
  ASSERT_EQ(capped->finished, 4u);
  EXPECT_EQ(capped->eval_executions, 1u);
  EXPECT_EQ(executed.load(), 4);
  EXPECT_EQ(capped->correct, 4u);
  for (const auto& rec : capped->records)
    if (rec.index == 1) q1 = &rec;
  const auto& rounds = q1->candidates[0].fix_rounds;
  ASSERT_FALSE(rounds.empty()) << generate::to_json(q1->candidates[0]).dump();
  EXPECT_NE(rounds[0].feedback.find("result has more than 2 rows"), std::string::npos) << rounds[0].feedback;
}

}  // namespace
}  // namespace nl2sql::pipeline
