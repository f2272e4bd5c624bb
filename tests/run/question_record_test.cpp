// The typed question record: its JSON layout (and a golden record a run wrote) reads back to the
// same bytes, absent fields read as empty; wrong types, unknown (renamed) keys and unknown
// versions are errors that name the question and the field (and, through load_run, the store and
// the version).
#include "nl2sql/run/question_record.h"

#include <gtest/gtest.h>

#include "nl2sql/core/files.h"
#include "nl2sql/run/run_data.h"
#include "nl2sql/run/run_store.h"
#include "report/run_fixture.h"
#include "support/test_env.h"

namespace nl2sql::run {
namespace {

using nlohmann::json;

// A model call as its trace writes it.
json call_json(const std::string& stage, int64_t prompt_tokens) {
  llm::LlmCallTrace c;
  c.stage = stage;
  c.template_name = "t_" + stage;
  c.profile = "p";
  c.prompt = "prompt";
  c.prompt_tokens = prompt_tokens;
  c.cached_tokens = 2;
  c.seed = 7;
  return llm::to_json(c);
}

// A candidate as the generate layer writes it, plus its judgement's keys.
json candidate_json(const std::string& id, const std::string& sql, bool with_round) {
  generate::Candidate c;
  c.id = id;
  c.generator = id.substr(0, id.find('#'));
  c.profile = "p";
  c.sql = c.original_sql = sql;
  c.execution.executed = true;
  c.execution.rows = 1;
  c.execution.columns = 1;
  c.execution.preview = "3";
  c.execution.elapsed_ms = 0.5;
  if (with_round) {
    generate::FixRound r;
    r.round = 1;
    r.failure_class = "syntax_error";
    auto call = llm::call_trace_from_json(call_json("fix", 30), "test");
    r.call = *call;
    c.fix_rounds.push_back(r);
  }
  c.calls.push_back(*llm::call_trace_from_json(call_json("generate", 20), "test"));
  json j = generate::to_json(c);
  return j;
}

// A record in the layout the pipeline writes (every field filled).
json full_record() {
  json j = json::parse(R"({
    "question_id": "q7", "index": 7, "db_id": "shop", "question": "How many?", "evidence": "",
    "difficulty": "simple", "gold_sql": "SELECT COUNT(*) FROM t", "status": "ok", "error": "",
    "features": ["aggregate"],
    "context": {"question_id": "q7", "db_id": "shop", "keywords": [{"text": "how", "source": "question"}],
                "values": [{"table": "t", "column": "c", "value": "v", "score": 0.5, "keyword": "how"}],
                "columns": [], "selected_columns": ["t.c"], "calls": [], "errors": [], "latency_s": 0.1},
    "selections": {"tournament": {"chosen": 0, "candidate_id": "dc#0", "sql": "SELECT COUNT(*) FROM t",
                   "correct": true, "llm_calls": 2, "cost_usd": 0.25, "latency_s": 1.5,
                   "explanation": {"scores": {"dc#0": 1.0, "qp#0": 0.0},
                                   "decisions": [{"a": "dc#0", "b": "qp#0", "by": "model", "winner": "dc#0"}],
                                   "model_pairs": 1, "pairs_answered_by_same_sql": 0, "pairs_over_cap": 0,
                                   "clusters": [{"members": ["dc#0"], "representative": "dc#0"}]}}},
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
  j["context"]["calls"].push_back(call_json("keywords", 5));
  json dc = candidate_json("dc#0", "SELECT COUNT(*) FROM t", true);
  dc.update(json::parse(R"({"correct": true, "cluster": 0, "executable_before_fix": false,
                            "executable_after_fix": true, "verdict": {"outcome": "RES3", "verdicts": {"bird": true}}})"));
  json qp = candidate_json("qp#0", "SELECT 1", false);
  qp.update(json::parse(R"({"correct": null, "cluster": 1, "executable_before_fix": true,
                            "executable_after_fix": true, "verdict": {"outcome": "RES2", "verdicts": {"bird": false}}})"));
  j["candidates"] = json::array({dc, qp});
  j["selections"]["tournament"]["calls"] = json::array({call_json("select", 10), call_json("select", 11)});
  j["curve_calls"] = json::array({call_json("select", 12)});
  return j;
}

TEST(QuestionRecord, WrittenLayoutReadsBackToTheSameJson) {
  const json j = full_record();
  auto r = record_from_json(j);
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_EQ(to_json(*r).dump(), j.dump()) << to_json(*r).dump(1);
  // Typed fields as a reader sees them.
  EXPECT_EQ(r->index, 7);
  ASSERT_EQ(r->candidates.size(), 2u);
  EXPECT_EQ(r->candidates[0].fix_rounds.size(), 1u);
  EXPECT_EQ(r->candidates[0].fix_rounds[0].call.prompt_tokens, 30);
  ASSERT_TRUE(r->candidates[1].judged.has_value());
  EXPECT_FALSE(r->candidates[1].judged->correct.has_value());  // gold unusable
  EXPECT_EQ(r->selections.at("tournament").cost_usd, 0.25);
  const auto* duels = std::get_if<select::DuelExplanation>(&r->selections.at("tournament").explanation);
  ASSERT_NE(duels, nullptr);
  EXPECT_EQ(duels->decisions->at(0).winner, "dc#0");
  ASSERT_TRUE(r->context.has_value());
  EXPECT_EQ(r->context->values.at(0).keyword, "how");
  EXPECT_EQ(r->context->latency_s, 0.1);
  EXPECT_EQ(r->curve_calls.at(0).prompt_tokens, 12);
  EXPECT_FALSE(r->curves.at(1).selector.has_value());
  EXPECT_EQ(r->curves.at(10).lower, false);
  EXPECT_EQ(r->usage.at("generate").degraded_prompts, 1);
  EXPECT_EQ(r->llm_faults.failed_by_kind.at("timeout"), 1);
  EXPECT_EQ(r->weights->at("qp"), 0.25);
  EXPECT_TRUE(r->correct("bird"));
  EXPECT_TRUE(r->correct("spider_ts"));  // a metric the verdict lacks: the outcome (RES3) decides
  // Every call, in pipeline order, typed.
  std::vector<std::string> stages;
  for (const auto& c : recorded_calls(*r)) stages.push_back(c.stage + ":" + c.trace->stage);
  EXPECT_EQ(stages, (std::vector<std::string>{"context:keywords", "generate:generate", "fix:fix", "generate:generate",
                                              "select:select", "select:select", "curves:select"}));
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

TEST(QuestionRecord, AbsentFieldsReadAsEmptyUnknownKeysAreRefused) {
  auto unknown = record_from_json({{"question_id", "3"}, {"index", 3}, {"added_by_a_later_version", {1, 2}}});
  ASSERT_FALSE(unknown.is_ok());
  EXPECT_NE(unknown.status().message().find("\"added_by_a_later_version\""), std::string::npos)
      << unknown.status().message();
  EXPECT_NE(unknown.status().message().find("question 3"), std::string::npos) << unknown.status().message();
  auto r = record_from_json({{"question_id", "3"}, {"index", 3}});
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
  EXPECT_NE(m.find("question 4"), std::string::npos) << m;
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

// The hand-made fixture (in the current layout) reads, and what it writes reads back to the same
// record.
TEST(QuestionRecord, FixtureRecordsReadAndRoundTrip) {
  for (const auto& j : testing::fixture_records()) {
    auto r = record_from_json(j);
    ASSERT_TRUE(r.is_ok()) << r.status().to_string();
    auto again = record_from_json(to_json(*r));
    ASSERT_TRUE(again.is_ok());
    EXPECT_EQ(*again, *r) << r->question_id;
  }
}

// A final record as a run of the current layout wrote it to its store (tests/run/golden/: the
// first question of configs/quickstart.json on the bundled mini set, simulated): it reads, and
// writes back byte for byte. When a stage's JSON changes shape without its reader (or the other
// way round) this fails.
std::string golden_record_text() {
  auto text = core::read_file(testing::fixtures_dir().parent_path() / "run" / "golden" / "record_v1.json");
  EXPECT_TRUE(text.is_ok()) << text.status().to_string();
  std::string t = text.is_ok() ? *text : std::string("{}");
  while (!t.empty() && (t.back() == '\n' || t.back() == '\r')) t.pop_back();
  return t;
}

TEST(QuestionRecord, GoldenRecordReadsAndWritesBackByteForByte) {
  const std::string text = golden_record_text();
  auto r = record_from_json(json::parse(text));
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_EQ(to_json(*r).dump(-1, ' ', false, json::error_handler_t::replace), text);
  // It holds every stage: context, candidates with their calls, selections, curves.
  EXPECT_TRUE(r->context.has_value());
  EXPECT_FALSE(r->candidates.empty());
  EXPECT_FALSE(r->selections.empty());
  EXPECT_FALSE(r->curves.empty());
  EXPECT_FALSE(recorded_calls(*r).empty());
}

// A key renamed in the golden record — at the top, in a candidate's call, in a selection's
// explanation, in the context — is refused, naming the key and the question; load_run names the
// run store and the record version too.
TEST(QuestionRecord, ARenamedKeyIsRefusedNamingFileVersionQuestionAndKey) {
  const std::string text = golden_record_text();
  const json golden = json::parse(text);
  const std::string qid = golden["question_id"].get<std::string>();
  auto rename = [](json& obj, const char* from, const char* to) {
    ASSERT_TRUE(obj.contains(from)) << from;
    obj[to] = obj[from];
    obj.erase(from);
  };
  std::vector<json> renamed;
  renamed.push_back(golden);
  rename(renamed.back(), "primary_selector", "primary_method");
  renamed.push_back(golden);
  rename(renamed.back()["candidates"][0]["calls"][0], "template_hash", "template_digest");
  renamed.push_back(golden);
  rename(renamed.back()["context"], "selected_columns", "columns_selected");
  renamed.push_back(golden);
  {
    json& selections = renamed.back()["selections"];
    ASSERT_FALSE(selections.empty());
    json& e = selections.begin().value()["explanation"];
    ASSERT_TRUE(e.is_object() && !e.empty()) << selections.dump();
    rename(e, e.begin().key().c_str(), "renamed_key");
  }
  const std::vector<std::string> keys = {"primary_method", "template_digest", "columns_selected", "renamed_key"};
  for (size_t i = 0; i < renamed.size(); ++i) {
    auto r = record_from_json(renamed[i]);
    ASSERT_FALSE(r.is_ok()) << keys[i];
    EXPECT_NE(r.status().message().find("\"" + keys[i] + "\""), std::string::npos) << r.status().message();
    EXPECT_NE(r.status().message().find("question " + qid), std::string::npos) << r.status().message();
  }
  testing::TempDir dir;
  json manifest = testing::fixture_manifest();
  manifest["record_version"] = kRecordVersion;
  testing::write_run(dir / "run", manifest, {renamed[1]});
  auto loaded = load_run(dir / "run");
  ASSERT_FALSE(loaded.is_ok());
  const std::string m = loaded.status().message();
  EXPECT_NE(m.find(RunStore::kFileName), std::string::npos) << m;
  EXPECT_NE(m.find("record version " + std::to_string(kRecordVersion)), std::string::npos) << m;
  EXPECT_NE(m.find("\"template_digest\""), std::string::npos) << m;
}

}  // namespace
}  // namespace nl2sql::run
