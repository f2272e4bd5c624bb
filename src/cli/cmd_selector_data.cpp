// nl2sql selector-data: pairwise fine-tuning examples for the selection model from a finished
// run over a split with gold (correct vs incorrect candidates from different clusters). Each
// prompt is rendered by the tournament's own function from the inputs the tournament had: the
// run's dataset gives the schema, the run's config the metadata (context.metadata.*, read from
// the index folder's cache) and the execution limits under which each candidate is run again
// (read-only) for its result rows.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <iostream>
#include <map>
#include <memory>

#include "cli/command.h"
#include "cli/dataset_options.h"
#include "nl2sql/context/question_context.h"
#include "nl2sql/core/config.h"
#include "nl2sql/db/executor.h"
#include "nl2sql/db/schema_info.h"
#include "nl2sql/llm/prompt_library.h"
#include "nl2sql/run/run_data.h"
#include "nl2sql/select/training_data.h"

namespace nl2sql::cli {
namespace {

struct SelectorDataArgs {
  std::string run, out, prompts, index_dir;
  DatasetOptions dataset;
  uint64_t seed = 0;
  size_t max_pairs = 8;
};

// The run's database: its schemas and metadata, opened once per database.
struct DatabaseInputs {
  std::shared_ptr<const sql::Schema> sql_schema;
  std::shared_ptr<const context::DatabaseMetadata> metadata;
};

// The tournament saw each candidate's result as the run's executor returned it: the run's
// eval.timeout_s and eval.row_cap.
Result<db::ExecutorOptions> run_executor_options(const core::Config& config) {
  db::ExecutorOptions eo;
  auto timeout = config.get_number("eval.timeout_s");
  auto row_cap = config.get_int("eval.row_cap");
  if (!timeout) return timeout.status();
  if (!row_cap) return row_cap.status();
  eo.limits.timeout_s = *timeout;
  eo.limits.row_cap = static_cast<size_t>(std::max<int64_t>(0, *row_cap));
  return eo;
}

// A record's gold-judged candidates, each clustered one with its result run again (once per SQL).
std::vector<select::TrainingCandidate> training_candidates(const run::QuestionRecord& r,
                                                           const std::filesystem::path& db_path,
                                                           const db::Executor& executor) {
  std::vector<select::TrainingCandidate> out;
  std::map<std::string, std::shared_ptr<const db::ResultSet>> results;  // by SQL
  for (const auto& c : r.candidates) {
    if (!c.judged || !c.judged->correct) continue;
    select::TrainingCandidate tc;
    tc.sql = c.sql;
    tc.cluster = static_cast<int>(c.judged->cluster);
    tc.correct = *c.judged->correct;
    if (tc.cluster >= 0) {
      auto [it, first] = results.try_emplace(c.sql);
      if (first) {
        auto e = executor.run(db_path, c.sql);
        if (e.ok()) it->second = std::make_shared<const db::ResultSet>(std::move(e.result));
        else spdlog::warn("question {}: candidate {} did not run again ({}): its result is not shown",
                          r.question_id, c.id, e.error);
      }
      tc.result = it->second;
    }
    out.push_back(std::move(tc));
  }
  return out;
}

// The run's successful questions as the tournament saw them: question, schemas, metadata and
// judged candidates. The questions point into `databases`, which must outlive them. Returns
// kExitOk, or the exit code of the failure it logged.
int training_questions(const run::RunData& run, const data::Dataset& ds, const context::ContextSettings& settings,
                       const std::filesystem::path& index_dir, const db::Executor& executor,
                       std::map<std::string, DatabaseInputs>& databases,
                       std::vector<select::TrainingQuestion>& questions) {
  for (const auto& r : run.records) {
    if (!r.ok) continue;
    auto schema = ds.schemas.find(r.db_id);
    auto path = ds.db_paths.find(r.db_id);
    if (schema == ds.schemas.end() || path == ds.db_paths.end()) {
      spdlog::error("question {}: database {} is not in the dataset", r.question_id, r.db_id);
      return kExitBadInput;
    }
    auto [db, fresh] = databases.try_emplace(r.db_id);
    if (fresh) {
      auto info = db::inspect_schema(path->second);
      if (info) db->second.sql_schema = std::make_shared<const sql::Schema>(std::move(*info));
      if (settings.metadata) {
        auto m = context::open_metadata(r.db_id, path->second, schema->second, settings.meta, index_dir, false,
                                        executor);
        if (!m) {
          spdlog::error("{}", m.status().message());
          return kExitFailure;
        }
        db->second.metadata = std::make_shared<const context::DatabaseMetadata>(std::move(*m));
      }
    }
    select::TrainingQuestion q;
    q.question_id = r.question_id;
    q.question = r.question;
    q.evidence = r.evidence;
    q.schema = &schema->second;
    q.sql_schema = db->second.sql_schema.get();
    q.metadata = db->second.metadata.get();
    q.candidates = training_candidates(r, path->second, executor);
    questions.push_back(std::move(q));
  }
  return kExitOk;
}

int run_selector_data(const SelectorDataArgs& a) {
  auto run = run::load_run(a.run);
  if (!run) {
    spdlog::error("{}", run.status().message());
    return kExitBadInput;
  }
  if (a.dataset.data.empty() && a.dataset.db_root.empty()) {
    spdlog::error("selector-data needs the run's dataset (--benchmark, --data …): the pair prompt shows the "
                  "schema as the tournament showed it");
    return kExitBadInput;
  }
  auto ds = a.dataset.load();
  if (!ds) return kExitBadInput;
  if (auto fp = ds->fingerprint(); fp && run->manifest.contains("dataset_fingerprint") &&
                                   run->manifest["dataset_fingerprint"] != *fp) {
    spdlog::error("the dataset at {} is not the one run {} used (fingerprint {} ≠ {})", a.dataset.data, a.run,
                  *fp, run->manifest["dataset_fingerprint"].dump());
    return kExitBadInput;
  }
  const core::Config config(run->config.is_object() ? run->config : nlohmann::json::object());
  auto settings = context::load_context_settings(config);
  if (!settings) {
    spdlog::error("{} (the run's config)", settings.status().message());
    return kExitBadInput;
  }
  auto eo = run_executor_options(config);
  if (!eo) {
    spdlog::error("{} (the run's config)", eo.status().message());
    return kExitBadInput;
  }
  db::Executor executor(*eo);
  const std::filesystem::path index_dir = a.index_dir.empty() ? settings->index.index_dir : std::filesystem::path(a.index_dir);
  std::map<std::string, DatabaseInputs> databases;  // the questions' schemas and metadata point here
  std::vector<select::TrainingQuestion> questions;
  if (int code = training_questions(*run, *ds, *settings, index_dir, executor, databases, questions); code != kExitOk)
    return code;
  size_t usable = 0;
  for (const auto& q : questions) usable += !q.candidates.empty();
  select::TrainingOptions options;
  options.seed = a.seed;
  options.max_pairs_per_question = a.max_pairs;
  // The run's own templates (its prompts.dir) unless --prompts names another folder.
  auto prompts = a.prompts.empty() ? llm::PromptLibrary::from_config(config) : llm::PromptLibrary::open(a.prompts);
  if (!prompts) {
    spdlog::error("{}", prompts.status().message());
    return kExitBadInput;
  }
  auto examples = select::build_selector_training_data(questions, options, &*prompts);
  if (!examples) {
    spdlog::error("{}", examples.status().message());
    return kExitFailure;
  }
  if (auto st = select::write_training_jsonl(*examples, a.out); !st) {
    spdlog::error("{}", st.message());
    return kExitFailure;
  }
  std::cout << fmt::format("{} pairs from {} questions with gold-judged candidates{} → {}\n", examples->size(),
                           usable, settings->metadata ? " (schemas with the run's metadata)" : "", a.out);
  return kExitOk;
}

RunFn setup_selector_data(CLI::App& parent) {
  auto* cmd = parent.add_subcommand("selector-data",
                                    "Pairwise fine-tuning data for the selector from a run with gold");
  auto a = std::make_shared<SelectorDataArgs>();
  cmd->add_option("--run", a->run, "Run folder")->required();
  cmd->add_option("--out", a->out, "Output JSONL (OpenAI chat fine-tuning format)")->required();
  a->dataset.add_to(*cmd);
  cmd->add_option("--index-dir", a->index_dir,
                  "Folder of the run's metadata files (default: the run's context.index_dir)");
  cmd->add_option("--seed", a->seed, "Seed of the pair order shuffle")->capture_default_str();
  cmd->add_option("--max-pairs", a->max_pairs, "Pairs per question (0: all)")->capture_default_str();
  cmd->add_option("--prompts", a->prompts,
                  "Folder whose <name>.txt files replace the bundled prompt templates (default: the run's prompts.dir)")
      ->type_name("DIR");
  return [a]() { return run_selector_data(*a); };
}

NL2SQL_REGISTER_COMMAND("selector-data", setup_selector_data);

}  // namespace
}  // namespace nl2sql::cli
