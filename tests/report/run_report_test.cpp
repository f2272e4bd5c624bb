#include "nl2sql/report/run_report.h"
#include "nl2sql/run/run_data.h"

#include <algorithm>

#include <gtest/gtest.h>

#include "nl2sql/core/files.h"
#include "report/run_fixture.h"
#include "support/test_env.h"

namespace nl2sql::report {
namespace {

using nlohmann::json;

run::RunData fixture_run() {
  run::RunData r;
  r.name = "mini";
  r.manifest = testing::fixture_manifest();
  r.records = testing::typed(testing::fixture_records());
  return r;
}

// Expected values are counted by hand from tests/fixtures/runs/mini/records.jsonl (see the
// comments in each block).
// `nl2sql run` hands the reports the records its summary read: the reports are byte for byte
// those of a fresh read of the store, and the records given are the ones used.
TEST(RunReport, ReportsFromRecordsAlreadyReadEqualAFreshRead) {
  testing::TempDir dir;
  testing::write_fixture_run(dir.path());
  ASSERT_TRUE(write_run_reports(dir.path()).is_ok());
  auto fresh = core::read_file(dir.path() / "report.json");
  ASSERT_TRUE(fresh.is_ok());
  ASSERT_TRUE(write_run_reports(dir.path(), nullptr, testing::typed(testing::fixture_records())).is_ok());
  auto given = core::read_file(dir.path() / "report.json");
  ASSERT_TRUE(given.is_ok());
  EXPECT_EQ(*given, *fresh);
  // Records that are not the store's: the report says what they say.
  std::vector<run::QuestionRecord> fewer = testing::typed(testing::fixture_records());
  fewer.resize(3);
  ASSERT_TRUE(write_run_reports(dir.path(), nullptr, fewer).is_ok());
  auto from_fewer = core::read_file(dir.path() / "report.json");
  ASSERT_TRUE(from_fewer.is_ok());
  EXPECT_NE(*from_fewer, *fresh);
  auto data = run::load_run(dir.path(), fewer);
  ASSERT_TRUE(data.is_ok());
  EXPECT_EQ(data->records.size(), 3u);
}

TEST(RunReport, ExBreakdownsMatchHandCounts) {
  json rep = build_report(fixture_run(), ReportOptions{});
  EXPECT_TRUE(rep["simulated"].get<bool>());
  EXPECT_EQ(rep["primary_metric"], "bird");
  // Correct: q0 q4 q11 q15; wrong: q1 q2 q19; failed: q6.
  const json& o = rep["ex"]["overall"];
  EXPECT_EQ(o["n"], 8);
  EXPECT_EQ(o["correct"], 4);
  EXPECT_DOUBLE_EQ(o["ex"].get<double>(), 50.0);
  EXPECT_LE(o["ci95"][0].get<double>(), 50.0);
  EXPECT_GE(o["ci95"][1].get<double>(), 50.0);
  EXPECT_LT(o["ci95"][0].get<double>(), o["ci95"][1].get<double>());
  const json& d = rep["ex"]["by_difficulty"];
  EXPECT_EQ(d["simple"]["n"], 4);
  EXPECT_EQ(d["simple"]["correct"], 2);
  EXPECT_EQ(d["moderate"]["correct"], 2);
  EXPECT_EQ(d["moderate"]["n"], 3);
  EXPECT_EQ(d["challenging"]["correct"], 0);
  EXPECT_DOUBLE_EQ(rep["ex"]["by_db"]["regional_schools"]["ex"].get<double>(), 40.0);
  EXPECT_EQ(rep["ex"]["by_db"]["music_store"]["correct"], 2);
  const json& f = rep["ex"]["by_feature"];
  EXPECT_EQ(f["join"]["correct"], 3);        // q0 q11 q15 of q0 q6 q11 q15
  EXPECT_EQ(f["join"]["n"], 4);
  EXPECT_EQ(f["aggregate"]["correct"], 4);   // q0 q4 q11 q15 of + q19
  EXPECT_EQ(f["aggregate"]["n"], 5);
  EXPECT_EQ(f["order_limit"]["correct"], 1); // q15 of q2 q6 q15
  EXPECT_EQ(f["nested"]["n"], 1);
  EXPECT_EQ(f["simple"]["n"], 1);            // q1 has no feature
  EXPECT_EQ(rep["metrics"]["bird"]["correct"], 4);
  EXPECT_EQ(rep["outcomes"]["RES3"], 4);
  EXPECT_EQ(rep["outcomes"]["RES2"], 3);
  EXPECT_EQ(rep["outcomes"]["not_evaluated"], 1);
  ASSERT_EQ(rep["errors"].size(), 1u);
  EXPECT_EQ(rep["errors"][0]["question_id"], "6");
  EXPECT_EQ(rep["questions"].size(), 8u);
}

TEST(RunReport, SelectorsBoundsGeneratorsOverlapAndErrors) {
  json rep = build_report(fixture_run(), ReportOptions{});
  EXPECT_EQ(rep["primary_selector"], "tournament");
  EXPECT_EQ(rep["selectors"]["tournament"]["correct"], 4);
  EXPECT_TRUE(rep["selectors"]["tournament"]["primary"].get<bool>());
  EXPECT_EQ(rep["selectors"]["self_consistency"]["correct"], 4);  // q0 q1 q11 q15
  EXPECT_FALSE(rep["selectors"]["self_consistency"]["primary"].get<bool>());
  EXPECT_DOUBLE_EQ(rep["selectors"]["tournament"]["llm_calls"].get<double>(), 6);  // 2+1+0+1+0+1+1
  EXPECT_DOUBLE_EQ(rep["bounds"]["oracle"]["ex"].get<double>(), 62.5);             // 5 of 8
  EXPECT_DOUBLE_EQ(rep["bounds"]["adversarial"]["ex"].get<double>(), 12.5);        // q11 only

  const json& g = rep["generators"];
  EXPECT_EQ(g["dc"]["candidates"], 7);
  EXPECT_EQ(g["dc"]["correct_candidates"], 3);  // q0 q1 q11 (q15's is unknown)
  EXPECT_DOUBLE_EQ(g["dc"]["upper_bound_pct"].get<double>(), 37.5);
  EXPECT_EQ(g["dc"]["unique_correct"], 1);      // q1
  EXPECT_EQ(g["qp"]["candidates"], 5);
  EXPECT_EQ(g["qp"]["unique_correct"], 1);      // q15
  EXPECT_EQ(g["os"]["candidates"], 4);
  EXPECT_EQ(g["os"]["executable_before_fix"], 3);
  EXPECT_EQ(g["os"]["executable_after_fix"], 4);
  EXPECT_DOUBLE_EQ(g["os"]["executable_before_fix_pct"].get<double>(), 75.0);
  EXPECT_EQ(g["os"]["fix_rounds"], 1);
  EXPECT_EQ(g["os"]["unique_correct"], 1);      // q4

  const json& ov = rep["overlap"];
  ASSERT_EQ(ov.size(), 6u);
  EXPECT_EQ(ov[0]["generators"], json::array());  // none: q2 q6 q19
  EXPECT_EQ(ov[0]["questions"], 3);
  size_t total = 0;
  bool all_three = false;
  for (const auto& e : ov) {
    total += e["questions"].get<size_t>();
    all_three = all_three || e["generators"] == json({"dc", "os", "qp"});
  }
  EXPECT_EQ(total, 8u);
  EXPECT_TRUE(all_three);

  const json& se = rep["selection_errors"];
  EXPECT_EQ(se["correct"]["count"], 4);
  EXPECT_EQ(se["wrong_selection"]["question_ids"], json({"1"}));
  EXPECT_EQ(se["no_correct_candidate"]["question_ids"], json({"2", "19"}));
  EXPECT_EQ(se["failed"]["question_ids"], json({"6"}));
  EXPECT_EQ(se["gold_unusable"]["count"], 0);
}

TEST(RunReport, CurvesUsageLatencyAndWeights) {
  json rep = build_report(fixture_run(), ReportOptions{});
  const json& c = rep["curves"];
  ASSERT_EQ(c.size(), 2u);
  EXPECT_EQ(c[0]["k"], 1);
  EXPECT_EQ(c[0]["n"], 7);
  EXPECT_NEAR(c[0]["upper"].get<double>(), 100.0 * 5 / 7, 1e-9);
  EXPECT_NEAR(c[0]["selector"].get<double>(), 100.0 * 4 / 7, 1e-9);
  EXPECT_EQ(c[1]["k"], 3);
  EXPECT_DOUBLE_EQ(c[1]["lower"].get<double>(), 50.0);  // q0 no, q11 yes
  // total latency = 0.4 + 0.05 * index for indexes 0 1 2 4 6 11 15 19
  const json& t = rep["latency_s"]["total"];
  EXPECT_NEAR(t["p50"].get<double>(), 0.65, 1e-9);
  EXPECT_NEAR(t["p90"].get<double>(), 1.21, 1e-9);
  EXPECT_NEAR(t["max"].get<double>(), 1.35, 1e-9);
  // generate calls = candidates: 3+2+2+2+0+3+2+2
  EXPECT_DOUBLE_EQ(rep["usage"]["stages"]["generate"]["calls"].get<double>(), 16);
  EXPECT_DOUBLE_EQ(rep["usage"]["stages"]["fix"]["calls"].get<double>(), 1);
  ASSERT_TRUE(rep.contains("weights"));
  EXPECT_EQ(rep["weights"]["presql"].size(), 7u);
  EXPECT_DOUBLE_EQ(rep["weights"]["presql"].back()[1].get<double>(), 0.66);
  EXPECT_EQ(rep["weights"]["presql"].back()[0], 19);
}

// Answers no reader could use are summed from the records' llm_faults and shown in md and html.
TEST(RunReport, ParseFailuresAreSummedAndShown) {
  run::RunData run = fixture_run();
  EXPECT_EQ(build_report(run, ReportOptions{})["llm_faults"]["parse_failures"], 0);
  run.records[0].llm_faults.parse_failures = 2;
  run.records[0].llm_faults.parse_failures_by_stage = {{"select:rank", 1}, {"fix", 1}};
  run.records[2].llm_faults.parse_failures = 1;
  run.records[2].llm_faults.parse_failures_by_stage = {{"fix", 1}};
  json rep = build_report(run, ReportOptions{});
  const json& f = rep["llm_faults"];
  EXPECT_EQ(f["parse_failures"], 3);
  EXPECT_EQ(f["parse_failures_by_stage"]["fix"], 2);
  EXPECT_EQ(f["parse_failures_by_stage"]["select:rank"], 1);
  EXPECT_EQ(f["questions_with_parse_failures"], 2);
  EXPECT_EQ(f["failed_calls"], 0);  // parse failures are not failed calls
  EXPECT_NE(render_markdown(rep).find("(parse failures): 3 in 2 question(s) (fix 2, select:rank 1)"), std::string::npos);
  EXPECT_NE(render_html(rep, run, ReportOptions{}).find("(parse failures): 3 in 2 question(s)"), std::string::npos);
}

// CHASE-SQL re-ranks retrieved values by embeddings: the report says whether the run did (an
// embeddings profile in the resolved config) and on how many questions the call failed.
TEST(RunReport, EmbeddingRerankingOffIsFlagged) {
  run::RunData run = fixture_run();
  json rep = build_report(run, ReportOptions{});
  EXPECT_EQ(rep["context"]["embedding_rerank"], false);
  EXPECT_NE(render_markdown(rep).find("**Embedding re-ranking was off** (no `context.embeddings.profile`"),
            std::string::npos);
  EXPECT_NE(render_html(rep, run, ReportOptions{}).find("<b>Embedding re-ranking was off</b>"), std::string::npos);
  run.config = {{"context", {{"embeddings", {{"profile", "embedder"}}}}}};
  run.records[1].context = context::ContextRecord{};
  run.records[1].context->errors = {"embeddings: HTTP 500 (edit-distance ranking kept)", "keywords: x"};
  run.records[3].context = context::ContextRecord{};
  run.records[3].context->errors = {"keywords: malformed answer (heuristic keywords only)"};
  rep = build_report(run, ReportOptions{});
  EXPECT_EQ(rep["context"]["embedding_rerank"], true);
  EXPECT_EQ(rep["context"]["embeddings_profile"], "embedder");
  EXPECT_EQ(rep["context"]["rerank_fell_back_questions"], 1);
  const std::string md = render_markdown(rep);
  EXPECT_NE(md.find("re-ranked by embedding similarity (profile `embedder`); the re-ranking call failed on 1 "
                    "question(s)"),
            std::string::npos);
  EXPECT_EQ(md.find("Embedding re-ranking was off"), std::string::npos);
}

// A question's keywords read as words with their source, not as JSON objects.
TEST(RunReport, KeywordsShowAsWordsWithTheirSource) {
  run::RunData run = fixture_run();
  run.records[0].context = context::ContextRecord{};
  run.records[0].context->keywords = {{"Hradec Kralove", "quoted"}, {"2019", "number"}};
  const std::string html = render_html(build_report(run, ReportOptions{}), run, ReportOptions{});
  EXPECT_NE(html.find("\u00abHradec Kralove\u00bb (quoted), \u00ab2019\u00bb (number)"), std::string::npos);
  EXPECT_EQ(html.find("&quot;source&quot;"), std::string::npos);
}

TEST(RunReport, PercentileInterpolates) {
  EXPECT_DOUBLE_EQ(percentile({}, 0.5), 0);
  EXPECT_DOUBLE_EQ(percentile({3, 1, 2}, 0.5), 2);
  EXPECT_DOUBLE_EQ(percentile({1, 2, 3, 4}, 0.5), 2.5);
  EXPECT_DOUBLE_EQ(percentile({10, 20}, 0.95), 19.5);
}

TEST(RunReport, MarkdownAndCsv) {
  run::RunData run = fixture_run();
  json rep = build_report(run, ReportOptions{});
  std::string md = render_markdown(rep);
  EXPECT_NE(md.find("SIMULATED — not a model's accuracy"), std::string::npos);
  EXPECT_NE(md.find("**EX 50.00%** (95% CI ["), std::string::npos) << md.substr(0, 600);
  EXPECT_NE(md.find("| tournament (primary) | 50.00 ["), std::string::npos);
  EXPECT_NE(md.find("| wrong_selection | 1 | 12.50 |"), std::string::npos);
  EXPECT_NE(md.find("| dc + os + qp | 1 |"), std::string::npos);
  std::string csv = render_csv(run);
  size_t lines = std::count(csv.begin(), csv.end(), '\n');
  EXPECT_EQ(lines, 9u);
  EXPECT_EQ(csv.rfind("question_id,index,db_id,difficulty,status,correct,outcome,features,candidates,correct_candidates,oracle,adversarial,sel_self_consistency,sel_tournament,cost_usd,latency_s,prediction,error\n", 0), 0u);
  EXPECT_NE(csv.find("\n6,6,regional_schools,moderate,error,0,,join;order_limit,0,0,0,0,,,"), std::string::npos) << csv;
  EXPECT_NE(csv.find("\n1,1,regional_schools,simple,ok,0,RES2,,2,1,1,0,1,0,"), std::string::npos) << csv;
}

TEST(RunReport, HtmlIsSelfContainedEscapedAndCarriesTheCharts) {
  run::RunData run = fixture_run();
  run.records[1].question = "<script>alert('q')</script> & more";
  run.records[1].prediction = "SELECT '</pre><img src=x onerror=alert(1)>'";
  run.records[1].candidates[0].generator = "dc\"><svg onload=alert(2)>";
  select::DuelExplanation hostile;
  hostile.decisions = std::vector<select::PairDecision>{
      {.a = "dc#0", .b = "qp#0", .by = "model", .winner = std::nullopt, .error = "</details><script>bad()</script>"}};
  run.records[1].selections["tournament"].explanation = hostile;
  ReportOptions opts;
  json rep = build_report(run, opts);
  std::string html = render_html(rep, run, opts);
  EXPECT_EQ(html.find("<script>alert"), std::string::npos);
  EXPECT_EQ(html.find("<img src=x"), std::string::npos);
  EXPECT_EQ(html.find("<svg onload"), std::string::npos);
  EXPECT_EQ(html.find("<script>bad()"), std::string::npos);
  EXPECT_NE(html.find("&lt;script&gt;alert(&#39;q&#39;)&lt;/script&gt; &amp; more"), std::string::npos);
  EXPECT_NE(html.find("&lt;img src=x onerror=alert(1)&gt;"), std::string::npos);
  // Exactly our two inline scripts, nothing fetched.
  size_t scripts = 0;
  for (size_t p = html.find("<script"); p != std::string::npos; p = html.find("<script", p + 1)) ++scripts;
  EXPECT_EQ(scripts, 2u);
  for (const char* banned : {"<script src", "<link", "http://", "https://", "@import", "<iframe"})
    EXPECT_EQ(html.find(banned), std::string::npos) << banned;
  EXPECT_NE(html.find("SIMULATED — not a model's accuracy</div>"), std::string::npos);
  for (const char* id : {"ex-difficulty", "ex-db", "ex-feature", "selectors", "overlap", "curves", "selection-errors", "weights"})
    EXPECT_NE(html.find(std::string("<svg class=\"chart\" id=\"") + id + "\""), std::string::npos) << id;
  EXPECT_NE(html.find("class=\"pt\""), std::string::npos);
  EXPECT_NE(html.find("data-label=\"simple\" data-value=\"50.00\""), std::string::npos);
  size_t details = 0;
  for (size_t p = html.find("<details class=\"q\""); p != std::string::npos; p = html.find("<details class=\"q\"", p + 1)) ++details;
  EXPECT_EQ(details, 8u);
  EXPECT_NE(html.find("no_such_column"), std::string::npos);            // fixer round of q2
  EXPECT_NE(html.find("decisions"), std::string::npos);                 // q0's tournament
  opts.drilldown_limit = 3;
  html = render_html(rep, run, opts);
  details = 0;
  for (size_t p = html.find("<details class=\"q\""); p != std::string::npos; p = html.find("<details class=\"q\"", p + 1)) ++details;
  EXPECT_EQ(details, 3u);
}

// Separating-instance duels as the selector writes them, read as a record reader reads them.
select::Explanation explanation_of_duels(json duels) {
  auto e = select::explanation_from_json({{"duels", std::move(duels)}}, "separating_instances", "test");
  EXPECT_TRUE(e.is_ok()) << e.status().to_string();
  return e.is_ok() ? *e : select::Explanation{};
}

// A duel whose model answer on D′ disagrees with gold's answer there is listed as a gold
// dispute (json, markdown, html) and every duel is drawn as evidence: D′ as tables, the answers.
TEST(RunReport, SeparatingInstanceDuelsAreShownAsEvidenceAgainstGold) {
  run::RunData run = fixture_run();
  auto duel = [](bool agrees) {
    return json{{"a", "c0"}, {"b", "c2"}, {"outcome", "b"},
                {"instance", {{"found", true}, {"attempts", 1}, {"rows", 2},
                              {"instance", {{"account", json::array({{{"account_id", 13}, {"frequency", "<b>weekly</b>"}},
                                                                     {{"account_id", 18}, {"frequency", "monthly"}}})}}},
                              {"answer_a", "[0]"}, {"answer_b", "[1]"}}},
                {"model_answers", json::array({"[1]", "[1]", "[0]"})}, {"majority", "[1]"},
                {"gold_answer", agrees ? "[1]" : "[2]"}, {"model_agrees_with_gold", agrees}};
  };
  const std::string disputed = run.records[0].question_id;
  auto selection = [&](bool agrees) {
    run::SelectionRecord s;
    s.candidate_id = "c2";
    s.llm_calls = 3;
    s.explanation = explanation_of_duels(json::array({duel(agrees)}));
    return s;
  };
  run.records[0].selections["separating_instances"] = selection(false);
  run.records[1].selections["separating_instances"] = selection(true);
  ReportOptions opts;
  json rep = build_report(run, opts);
  ASSERT_EQ(rep["gold_disputes"].size(), 1u);
  EXPECT_EQ(rep["gold_disputes"][0]["question_id"], disputed);
  EXPECT_EQ(rep["gold_disputes"][0]["duels"], 1);
  EXPECT_NE(render_markdown(rep).find("disagrees with gold's (evidence against the gold SQL): 1 question(s): " + disputed),
            std::string::npos);
  std::string html = render_html(rep, run, opts);
  EXPECT_NE(html.find("D′ (separating instance)"), std::string::npos);
  EXPECT_NE(html.find("<td>13</td>"), std::string::npos);
  EXPECT_NE(html.find("&lt;b&gt;weekly&lt;/b&gt;"), std::string::npos);
  EXPECT_EQ(html.find("<b>weekly</b>"), std::string::npos);
  EXPECT_NE(html.find("c2 wins"), std::string::npos);
  EXPECT_NE(html.find("3 model answer(s)"), std::string::npos);
  size_t flagged = 0;
  for (size_t p = html.find("the model&#39;s answer disagrees: evidence against the gold SQL"); p != std::string::npos;
       p = html.find("the model&#39;s answer disagrees: evidence against the gold SQL", p + 1))
    ++flagged;
  EXPECT_EQ(flagged, 1u);  // the agreeing duel shows gold without the flag
  EXPECT_NE(html.find("1 question(s): " + disputed), std::string::npos);
}

// Per selector that duels: technical coverage (questions whose duels reached the model over
// questions with two or more distinct results) and, per question, why duels were draws.
TEST(RunReport, SeparatingDuelsGiveCoverageAndDrawReasons) {
  run::RunData run = fixture_run();
  auto selection = [](json duels) {
    run::SelectionRecord s;
    s.explanation = explanation_of_duels(std::move(duels));
    return s;
  };
  const json asked = {{"a", "c0"}, {"b", "c1"}, {"outcome", "a"}, {"model_answers", json::array({"[1]"})}};
  const json too_large = {{"a", "c0"}, {"b", "c2"}, {"outcome", "draw"}, {"draw", "too_large"}};
  const json timeout = {{"a", "c1"}, {"b", "c2"}, {"outcome", "draw"}, {"draw", "timeout"}};
  run.records[0].selections["separating_instances"] = selection(json::array({asked, too_large}));
  run.records[1].selections["separating_instances"] = selection(json::array({too_large, timeout}));
  run.records[2].selections["separating_instances"] = selection(json::array());  // one result: no duel
  json rep = build_report(run, ReportOptions{});
  const json& sep = rep["separating_duels"]["separating_instances"];
  EXPECT_EQ(sep["questions_contested"], 2);
  EXPECT_EQ(sep["questions_dueled"], 1);
  EXPECT_DOUBLE_EQ(sep["technical_coverage"].get<double>(), 0.5);
  EXPECT_EQ(sep["draws"], (json{{"too_large", 2}, {"timeout", 1}}));
  ASSERT_EQ(sep["questions"].size(), 2u);
  EXPECT_EQ(sep["questions"][1]["question_id"], run.records[1].question_id);
  EXPECT_EQ(sep["questions"][1]["draws"], (json{{"too_large", 1}, {"timeout", 1}}));
  const std::string md = render_markdown(rep);
  EXPECT_NE(md.find("| separating_instances | 1/2 (50.00%) | timeout 1, too_large 2 |"), std::string::npos) << md;
  EXPECT_NE(render_html(rep, run, ReportOptions{}).find("technical coverage 1/2 questions (50.0%"), std::string::npos);
}

// report.json is written from its questions serialized side by side: the text is the whole
// report's dump byte for byte (strings with line breaks, quotes and invalid UTF-8 included).
TEST(RunReport, ReportJsonIsTheWholeReportsDumpByteForByte) {
  auto run = fixture_run();
  ASSERT_GE(run.records.size(), 2u);
  run.records[0].question = "line one\nline two \"quoted\"\t\xff\xfe end";
  run.records[1].evidence = "  \n  \"questions\": []\n";
  json rep = build_report(run, ReportOptions{});
  const json before = rep;
  const std::string whole = rep.dump(1, ' ', false, json::error_handler_t::replace);
  EXPECT_EQ(dump_report(rep), whole);
  EXPECT_EQ(rep, before);
  json few = build_report(run, ReportOptions{});
  few["questions"] = json::array({few["questions"][0]});
  EXPECT_EQ(dump_report(few), few.dump(1, ' ', false, json::error_handler_t::replace));
}

TEST(RunReport, WriteReportsFromTheStoreAndOptionsFromConfig) {
  testing::TempDir dir;
  testing::write_fixture_run(dir / "run");
  auto run = run::load_run(dir / "run");
  ASSERT_TRUE(run.is_ok()) << run.status().to_string();
  EXPECT_EQ(run->name, "run");
  EXPECT_EQ(run->records.size(), 8u);
  auto opts = ReportOptions::from_config(run->config);
  ASSERT_TRUE(opts.is_ok());
  EXPECT_EQ(opts->title, "mini fixture");
  ASSERT_TRUE(write_reports(*run, dir / "run", *opts).is_ok());
  for (const char* f : {"report.json", "report.md", "per_question.csv", "report.html"})
    EXPECT_TRUE(std::filesystem::exists(dir / "run" / f)) << f;
  auto rep = core::read_json_file(dir / "run" / "report.json");
  ASSERT_TRUE(rep.is_ok());
  EXPECT_EQ((*rep)["run"]["title"], "mini fixture");
  EXPECT_EQ((*rep)["ex"]["overall"]["correct"], 4);

  EXPECT_FALSE(ReportOptions::from_config({{"report", {{"bootstrap_samples", 5}}}}).is_ok());
  EXPECT_FALSE(ReportOptions::from_config({{"report", {{"html", "yes"}}}}).is_ok());
  auto off = ReportOptions::from_config({{"report", {{"html", false}, {"drilldown_limit", 2}}}});
  ASSERT_TRUE(off.is_ok());
  EXPECT_FALSE(off->html);
  EXPECT_EQ(off->drilldown_limit, 2u);

  // The CLI regenerates them.
  std::filesystem::remove(dir / "run" / "report.html");
  auto r = testing::run_nl2sql("report " + (dir / "run").string());
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("EX 50.00%"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("SIMULATED"), std::string::npos);
  EXPECT_TRUE(std::filesystem::exists(dir / "run" / "report.html"));
  EXPECT_EQ(testing::run_nl2sql("report " + (dir / "missing").string()).exit_code, 2);
}

}  // namespace
}  // namespace nl2sql::report
