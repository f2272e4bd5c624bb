// The separating-instance paper's experiment as shipped
// (configs/ablations/separating_k_sweep*.json): the configs validate, and a tiny run of the sim
// variant on the bundled mini set yields the accuracy-vs-K table and plot for its four selectors at
// K = 2, 5, 11, 24, the repeats the paper averages over, and the SIMULATED label.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "nl2sql/run/run_data.h"
#include "support/test_env.h"

namespace nl2sql {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

fs::path configs_dir() { return testing::fixtures_dir().parent_path().parent_path() / "configs"; }
std::string quote(const fs::path& p) { return "'" + p.string() + "'"; }

std::string read_text(const fs::path& p) {
  std::ifstream in(p);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

const std::vector<std::string> kSelectors = {"separating_instances", "alphasql_consistency",
                                             "alphasql_naive", "deepeye_selection"};

TEST(SeparatingSweep, ShippedConfigsValidate) {
  for (const char* name : {"separating_k_sweep.json", "separating_k_sweep_sim.json"}) {
    auto r =
        testing::run_nl2sql("config check --config " + quote(configs_dir() / "ablations" / name));
    EXPECT_EQ(r.exit_code, 0) << name << "\n" << r.out << r.err;
  }
  // A curve selector must also be run on the whole pool: the run refuses, naming the key.
  testing::TempDir dir;
  const fs::path data = testing::build_mini_bird(dir.path() / "mini");
  auto bad = testing::run_nl2sql(
      "run --config " + quote(configs_dir() / "ablations" / "separating_k_sweep_sim.json") +
      " --benchmark bird --data " + quote(data) + " --out " + quote(dir.path() / "bad") +
      " --set 'run.selectors=[\"separating_instances\"]' --progress off");
  EXPECT_EQ(bad.exit_code, 2) << bad.out << bad.err;
  EXPECT_NE((bad.out + bad.err).find("run.curve_selectors"), std::string::npos)
      << bad.out << bad.err;
}

TEST(SeparatingSweep, TinySimulatedSweepPlotsFourSelectorsAtFourK) {
  testing::TempDir dir;
  const fs::path data = testing::build_mini_bird(dir.path() / "mini");
  const fs::path out = dir.path() / "sweep";
  // Fewer repeats than shipped keep the test short; the shipped counts are checked below.
  auto r = testing::run_nl2sql(
      "sweep " + quote(configs_dir() / "ablations" / "separating_k_sweep_sim.json") +
      " --benchmark bird --data " + quote(data) + " --questions 0-3 --out " + quote(out) +
      " --index-dir " + quote(dir.path() / "index") +
      " --set run.curve_repeats=2 --set run.curve_repeats_primary=3");
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const fs::path run = out / "separating_k_sweep_sim";
  auto loaded = run::load_run(run);
  ASSERT_TRUE(loaded.is_ok()) << loaded.status().message();
  ASSERT_EQ(loaded->records.size(), 4u);
  for (const auto& rec : loaded->records) {
    ASSERT_EQ(rec.candidates.size(), 24u) << rec.question_id;
    for (int64_t k : {2, 5, 11, 24}) {
      ASSERT_TRUE(rec.curves.count(k)) << rec.question_id << " k=" << k;
      const auto& p = rec.curves.at(k);
      ASSERT_TRUE(p.contested.has_value());
      ASSERT_EQ(p.selectors.size(), 4u);
      EXPECT_EQ(p.selectors.at("separating_instances").size(), 3u);
      EXPECT_EQ(p.selectors.at("alphasql_naive").size(), 2u);
      EXPECT_EQ(p.selectors.at("deepeye_selection").size(), 2u);
      EXPECT_EQ(p.selectors.at("alphasql_consistency").size(), 1u);  // no model: once
    }
    // On the whole pool, repeat 0 is the run's own selection.
    for (const auto& name : kSelectors)
      EXPECT_EQ(rec.curves.at(24).selectors.at(name).front(),
                rec.selections.at(name).correct.value_or(false))
          << rec.question_id << " " << name;
  }

  std::ifstream in(run / "report.json");
  ASSERT_TRUE(in.good());
  json rep = json::parse(in);
  ASSERT_TRUE(rep.contains("selector_curves"));
  const json& sc = rep["selector_curves"];
  EXPECT_EQ(sc["selectors"], json(kSelectors));
  ASSERT_EQ(sc["points"].size(), 4u);
  std::vector<long> ks;
  for (const auto& p : sc["points"]) {
    ks.push_back(p["k"].get<long>());
    EXPECT_EQ(p["questions"], 4);
    for (const auto& name : kSelectors) {
      ASSERT_TRUE(p["all"][name]["mean_pct"].is_number()) << p.dump();
      const double v = p["all"][name]["mean_pct"].get<double>();
      EXPECT_GE(v, 0.0);
      EXPECT_LE(v, 100.0);
    }
    // The mean over repeats, recomputed from the records.
    double sum = 0;
    for (const auto& rec : loaded->records) {
      const auto& picks = rec.curves.at(p["k"].get<int64_t>()).selectors.at("separating_instances");
      sum += static_cast<double>(std::count(picks.begin(), picks.end(), true)) /
             static_cast<double>(picks.size());
    }
    EXPECT_NEAR(p["all"]["separating_instances"]["mean_pct"].get<double>(), 100.0 * sum / 4, 1e-9);
  }
  EXPECT_EQ(ks, (std::vector<long>{2, 5, 11, 24}));

  const std::string md = read_text(run / "report.md");
  EXPECT_NE(md.find("## Accuracy vs number of candidates per selector (SIMULATED)"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("| candidates | questions | separating_instances % | alphasql_consistency % | "
                    "alphasql_naive % | "
                    "deepeye_selection % |"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("| 24 | 4 |"), std::string::npos) << md;
  const std::string html = read_text(run / "report.html");
  EXPECT_NE(html.find("id=\"selector-curves-contested\""), std::string::npos);
  EXPECT_NE(html.find("id=\"selector-curves-all\""), std::string::npos);
  EXPECT_NE(html.find("deepeye_selection"), std::string::npos);

  // The shipped repeats are the paper's: 4 runs per baseline, 16 for its own method.
  auto shown = testing::run_nl2sql("config show --config " +
                                   quote(configs_dir() / "ablations" / "separating_k_sweep.json"));
  ASSERT_EQ(shown.exit_code, 0) << shown.err;
  EXPECT_NE(shown.out.find("\"curve_repeats\": 4"), std::string::npos) << shown.out;
  EXPECT_NE(shown.out.find("\"curve_repeats_primary\": 16"), std::string::npos) << shown.out;
}

}  // namespace
}  // namespace nl2sql
