#include "nl2sql/eval/judge.h"

#include <cmath>

#include <gtest/gtest.h>

#include "nl2sql/eval/evaluator.h"
#include "nl2sql/eval/report.h"
#include "support/fake_client.h"
#include "support/fake_openai_server.h"
#include "support/jsonl_dataset.h"
#include "support/test_env.h"

namespace nl2sql::eval {
namespace {

using llm::testing::completion_body;
using llm::testing::FakeOpenAiServer;
using llm::testing::FakeReply;

TEST(JudgeAnswer, ReadsEveryCodeAndItsReasoning) {
  for (int k = 1; k <= 6; ++k) {
    const std::string code = "RES" + std::to_string(k);
    auto v = read_judge_answer("Comparing both tables.\n```json\n{\"Classification code\": \"" + code +
                               "\", \"Reasoning\": \"because " + code + "\"}\n```");
    ASSERT_TRUE(v.is_ok()) << code << ": " << v.status().message();
    EXPECT_EQ(v->code, code);
    EXPECT_EQ(v->reasoning, "because " + code);
  }
  auto loose = read_judge_answer("{'classification code': 'res 5', 'reasoning': 'extra column',}");
  ASSERT_TRUE(loose.is_ok()) << loose.status().message();
  EXPECT_EQ(loose->code, "RES5");
}

TEST(JudgeAnswer, MalformedAnswersAreErrors) {
  EXPECT_FALSE(read_judge_answer("The answer is correct.").is_ok());
  EXPECT_FALSE(read_judge_answer("{\"Reasoning\": \"no code\"}").is_ok());
  EXPECT_FALSE(read_judge_answer("{\"Classification code\": \"RES9\"}").is_ok());
  EXPECT_FALSE(read_judge_answer("{\"Classification code\": 3}").is_ok());
  EXPECT_FALSE(read_judge_answer("").is_ok());
}

TEST(JudgeTable, ShowsColumnNamesFailuresAndEmptyResults) {
  db::ExecutionResult r;
  r.result.columns = {"account_id", "name"};
  r.result.rows = {{db::Value::integer(42), db::Value::text("Bank \"A\"")}, {db::Value::real(1.5), db::Value::null()}};
  EXPECT_EQ(judge_table(r), R"([{"account_id": 42, "name": "Bank \"A\""}, {"account_id": 1.5, "name": null}])");
  db::ExecutionResult empty;
  empty.result.columns = {"a", "b"};
  EXPECT_EQ(judge_table(empty), "None (no rows; columns: a, b)");
  db::ExecutionResult failed;
  failed.status = db::ExecStatus::kError;
  failed.error = "no such column: amount";
  EXPECT_EQ(judge_table(failed), "Failed to execute the query: no such column: amount");
}

TEST(JudgeTable, CutsAtFiveHundredCharacters) {
  db::ExecutionResult r;
  r.result.columns = {"v"};
  for (int i = 0; i < 200; ++i) r.result.rows.push_back({db::Value::text("é")});  // 2 bytes, 1 character
  const std::string t = judge_table(r);
  // 500 code points then the ellipsis; the first 500 characters are the start of the full text.
  size_t points = 0;
  for (unsigned char c : t) points += (c & 0xC0) != 0x80;
  EXPECT_EQ(points, 501u);
  EXPECT_EQ(t.substr(t.size() - 3), "…");
  EXPECT_EQ(t.rfind("[{\"v\": \"é\"}, {\"v\": \"é\"}", 0), 0u);
  // A short table is not cut.
  db::ExecutionResult small;
  small.result.columns = {"v"};
  small.result.rows = {{db::Value::integer(1)}};
  EXPECT_EQ(judge_table(small), "[{\"v\": 1}]");
  EXPECT_EQ(judge_table(r, 10), "[{\"v\": \"é\"…");
}

JudgedItem judged(const std::string& id, const std::string& code, const std::string& rule, bool ex) {
  JudgedItem j;
  j.question_id = id;
  j.result.code = code;
  j.result.error = code.empty() ? "judge answer: no JSON" : "";
  j.result.prompt_tokens = 10;
  j.result.completion_tokens = 5;
  j.result.cost_usd = 0.001;
  j.rule_code = rule;
  j.ex_correct = ex;
  j.gold_table = "[{\"n\": 1}]";
  j.pred_table = "[{\"n\": 1, \"m\": 2}]";
  return j;
}

