// `nl2sql testsuite build` on the bundled mini set, then `nl2sql eval --test-suite` on what it
// wrote: the two commands a user runs for BIRD.
#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "nl2sql/core/files.h"
#include "support/test_env.h"

namespace nl2sql {
namespace {
namespace fs = std::filesystem;
using nlohmann::json;

class TestSuiteCli : public ::testing::Test {
 protected:
  void SetUp() override { root_ = testing::build_mini_bird(dir_ / "mini"); }
  std::string build_args() {
    return "testsuite build --benchmark bird --data '" + root_.string() + "' --out '" + (dir_ / "suite").string() +
           "' --candidates 15 --max-rows 6 --threads 1 --progress off ";
  }
  testing::TempDir dir_;
  fs::path root_;
};

TEST_F(TestSuiteCli, BuildThenEvaluateWithTheSuite) {
  auto b = testing::run_nl2sql(build_args());
  ASSERT_EQ(b.exit_code, 0) << b.err << b.out;
  EXPECT_NE(b.out.find("coverage"), std::string::npos) << b.out;
  auto manifest = core::read_json_file(dir_ / "suite" / "manifest.json");
  ASSERT_TRUE(manifest.is_ok());
  EXPECT_EQ((*manifest)["benchmark"], "bird");
  EXPECT_EQ((*manifest)["total"]["failed"], 0);
  ASSERT_GT((*manifest)["total"]["variants"].get<size_t>(), 0u);
  for (const auto& [db_id, entry] : (*manifest)["databases"].items()) {
    EXPECT_TRUE(fs::exists(dir_ / "suite" / db_id / (db_id + ".sqlite"))) << db_id;
    for (const auto& v : entry["variants"]) EXPECT_TRUE(fs::exists(dir_ / "suite" / db_id / v["file"].get<std::string>()));
  }
  // No path of this machine in the manifest.
  EXPECT_EQ(manifest->dump().find(dir_.path().string()), std::string::npos);

  // Gold scores 100% on its own suite, judged on the original and every variant.
  auto questions = *core::read_json_file(root_ / "dev.json");
  json pred = json::object();
  for (size_t i = 0; i < questions.size(); ++i)
    pred[std::to_string(i)] = questions[i]["SQL"].get<std::string>() + "\t----- bird -----\t" +
                              questions[i]["db_id"].get<std::string>();
  std::ofstream(dir_ / "pred.json") << pred.dump();
  auto e = testing::run_nl2sql("eval --benchmark bird --data '" + root_.string() + "' --no-cache --metric spider-ts --pred '" +
                               (dir_ / "pred.json").string() + "' --test-suite '" + (dir_ / "suite").string() +
                               "' --out '" + (dir_ / "eval").string() + "'");
  ASSERT_EQ(e.exit_code, 0) << e.err;
  auto report = core::read_json_file(dir_ / "eval" / "eval.json");
  ASSERT_TRUE(report.is_ok());
  EXPECT_DOUBLE_EQ((*report)["summary"]["metrics"]["spider_ts"]["overall"]["ex"].get<double>(), 100.0);
  size_t on_a_suite = 0;
  for (const auto& item : (*report)["items"])
    if (item.contains("test_suite")) on_a_suite += item["test_suite"]["databases"].get<size_t>() > 1;
  EXPECT_GT(on_a_suite, 0u);

  // A run judged on the suite (the sim provider: SIMULATED answers) reports spider-ts on the
  // original databases alone beside the suite's, in report.json, report.md and report.html.
  const fs::path configs = testing::fixtures_dir().parent_path().parent_path() / "configs";
  auto run = testing::run_nl2sql("run --config '" + (configs / "quickstart.json").string() + "' --benchmark bird --data '" +
                                 root_.string() + "' --out '" + (dir_ / "run").string() + "' --index-dir '" +
                                 (dir_ / "index").string() + "' --progress off --set eval.metrics=spider-ts --set "
                                 "eval.test_suite='" + (dir_ / "suite").string() + "'");
  ASSERT_EQ(run.exit_code, 0) << run.err << run.out;
  auto rep = core::read_json_file(dir_ / "run" / "report.json");
  ASSERT_TRUE(rep.is_ok());
  ASSERT_TRUE(rep->contains("test_suite")) << rep->dump().substr(0, 500);
  const auto& t = (*rep)["test_suite"];
  EXPECT_GT(t["questions_on_a_suite"].get<size_t>(), 0u);
  EXPECT_GE(t["correct_on_original"].get<size_t>(), t["correct_on_suite"].get<size_t>());
  EXPECT_EQ(t["passes_original_fails_variant"].size(),
            t["correct_on_original"].get<size_t>() - t["correct_on_suite"].get<size_t>());
  auto md = core::read_file(dir_ / "run" / "report.md");
  ASSERT_TRUE(md.is_ok());
  EXPECT_NE(md->find("## Test suite"), std::string::npos);
  auto html = core::read_file(dir_ / "run" / "report.html");
  ASSERT_TRUE(html.is_ok());
  EXPECT_NE(html->find("<h3>Test suite</h3>"), std::string::npos);

  // A second build keeps every finished database.
  auto again = testing::run_nl2sql(build_args());
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_NE(again.out.find("kept"), std::string::npos);
  EXPECT_EQ(again.out.find("built"), std::string::npos) << again.out;
}

TEST_F(TestSuiteCli, BadInputNamesTheProblem) {
  auto r = testing::run_nl2sql(build_args() + "--db no_such_db");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("no_such_db"), std::string::npos) << r.err;
  r = testing::run_nl2sql("testsuite build --benchmark bird --data '" + root_.string() + "'");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--out"), std::string::npos) << r.err;
  r = testing::run_nl2sql(build_args() + "--candidates 0");
  EXPECT_EQ(r.exit_code, 2);
}

}  // namespace
}  // namespace nl2sql
