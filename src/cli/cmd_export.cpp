// nl2sql export --run DIR --format bird|spider|jsonl [--out FILE]: a run's predictions in the
// official formats (see nl2sql/report/export.h for placeholders and ordering).
#include <spdlog/spdlog.h>

#include <iostream>

#include "cli/command.h"
#include "nl2sql/core/files.h"
#include "nl2sql/report/export.h"

namespace nl2sql::cli {
namespace {

struct ExportArgs {
  std::string run;
  std::string format = "bird";
  std::string out;
};

int run_export(const ExportArgs& a) {
  auto format = report::parse_export_format(a.format);
  if (!format) {
    spdlog::error("{}", format.status().message());
    return kExitBadInput;
  }
  auto run = run::load_run(a.run);
  if (!run) {
    spdlog::error("{}", run.status().message());
    return kExitBadInput;
  }
  report::ExportStats stats;
  std::string text = report::export_predictions(*run, *format, &stats);
  if (a.out.empty()) {
    std::cout << text;
  } else {
    Status st = core::write_file_atomic(a.out, text);
    if (!st) {
      spdlog::error("{}", st.message());
      return kExitFailure;
    }
  }
  spdlog::info("export: {} predictions, {} placeholder lines ({}){}", stats.written, stats.placeholders,
               report::kNoPredictionSql, a.out.empty() ? "" : " -> " + a.out);
  return kExitOk;
}

RunFn setup_export(CLI::App& app) {
  auto a = std::make_shared<ExportArgs>();
  auto* cmd = app.add_subcommand("export", "Write a run's predictions as BIRD predict_dev.json, Spider text or JSONL");
  cmd->add_option("--run", a->run, "Run folder")->required();
  cmd->add_option("--format", a->format, "bird | spider | jsonl")->capture_default_str();
  cmd->add_option("--out", a->out, "Output file (default: standard output)");
  return [a] { return run_export(*a); };
}

NL2SQL_REGISTER_COMMAND("export", setup_export);

}  // namespace
}  // namespace nl2sql::cli