TEST(JudgeSummary, AccuracyIsRes3PlusRes5OverAllQuestions) {
  // judge: RES3, RES5, RES2, RES1, unreadable → 2 / 5 = 40%; rule: RES3, RES2, RES2, RES1, RES5 → 40%.
  std::vector<JudgedItem> items = {judged("a", "RES3", "RES3", true), judged("b", "RES5", "RES2", false),
                                   judged("c", "RES2", "RES2", false), judged("d", "RES1", "RES1", false),
                                   judged("e", "", "RES5", true)};
  auto s = judge_summary(items, 200, 1);
  EXPECT_DOUBLE_EQ(s["semantic_accuracy"].get<double>(), 40.0);
  EXPECT_DOUBLE_EQ(s["rule_semantic_accuracy"].get<double>(), 40.0);
  EXPECT_DOUBLE_EQ(s["ex"].get<double>(), 40.0);
  EXPECT_EQ(s["codes"]["unparsed"], 1);
  EXPECT_EQ(s["codes"]["RES5"], 1);
  EXPECT_EQ(s["confusion_judge_by_rule"]["RES5"]["RES2"], 1);
  EXPECT_EQ(s["confusion_judge_by_rule"]["RES3"]["RES3"], 1);
  EXPECT_EQ(s["confusion_judge_by_rule"]["unparsed"]["RES5"], 1);
  // b: judge accepts, EX rejects; e: EX accepts, the judge's answer was unreadable.
  ASSERT_EQ(s["disagreements_with_ex"].size(), 2u);
  EXPECT_EQ(s["disagreements_with_ex"][0]["question_id"], "b");
  EXPECT_EQ(s["disagreements_with_ex"][0]["pred_table"], "[{\"n\": 1, \"m\": 2}]");
  EXPECT_EQ(s["disagreements_with_ex"][1]["question_id"], "e");
  EXPECT_EQ(s["tokens"]["prompt"], 50);
  EXPECT_EQ(s["tokens"]["completion"], 25);
  EXPECT_NEAR(s["cost_usd"].get<double>(), 0.005, 1e-12);
}

class JudgeEvalTest : public ::testing::Test {
 protected:
  void SetUp() override {
    testing::build_database(dir_ / "dbs" / "d" / "d.sqlite",
                            "CREATE TABLE t(id INTEGER PRIMARY KEY, name TEXT, score INTEGER);"
                            "INSERT INTO t VALUES (1,'a',10),(2,'b',10),(3,'c',5);");
    std::vector<std::string> lines;
    // The fake judge answers the code named in the question (or garbage for "broken").
    for (const char* want : {"RES1", "RES2", "RES3", "RES4", "RES5", "RES6", "broken", "nojson"})
      lines.push_back(std::string(R"({"question_id": "q_)") + want + R"(", "db_id": "d", "question": "want )" + want +
                      R"(", "sql": "SELECT name FROM t WHERE score = 10"})");
    ds_ = testing::jsonl_dataset(dir_.path(), lines);
  }
  static FakeReply judge_model(const httplib::Request& req, int64_t) {
    auto body = nlohmann::json::parse(req.body);
    const std::string user = body["messages"].back()["content"];
    const auto at = user.find("Question: want ");
    const std::string want = user.substr(at + 15, user.find('\n', at) - at - 15);
    if (want == "broken") return FakeReply(200, completion_body("```json\n{\"Classification code\": \"RES7\"}\n```"));
    if (want == "nojson") return FakeReply(200, completion_body("I think it is fine."));
    return FakeReply(200, completion_body("```json\n{\"Classification code\": \"" + want + "\", \"Reasoning\": \"asked\"}\n```"));
  }
  std::unique_ptr<llm::Client> client(const FakeOpenAiServer& server) {
    llm::LlmSettings s = llm::testing::one_profile_settings(server.base_url(), "fake-judge");
    s.cache.mode = llm::CacheMode::kReadWrite;  // a rerun must make no call
    s.cache.path = (dir_ / "llm_cache.sqlite").string();
    return llm::testing::client_from(s);
  }
  testing::TempDir dir_;
  data::Dataset ds_;
};

