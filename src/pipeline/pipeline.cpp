// pipeline::run: a run as the sequence of its units (run_parts.h), and the log of skipped
// questions.
#include "nl2sql/pipeline/pipeline.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <set>

#include "nl2sql/llm/prompt_template.h"

#include "progress.h"
#include "run_parts.h"
#include "shared.h"

namespace nl2sql::pipeline {

namespace {

// Questions whose database is missing, in one line each for those the run selected and for the
// rest (a partial copy of BIRD run with --db has a thousand of the latter): how many, on which
// databases, the first ids. The selected ones are listed in full in the manifest and report.md.
void log_skipped(const std::vector<data::SkippedQuestion>& all, const std::vector<data::SkippedQuestion>& selected) {
  auto summarise = [](const std::vector<data::SkippedQuestion>& list, size_t from, size_t to) {
    std::set<std::string> dbs;
    std::string ids;
    for (size_t i = from; i < to; ++i) {
      dbs.insert(list[i].db_id);
      if (i - from < 5) ids += (ids.empty() ? "" : ", ") + list[i].question_id;
    }
    std::string names;
    for (const auto& d : dbs) {
      if (names.size() > 80) {
        names += ", …";
        break;
      }
      names += (names.empty() ? "" : ", ") + d;
    }
    return fmt::format("{} question{} ({} database{}: {}; first ids {}{})", to - from, to - from == 1 ? "" : "s",
                       dbs.size(), dbs.size() == 1 ? "" : "s", names, ids, to - from > 5 ? ", …" : "");
  };
  if (!selected.empty())
    spdlog::warn("{} of this run skipped: {} — listed in report.md; first reason: {}",
                 summarise(selected, 0, selected.size()), "their database is missing", selected.front().reason);
  if (all.size() > selected.size()) {
    std::set<std::string> chosen;
    for (const auto& sk : selected) chosen.insert(sk.question_id);
    std::vector<data::SkippedQuestion> rest;
    for (const auto& sk : all)
      if (!chosen.count(sk.question_id)) rest.push_back(sk);
    spdlog::info("{} outside this run's selection have no database either (not run, not reported)",
                 summarise(rest, 0, rest.size()));
  }
}

// The run's templates: RunOptions::prompts_dir, else config key prompts.dir, else the bundled ones.
Result<llm::PromptLibrary> open_prompts(const RunOptions& options, const core::Config& config) {
  auto lib = options.prompts_dir.empty() ? llm::PromptLibrary::from_config(config)
                                         : llm::PromptLibrary::open(options.prompts_dir);
  if (!lib) return lib.status();
  if (!lib->override_dir().empty())
    spdlog::info("prompt templates: those in {} replace the bundled ones", lib->override_dir().string());
  return lib;
}

}  // namespace

Result<RunSummary> run(const RunOptions& options) {
  auto started = Clock::now();
  RunSummary summary;
  summary.out_dir = options.out_dir;
  Shared s;
  s.options = &options;
  s.config = options.config;

  auto ds = data::load_dataset(options.dataset);
  if (!ds) return ds.status();
  s.ds = &*ds;
  for (size_t i = 0; i < ds->warnings.size() && i < 5; ++i) spdlog::warn("{}", ds->warnings[i]);
  if (ds->warnings.size() > 5) spdlog::warn("… and {} more dataset warnings", ds->warnings.size() - 5);
  auto picked = select_questions(*ds, options.filter);
  if (!picked) return picked.status();
  log_skipped(ds->skipped, skipped_in_selection(*ds, options.filter));
  summary.questions = picked->size();
  auto settings = load_run_settings(s.config, ds->benchmark);
  if (!settings) return settings.status();
  s.settings = std::move(*settings);
  auto prompts = open_prompts(options, s.config);
  if (!prompts) return prompts.status();
  s.prompts = std::make_unique<llm::PromptLibrary>(std::move(*prompts));

  PreflightGate preflight;
  auto services = set_up(s, *ds, *picked, preflight);
  if (!services) return services.status();
  summary.simulated = services->simulated;
  auto opened = open_store(s, *ds, *picked, *services);
  if (!opened) return opened.status();
  auto work = load_work(s, *ds, *picked);
  if (!work) return work.status();
  summary.resumed = picked->size() - work->pending.size();
  set_slot_priority(*s.client, s.order);
  replay_weights(s, work->finals);
  if (summary.resumed)
    spdlog::info("resuming {}: {} of {} questions already finished", options.out_dir.string(),
                 summary.resumed, summary.questions);
  if (!work->pending.empty()) preflight.start();
  preflight.hold_calls();

  ProgressOptions popts;
  popts.mode = options.progress;
  popts.interval_s = options.progress_interval_s;
  popts.total = summary.questions;
  Progress progress(popts, s.client.get());
  for (const auto& [id, r] : work->finals) progress.add_resumed(r.correct(opened->primary_metric));
  s.progress = &progress;
  progress.start();
  UsageCarry carry(*s.store);
  auto outcome = run_questions(s, *work, preflight, carry, progress, opened->primary_metric);
  progress.stop();

  NL2SQL_RETURN_IF_ERROR(summarize(s, *work, outcome, opened->primary_metric, summary));
  summary.wall_s = seconds_since(started);
  return summary;
}

}  // namespace nl2sql::pipeline
