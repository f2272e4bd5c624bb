// End-to-end `nl2sql eval` on the bundled mini set: prediction formats, reports, exit codes.
#include <sqlite3.h>
#include <sys/wait.h>

#include <cstdlib>
#include <fstream>
#include <set>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "nl2sql/core/files.h"
#include "nl2sql/core/hash.h"
#include "support/test_env.h"

namespace nl2sql {
namespace {
namespace fs = std::filesystem;
using nlohmann::json;

class EvalCli : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = testing::build_mini_bird(dir_ / "mini");
    questions_ = *core::read_json_file(root_ / "dev.json");
  }
  std::string base_args() {
    return "eval --benchmark bird --data '" + root_.string() + "' --cache-dir '" +
           (dir_ / "cache").string() + "' ";
  }
  testing::TempDir dir_;
  fs::path root_;
  json questions_;
};

TEST_F(EvalCli, GoldAgainstGoldScoresFullMarksUnderEveryMetric) {
  json pred = json::object();
  for (size_t i = 0; i < questions_.size(); ++i)
    pred[std::to_string(i)] = questions_[i]["SQL"].get<std::string>() + "\t----- bird -----\t" +
                              questions_[i]["db_id"].get<std::string>();
  std::ofstream(dir_ / "pred.json") << pred.dump();
  auto r = testing::run_nl2sql(base_args() + "--metric all --pred '" + (dir_ / "pred.json").string() +
                               "' --out '" + (dir_ / "out").string() + "'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto report = core::read_json_file(dir_ / "out" / "eval.json");
  ASSERT_TRUE(report.is_ok());
  for (const char* m : {"bird", "spider_ts", "relaxed"})
    EXPECT_DOUBLE_EQ((*report)["summary"]["metrics"][m]["overall"]["ex"].get<double>(), 100.0) << m;
  ASSERT_EQ((*report)["items"].size(), 21u);
  EXPECT_EQ((*report)["items"][0]["outcome"], "RES3");
  EXPECT_TRUE(fs::exists(dir_ / "out" / "eval.md"));
  EXPECT_TRUE(fs::exists(dir_ / "out" / "eval.csv"));
}

TEST_F(EvalCli, EfficiencyTablesBesideEx) {
  json pred = json::object();
  for (size_t i = 0; i < questions_.size(); ++i)
    pred[std::to_string(i)] = questions_[i]["SQL"].get<std::string>() + "\t----- bird -----\t" +
                              questions_[i]["db_id"].get<std::string>();
  std::ofstream(dir_ / "pred.json") << pred.dump();
  auto r = testing::run_nl2sql(base_args() + "--metric rves,rves-steps,ves-steps --ves-repeats 2 --pred '" +
                               (dir_ / "pred.json").string() + "' --out '" + (dir_ / "out").string() + "'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("R-VES (steps)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("2 timed round(s) per correct pair"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("bird       EX 100.00%"), std::string::npos) << r.out;  // EX beside, the auto metric
  auto report = core::read_json_file(dir_ / "out" / "eval.json");
  ASSERT_TRUE(report.is_ok());
  const auto& e = (*report)["summary"]["efficiency"];
  EXPECT_DOUBLE_EQ(e["metrics"]["rves_steps"]["overall"]["score"].get<double>(), 100.0);  // gold vs gold
  EXPECT_DOUBLE_EQ(e["metrics"]["ves_steps"]["overall"]["score"].get<double>(), 100.0);
  EXPECT_EQ(e["repeats"], 2);
  EXPECT_EQ((*report)["items"][0]["efficiency"]["scores"]["rves"]["rounds"], 2);
  auto csv = core::read_file(dir_ / "out" / "eval.csv");
  ASSERT_TRUE(csv.is_ok());
  EXPECT_NE(csv->find("rves_ratio,rves_reward,rves_steps_ratio"), std::string::npos);
  auto md = core::read_file(dir_ / "out" / "eval.md");
  ASSERT_TRUE(md.is_ok());
  EXPECT_NE(md->find("## Efficiency"), std::string::npos);
}

TEST_F(EvalCli, JudgeImportPrintsTheAlignmentFigures) {
  std::ofstream(dir_ / "labels.csv") << "question_id,judge_code,label\nq1,RES3,correct\nq2,RES5,incorrect\nq3,RES2,RES3\n"
                                        "q4,RES1,0\nq5,RES3,\n";
  auto r = testing::run_nl2sql("judge-import --labels '" + (dir_ / "labels.csv").string() + "' --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = json::parse(r.out);
  EXPECT_EQ(j["tp"], 1);
  EXPECT_EQ(j["fp"], 1);
  EXPECT_EQ(j["fn"], 1);
  EXPECT_EQ(j["tn"], 1);
  EXPECT_EQ(j["unlabelled"], 1);
  EXPECT_DOUBLE_EQ(j["precision"].get<double>(), 50.0);
  auto bad = testing::run_nl2sql("judge-export --eval '" + (dir_ / "nowhere").string() + "' --out '" +
                                 (dir_ / "x.csv").string() + "'");
  EXPECT_EQ(bad.exit_code, 2);
}

TEST_F(EvalCli, OutcomeCodesAndFailUnder) {
  // JSONL predictions with one of each kind of mistake.
  std::ofstream f(dir_ / "pred.jsonl");
  f << R"({"question_id": 0, "sql": "SELECT COUNT(*) FROM school AS T1 INNER JOIN district AS T2 ON T1.district_id = T2.district_id WHERE T2.region = 'east Bohemia'"})" "\n"
    << R"({"question_id": 1, "sql": "SELECT nme FROM school"})" "\n"                        // RES1
    << R"({"question_id": 2, "sql": "SELECT name FROM district ORDER BY population ASC LIMIT 1"})" "\n"  // RES2
    << R"({"question_id": 3, "sql": "SELECT avg_math FROM score WHERE year = 1900"})" "\n"   // RES4
    << R"({"question_id": 10, "sql": "SELECT name, kind FROM school WHERE opened IS NULL"})" "\n"  // RES5
    << R"({"question_id": 11, "sql": "DELETE FROM album"})" "\n";                             // RES1, refused
  f.close();
  auto r = testing::run_nl2sql(base_args() + "--pred-format jsonl --pred '" +
                               (dir_ / "pred.jsonl").string() + "' --out '" +
                               (dir_ / "out").string() + "' --fail-under 50");
  EXPECT_EQ(r.exit_code, 3) << r.out << r.err;
  auto report = *core::read_json_file(dir_ / "out" / "eval.json");
  std::map<std::string, std::string> outcome;
  for (const auto& it : report["items"]) outcome[it["question_id"]] = it["outcome"];
  EXPECT_EQ(outcome["0"], "RES3");
  EXPECT_EQ(outcome["1"], "RES1");
  EXPECT_EQ(outcome["2"], "RES2");
  EXPECT_EQ(outcome["3"], "RES4");
  EXPECT_EQ(outcome["10"], "RES5");
  EXPECT_EQ(outcome["11"], "RES1");
  EXPECT_EQ(outcome["5"], "RES1");  // no prediction
  for (const auto& it : report["items"]) {
    if (it["question_id"] == "11") {
      EXPECT_EQ(it["pred_status"], "rejected");
    }
  }
  // The DELETE never reached the database: its bytes are unchanged by another full run.
  auto db = root_ / "dev_databases" / "music_store" / "music_store.sqlite";
  auto before = core::sha256_file(db);
  auto again = testing::run_nl2sql(base_args() + "--pred-format jsonl --pred '" +
                                   (dir_ / "pred.jsonl").string() + "' --no-cache");
  EXPECT_EQ(again.exit_code, 0) << again.err;
  EXPECT_EQ(*core::sha256_file(db), *before);
}

// eval reads the eval.* keys of a config as a run does (eval::options_from_config), so a run's
// config scores a prediction file by the run's rules; its flags are those keys and win.
TEST_F(EvalCli, AConfigSetsTheEvalKeysAndItsFlagsWin) {
  json pred = json::object();
  size_t multi_row = 0;
  for (size_t i = 0; i < questions_.size(); ++i)
    pred[std::to_string(i)] = questions_[i]["SQL"].get<std::string>() + "\t----- bird -----\t" +
                              questions_[i]["db_id"].get<std::string>();
  std::ofstream(dir_ / "pred.json") << pred.dump();
  std::ofstream(dir_ / "run.json") << R"({"eval": {"metrics": ["bird", "relaxed"], "row_cap": 1, "check_ties": false}})";
  const std::string args = base_args() + "--no-cache --config '" + (dir_ / "run.json").string() + "' --pred '" +
                           (dir_ / "pred.json").string() + "' --out '" + (dir_ / "out").string() + "'";
  auto r = testing::run_nl2sql(args);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto report = *core::read_json_file(dir_ / "out" / "eval.json");
  EXPECT_EQ(report["summary"]["metrics"].size(), 2u) << report["summary"]["metrics"].dump();
  EXPECT_TRUE(report["summary"]["metrics"].contains("relaxed"));
  // The config's row cap of 1 keeps one row of each answer; larger answers are hashed and
  // compared whole, so the cap decides no verdict (gold vs gold stays 100%).
  for (const auto& it : report["items"]) multi_row += it["pred_status"] == "ok" && it["pred_rows"].get<size_t>() > 1;
  EXPECT_GT(multi_row, 0u);
  EXPECT_DOUBLE_EQ(report["summary"]["metrics"]["bird"]["overall"]["ex"].get<double>(), 100.0);

  r = testing::run_nl2sql(args + " --row-cap 0 --metric spider-ts");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  report = *core::read_json_file(dir_ / "out" / "eval.json");
  ASSERT_EQ(report["summary"]["metrics"].size(), 1u) << report["summary"]["metrics"].dump();
  EXPECT_DOUBLE_EQ(report["summary"]["metrics"]["spider_ts"]["overall"]["ex"].get<double>(), 100.0);

  std::ofstream(dir_ / "typo.json") << R"({"eval": {"row_caps": 1}})";
  r = testing::run_nl2sql(base_args() + "--config '" + (dir_ / "typo.json").string() + "' --pred x.json");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("unknown config key \"eval.row_caps\""), std::string::npos) << r.err;
}

// A predict_dev.json as real ones come: a non-string value (the BIRD authors' own baseline
// files hold the integer 0), a value without the separator, keys out of file order. Scored, not
// refused; each oddity is named in a warning.
TEST_F(EvalCli, UntidyBirdPredictionFilesAreScoredWithWarnings) {
  auto entry = [&](size_t i) {
    return questions_[i]["SQL"].get<std::string>() + "\t----- bird -----\t" + questions_[i]["db_id"].get<std::string>();
  };
  std::string text = "{\"1\": " + json(entry(1)).dump() + ", \"0\": 0, \"2\": " +
                     json(questions_[2]["SQL"].get<std::string>()).dump();
  for (size_t i = 3; i < questions_.size(); ++i) text += ", \"" + std::to_string(i) + "\": " + json(entry(i)).dump();
  std::ofstream(dir_ / "pred.json") << text << "}";
  auto r = testing::run_nl2sql(base_args() + "--no-cache --pred '" + (dir_ / "pred.json").string() + "' --out '" +
                               (dir_ / "out").string() + "'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("1 value(s) are not strings (keys 0)"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("lack the"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("keys 2)"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("not at the position their key names (first: key \"1\" is entry 0)"), std::string::npos) << r.err;
  auto report = *core::read_json_file(dir_ / "out" / "eval.json");
  std::map<std::string, json> items;
  for (const auto& it : report["items"]) items[it["question_id"]] = it;
  EXPECT_FALSE(items["0"]["verdicts"]["bird"].get<bool>());
  EXPECT_TRUE(items["1"]["verdicts"]["bird"].get<bool>());
  EXPECT_TRUE(items["2"]["verdicts"]["bird"].get<bool>());  // no separator: the whole value is the SQL
  EXPECT_EQ(report["summary"]["metrics"]["bird"]["overall"]["correct"].get<int>(), static_cast<int>(questions_.size()) - 1);
}

TEST_F(EvalCli, ATabInsideASpiderLineCutsItAndSaysSo) {
  std::ofstream f(dir_ / "pred.sql");
  for (size_t i = 0; i < questions_.size(); ++i) {
    const std::string sql = questions_[i]["SQL"].get<std::string>();
    if (i == 1) f << "SELECT 1\t" << sql << "\n";                                       // cut: warned
    else f << sql << "\t" << questions_[i]["db_id"].get<std::string>() << "\n";          // "SQL\tdb_id": fine
  }
  f.close();
  auto r = testing::run_nl2sql(base_args() + "--no-cache --pred-format spider --pred '" + (dir_ / "pred.sql").string() + "'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("pred.sql:2: a tab cuts the line; question 1 is scored on \"SELECT 1\" only"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("pred.sql:1:"), std::string::npos) << r.err;
}

TEST_F(EvalCli, BadInputExitsTwoAndNamesTheFile) {
  std::ofstream(dir_ / "bad.json") << "{\"0\": \"SELECT 1\",";
  auto r = testing::run_nl2sql(base_args() + "--pred '" + (dir_ / "bad.json").string() + "'");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("bad.json:1:"), std::string::npos) << r.err;
  r = testing::run_nl2sql("eval --benchmark bird --data /nonexistent --pred x.json");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("dev.json"), std::string::npos) << r.err;
  r = testing::run_nl2sql(base_args() + "--metric exactish --pred x.json");
  EXPECT_EQ(r.exit_code, 2);
}