TEST_F(JudgeEvalTest, EveryCodeMalformedAnswersAndARerunWithoutCalls) {
  FakeOpenAiServer server(judge_model);
  std::vector<Prediction> preds;
  for (size_t i = 0; i < ds_.questions.size(); ++i) preds.push_back({"SELECT name FROM t WHERE score >= 10", true, ""});
  preds[0] = {"SELECT nope FROM t", true, ""};
  EvalOptions opts;
  opts.judge = true;
  opts.threads = 2;
  for (int run = 0; run < 2; ++run) {
    auto c = client(server);
    opts.judge_client = c.get();
    auto r = evaluate(ds_, preds, opts);
    ASSERT_TRUE(r.is_ok()) << r.status().message();
    EXPECT_EQ(server.requests(), 8) << "run " << run << ": the second run answers from the cache";
    ASSERT_EQ(r->judged.size(), 8u);
    for (int k = 0; k < 6; ++k) EXPECT_EQ(r->judged[static_cast<size_t>(k)].result.code, "RES" + std::to_string(k + 1));
    EXPECT_EQ(r->judged[6].result.code, "");
    EXPECT_NE(r->judged[6].result.error.find("RES7"), std::string::npos);
    EXPECT_EQ(r->judged[7].result.code, "");
    EXPECT_EQ(r->judged[0].pred_table.rfind("Failed to execute the query", 0), 0u);
    EXPECT_EQ(r->judged[1].gold_table, R"([{"name": "a"}, {"name": "b"}])");
    const auto& j = r->summary["judge"];
    EXPECT_DOUBLE_EQ(j["semantic_accuracy"].get<double>(), 25.0);  // RES3 + RES5 of 8
    EXPECT_EQ(j["codes"]["unparsed"], 2);
    EXPECT_EQ(j["cached_answers"], run == 0 ? 0 : 8);
    // The fake server reports 10 prompt + 5 completion tokens per answer.
    if (run == 0) {
      EXPECT_EQ(j["tokens"]["prompt"], 80);
    }
    // Rule codes: 7 predictions equal gold's answer (RES3), one fails (RES1): 7 / 8.
    EXPECT_DOUBLE_EQ(r->summary["rule_semantic_accuracy"].get<double>(), 87.5);
    // EX accepts 7; the judge accepts q_RES3 and q_RES5 of those, rejects q_RES1's failure too.
    EXPECT_EQ(j["disagreements_with_ex"].size(), 5u);
    const std::string md = report_to_markdown(*r);
    EXPECT_NE(md.find("Semantic accuracy (LLM judge)"), std::string::npos);
    EXPECT_NE(md.find("| RES3 | 0 | 0 | 1 | 0 | 0 | 0 |"), std::string::npos) << md;
  }
  // The prompt carries the question and both tables.
  const auto bodies = server.bodies();
  ASSERT_FALSE(bodies.empty());
  const std::string user = nlohmann::json::parse(bodies[0])["messages"].back()["content"];
  EXPECT_NE(user.find("[{\"name\": \"a\"}, {\"name\": \"b\"}]"), std::string::npos) << user;
}

TEST(JudgeAlignment, StratifiedSampleKeepsEveryCode) {
  std::vector<std::string> codes = {"RES3", "RES3", "RES2", "RES3", "RES1", "RES3", "RES2", "RES3", "RES2", "RES3"};
  // 6 RES3, 3 RES2, 1 RES1, n = 5: exact shares 3, 1.5, 0.5 → 3, 1, 0, then the remainders
  // (0.5 each) in code order: RES1 gets the fifth.
  auto s = stratified_sample(codes, 5, 11);
  ASSERT_EQ(s.size(), 5u);
  std::map<std::string, int> per;
  for (size_t i : s) ++per[codes[i]];
  EXPECT_EQ(per["RES3"], 3);
  EXPECT_EQ(per["RES2"], 1);
  EXPECT_EQ(per["RES1"], 1);
  EXPECT_EQ(stratified_sample(codes, 5, 11), s);  // seeded
  EXPECT_EQ(stratified_sample(codes, 50, 11).size(), 10u);
}

