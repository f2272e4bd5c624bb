// What a run folder promises when users are unlucky (issue 20): one run at a time per folder, no
// resume across a change of model, --questions naming file positions whatever databases are
// present (set-aside questions listed), and question files that would make two questions one
// or whose db_id text leaves the database root refused with the line to fix (a symlinked
// database folder is followed, refused only under data.strict_db_root).
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "nl2sql/core/config.h"
#include "nl2sql/data/dataset.h"
#include "nl2sql/eval/evaluator.h"
#include "nl2sql/pipeline/pipeline.h"
#include "nl2sql/run/run_data.h"
#include "nl2sql/run/run_lock.h"
#include "support/mini_run.h"
#include "support/test_env.h"

namespace nl2sql::pipeline {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

core::Config sim_config(const std::string& model = "sim") {
  core::Config c(json::parse(R"({
    "llm": {"models": {"sim": {"provider": "sim"}}, "default_profile": "sim", "cache": {"mode": "off"}},
    "generate": {"generators": [{"name": "baseline", "samples": 1}]},
    "fix": {"enabled": false}, "select": {"method": "self_consistency"},
    "run": {"curve_points": [1]}
  })"));
  c.set("llm.models.sim.model", model);
  return c;
}

void write_json(const fs::path& p, const json& j) { std::ofstream(p) << j.dump(1); }

class RunFolder : public ::testing::Test {
 protected:
  void SetUp() override { data_ = testing::build_mini_bird(dir_ / "mini"); }
  RunOptions options(const core::Config& c, const fs::path& out) {
    return testing::mini_run_options(c, data_, out, dir_ / "index");
  }
  testing::TempDir dir_;
  fs::path data_;
};

TEST_F(RunFolder, ARunsRecordsAreThoseItsStoreHoldsInTheStoresOrder) {
  // A fresh run hands on the records it stored without reading them back: they must be what
  // the store holds, field for field and in its order (the reports of a fresh run and of the
  // same folder re-rendered are then the same). Three generators, the fixer and the tournament
  // make records with every part filled.
  core::Config c = sim_config();
  c.set("generate.generators", json::parse(R"([{"name": "dc", "samples": 2}, {"name": "qp", "samples": 2},
                                               {"name": "os", "samples": 2}])"));
  c.set("fix", json::parse(R"({"enabled": true, "max_rounds": 2})"));
  c.set("run.selectors", json::array({"tournament", "self_consistency"}));
  c.set("run.primary_selector", "tournament");
  c.set("run.threads", 4);
  const fs::path out = dir_ / "run";
  auto summary = run(options(c, out));
  ASSERT_TRUE(summary.is_ok()) << summary.status().message();
  ASSERT_EQ(summary->finished, 21u);
  auto data = run::load_run(out);
  ASSERT_TRUE(data.is_ok()) << data.status().message();
  ASSERT_EQ(summary->records.size(), data->records.size());
  for (size_t i = 0; i < data->records.size(); ++i)
    EXPECT_EQ(run::to_json(summary->records[i]).dump(), run::to_json(data->records[i]).dump())
        << "record " << i << " (question " << data->records[i].question_id << ")";
}

TEST_F(RunFolder, ASecondRunOnALiveFolderIsRefusedWithTheHoldersPid) {
  const fs::path out = dir_ / "run";
  fs::create_directories(out);
  auto held = run::RunFolderLock::acquire(out);  // as a live run holds it
  ASSERT_TRUE(held.is_ok()) << held.status().message();
  for (bool force_new : {false, true}) {
    RunOptions o = options(sim_config(), out);
    o.force_new = force_new;
    auto second = testing::run_and_report(o);
    ASSERT_FALSE(second.is_ok());
    EXPECT_EQ(second.status().code(), ErrorCode::kInvalidInput);
    EXPECT_NE(second.status().message().find("in use by another nl2sql run (pid " + std::to_string(::getpid())),
              std::string::npos)
        << second.status().message();
  }
  EXPECT_FALSE(fs::exists(out / "run.sqlite")) << "nothing was started";
  // Readers are refused while it runs, too.
  auto report = testing::run_nl2sql("report " + out.string());
  EXPECT_EQ(report.exit_code, 2) << report.out << report.err;
  EXPECT_NE(report.err.find("is being written by an nl2sql run (pid"), std::string::npos) << report.err;
  held->reset();  // the live run ends
  auto after = testing::run_and_report(options(sim_config(), out));
  ASSERT_TRUE(after.is_ok()) << after.status().message();
  EXPECT_EQ(after->finished, 21u);
}

TEST_F(RunFolder, AResumeWithAnotherModelIsRefused) {
  const fs::path out = dir_ / "run";
  RunOptions first = options(sim_config("model-a"), out);
  first.filter.ranges = "0-2";
  ASSERT_TRUE(run(first).is_ok());
  json manifest = testing::read_json_file(out / "manifest.json");
  EXPECT_EQ(manifest["models"]["sim"]["model"], "model-a") << manifest.dump();
  RunOptions second = options(sim_config("model-b"), out);
  second.filter.ranges = "0-2";
  auto refused = run(second);
  ASSERT_FALSE(refused.is_ok());
  EXPECT_NE(refused.status().message().find("models:"), std::string::npos) << refused.status().message();
  EXPECT_NE(refused.status().message().find("model-b"), std::string::npos) << refused.status().message();
}

TEST_F(RunFolder, QuestionRangesAreFilePositionsAndSetAsideQuestionsAreListed) {
  json dev = testing::read_json_file(data_ / "dev.json");
  dev[1]["db_id"] = "not_here";  // question 1's database is missing
  write_json(data_ / "dev.json", dev);
  const fs::path out = dir_ / "run";
  RunOptions o = options(sim_config(), out);
  o.filter.ranges = "0-4";
  auto summary = testing::run_and_report(o);
  ASSERT_TRUE(summary.is_ok()) << summary.status().message();
  EXPECT_EQ(summary->questions, 4u);  // 0, 2, 3, 4 — not 5
  json manifest = testing::read_json_file(out / "manifest.json");
  std::vector<std::string> ids;
  for (const auto& id : manifest["question_ids"]) ids.push_back(id.get<std::string>());
  EXPECT_EQ(ids, (std::vector<std::string>{dev[0]["question_id"].dump(), dev[2]["question_id"].dump(),
                                           dev[3]["question_id"].dump(), dev[4]["question_id"].dump()}));
  json report = testing::read_json_file(out / "report.json");
  ASSERT_EQ(report["skipped"].size(), 1u) << report["skipped"].dump();
  EXPECT_EQ(report["skipped"][0]["index"], 1);
  EXPECT_EQ(report["skipped"][0]["db_id"], "not_here");
  EXPECT_FALSE(report["skipped"][0]["reason"].get<std::string>().empty());
  std::ifstream md(out / "report.md");
  std::stringstream ss;
  ss << md.rdbuf();
  EXPECT_NE(ss.str().find("Skipped questions"), std::string::npos);
}

TEST_F(RunFolder, DuplicateIdsAndEscapingDbIdsAreRefusedNamingTheQuestion) {
  data::DatasetSpec spec;
  spec.data_dir = data_;
  json dev = testing::read_json_file(data_ / "dev.json");
  // A repeated id in a BIRD file (the official mini-dev repeats two): both questions kept, the
  // later one renamed, a warning naming both positions.
  json dup = dev;
  dup[5]["question_id"] = dup[2]["question_id"];
  write_json(data_ / "dev.json", dup);
  auto d = data::load_dataset(spec);
  ASSERT_TRUE(d.is_ok()) << d.status().message();
  EXPECT_EQ(d->questions.size(), dev.size());
  const std::string renamed = dup[2]["question_id"].dump() + "@5";
  EXPECT_NE(d->find_question(renamed), nullptr);
  ASSERT_FALSE(d->warnings.empty());
  EXPECT_NE(d->warnings.back().find("question #5: repeats question_id"), std::string::npos) << d->warnings.back();
  EXPECT_NE(d->warnings.back().find("#2"), std::string::npos) << d->warnings.back();

  for (const char* bad : {"../outside", "/etc", "a/b", "..", "a\\b"}) {
    json esc = dev;
    esc[3]["db_id"] = bad;
    write_json(data_ / "dev.json", esc);
    auto e = data::load_dataset(spec);
    ASSERT_FALSE(e.is_ok()) << bad;
    EXPECT_NE(e.status().message().find("db_id"), std::string::npos) << e.status().message();
  }

  // A database folder that is a symlink to somewhere outside the root: the user's layout (one
  // copy of a large dataset linked in), followed; refused only with data.strict_db_root.
  write_json(data_ / "dev.json", dev);
  const fs::path outside = dir_ / "elsewhere";
  fs::rename(data_ / "dev_databases" / "music_store", outside);
  fs::create_directory_symlink(outside, data_ / "dev_databases" / "music_store");
  auto sym = data::load_dataset(spec);
  ASSERT_TRUE(sym.is_ok()) << sym.status().message();
  EXPECT_EQ(sym->questions.size(), dev.size());
  EXPECT_TRUE(sym->skipped.empty());
  ASSERT_TRUE(sym->schemas.count("music_store"));
  EXPECT_FALSE(sym->schemas.at("music_store").tables.empty());  // read through the link
  EXPECT_EQ(fs::weakly_canonical(sym->db_paths.at("music_store")), fs::weakly_canonical(outside / "music_store.sqlite"));
  data::DatasetSpec strict = spec;
  strict.strict_db_root = true;
  auto refused = data::load_dataset(strict);
  ASSERT_FALSE(refused.is_ok());
  EXPECT_NE(refused.status().message().find("outside the database root"), std::string::npos) << refused.status().message();
  EXPECT_NE(refused.status().message().find("data.strict_db_root"), std::string::npos) << refused.status().message();
}

TEST_F(RunFolder, APasswordInAProfilesBaseUrlNeverReachesTheRunFolder) {
  core::Config c(json::parse(R"({
    "llm": {"models": {"m": {"base_url": "http://tester:pa55-w0rd-x9@127.0.0.1:9/v1", "model": "x", "api_key_env": ""}},
            "default_profile": "m", "cache": {"mode": "off"}, "preflight": false,
            "retry": {"max_attempts": 1}},
    "generate": {"generators": [{"name": "baseline", "samples": 1}]},
    "fix": {"enabled": false}, "select": {"method": "self_consistency"}, "run": {"curve_points": [1]}
  })"));
  const fs::path out = dir_ / "run";
  RunOptions o = options(c, out);
  o.filter.ranges = "0";
  auto summary = testing::run_and_report(o);
  ASSERT_TRUE(summary.is_ok()) << summary.status().message();
  size_t files = 0;
  for (const auto& entry : fs::recursive_directory_iterator(out)) {
    if (!entry.is_regular_file()) continue;
    ++files;
    std::ifstream in(entry.path(), std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    EXPECT_EQ(ss.str().find("pa55-w0rd-x9"), std::string::npos) << entry.path();
  }
  EXPECT_GE(files, 4u);
  EXPECT_NE(testing::read_json_file(out / "config.resolved.json")["llm"]["models"]["m"]["base_url"].get<std::string>().find("***@"),
            std::string::npos);
}

TEST_F(RunFolder, APredictionFileWithARepeatedIdIsRefusedNamingBothLines) {
  data::DatasetSpec spec;
  spec.data_dir = data_;
  auto ds = data::load_dataset(spec);
  ASSERT_TRUE(ds.is_ok()) << ds.status().message();
  const fs::path preds = dir_ / "preds.jsonl";
  std::ofstream(preds) << R"({"question_id": "0", "sql": "SELECT 1"})" "\n"
                       << R"({"question_id": "1", "sql": "SELECT 2"})" "\n"
                       << R"({"question_id": "0", "sql": "SELECT 3"})" "\n";
  auto r = eval::read_predictions(preds, eval::PredictionFormat::kJsonl, *ds);
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("preds.jsonl:3: duplicate question_id 0 (also line 1)"), std::string::npos)
      << r.status().message();
}

}  // namespace
}  // namespace nl2sql::pipeline
