// A candidate pool made elsewhere, read from a file, through selection, the curves over K and
// evaluation (generate.generators[].name = "file"), beside a model generator; what the file
// lacks or has in excess is listed in the report; a changed file is a changed input on resume.
#include <gtest/gtest.h>

#include <fstream>

#include "nl2sql/core/config.h"
#include "nl2sql/core/files.h"
#include "nl2sql/data/dataset.h"
#include "nl2sql/pipeline/pipeline.h"
#include "nl2sql/run/run_data.h"
#include "support/mini_run.h"
#include "support/test_env.h"

namespace nl2sql::pipeline {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

class CandidatePoolRun : public ::testing::Test {
 protected:
  void SetUp() override {
    auto ds = testing::load_mini_bird(dir_ / "mini");
    ASSERT_TRUE(ds.is_ok()) << ds.status().message();
    data_ = dir_ / "mini";
    ds_ = std::move(*ds);
  }
  core::Config config(const fs::path& pool) const {
    core::Config c(json::parse(R"({
      "llm": {"models": {"sim": {"provider": "sim"}}, "default_profile": "sim", "cache": {"mode": "off"}},
      "fix": {"enabled": false}, "run": {"curve_points": [1, 2, 3], "selectors": ["self_consistency"]}
    })"));
    c.set("generate.generators", json::array({{{"name", "file"}, {"label", "other"}, {"path", pool.string()}}}));
    return c;
  }
  const data::Question& q(size_t i) const { return ds_.questions[i]; }
  testing::TempDir dir_;
  fs::path data_;
  data::Dataset ds_;
};

TEST_F(CandidatePoolRun, APoolFileRunsThroughSelectionCurvesAndTheReport) {
  // Question 0: a wrong query first, gold second (the curve's upper bound turns true at K = 2);
  // question 1: gold alone; every other question but the last: a wrong query; the last: absent.
  json pool = json::object();
  pool[q(0).question_id] = {"SELECT 0", q(0).gold_sql};
  pool[q(1).question_id] = {q(1).gold_sql};
  for (size_t i = 2; i + 1 < ds_.questions.size(); ++i) pool[q(i).question_id] = {"SELECT 'no'"};
  pool["no-such-question"] = {"SELECT 1"};
  const fs::path file = dir_ / "pool.json";
  std::ofstream(file) << pool.dump(1);
  const fs::path out = dir_ / "run";
  auto summary = testing::run_and_report(testing::mini_run_options(config(file), data_, out, dir_ / "index"));
  ASSERT_TRUE(summary.is_ok()) << summary.status().message();
  EXPECT_EQ(summary->finished, ds_.questions.size());
  EXPECT_EQ(summary->failed, 0u);
  EXPECT_EQ(summary->llm_calls, 0);  // nothing asked a model
  auto data = run::load_run(out);
  ASSERT_TRUE(data.is_ok()) << data.status().message();
  EXPECT_TRUE(data->records[1].correct(run::primary_metric(data->manifest)));  // gold, read from the file
  const run::QuestionRecord& first = data->records[0];
  ASSERT_EQ(first.candidates.size(), 2u);
  EXPECT_EQ(first.candidates[0].id, "other#0");
  ASSERT_TRUE(first.candidates[1].source.has_value());
  EXPECT_EQ(first.candidates[1].source->position, 2);
  EXPECT_EQ(first.candidates[1].source->file, file.string());
  EXPECT_EQ(first.curves.at(1).upper, false);
  EXPECT_EQ(first.curves.at(2).upper, true);
  EXPECT_TRUE(data->records.back().candidates.empty());  // the question the file lacks
  // The report lists what did not match, never drops it silently.
  auto rep = core::read_json_file(out / "report.json");
  ASSERT_TRUE(rep.is_ok());
  const json& pools = (*rep)["candidate_pools"];
  ASSERT_EQ(pools.size(), 1u);
  EXPECT_EQ(pools[0]["layout"], "pool");
  EXPECT_EQ(pools[0]["run_questions_missing"], json::array({ds_.questions.back().question_id}));
  EXPECT_EQ(pools[0]["unknown_ids"], json::array({"no-such-question"}));
  auto md = core::read_file(out / "report.md");
  ASSERT_TRUE(md.is_ok());
  EXPECT_NE(md->find("## Candidate pools from files"), std::string::npos);
  EXPECT_NE(md->find("no-such-question"), std::string::npos);

  // A changed file is a changed input: the folder's run is not resumed with it.
  pool[q(2).question_id] = {q(2).gold_sql};
  std::ofstream(file) << pool.dump(1);
  auto again = run(testing::mini_run_options(config(file), data_, out, dir_ / "index"));
  ASSERT_FALSE(again.is_ok());
  EXPECT_NE(again.status().message().find("candidate pools"), std::string::npos) << again.status().message();
}

TEST_F(CandidatePoolRun, ABadPoolFileStopsTheRunNamingTheKeyAndTheLine) {
  const fs::path file = dir_ / "bad.jsonl";
  std::ofstream(file) << "{\"question_id\": \"0\", \"sql\": \"SELECT 1\"}\n{\"question_id\": \"1\", \"sql\": null}\n";
  auto r = run(testing::mini_run_options(config(file), data_, dir_ / "run", dir_ / "index"));
  ASSERT_FALSE(r.is_ok());
  const std::string msg = r.status().message();
  EXPECT_NE(msg.find("generate.generators[0].path"), std::string::npos) << msg;
  EXPECT_NE(msg.find("bad.jsonl:2"), std::string::npos) << msg;
}

}  // namespace
}  // namespace nl2sql::pipeline
