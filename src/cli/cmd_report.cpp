// nl2sql report DIR: regenerates report.json, report.md, per_question.csv and report.html of a
// run folder from its run store.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <iostream>

#include "cli/command.h"
#include "nl2sql/run/run_lock.h"
#include "nl2sql/report/run_report.h"

namespace nl2sql::cli {
namespace {

struct ReportArgs {
  std::string dir;
  std::string out;
  std::string title;
  bool no_html = false;
  size_t drilldown_limit = 0;
  bool drilldown_set = false;
};

int run_report(const ReportArgs& a) {
  // Read under a shared lock: a live run's folder is refused, not half-read.
  auto reading = run::RunFolderLock::acquire_shared(a.dir);
  if (!reading) {
    spdlog::error("{}", reading.status().message());
    return kExitBadInput;
  }
  auto run = run::load_run(a.dir);
  if (!run) {
    spdlog::error("{}", run.status().message());
    return run.status().code() == ErrorCode::kIo ? kExitFailure : kExitBadInput;
  }
  auto opts = report::ReportOptions::from_config(run->config);
  if (!opts) {
    spdlog::error("{}", opts.status().message());
    return kExitBadInput;
  }
  if (a.no_html) opts->html = false;
  if (!a.title.empty()) opts->title = a.title;
  if (a.drilldown_set) opts->drilldown_limit = a.drilldown_limit;
  std::filesystem::path out = a.out.empty() ? std::filesystem::path(a.dir) : std::filesystem::path(a.out);
  Status st = report::write_reports(*run, out, *opts);
  if (!st) {
    spdlog::error("{}", st.message());
    return kExitFailure;
  }
  auto rep = report::build_report(*run, *opts);
  const auto& o = rep["ex"]["overall"];
  std::cout << fmt::format("{}: {} questions, EX {:.2f}% [{:.2f}, {:.2f}] ({}){}\n", run->name, o["n"].get<size_t>(),
                           o["ex"].get<double>(), o["ci95"][0].get<double>(), o["ci95"][1].get<double>(),
                           rep["primary_selector"].get<std::string>(), rep["simulated"].get<bool>() ? "  SIMULATED — not a model's accuracy" : "");
  for (const char* f : {"report.json", "report.md", "per_question.csv", "report.html"})
    if (std::string(f) != "report.html" || opts->html) std::cout << "  " << (out / f).string() << "\n";
  return kExitOk;
}

RunFn setup_report(CLI::App& app) {
  auto a = std::make_shared<ReportArgs>();
  auto* cmd = app.add_subcommand("report", "Regenerate a run folder's reports from its run store");
  cmd->add_option("dir", a->dir, "Run folder (holding run.sqlite)")->required();
  cmd->add_option("--out", a->out, "Write the reports here instead of the run folder");
  cmd->add_option("--title", a->title, "Report title (default: report.title, else the folder's name)");
  cmd->add_flag("--no-html", a->no_html, "Skip report.html");
  cmd->add_option("--drilldown-limit", a->drilldown_limit, "Most questions in the HTML drill-down (0: all)")
      ->each([a](const std::string&) { a->drilldown_set = true; });
  return [a] { return run_report(*a); };
}

NL2SQL_REGISTER_COMMAND("report", setup_report);

}  // namespace
}  // namespace nl2sql::cli
