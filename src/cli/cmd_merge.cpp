// nl2sql merge runs/a runs/b … --out runs/all: one run store (and report) from shards or
// partial runs of the same config on the same data.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <iostream>

#include "cli/command.h"
#include "nl2sql/run/run_lock.h"
#include "nl2sql/report/merge.h"
#include "nl2sql/report/run_report.h"

namespace nl2sql::cli {
namespace {

struct MergeArgs {
  std::vector<std::string> runs;
  std::string out;
  bool no_report = false;
};

int run_merge(const MergeArgs& a) {
  std::vector<std::filesystem::path> inputs(a.runs.begin(), a.runs.end());
  // Every input read under a shared lock: a shard still running is refused, not half-merged.
  std::vector<std::unique_ptr<run::RunFolderLock>> reading;
  for (const auto& in : inputs) {
    auto lock = run::RunFolderLock::acquire_shared(in);
    if (!lock) {
      spdlog::error("{}", lock.status().message());
      return kExitBadInput;
    }
    reading.push_back(std::move(*lock));
  }
  auto merged = report::merge_runs(inputs, a.out);
  if (!merged) {
    spdlog::error("{}", merged.status().message());
    return merged.status().code() == ErrorCode::kIo ? kExitFailure : kExitBadInput;
  }
  std::cout << fmt::format("merged {} runs into {}: {} questions ({} in several inputs, all agreeing), {} rows\n",
                           merged->inputs, a.out, merged->questions, merged->overlapping, merged->rows);
  size_t expected = merged->manifest["question_ids"].size();
  if (expected > merged->questions)
    std::cout << fmt::format("  {} of the {} expected questions have no record yet\n", expected - merged->questions, expected);
  if (a.no_report) return kExitOk;
  auto run = run::load_run(a.out);
  if (!run) {
    spdlog::error("{}", run.status().message());
    return kExitFailure;
  }
  auto opts = report::ReportOptions::from_config(run->config);
  if (!opts) {
    spdlog::error("{}", opts.status().message());
    return kExitBadInput;
  }
  Status st = report::write_reports(*run, a.out, *opts);
  if (!st) {
    spdlog::error("{}", st.message());
    return kExitFailure;
  }
  std::cout << "  report: " << (std::filesystem::path(a.out) / "report.html").string() << "\n";
  return kExitOk;
}

RunFn setup_merge(CLI::App& app) {
  auto a = std::make_shared<MergeArgs>();
  auto* cmd = app.add_subcommand("merge", "Merge run stores (shards of one run) into one run folder with its report");
  cmd->add_option("runs", a->runs, "Run folders to merge")->required()->expected(2, -1);
  cmd->add_option("--out", a->out, "Output run folder (must not hold a run)")->required();
  cmd->add_flag("--no-report", a->no_report, "Only merge the stores");
  return [a] { return run_merge(*a); };
}

NL2SQL_REGISTER_COMMAND("merge", setup_merge);

}  // namespace
}  // namespace nl2sql::cli
