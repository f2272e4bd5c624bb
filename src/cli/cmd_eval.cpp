// nl2sql eval: execution accuracy of a prediction file, exactly as the official evaluators
// compute it, with breakdowns, outcome codes and reports.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <iostream>

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

  // "auto": the benchmark's official metric alone (a run adds relaxed beside it).
  auto options = eval::options_from_config(*config, ds->benchmark == data::Benchmark::kSpider ? "spider-ts" : "bird");
  if (!options) {
    spdlog::error("{}", options.status().message());
    return kExitBadInput;
  }
  eval::EvalOptions opts = std::move(*options);
  opts.threads = a.threads;
  auto prompts = llm::PromptLibrary::from_config(*config);  // the judge's template (--prompts)
  if (!prompts) {
    spdlog::error("{}", prompts.status().message());
    return kExitBadInput;
  }
  opts.prompts = &*prompts;
  std::unique_ptr<llm::Client> judge_client;
  if (opts.judge) {  // the model of role `judge` (the environment's endpoint by default)
    auto c = sim::make_client(*config, &*ds);
    if (!c) {
      spdlog::error("{}", c.status().message());
      return kExitBadInput;
    }
    judge_client = std::move(*c);
    opts.judge_client = judge_client.get();
  }
  if (!a.no_cache) {
    std::filesystem::path dir = a.cache_dir.empty() ? db::default_cache_dir() : std::filesystem::path(a.cache_dir);
    opts.cache_file = dir / "results.sqlite";
  }
  auto report = eval::evaluate(*ds, *preds, opts);
  if (!report) {
    spdlog::error("{}", report.status().message());
    return report.status().code() == ErrorCode::kInvalidInput ? kExitBadInput : kExitFailure;
  }
  report->predictions_file = std::filesystem::path(a.pred).filename().string();
  report->warnings.insert(report->warnings.end(), warnings.begin(), warnings.end());
  eval::summarize(*report, opts);

  const auto& s = report->summary;
  std::cout << fmt::format("{} {}: {} questions evaluated, {} skipped, {} gold unusable\n",
                           report->benchmark, report->split, report->items.size(),
                           report->skipped.size(), s["gold_unusable"].get<size_t>());
  double primary_ex = 0;
  bool first = true;
  for (auto& [name, m] : s["metrics"].items()) {
    const auto& o = m["overall"];
    std::cout << fmt::format("  {:<10} EX {:6.2f}%  95% CI [{:.2f}, {:.2f}]  ({}/{})\n", name,
                             o["ex"].get<double>(), o["ci95"][0].get<double>(),
                             o["ci95"][1].get<double>(), o["correct"].get<long>(), o["n"].get<size_t>());
    if (first) primary_ex = o["ex"].get<double>();
    first = false;
  }
  std::cout << fmt::format("  (RES3 + RES5) / n on the rule codes {:6.2f}%\n", s["rule_semantic_accuracy"].get<double>());
  if (s.contains("judge")) {
    const auto& j = s["judge"];
    std::cout << fmt::format("  judge      semantic accuracy {:6.2f}%  95% CI [{:.2f}, {:.2f}]  ({} unreadable; {} disagree with EX; "
                             "{} cached; {} + {} tokens, ${:.4f})\n",
                             j["semantic_accuracy"].get<double>(), j["ci95"][0].get<double>(), j["ci95"][1].get<double>(),
                             j["codes"]["unparsed"].get<size_t>(), j["disagreements_with_ex"].size(),
                             j["cached_answers"].get<size_t>(), j["tokens"]["prompt"].get<int64_t>(),
                             j["tokens"]["completion"].get<int64_t>(), j["cost_usd"].get<double>());
  }
  std::cout << fmt::format("  soft-F1    {:6.2f}\n", s["soft_f1"].get<double>());
  if (s.contains("test_suite")) {
    const auto& t = s["test_suite"];
    std::cout << fmt::format("  test suite: {} question(s) on up to {} database files; spider-ts on the original databases alone "
                             "{:.2f}%; {} pass there but fail on a variant (listed in the report)\n",
                             t["questions_on_a_suite"].get<size_t>(), t["most_database_files"].get<size_t>(),
                             t["ex_original_only"].get<double>(), t["passes_original_fails_variant"].size());
  }
  if (s.contains("efficiency")) {
    const auto& e = s["efficiency"];
    std::cout << fmt::format("\nefficiency: {} timed round(s) per correct pair, one pair at a time; CPU {}", e["repeats"].get<int>(),
                             e["cpu"].get<std::string>());
    if (e.contains("load_average_before"))
      std::cout << fmt::format("; 1-min load {:.2f} before, {:.2f} after the timed pass",
                               e["load_average_before"].get<double>(), e["load_average_after"].get<double>());
    std::cout << "\n";
    for (eval::EfficiencyMetric metric : report->efficiency.metrics) {  // in the order asked for
      const std::string name = eval::efficiency_metric_name(metric);
      const auto& m = e["metrics"][name];
      std::cout << "\n" << eval::efficiency_table(e, name);
      if (m.contains("near_boundary"))
        std::cout << fmt::format("pairs whose ratio interval crosses a reward boundary: {}\n", m["near_boundary"].get<size_t>());
    }
    if (e.contains("rank_correlation"))
      for (auto& [pair, c] : e["rank_correlation"].items())
        std::cout << fmt::format("Spearman rank correlation of per-question ratios, {}: {} ({} pairs)\n", pair,
                                 c["spearman"].is_null() ? std::string("n/a (fewer than 2 pairs, or one side constant)") : fmt::format("{:.3f}", c["spearman"].get<double>()),
                                 c["pairs"].get<size_t>());
    std::cout << "\n";
  }
  std::cout << fmt::format("  {:.3f} s, {:.1f} questions/s\n", report->wall_s,
                           s["timing"]["questions_per_s"].get<double>());
  if (!a.out.empty()) {
    Status st = eval::write_report(*report, a.out);
    if (!st) {
      spdlog::error("{}", st.message());
      return kExitFailure;
    }
    std::cout << "  report: " << (std::filesystem::path(a.out) / "eval.md").string() << "\n";
  }
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
