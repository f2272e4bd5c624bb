// The browser check: headless Chromium loads report.html built from the fixture run; the charts
// must be in the rendered DOM with their data and the page must have raised no script error.
#include <cstdlib>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#include "nl2sql/report/run_report.h"
#include "nl2sql/run/run_data.h"
#include "report/run_fixture.h"
#include "support/test_env.h"

namespace nl2sql::report {
namespace {

TEST(ReportHtmlBrowser, ChromiumRendersChartsWithoutScriptErrors) {
  if (std::system("command -v chromium >/dev/null 2>&1") != 0)
    GTEST_SKIP() << "chromium is not installed (scripts/setup.sh installs it): skipping the browser check";
  testing::TempDir dir;
  testing::write_fixture_run(dir / "run");
  auto run = run::load_run(dir / "run");
  ASSERT_TRUE(run.is_ok());
  ASSERT_TRUE(write_reports(*run, dir / "run", ReportOptions{}).is_ok());
  std::string script = std::string(NL2SQL_SOURCE_DIR) + "/scripts/check_report_html.sh";
  std::string cmd = script + " " + (dir / "run" / "report.html").string() + " " + (dir / "shot.png").string() +
                    " > " + (dir / "check.log").string() + " 2>&1";
  int rc = std::system(cmd.c_str());
  std::ifstream log(dir / "check.log");
  std::stringstream log_text;
  log_text << log.rdbuf();
  ASSERT_EQ(rc, 0) << log_text.str();
  std::ifstream in(dir / "shot.dom.html");
  std::stringstream ss;
  ss << in.rdbuf();
  std::string dom = ss.str();
  EXPECT_NE(dom.find("data-errors=\"0\""), std::string::npos);
  EXPECT_NE(dom.find("data-ready=\"1\""), std::string::npos);
  EXPECT_NE(dom.find("data-charts=\"8\""), std::string::npos);
  for (const char* id : {"ex-difficulty", "selectors", "overlap", "curves", "weights"})
    EXPECT_NE(dom.find(std::string("id=\"") + id + "\""), std::string::npos) << id;
  EXPECT_NE(dom.find("data-series=\"upper bound\""), std::string::npos);
  EXPECT_NE(dom.find("SIMULATED"), std::string::npos);
  EXPECT_NE(dom.find("id=\"qshown\">8<"), std::string::npos);  // the filter script ran over 8 questions
  EXPECT_GT(std::filesystem::file_size(dir / "shot.png"), 1000u);
}

}  // namespace
}  // namespace nl2sql::report
