// The provider's own accounting in the reports (issue 39): report.json, report.md and
// report.html show per stage and in total the prompt tokens the provider's cache served (with
// their share) and the completion tokens spent reasoning, "not reported" where no call's server
// said (never 0%); `nl2sql compare` shows the runs' figures side by side; records written
// before the fields existed read as "not reported".
#include <fmt/format.h>
#include <gtest/gtest.h>

#include "nl2sql/report/compare.h"
#include "nl2sql/report/run_report.h"
#include "nl2sql/run/run_data.h"
#include "report/run_fixture.h"

namespace nl2sql::report {
namespace {

using nlohmann::json;

// The fixture run with the provider's breakdown on its generate calls of two questions (one of
// them reporting reasoning too); its fix calls report nothing.
run::RunData run_with_breakdown(const std::string& name, int64_t cached_a, int64_t cached_b) {
  run::RunData r;
  r.name = name;
  r.manifest = testing::fixture_manifest();
  r.records = testing::typed(testing::fixture_records());
  auto& a = r.records.at(0).usage["generate"];
  a.prompt_tokens = 1000;
  a.completion_tokens = 100;
  a.cached_tokens = cached_a;
  a.calls_reporting_cached = a.calls;
  a.reasoning_tokens = 40;
  a.calls_reporting_reasoning = a.calls;
  auto& b = r.records.at(1).usage["generate"];
  b.prompt_tokens = 1000;
  b.completion_tokens = 100;
  b.cached_tokens = cached_b;
  b.calls_reporting_cached = b.calls;
  return r;
}

TEST(ProviderUsageReport, JsonHasCachedAndReasoningPerStageAndTotal) {
  const run::RunData run = run_with_breakdown("mini", 600, 300);
  const json rep = build_report(run, ReportOptions{});
  const json& gen = rep["usage"]["stages"]["generate"];
  EXPECT_DOUBLE_EQ(gen["cached_tokens"].get<double>(), 900);
  const double reporting = static_cast<double>(run.records[0].usage.at("generate").calls +
                                               run.records[1].usage.at("generate").calls);
  EXPECT_DOUBLE_EQ(gen["calls_reporting_cached"].get<double>(), reporting);
  EXPECT_NEAR(gen["cached_pct"].get<double>(), 100.0 * 900 / gen["prompt_tokens"].get<double>(), 1e-9);
  EXPECT_DOUBLE_EQ(gen["reasoning_tokens"].get<double>(), 40);
  EXPECT_NEAR(gen["reasoning_pct"].get<double>(), 100.0 * 40 / gen["completion_tokens"].get<double>(), 1e-9);
  // No fix call reported: unknown, not zero percent.
  const json& fix = rep["usage"]["stages"]["fix"];
  EXPECT_DOUBLE_EQ(fix["calls_reporting_cached"].get<double>(), 0);
  EXPECT_TRUE(fix["cached_pct"].is_null());
  EXPECT_TRUE(fix["reasoning_pct"].is_null());
  const json& total = rep["usage"]["total"];
  EXPECT_DOUBLE_EQ(total["cached_tokens"].get<double>(), 900);
  EXPECT_DOUBLE_EQ(total["reasoning_tokens"].get<double>(), 40);
  EXPECT_NEAR(total["cached_pct"].get<double>(), 100.0 * 900 / total["prompt_tokens"].get<double>(), 1e-9);
}

TEST(ProviderUsageReport, MarkdownAndHtmlShowTheBreakdownOrNotReported) {
  const run::RunData run = run_with_breakdown("mini", 600, 300);
  const json rep = build_report(run, ReportOptions{});
  const std::string md = render_markdown(rep);
  EXPECT_NE(md.find("| prompt tokens | of which cached by the provider | completion tokens | of which reasoning |"),
            std::string::npos)
      << md;
  const json& gen = rep["usage"]["stages"]["generate"];
  const std::string gen_cached =
      fmt::format("900 ({:.1f}%)", 100.0 * 900 / gen["prompt_tokens"].get<double>());
  EXPECT_NE(md.find("| generate | "), std::string::npos);
  EXPECT_NE(md.find(gen_cached), std::string::npos) << md;
  // Only two questions' generate calls reported reasoning: the cell says how many calls did.
  EXPECT_NE(md.find("of " + fmt::format("{:.0f}", gen["calls"].get<double>()) + " calls)"), std::string::npos) << md;
  const size_t fix_row = md.find("| fix | ");
  ASSERT_NE(fix_row, std::string::npos);
  const std::string fix_line = md.substr(fix_row, md.find('\n', fix_row) - fix_row);
  EXPECT_NE(fix_line.find("not reported"), std::string::npos) << fix_line;
  EXPECT_EQ(fix_line.find('%'), std::string::npos) << fix_line;
  const std::string html = render_html(rep, run, ReportOptions{});
  EXPECT_NE(html.find("<th>of which cached by the provider</th>"), std::string::npos);
  EXPECT_NE(html.find(gen_cached), std::string::npos);
  EXPECT_NE(html.find("not reported"), std::string::npos);
}

TEST(ProviderUsageReport, RecordsWithoutTheFieldsReadAsNotReported) {
  run::RunData run;
  run.name = "old";
  run.manifest = testing::fixture_manifest();
  run.records = testing::typed(testing::fixture_records());  // written before issue 39
  const json rep = build_report(run, ReportOptions{});
  EXPECT_DOUBLE_EQ(rep["usage"]["total"]["calls_reporting_cached"].get<double>(), 0);
  EXPECT_TRUE(rep["usage"]["total"]["cached_pct"].is_null());
  const std::string md = render_markdown(rep);
  const size_t total_row = md.find("| **total** | ");
  ASSERT_NE(total_row, std::string::npos);
  EXPECT_NE(md.substr(total_row, md.find('\n', total_row) - total_row).find("not reported"), std::string::npos);
}

TEST(ProviderUsageReport, RecordJsonKeepsTheBreakdown) {
  const run::RunData run = run_with_breakdown("mini", 600, 300);
  const json j = run::to_json(run.records.at(0));
  EXPECT_EQ(j["usage"]["generate"]["cached_tokens"], 600);
  EXPECT_EQ(j["usage"]["generate"]["reasoning_tokens"], 40);
  // A stage without reports writes no breakdown (records of such servers keep their form).
  EXPECT_FALSE(j["usage"]["fix"].contains("cached_tokens"));
  auto back = run::record_from_json(j);
  ASSERT_TRUE(back.is_ok()) << back.status().message();
  EXPECT_EQ(back->usage.at("generate"), run.records.at(0).usage.at("generate"));
}

TEST(ProviderUsageReport, CompareShowsTheRunsSideBySide) {
  const run::RunData a = run_with_breakdown("A", 600, 300);
  const run::RunData b = run_with_breakdown("B", 100, 0);
  const json cmp = compare_runs({a, b}, CompareOptions{});
  ASSERT_TRUE(cmp["runs"][0].contains("usage"));
  EXPECT_DOUBLE_EQ(cmp["runs"][0]["usage"]["total"]["cached_tokens"].get<double>(), 900);
  EXPECT_DOUBLE_EQ(cmp["runs"][1]["usage"]["total"]["cached_tokens"].get<double>(), 100);
  EXPECT_DOUBLE_EQ(cmp["runs"][1]["usage"]["stages"]["generate"]["reasoning_tokens"].get<double>(), 40);
  const std::string md = compare_markdown(cmp);
  EXPECT_NE(md.find("## Tokens and cost"), std::string::npos) << md;
  const json& ta = cmp["runs"][0]["usage"]["total"];
  const std::string total_a = fmt::format("| **total** | A | {:.0f} | 900 (", ta["prompt_tokens"].get<double>());
  const std::string total_b = fmt::format("| **total** | B | {:.0f} | 100 (", ta["prompt_tokens"].get<double>());
  EXPECT_NE(md.find(total_a), std::string::npos) << md;
  EXPECT_NE(md.find(total_b), std::string::npos) << md;
  EXPECT_NE(md.find("| generate | A | "), std::string::npos);
  EXPECT_NE(md.find("| generate | B | "), std::string::npos);
  EXPECT_NE(md.find("| fix | B | "), std::string::npos);
}

}  // namespace
}  // namespace nl2sql::report
