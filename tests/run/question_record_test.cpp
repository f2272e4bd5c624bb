// The typed question record: its JSON layout reads back to the same bytes, absent fields read as
// empty, wrong types and unknown versions are errors that name the question and the field.
#include "nl2sql/run/question_record.h"

#include <gtest/gtest.h>

#include "nl2sql/run/run_data.h"
#include "nl2sql/run/run_store.h"
#include "report/run_fixture.h"
#include "support/test_env.h"

namespace nl2sql::run {
namespace {

using nlohmann::json;

// A record in the layout the pipeline writes (every field filled).
json full_record() {
  return json::parse(R"({
    "question_id": "q7", "index": 7, "db_id": "shop", "question": "How many?", "evidence": "",
    "difficulty": "simple", "gold_sql": "SELECT COUNT(*) FROM t", "status": "ok", "error": "",
    "features": ["aggregate"],
    "context": {"keywords": [{"text": "how", "source": "question"}], "values": [], "calls": []},
    "candidates": [
      {"id": "dc#0", "generator": "dc", "profile": "p", "sample_index": 0, "reasoning": "r",
       "raw_response": "x", "sql": "SELECT COUNT(*) FROM t", "original_sql": "SELECT COUNT(*) FROM t",
       "extraction_ok": true, "extraction_error": "", "sql_trailing": "", "rejected": false,
       "rejection": "", "execution": {"executed": true, "status": "ok", "error": "", "rows": 1,
       "columns": 1, "preview": "3", "elapsed_ms": 0.5},
       "fix_rounds": [{"round": 1, "failure_class": "syntax"}], "still_failing": false, "calls": [],
       "correct": true, "cluster": 0, "executable_before_fix": false, "executable_after_fix": true,
       "verdict": {"outcome": "RES3", "verdicts": {"bird": true}}},
      {"id": "qp#0", "generator": "qp", "sql": "SELECT 1", "correct": null, "cluster": 1,
       "executable_before_fix": true, "executable_after_fix": true,
       "verdict": {"outcome": "RES2", "verdicts": {"bird": false}}}
    ],
    "selections": {"tournament": {"chosen": 0, "candidate_id": "dc#0", "sql": "SELECT COUNT(*) FROM t",
                   "correct": true, "llm_calls": 2, "cost_usd": 0.25, "latency_s": 1.5,
                   "explanation": {"wins": [1, 0]}, "calls": [{"prompt_tokens": 10}]}},
    "primary_selector": "tournament", "prediction": "SELECT COUNT(*) FROM t",
    "verdict": {"verdicts": {"bird": true}, "outcome": "RES3", "soft_f1": 1.0, "pred_status": "ok",
                "error": "", "gold_status": "ok", "gold_error": "", "gold_unusable": false,
                "gold_tie_dependent": false, "pred_rows": 1, "gold_rows": 1, "difficulty": "simple"},
    "bounds": {"oracle": true, "adversarial": false},
    "curves": {"1": {"upper": true, "lower": true, "self_consistency": true, "selector": null},
               "10": {"upper": true, "lower": false, "self_consistency": true, "selector": true}},
    "usage": {"generate": {"calls": 2, "prompt_tokens": 100, "completion_tokens": 20, "cost_usd": 0.5,
              "latency_s": 2.0, "degraded_prompts": 1},
              "select": {"calls": 1, "prompt_tokens": 10, "completion_tokens": 2, "cost_usd": 0.0, "latency_s": 0.1}},
    "llm_faults": {"failed_calls": 1, "retries": 2, "failed_by_kind": {"timeout": 1}, "parse_failures": 1,
                   "parse_failures_by_stage": {"fix": 1}},
    "latency_s": {"context": 0.1, "generate": 2.0, "total": 2.1},
    "weights": {"dc": 0.5, "qp": 0.25}
  })");
}

TEST(QuestionRecord, WrittenLayoutReadsBackToTheSameJson) {
  const json j = full_record();
  auto r = record_from_json(j);
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_EQ(to_json(*r), j) << to_json(*r).dump(1);
  // Typed fields as a reader sees them.
  EXPECT_EQ(r->index, 7);
  ASSERT_EQ(r->candidates.size(), 2u);
  EXPECT_EQ(r->candidates[0].fix_rounds(), 1u);
  ASSERT_TRUE(r->candidates[1].judged.has_value());
  EXPECT_FALSE(r->candidates[1].judged->correct.has_value());  // gold unusable
  EXPECT_EQ(r->selections.at("tournament").cost_usd, 0.25);
  EXPECT_FALSE(r->curves.at(1).selector.has_value());
  EXPECT_EQ(r->curves.at(10).lower, false);
  EXPECT_EQ(r->usage.at("generate").degraded_prompts, 1);
  EXPECT_EQ(r->llm_faults.failed_by_kind.at("timeout"), 1);
  EXPECT_EQ(r->weights->at("qp"), 0.25);
  EXPECT_TRUE(r->correct("bird"));
  EXPECT_TRUE(r->correct("spider_ts"));  // a metric the verdict lacks: the outcome (RES3) decides
}

TEST(QuestionRecord, CorrectnessFollowsTheMetricThenTheOutcome) {
  QuestionRecord r;
  EXPECT_FALSE(r.correct("bird"));  // not evaluated
  r.verdict = Verdict{};
  r.verdict->outcome = "RES3";
  EXPECT_TRUE(r.correct("bird"));  // an older run: no verdict per metric, RES3 is correct
  r.verdict->verdicts["bird"] = false;
  EXPECT_FALSE(r.correct("bird"));
  r.verdict->verdicts["bird"] = true;
  r.ok = false;
  EXPECT_FALSE(r.correct("bird"));  // a failed question counts as wrong
}

TEST(QuestionRecord, FailedRecordKeepsItsShape) {
  QuestionRecord r;
  r.question_id = "q1";
  r.ok = false;
  r.error = "context stage: database 'x' is not available";
  json j = to_json(r);
  EXPECT_EQ(j["status"], "error");
  EXPECT_TRUE(j["verdict"].is_null());
  EXPECT_EQ(j["llm_faults"]["failed_calls"], 0);  // present, zeros
  for (const char* absent : {"context", "bounds", "curves", "usage", "latency_s", "weights"})
    EXPECT_FALSE(j.contains(absent)) << absent;
  auto back = record_from_json(j);
  ASSERT_TRUE(back.is_ok());
  EXPECT_EQ(*back, r);
}

TEST(QuestionRecord, AbsentFieldsReadAsEmptyUnknownKeysAreIgnored) {
  auto r = record_from_json({{"question_id", "3"}, {"index", 3}, {"added_by_a_later_version", {1, 2}}});
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_TRUE(r->ok);
  EXPECT_TRUE(r->candidates.empty());
  EXPECT_FALSE(r->verdict.has_value());
  EXPECT_FALSE(r->bounds.has_value());
}

TEST(QuestionRecord, WrongTypesNameTheQuestionAndTheField) {
  auto message = [](json j) {
    auto r = record_from_json(j);
    return r.is_ok() ? std::string("(read)") : r.status().message();
  };
  EXPECT_NE(message({{"question_id", "3"}}).find("question 3"), std::string::npos);
  EXPECT_FALSE(record_from_json({{"index", 4}}).is_ok());
  EXPECT_FALSE(record_from_json(json::array()).is_ok());
  const json base = {{"question_id", "4"}, {"index", 4}};
  auto with = [&](const char* key, json v) {
    json j = base;
    j[key] = std::move(v);
    return message(j);
  };
  EXPECT_NE(with("candidates", 1).find("\"candidates\""), std::string::npos);
  EXPECT_NE(with("status", 3).find("\"status\""), std::string::npos);
  EXPECT_NE(with("selections", json::array()).find("\"selections\""), std::string::npos);
  std::string m = with("usage", {{"generate", {{"calls", "two"}}}});
  EXPECT_NE(m.find("question 4"), std::string::npos) << m;
  EXPECT_NE(m.find("usage \"generate\""), std::string::npos) << m;
  EXPECT_NE(m.find("\"calls\""), std::string::npos) << m;
  m = with("candidates", json::array({{{"id", "dc#1"}, {"correct", "yes"}}}));
  EXPECT_NE(m.find("candidate dc#1"), std::string::npos) << m;
  EXPECT_NE(m.find("\"correct\""), std::string::npos) << m;
  EXPECT_NE(with("curves", {{"zero", json::object()}}).find("curve point \"zero\""), std::string::npos);
  EXPECT_NE(with("selections", {{"tournament", {{"llm_calls", "x"}}}}).find("selection \"tournament\""), std::string::npos);
  EXPECT_NE(with("verdict", {{"soft_f1", "high"}}).find("verdict"), std::string::npos);
}

TEST(QuestionRecord, VersionsThisBuildCannotReadAreRefused) {
  EXPECT_EQ(*record_version(json::object()), 1);  // before records were versioned
  EXPECT_EQ(*record_version({{"record_version", kRecordVersion}}), kRecordVersion);
  auto newer = record_version({{"record_version", kRecordVersion + 1}});
  ASSERT_FALSE(newer.is_ok());
  EXPECT_NE(newer.status().message().find("newer nl2sql"), std::string::npos);
  EXPECT_FALSE(record_version({{"record_version", "1"}}).is_ok());
  EXPECT_FALSE(record_from_json(full_record(), kRecordVersion + 1).is_ok());

  // A run folder written by a newer build: load_run says so, naming the manifest.
  testing::TempDir dir;
  json manifest = testing::fixture_manifest();
  manifest["record_version"] = kRecordVersion + 1;
  testing::write_run(dir / "run", manifest, testing::fixture_records());
  auto loaded = load_run(dir / "run");
  ASSERT_FALSE(loaded.is_ok());
  EXPECT_NE(loaded.status().message().find("manifest.json"), std::string::npos) << loaded.status().message();
}

// A record a reader cannot use stops load_run with the store, the question and the field named.
TEST(QuestionRecord, LoadRunNamesTheBadRecord) {
  testing::TempDir dir;
  auto records = testing::fixture_records();
  records[3]["bounds"] = "both";
  testing::write_run(dir / "run", testing::fixture_manifest(), records);
  auto loaded = load_run(dir / "run");
  ASSERT_FALSE(loaded.is_ok());
  const std::string m = loaded.status().message();
  EXPECT_NE(m.find(RunStore::kFileName), std::string::npos) << m;
  EXPECT_NE(m.find("question " + records[3]["question_id"].get<std::string>()), std::string::npos) << m;
  EXPECT_NE(m.find("\"bounds\""), std::string::npos) << m;
}

// The hand-made fixture (an older layout with extra verdict keys) reads, and what it writes reads
// back to the same record.
TEST(QuestionRecord, FixtureRecordsReadAndRoundTrip) {
  for (const auto& j : testing::fixture_records()) {
    auto r = record_from_json(j);
    ASSERT_TRUE(r.is_ok()) << r.status().to_string();
    auto again = record_from_json(to_json(*r));
    ASSERT_TRUE(again.is_ok());
    EXPECT_EQ(*again, *r) << r->question_id;
  }
}

}  // namespace
}  // namespace nl2sql::run
