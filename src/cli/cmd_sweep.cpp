// nl2sql sweep: several configs over the same questions, sharing one LLM response cache, then one
// comparison (paired bootstrap + McNemar against the first config).
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <iostream>

#include "cli/command.h"
#include "cli/config_options.h"
#include "cli/dataset_options.h"
#include "nl2sql/core/files.h"
#include "nl2sql/pipeline/estimate.h"
#include "nl2sql/pipeline/pipeline.h"
#include "nl2sql/report/compare.h"

namespace nl2sql::cli {

int run_one(const core::Config& config, const std::string& config_name, const DatasetOptions& dataset,
            const pipeline::QuestionFilter& filter, const std::string& out, bool force_new,
            std::optional<double> fail_under,
            pipeline::ProgressMode progress, const std::string& index_dir,
            pipeline::RunSummary* summary_out);
Result<pipeline::Estimate> estimate_one(const core::Config& config, const std::string& config_name,
                                        const DatasetOptions& dataset, const pipeline::QuestionFilter& filter,
                                        const std::string& out, const std::string& estimate_from,
                                        const std::string& index_dir);

namespace {

struct SweepArgs {
  std::vector<std::string> configs;
  std::vector<std::string> sets;
  DatasetOptions dataset;
  std::string questions, db, out = "runs/sweep", index_dir;
  std::optional<size_t> sample;
  uint64_t seed = 0;
  bool force_new = false;
  bool estimate = false, json = false;
};

// --estimate: every config's estimate (each against its run folder in the sweep, when one is
// there), then the sum; nothing runs.
int estimate_sweep(const SweepArgs& a, const std::vector<std::pair<std::string, core::Config>>& configs,
                   const pipeline::QuestionFilter& filter) {
  namespace fs = std::filesystem;
  pipeline::StageEstimate total;
  nlohmann::json per = nlohmann::json::array();
  for (const auto& [name, config] : configs) {
    auto e = estimate_one(config, name, a.dataset, filter, (fs::path(a.out) / name).string(), "", a.index_dir);
    if (!e) {
      spdlog::error("estimate of {}: {}", name, e.status().message());
      return e.status().code() == ErrorCode::kInvalidInput ? kExitBadInput : kExitFailure;
    }
    total += e->total;
    if (a.json) per.push_back({{"config", name}, {"estimate", pipeline::to_json(*e)}});
    else std::cout << pipeline::estimate_text(*e, name) << "\n";
  }
  if (a.json) {
    nlohmann::json j = pipeline::to_json(total);
    j["configs"] = per;
    std::cout << j.dump(2) << "\n";
  } else {
    std::cout << fmt::format("sweep of {} configs: calls {:.0f} / {:.0f} / {:.0f}, prompt tokens {:.0f} / {:.0f} / {:.0f}, "
                             "completion tokens {:.0f} / {:.0f} / {:.0f}, USD {:.4f} / {:.4f} / {:.4f} (low / expected / high)\n",
                             configs.size(), total.calls.low, total.calls.expected, total.calls.high,
                             total.prompt_tokens.low, total.prompt_tokens.expected, total.prompt_tokens.high,
                             total.completion_tokens.low, total.completion_tokens.expected, total.completion_tokens.high,
                             total.cost_usd.low, total.cost_usd.expected, total.cost_usd.high);
  }
  return kExitOk;
}

int run_sweep(const SweepArgs& a) {
  namespace fs = std::filesystem;
  pipeline::QuestionFilter filter;
  filter.ranges = a.questions;
  filter.sample = a.sample;
  filter.seed = a.seed;
  filter.db_id = a.db;
  std::vector<std::string> names;
  std::vector<fs::path> dirs;
  int worst = kExitOk;
  std::vector<std::pair<std::string, core::Config>> loaded;
  for (const auto& path : a.configs) {
    ConfigOptions co;
    co.path = path;
    co.sets = a.sets;
    auto config = co.load();
    if (!config) return kExitBadInput;
    // One cache for the whole sweep unless the config names its own: configs that share a
    // generator reuse its answers instead of paying for them again.
    if (!config->has("llm.cache.path")) config->set("llm.cache.path", (fs::path(a.out) / "llm_cache.sqlite").string());
    std::string name = co.name();
    if (std::find(names.begin(), names.end(), name) != names.end())
      name += fmt::format("-{}", names.size());
    fs::path dir = fs::path(a.out) / name;
    if (a.estimate) {
      names.push_back(name);
      loaded.emplace_back(name, std::move(*config));
      continue;
    }
    spdlog::info("sweep: {} → {}", path, dir.string());
    int rc = run_one(*config, name, a.dataset, filter, dir.string(), a.force_new, std::nullopt,
                     pipeline::ProgressMode::kAuto, a.index_dir, nullptr);
    if (rc == kExitInterrupted || rc == kExitBadInput) return rc;
    if (rc != kExitOk) worst = rc;
    names.push_back(name);
    dirs.push_back(dir);
  }
  if (a.estimate) return estimate_sweep(a, loaded, filter);
  std::vector<run::RunData> runs;
  for (const auto& d : dirs) {
    auto r = run::load_run(d);
    if (!r) {
      spdlog::error("{}", r.status().message());
      return kExitFailure;
    }
    runs.push_back(std::move(*r));
  }
  auto comparison = report::compare_runs(runs, {});
  std::string md = report::compare_markdown(comparison);
  auto st = core::write_file_atomic(fs::path(a.out) / "comparison.md", md);
  if (st) st = core::write_file_atomic(fs::path(a.out) / "comparison.json", comparison.dump(2));
  if (!st) {
    spdlog::error("{}", st.message());
    return kExitFailure;
  }
  std::cout << md << "\ncomparison: " << (fs::path(a.out) / "comparison.md").string() << "\n";
  return worst;
}

RunFn setup_sweep(CLI::App& parent) {
  auto* cmd = parent.add_subcommand("sweep", "Run several configs on the same questions and compare them");
  auto a = std::make_shared<SweepArgs>();
  cmd->add_option("configs", a->configs, "Config files (the first is the baseline)")->required();
  cmd->add_option("--set", a->sets, "Override applied to every config: a.b=value (repeatable)");
  cmd->add_option_function<std::string>(
         "--prompts", [a](const std::string& dir) { a->sets.push_back("prompts.dir=" + nlohmann::json(dir).dump()); },
         "Folder whose <name>.txt files replace the bundled prompt templates of that name, for every config "
         "(sets config key prompts.dir)")
      ->type_name("DIR");
  a->dataset.add_to(*cmd);
  cmd->add_option("--questions", a->questions, "Question indices, e.g. 0-99");
  cmd->add_option("--sample", a->sample, "A seeded sample of this many questions");
  cmd->add_option("--seed", a->seed, "Seed of --sample")->capture_default_str();
  cmd->add_option("--db", a->db, "Only questions on this database");
  cmd->add_option("--out", a->out, "Sweep folder: one run folder per config, the shared LLM cache, comparison.md")
      ->capture_default_str();
  cmd->add_option("--index-dir", a->index_dir, "Value index folder");
  cmd->add_flag("--force-new", a->force_new, "Start every run over");
  cmd->add_flag("--estimate", a->estimate,
                "Print what every config's run would cost and their sum (low / expected / high) without calling "
                "any endpoint, and stop");
  cmd->add_flag("--json", a->json, "With --estimate: print the estimates as JSON");
  return [a]() { return run_sweep(*a); };
}

NL2SQL_REGISTER_COMMAND("sweep", setup_sweep);

}  // namespace
}  // namespace nl2sql::cli