// A WAL database on read-only storage (issue 40, item 4): its rows live only in the -wal (the
// writer still holds it), the dataset folder is a read-only bind mount in a mount namespace of
// the command's own (so root is stopped too; the mount vanishes with the command), and the
// eval must see the rows (EX 100 on a COUNT) and leave the folder as it was. Skips where mount
// namespaces are not available (not root, no unshare).
TEST_F(EvalCli, AWalDatabaseOnAReadOnlyMountIsReadWhole) {
  const fs::path data = dir_ / "wal_bird", mnt = dir_ / "ro";
  const fs::path db_dir = data / "dev_databases" / "w";
  fs::create_directories(db_dir);
  fs::create_directories(mnt);
  const fs::path writer_db = dir_ / "writer.sqlite";
  sqlite3* writer = nullptr;
  ASSERT_EQ(sqlite3_open(writer_db.c_str(), &writer), SQLITE_OK);
  auto exec = [&](const char* sql) {
    char* err = nullptr;
    EXPECT_EQ(sqlite3_exec(writer, sql, nullptr, nullptr, &err), SQLITE_OK) << (err ? err : "");
    sqlite3_free(err);
  };
  exec("PRAGMA journal_mode=WAL; PRAGMA wal_autocheckpoint=0; CREATE TABLE t (x INTEGER);");
  exec("PRAGMA wal_checkpoint(TRUNCATE);");  // the main file has the table, no rows
  exec("INSERT INTO t VALUES (1), (2), (3);");
  fs::copy_file(writer_db, db_dir / "w.sqlite");
  fs::copy_file(writer_db.string() + "-wal", db_dir / "w.sqlite-wal");
  sqlite3_close(writer);
  std::ofstream(data / "dev.json") << R"([{"question_id": 0, "db_id": "w", "question": "How many?", "evidence": "", "SQL": "SELECT COUNT(*) FROM t"}])";
  std::ofstream(dir_ / "wal_pred.json") << R"({"0": "SELECT 3\t----- bird -----\tw"})";

  const std::string probe = "unshare -m sh -c \"mount --bind '" + data.string() + "' '" + mnt.string() +
                            "' && mount -o remount,ro,bind '" + mnt.string() + "' && ! touch '" +
                            (mnt / "probe").string() + "'\" >/dev/null 2>&1";
  if (std::system(probe.c_str()) != 0) GTEST_SKIP() << "no read-only bind mount here (needs root and unshare -m)";

  const std::string eval = std::string("'") + NL2SQL_BINARY + "' eval --benchmark bird --data '" + mnt.string() +
                           "' --cache-dir '" + (dir_ / "cache").string() + "' --pred '" + (dir_ / "wal_pred.json").string() +
                           "' --out '" + (dir_ / "wal_out").string() + "' 2>'" + (dir_ / "wal_err.txt").string() + "'";
  const std::string cmd = "unshare -m sh -c \"mount --bind '" + data.string() + "' '" + mnt.string() +
                          "' && mount -o remount,ro,bind '" + mnt.string() + "' && " + eval + "\"";
  const int rc = std::system(cmd.c_str());
  std::ifstream err_in(dir_ / "wal_err.txt");
  const std::string err((std::istreambuf_iterator<char>(err_in)), std::istreambuf_iterator<char>());
  ASSERT_TRUE(WIFEXITED(rc) && WEXITSTATUS(rc) == 0) << err;
  auto report = core::read_json_file(dir_ / "wal_out" / "eval.json");
  ASSERT_TRUE(report.is_ok());
  EXPECT_DOUBLE_EQ((*report)["summary"]["metrics"]["bird"]["overall"]["ex"].get<double>(), 100.0) << report->dump();
  std::set<std::string> names;
  for (const auto& e : fs::directory_iterator(db_dir)) names.insert(e.path().filename().string());
  EXPECT_EQ(names, (std::set<std::string>{"w.sqlite", "w.sqlite-wal"}));
}

}  // namespace
}  // namespace nl2sql
