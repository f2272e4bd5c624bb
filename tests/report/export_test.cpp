#include "nl2sql/report/export.h"
#include "nl2sql/run/run_data.h"

#include <map>

#include <gtest/gtest.h>

#include "nl2sql/core/files.h"
#include "report/run_fixture.h"
#include "support/test_env.h"

namespace nl2sql::report {
namespace {

using nlohmann::json;

run::RunData small_run() {
  run::RunData r;
  r.records.push_back(testing::typed(json{{"question_id", "a"}, {"index", 0}, {"db_id", "d1"}, {"status", "ok"}, {"prediction", "SELECT 1\nFROM t\tWHERE x = 'a\"b'"}}));
  r.records.push_back(testing::typed(json{{"question_id", "c"}, {"index", 2}, {"db_id", "d2"}, {"status", "error"}, {"prediction", ""}}));
  r.records.push_back(testing::typed(json{{"question_id", "d"}, {"index", 3}, {"db_id", "d2"}, {"status", "ok"}, {"prediction", "SELECT 2"}}));
  return r;
}

TEST(Export, BirdKeysByPositionWithPlaceholders) {
  ExportStats st;
  std::string out = export_predictions(small_run(), ExportFormat::kBird, &st);
  EXPECT_EQ(out,
            "{\n"
            "    \"0\": \"SELECT 1 FROM t WHERE x = 'a\\\"b'\\t----- bird -----\\td1\",\n"
            "    \"1\": \"SELECT nl2sql_no_prediction\\t----- bird -----\\t\",\n"
            "    \"2\": \"SELECT nl2sql_no_prediction\\t----- bird -----\\td2\",\n"
            "    \"3\": \"SELECT 2\\t----- bird -----\\td2\"\n"
            "}\n");
  EXPECT_EQ(st.written, 2u);
  EXPECT_EQ(st.placeholders, 2u);
  EXPECT_TRUE(json::parse(out).is_object());
}

TEST(Export, SpiderOneLinePerPositionAndJsonl) {
  EXPECT_EQ(export_predictions(small_run(), ExportFormat::kSpider),
            "SELECT 1 FROM t WHERE x = 'a\"b'\nSELECT nl2sql_no_prediction\nSELECT nl2sql_no_prediction\nSELECT 2\n");
  std::string jl = export_predictions(small_run(), ExportFormat::kJsonl);
  EXPECT_EQ(jl,
            "{\"db_id\":\"d1\",\"question_id\":\"a\",\"sql\":\"SELECT 1 FROM t WHERE x = 'a\\\"b'\"}\n"
            "{\"db_id\":\"d2\",\"question_id\":\"c\",\"sql\":\"\"}\n"
            "{\"db_id\":\"d2\",\"question_id\":\"d\",\"sql\":\"SELECT 2\"}\n");
  EXPECT_FALSE(parse_export_format("csv").is_ok());
  EXPECT_EQ(*parse_export_format("spider"), ExportFormat::kSpider);
}

// Export the fixture run in each format and score it with `nl2sql eval` on the mini set: every
// recorded question gets the verdict the run recorded; positions outside the run score wrong.
TEST(Export, ReEvaluatedExportGivesTheRecordedVerdicts) {
  testing::TempDir dir;
  auto data = testing::build_mini_bird(dir / "data");
  testing::write_fixture_run(dir / "run");
  auto records = testing::fixture_records();
  std::map<std::string, bool> recorded;
  for (const auto& r : testing::typed(records)) recorded[r.question_id] = r.correct("bird");
  for (const std::string fmt : {"bird", "spider", "jsonl"}) {
    std::string ext = fmt == "bird" ? "json" : fmt == "spider" ? "sql" : "jsonl";
    auto pred = dir / ("pred." + ext);
    auto ex = testing::run_nl2sql("export --run " + (dir / "run").string() + " --format " + fmt + " --out " + pred.string());
    ASSERT_EQ(ex.exit_code, 0) << ex.err;
    auto out = dir / ("eval_" + fmt);
    auto ev = testing::run_nl2sql("eval --benchmark bird --data " + data.string() + " --pred " + pred.string() +
                                  " --no-cache --out " + out.string());
    ASSERT_EQ(ev.exit_code, 0) << ev.err;
    auto rep = core::read_json_file(out / "eval.json");
    ASSERT_TRUE(rep.is_ok());
    size_t checked = 0;
    for (const auto& item : (*rep)["items"]) {
      std::string id = item["question_id"].get<std::string>();
      bool ok = item["verdicts"]["bird"].get<bool>();
      auto it = recorded.find(id);
      if (it == recorded.end()) {
        EXPECT_FALSE(ok) << fmt << ": question " << id << " is not in the run";
        continue;
      }
      EXPECT_EQ(ok, it->second) << fmt << ": question " << id;
      ++checked;
    }
    EXPECT_EQ(checked, recorded.size()) << fmt;
  }
}

}  // namespace
}  // namespace nl2sql::report
