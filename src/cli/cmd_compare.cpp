// nl2sql compare runs/A runs/B …: side-by-side EX on the common questions, paired bootstrap CI
// of each run's difference to the first, McNemar's test and the flipped questions.
#include <spdlog/spdlog.h>

#include <iostream>

#include "cli/command.h"
#include "nl2sql/core/files.h"
#include "nl2sql/report/compare.h"

namespace nl2sql::cli {
namespace {

struct CompareArgs {
  std::vector<std::string> runs;
  bool json = false;
  std::string out;
  int bootstrap_samples = 1000;
  uint64_t seed = 20240101;
  size_t max_flips = 0;
};

int run_compare(const CompareArgs& a) {
  if (a.runs.size() < 2) {
    spdlog::error("compare needs at least two run folders");
    return kExitBadInput;
  }
  std::vector<run::RunData> runs;
  for (const auto& dir : a.runs) {
    auto r = run::load_run(dir);
    if (!r) {
      spdlog::error("{}", r.status().message());
      return kExitBadInput;
    }
    runs.push_back(std::move(*r));
  }
  for (size_t i = 1; i < runs.size(); ++i)
    for (const char* key : {"benchmark", "split", "dataset_fingerprint"})
      if (run::field(runs[i].manifest, key) != run::field(runs[0].manifest, key))
        spdlog::warn("{} and {} differ in {} ({} vs {}): only questions with the same id are paired", runs[0].name,
                     runs[i].name, key, run::field(runs[0].manifest, key).dump(), run::field(runs[i].manifest, key).dump());
  report::CompareOptions o;
  o.bootstrap_samples = a.bootstrap_samples;
  o.bootstrap_seed = a.seed;
  o.max_flips_listed = a.max_flips;
  auto cmp = report::compare_runs(runs, o);
  if (cmp["common_questions"].get<size_t>() == 0) spdlog::warn("the runs share no question");
  std::string text = a.json ? cmp.dump(2) + "\n" : report::compare_markdown(cmp);
  if (!a.out.empty()) {
    Status st = core::write_file_atomic(a.out, text);
    if (!st) {
      spdlog::error("{}", st.message());
      return kExitFailure;
    }
  }
  std::cout << text;
  return kExitOk;
}

RunFn setup_compare(CLI::App& app) {
  auto a = std::make_shared<CompareArgs>();
  auto* cmd = app.add_subcommand("compare", "Compare runs: EX side by side, paired bootstrap CI, McNemar, flipped questions");
  cmd->add_option("runs", a->runs, "Run folders; the first is the baseline")->required();
  cmd->add_flag("--json", a->json, "JSON instead of markdown");
  cmd->add_option("--out", a->out, "Also write the output to this file");
  cmd->add_option("--bootstrap-samples", a->bootstrap_samples, "Bootstrap resamples")->capture_default_str();
  cmd->add_option("--seed", a->seed, "Bootstrap seed")->capture_default_str();
  cmd->add_option("--max-flips", a->max_flips, "Most flipped questions listed per pair (0: all)")->capture_default_str();
  return [a] { return run_compare(*a); };
}

NL2SQL_REGISTER_COMMAND("compare", setup_compare);

}  // namespace
}  // namespace nl2sql::cli