TEST(JudgeAlignment, ExportThenImportGivesHandComputedPrecisionAndRecall) {
  nlohmann::json report = {{"items", nlohmann::json::array()}};
  const std::vector<std::string> codes = {"RES3", "RES3", "RES3", "RES5", "RES2", "RES2", "RES1", "RES4"};
  for (size_t i = 0; i < codes.size(); ++i)
    report["items"].push_back({{"question_id", "q" + std::to_string(i)},
                               {"judge", {{"code", codes[i]}, {"question", "How many, \"really\"?\nTwo lines"},
                                          {"gold_sql", "SELECT 1"}, {"pred_sql", "SELECT 1, 2"},
                                          {"gold_table", "[{\"a\": 1}]"}, {"pred_table", "[{\"a\": 1, \"b\": 2}]"}}}});
  report["items"].push_back({{"question_id", "unjudged"}});
  size_t rows = 0;
  auto csv = judge_sample_csv(report, 100, 3, &rows);
  ASSERT_TRUE(csv.is_ok()) << csv.status().message();
  EXPECT_EQ(rows, 8u);
  auto table = data::parse_csv(*csv, "export");
  ASSERT_TRUE(table.is_ok()) << table.status().message();
  ASSERT_EQ(table->size(), 9u);
  EXPECT_EQ((*table)[0].back(), "label");
  EXPECT_EQ((*table)[1][1], "How many, \"really\"?\nTwo lines");
  // Humans: q0 q1 correct, q2 incorrect (judge FP), q3 correct (RES5), q4 correct (judge FN),
  // q5 incorrect, q6 RES1, q7 left empty.
  std::map<std::string, std::string> labels = {{"q0", "correct"}, {"q1", "RES3"}, {"q2", "incorrect"}, {"q3", "RES5"},
                                               {"q4", "yes"},     {"q5", "0"},    {"q6", "RES1"},      {"q7", ""}};
  std::string filled = "question_id,question,judge_code,gold_sql,pred_sql,gold_table,pred_table,label\n";
  for (size_t r = 1; r < table->size(); ++r) {
    auto row = (*table)[r];
    row.back() = labels.at(row[0]);
    for (size_t c = 0; c < row.size(); ++c) filled += (c ? "," : "") + csv_escape(row[c]);
    filled += "\r\n";
  }
  auto imported = read_labels(filled, "labels.csv");
  ASSERT_TRUE(imported.is_ok()) << imported.status().message();
  const auto& a = imported->alignment;
  EXPECT_EQ(imported->rows, 7u);
  EXPECT_EQ(imported->unlabelled, 1u);
  // judge positive: q0 q1 q2 q3; human positive: q0 q1 q3 q4 → TP 3, FP 1, FN 1, TN 2.
  EXPECT_EQ(a.tp, 3u);
  EXPECT_EQ(a.fp, 1u);
  EXPECT_EQ(a.fn, 1u);
  EXPECT_EQ(a.tn, 2u);
  EXPECT_DOUBLE_EQ(a.precision(), 75.0);
  EXPECT_DOUBLE_EQ(a.recall(), 75.0);
  EXPECT_NEAR(a.accuracy(), 500.0 / 7.0, 1e-12);
  EXPECT_DOUBLE_EQ(a.f1(), 75.0);
  EXPECT_EQ(a.code_labels, 3u);  // q1 RES3 = RES3, q3 RES5 = RES5, q6 RES1 = RES1
  EXPECT_EQ(a.code_agree, 3u);
  // A label that is none of the accepted words names its row and question.
  auto bad = read_labels("question_id,judge_code,label\nq9,RES3,maybe\n", "bad.csv");
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.status().message().find("q9"), std::string::npos);
  EXPECT_FALSE(data::parse_csv("a,\"open\n", "x").is_ok());
}

}  // namespace
}  // namespace nl2sql::eval
