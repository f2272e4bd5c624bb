// nl2sql run: the whole pipeline from a config into a resumable run folder with reports.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <csignal>
#include <iostream>
#include <utility>

#include "cli/command.h"
#include "cli/config_options.h"
#include "cli/dataset_options.h"
#include "nl2sql/pipeline/estimate.h"
#include "nl2sql/pipeline/pipeline.h"
#include "nl2sql/report/run_report.h"

namespace nl2sql::cli {
namespace {

std::atomic<bool> g_cancel{false};

extern "C" void on_interrupt(int) {
  if (g_cancel.exchange(true)) {
    // A second Ctrl-C: leave now (completed stages are already in the run store).
    std::signal(SIGINT, SIG_DFL);
    std::raise(SIGINT);
  }
}

struct RunArgs {
  ConfigOptions config;
  DatasetOptions dataset;
  std::string questions, db, out, shard, progress = "auto", index_dir;
  std::optional<size_t> sample;
  uint64_t seed = 0;
  bool force_new = false;
  bool estimate = false, json = false;
  std::string estimate_from;
};

Result<pipeline::ProgressMode> parse_progress(const std::string& s) {
  if (s == "auto") return pipeline::ProgressMode::kAuto;
  if (s == "tty") return pipeline::ProgressMode::kTerminal;
  if (s == "plain") return pipeline::ProgressMode::kPlain;
  if (s == "off") return pipeline::ProgressMode::kOff;
  return invalid_input("--progress: expected auto | tty | plain | off, got '" + s + "'");
}

std::filesystem::path run_folder(const std::string& out, const std::string& config_name, const DatasetOptions& dataset) {
  return out.empty() ? std::filesystem::path("runs") /
                           fmt::format("{}-{}-{}", config_name, dataset.benchmark, dataset.split)
                     : std::filesystem::path(out);
}

int exit_code_of(const Status& st) {
  return st.code() == ErrorCode::kInvalidInput || st.code() == ErrorCode::kNotFound ? kExitBadInput : kExitFailure;
}

}  // namespace

// Shared with `nl2sql sweep`: the estimate of one config before its run (no endpoint called);
// `out` as run_one takes it (a previous run there of the same config is learnt from).
Result<pipeline::Estimate> estimate_one(const core::Config& config, const std::string& config_name,
                                        const DatasetOptions& dataset, const pipeline::QuestionFilter& filter,
                                        const std::string& out, const std::string& estimate_from,
                                        const std::string& index_dir) {
  auto spec = dataset.spec(config);
  if (!spec) return spec.status();
  pipeline::EstimateOptions o;
  o.run.config = config;
  o.run.dataset = *spec;
  o.run.filter = filter;
  o.run.out_dir = run_folder(out, config_name, dataset);
  o.run.index_dir = index_dir;
  o.run.progress = pipeline::ProgressMode::kOff;
  o.run.cancel = &g_cancel;
  o.previous_run = estimate_from;
  auto previous = std::signal(SIGINT, on_interrupt);
  auto e = pipeline::estimate_run(o);
  std::signal(SIGINT, previous);
  return e;
}

// Shared with `nl2sql sweep`: runs one config; returns the exit code.
int run_one(const core::Config& config, const std::string& config_name, const DatasetOptions& dataset,
            const pipeline::QuestionFilter& filter, const std::string& out, bool force_new,
            std::optional<double> fail_under,
            pipeline::ProgressMode progress, const std::string& index_dir,
            pipeline::RunSummary* summary_out) {
  auto spec = dataset.spec(config);
  if (!spec) {
    spdlog::error("{}", spec.status().message());
    return kExitBadInput;
  }
  pipeline::RunOptions options;
  options.config = config;
  options.dataset = *spec;
  options.filter = filter;
  options.out_dir = run_folder(out, config_name, dataset);
  options.force_new = force_new;
  options.progress = progress;
  options.index_dir = index_dir;
  options.cancel = &g_cancel;
  auto previous = std::signal(SIGINT, on_interrupt);
  auto summary = pipeline::run(options);
  std::signal(SIGINT, previous);
  if (!summary) {
    spdlog::error("{}", summary.status().message());
    return exit_code_of(summary.status());
  }
  // The reports take the records; the summary handed on (sweep) does not carry them.
  std::vector<run::QuestionRecord> records = std::exchange(summary->records, {});
  const auto& s = *summary;
  if (summary_out) *summary_out = s;
  std::map<std::string, int64_t> duplicates;
  if (Status st = report::write_run_reports(options.out_dir, &duplicates, std::move(records)); !st) {
    spdlog::error("reports: {}", st.message());
    return kExitFailure;
  }
  std::cout << fmt::format("{}{}: {} ({}/{} questions finished, {} resumed, {} failed{}{})\n",
                           s.simulated ? "SIMULATED (sim provider, not a model's accuracy) " : "",
                           options.out_dir.string(),
                           s.finished ? fmt::format("EX {:.2f}%", s.ex()) : std::string("no EX (no question finished)"),
                           s.finished, s.questions, s.resumed, s.failed,
                           s.interrupted ? fmt::format(", {} interrupted (their stored stages are kept)", s.interrupted) : "",
                           s.not_started ? fmt::format(", {} not started", s.not_started) : "");
  std::cout << fmt::format("model cost this invocation: ${:.4f}; wall {:.1f} s\n", s.cost_usd, s.wall_s);
  if (s.llm_failed || s.llm_retries)
    std::cout << fmt::format("model calls this invocation: {} ({} failed after retries, {} retries)\n",
                             s.llm_calls, s.llm_failed, s.llm_retries);
  for (const auto& l : s.overloaded)
    std::cout << fmt::format("endpoint overloaded: profile {} answered 'busy' {} times; requests in flight were "
                             "lowered to {} (of {}) and raised again as it answered\n",
                             l.profile, l.overloads, l.lowest_in_flight, l.max_in_flight);
  if (!duplicates.empty()) {
    int64_t n = 0;
    std::string stages;
    for (const auto& [stage, d] : duplicates) {
      n += d;
      stages += fmt::format("{}{} {}", stages.empty() ? "" : ", ", stage, d);
    }
    std::cout << fmt::format("warning: {} duplicate requests (a request body sent again byte for byte; {}): "
                             "see report.md's usage table\n",
                             n, stages);
  }
  std::cout << "report: " << (options.out_dir / "report.html").string() << "\n";
  if (!s.fatal_error.empty()) {
    std::cout << "stopped early: " << s.fatal_error
              << "\nfinished questions and stages are kept: fix the cause and rerun the same command to resume\n";
    return kExitEndpointStopped;
  }
  if (s.cancelled) {
    std::cout << "interrupted: rerun the same command to continue where it stopped\n";
    return kExitInterrupted;
  }
  if (s.budget_stopped)
    std::cout << "budget reached: rerun with a higher --max-cost-usd to finish the rest\n";
  if (s.unrecorded) {
    std::cout << fmt::format("{} questions could not be RECORDED (the run store refused the writes: disk full?): "
                             "free space and rerun the same command to redo them\n",
                             s.unrecorded);
    return kExitFailure;
  }
  if (s.failed) {
    std::cout << fmt::format("{} of {} questions FAILED (no answer from the model, or a broken database): "
                             "see report.md's failed list; rerun the same command to attempt them again\n",
                             s.failed, s.finished);
  }
  const bool under = fail_under && s.ex() < *fail_under;
  if (under) std::cout << fmt::format("EX {:.2f}% is under the bar (--fail-under / run.fail_under) {:.2f}\n", s.ex(), *fail_under);
  // Failed questions first: an EX below the bar is then no verdict on the model.
  if (s.failed) return kExitQuestionsFailed;
  if (under) return kExitFailUnder;
  return kExitOk;
}

namespace {

RunFn setup_run(CLI::App& parent) {
  auto* cmd = parent.add_subcommand(
      "run", "Run the whole pipeline (context, generation, fixing, selection, evaluation, reports)");
  auto a = std::make_shared<RunArgs>();
  a->config.add_to(*cmd, /*required=*/true);
  a->dataset.add_to(*cmd);
  cmd->add_option("--questions", a->questions, "Question indices to run, e.g. 0-99,120 (file order)");
  cmd->add_option("--sample", a->sample, "Run a seeded sample of this many questions");
  cmd->add_option("--seed", a->seed, "Seed of --sample")->capture_default_str();
  cmd->add_option("--db", a->db, "Only questions on this database");
  cmd->add_option("--out", a->out, "Run folder (default: runs/<config>-<benchmark>-<split>)");
  cmd->add_option("--shard", a->shard, "Run the I-th of N deterministic slices, e.g. 0/4");
  a->config.add_key_flags(*cmd, {{"--max-cost-usd", "run.max_cost_usd"}, {"--fail-under", "run.fail_under"}});
  a->config.add_prompts_flag(*cmd);
  cmd->add_flag("--force-new", a->force_new, "Delete the run store in --out and start over");
  cmd->add_option("--progress", a->progress, "auto | tty | plain | off")->capture_default_str();
  cmd->add_option("--index-dir", a->index_dir, "Value index folder (default: context.index_dir or the cache dir)");
  cmd->add_flag("--estimate", a->estimate,
                "Print what the run would cost (calls, tokens, USD: low / expected / high) without calling any "
                "endpoint, and stop");
  cmd->add_flag("--json", a->json, "With --estimate: print the estimate as JSON");
  cmd->add_option("--estimate-from", a->estimate_from,
                  "With --estimate: a run folder whose per-question means to use (default: --out when it holds a "
                  "run of the same config)")
      ->type_name("DIR");
  return [a]() {
    auto config = a->config.load();
    if (!config) return kExitBadInput;
    auto progress = parse_progress(a->progress);
    if (!progress) {
      spdlog::error("{}", progress.status().message());
      return kExitBadInput;
    }
    pipeline::QuestionFilter filter;
    filter.ranges = a->questions;
    filter.sample = a->sample;
    filter.seed = a->seed;
    filter.db_id = a->db;
    if (!a->shard.empty()) {
      auto shard = pipeline::parse_shard(a->shard);
      if (!shard) {
        spdlog::error("{}", shard.status().message());
        return kExitBadInput;
      }
      filter.shard = *shard;
    }
    std::optional<double> fail_under;
    if (config->has("run.fail_under") && !config->find("run.fail_under")->is_null()) {
      auto f = config->get_number("run.fail_under");
      if (!f) {
        spdlog::error("{}", f.status().message());
        return kExitBadInput;
      }
      fail_under = *f;
    }
    if (!a->estimate && (a->json || !a->estimate_from.empty())) {
      spdlog::error("--json and --estimate-from go with --estimate");
      return kExitBadInput;
    }
    if (a->estimate) {
      auto e = estimate_one(*config, a->config.name(), a->dataset, filter, a->out, a->estimate_from, a->index_dir);
      if (!e) {
        spdlog::error("estimate: {}", e.status().message());
        return exit_code_of(e.status());
      }
      if (a->json) std::cout << pipeline::to_json(*e).dump(2) << "\n";
      else std::cout << pipeline::estimate_text(*e, a->config.name());
      return kExitOk;
    }
    return run_one(*config, a->config.name(), a->dataset, filter, a->out, a->force_new, fail_under, *progress, a->index_dir, nullptr);
  };
}

NL2SQL_REGISTER_COMMAND("run", setup_run);

}  // namespace
}  // namespace nl2sql::cli
