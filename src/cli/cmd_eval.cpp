// nl2sql eval: execution accuracy of a prediction file, exactly as the official evaluators
// compute it, with breakdowns, outcome codes and reports.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <iostream>
#include <optional>

#include "cli/command.h"
#include "cli/config_options.h"
#include "cli/dataset_options.h"
#include "nl2sql/core/thread_pool.h"
#include "nl2sql/eval/evaluator.h"
#include "nl2sql/eval/report.h"
#include "nl2sql/sim/simulator.h"

namespace nl2sql::cli {
namespace {

struct EvalArgs {
  DatasetOptions dataset;
  std::string pred;
  std::string pred_format = "auto";
  std::string out;
  size_t threads = 0;
  double fail_under = -1;
  std::string cache_dir;
  bool no_cache = false;
  ConfigOptions config;  // the eval.* keys: a run's config evaluates as the run judged
};

// The evaluation's options: the config's eval.* keys, then the flags (threads, cache) and the
// judge's prompts and model client (kept alive in `judge_client`). Errors are logged.
std::optional<eval::EvalOptions> eval_options(const EvalArgs& a, const core::Config& config, const data::Dataset& ds,
                                              std::optional<llm::PromptLibrary>& prompts,
                                              std::unique_ptr<llm::Client>& judge_client) {
  // "auto": the benchmark's official metric alone (a run adds relaxed beside it).
  auto options = eval::options_from_config(config, ds.benchmark == data::Benchmark::kSpider ? "spider-ts" : "bird");
  if (!options) {
    spdlog::error("{}", options.status().message());
    return std::nullopt;
  }
  eval::EvalOptions opts = std::move(*options);
  opts.threads = a.threads;
  auto library = llm::PromptLibrary::from_config(config);  // the judge's template (--prompts)
  if (!library) {
    spdlog::error("{}", library.status().message());
    return std::nullopt;
  }
  prompts.emplace(std::move(*library));
  opts.prompts = &*prompts;
  if (opts.judge) {  // the model of role `judge` (the environment's endpoint by default)
    auto c = sim::make_client(config, &ds);
    if (!c) {
      spdlog::error("{}", c.status().message());
      return std::nullopt;
    }
    judge_client = std::move(*c);
    opts.judge_client = judge_client.get();
  }
  if (!a.no_cache) {
    std::filesystem::path dir = a.cache_dir.empty() ? db::default_cache_dir() : std::filesystem::path(a.cache_dir);
    opts.cache_file = dir / "results.sqlite";
  }
  return opts;
}

int run_eval(const EvalArgs& a) {
  auto config = a.config.load();
  if (!config) return kExitBadInput;
  auto ds = a.dataset.load(*config);
  if (!ds) return kExitBadInput;
  if (!ds->skipped.empty())
    spdlog::warn("{} of {} questions skipped (database missing); they are listed in the report",
                 ds->skipped.size(), ds->total_questions);
  auto fmt_or = eval::parse_prediction_format(a.pred_format);
  if (!fmt_or) {
    spdlog::error("{}", fmt_or.status().message());
    return kExitBadInput;
  }
  std::vector<std::string> warnings;
  auto preds = eval::read_predictions(a.pred, *fmt_or, *ds, &warnings);
  if (!preds) {
    spdlog::error("{}", preds.status().message());
    return kExitBadInput;
  }
  for (const auto& w : warnings) spdlog::warn("{}", w);
  std::optional<llm::PromptLibrary> prompts;
  std::unique_ptr<llm::Client> judge_client;
  auto opts = eval_options(a, *config, *ds, prompts, judge_client);
  if (!opts) return kExitBadInput;
  auto report = eval::evaluate(*ds, *preds, *opts);
  if (!report) {
    spdlog::error("{}", report.status().message());
    return report.status().code() == ErrorCode::kInvalidInput ? kExitBadInput : kExitFailure;
  }
  report->predictions_file = std::filesystem::path(a.pred).filename().string();
  report->warnings.insert(report->warnings.end(), warnings.begin(), warnings.end());
  eval::summarize(*report, *opts);
  std::cout << eval::report_to_console(*report);
  if (!a.out.empty()) {
    Status st = eval::write_report(*report, a.out);
    if (!st) {
      spdlog::error("{}", st.message());
      return kExitFailure;
    }
    std::cout << "  report: " << (std::filesystem::path(a.out) / "eval.md").string() << "\n";
  }
  const double primary_ex = eval::first_metric_ex(*report);
  if (a.fail_under >= 0 && primary_ex < a.fail_under) {
    std::cout << fmt::format("FAIL: EX {:.2f}% is under --fail-under {:.2f}%\n", primary_ex, a.fail_under);
    return kExitFailUnder;
  }
  return kExitOk;
}

RunFn setup_eval(CLI::App& app) {
  auto args = std::make_shared<EvalArgs>();
  auto* cmd = app.add_subcommand("eval", "Score predictions by execution (BIRD, Spider test-suite, relaxed)");
  args->dataset.add_to(*cmd);
  cmd->add_option("--pred", args->pred, "Prediction file: BIRD predict_dev.json, Spider one-SQL-per-line, or JSONL {question_id, sql}")->required();
  cmd->add_option("--pred-format", args->pred_format, "auto | bird | spider | jsonl (auto: by extension .json/.jsonl/other)")->capture_default_str();
  cmd->add_option("--out", args->out, "Folder for eval.json, eval.md, eval.csv");
  cmd->add_option("--threads", args->threads, "Worker threads (0: one per core)")->capture_default_str();
  cmd->add_option("--fail-under", args->fail_under, "Exit 3 when the primary metric's EX % is below this");
  cmd->add_option("--cache-dir", args->cache_dir, "Result cache folder (default $NL2SQL_CACHE_DIR or ~/.cache/nl2sql)");
  cmd->add_flag("--no-cache", args->no_cache, "Execute everything; read and write no result cache");
  args->config.add_to(*cmd, /*required=*/false);
  args->config.add_key_flags(*cmd, {{"--metric", "eval.metrics"}, {"--timeout", "eval.timeout_s"}, {"--row-cap", "eval.row_cap"},
                                    {"--test-suite", "eval.test_suite"},
                                    {"--ves-repeats", "eval.ves_repeats"}});
  args->config.add_prompts_flag(*cmd);
  args->config.add_key_switches(*cmd, {{"--keep-distinct", "eval.keep_distinct", "true", "spider-ts: do not remove DISTINCT"},
                                       {"--no-tie-check", "eval.check_ties", "false", "Skip the tie-order check of gold queries with LIMIT"},
                                       {"--plug-value", "eval.plug_value", "true", "spider-ts: also try gold's values in the prediction's value slots, as the official --plug_value"}});
  return [args] { return run_eval(*args); };
}

NL2SQL_REGISTER_COMMAND("eval", setup_eval);

}  // namespace
}  // namespace nl2sql::cli
