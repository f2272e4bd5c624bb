// nl2sql retrieve: the values and columns retrieval finds for one question (the debugging
// view), and, with the hidden --recall flag, the recall benchmark of scripts/bench/context_recall.sh.
// With --config, the question goes through context::ContextBuilder exactly as in the pipeline
// (LLM keywords, embedding re-ranking, column filtering when the config turns them on).
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <iostream>
#include <map>

#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "cli/config_options.h"
#include "cli/dataset_options.h"
#include "nl2sql/context/question_context.h"
#include "nl2sql/context/recall_bench.h"
#include "nl2sql/context/retrieve.h"
#include "nl2sql/context/text_match.h"
#include "nl2sql/llm/client.h"
#include "nl2sql/context/value_index.h"
#include "nl2sql/core/files.h"
#include "nl2sql/core/text.h"
#include "nl2sql/db/executor.h"
#include "nl2sql/sim/simulator.h"

namespace nl2sql::cli {
namespace {
namespace fs = std::filesystem;
using nlohmann::json;

struct RetrieveArgs {
  DatasetOptions dataset;
  ConfigOptions config;
  bool json = false;
  // Which retrieval flags were given (they override the config).
  CLI::Option* min_similarity_opt = nullptr;
  CLI::Option* per_column_opt = nullptr;
  CLI::Option* top_opt = nullptr;
  CLI::Option* threads_opt = nullptr;
  std::string question_id;
  std::string index_dir;
  bool exhaustive = false;
  bool recall = false;
  std::vector<std::string> dbs;
  std::string json_out;
  size_t max_questions = 0;
  bool show_misses = false;
  bool typos = false;
  bool no_exhaustive = false;
  size_t threads = 0;
  context::RetrievalOptions ropts;
};

// The recall benchmark of scripts/bench/context_recall.sh (context/recall_bench.h).
int run_recall(const RetrieveArgs& a, const data::Dataset& ds) {
  db::Executor executor;
  context::RecallBenchOptions o;
  o.dbs = a.dbs;
  o.max_questions = a.max_questions;
  o.typos = a.typos;
  o.exhaustive_baseline = !a.no_exhaustive;
  o.index.index_dir = a.index_dir;
  o.index.threads = a.threads;
  o.retrieval = a.ropts;
  if (a.show_misses) o.on_miss = [](const std::string& line) { std::cout << line << "\n"; };
  auto bench = context::run_recall_bench(ds, o, executor);
  if (!bench) {
    spdlog::error("{}", bench.status().message());
    return kExitFailure;
  }
  std::cout << bench->summary();
  if (!a.json_out.empty()) {
    Status s = core::write_file_atomic(a.json_out, bench->to_json().dump(2));
    if (!s) {
      spdlog::error("{}", s.message());
      return kExitFailure;
    }
  }
  return kExitOk;
}

// The retrieval settings: the config's context.* keys, then the flags (which beat them).
Result<context::ContextSettings> retrieve_settings(const RetrieveArgs& a, const core::Config& config) {
  auto settings = context::load_context_settings(config);
  if (!settings) return settings.status();
  if (!a.index_dir.empty()) settings->index.index_dir = a.index_dir;
  if (a.threads_opt->count()) settings->index.threads = a.threads;
  auto& ro = settings->retrieval;
  if (a.min_similarity_opt->count()) ro.min_similarity = a.ropts.min_similarity;
  if (a.per_column_opt->count()) ro.per_column = a.ropts.per_column;
  if (a.top_opt->count()) ro.max_values = a.ropts.max_values;
  ro.extra_keywords = a.ropts.extra_keywords;
  ro.exhaustive = a.exhaustive;
  return settings;
}

int run_retrieve(const RetrieveArgs& a) {
  auto config = a.config.load();  // first: a bad config stops the command before any work
  if (!config) return kExitBadInput;
  auto ds = a.dataset.load(*config);
  if (!ds) return kExitBadInput;
  if (a.recall) return run_recall(a, *ds);
  if (a.question_id.empty()) {
    spdlog::error("--question-id is required");
    return kExitBadInput;
  }
  const data::Question* q = ds->find_question(a.question_id);
  if (!q) {
    spdlog::error("question {} not found in {}", a.question_id, ds->questions_file.string());
    return kExitBadInput;
  }
  auto settings = retrieve_settings(a, *config);
  if (!settings) {
    spdlog::error("{}", settings.status().message());
    return kExitBadInput;
  }
  std::unique_ptr<llm::Client> client;
  if (settings->calls_a_model()) {
    auto c = sim::make_client(*config, &*ds);
    if (!c) {
      spdlog::error("{}", c.status().message());
      return kExitBadInput;
    }
    client = std::move(*c);
  }
  db::Executor executor;
  auto builder = context::ContextBuilder::create(std::move(*settings), client.get(), executor);
  if (!builder) {
    spdlog::error("{}", builder.status().message());
    return kExitBadInput;
  }
  const auto& schema = ds->schemas.at(q->db_id);
  // The index is opened (loaded, or built when missing or stale) and timed on its own; the
  // builder keeps it, so the context below is timed without any index loading.
  context::IndexStatus status;
  auto t_load = std::chrono::steady_clock::now();
  auto idx = (*builder)->index(q->db_id, ds->db_paths.at(q->db_id), schema, &status);
  const double load_ms = 1000 * std::chrono::duration<double>(std::chrono::steady_clock::now() - t_load).count();
  if (!idx) {
    spdlog::error("{}", idx.status().message());
    return kExitFailure;
  }
  auto t0 = std::chrono::steady_clock::now();
  auto ctx = (*builder)->build(*q, schema, ds->db_paths.at(q->db_id), 0);
  double ms = 1000 * std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (!ctx) {
    spdlog::error("{}", ctx.status().message());
    return kExitFailure;
  }
  if (a.json) {
    json j = ctx->to_json();
    j["timings_ms"] = {{"index_load", load_ms}, {"context", ms}};
    j["index"] = {{"action", status.action}, {"file", status.file.string()}, {"values", (*idx)->size()}};
    std::cout << j.dump(2) << "\n";
    return kExitOk;
  }
  std::cout << context::context_to_text({.task = *q,
                                         .context = *ctx,
                                         .settings = (*builder)->settings(),
                                         .index = status,
                                         .index_load_ms = load_ms,
                                         .context_ms = ms});
  return kExitOk;
}

RunFn setup_retrieve(CLI::App& app) {
  auto args = std::make_shared<RetrieveArgs>();
  auto* cmd = app.add_subcommand("retrieve", "Show the keywords, matched values and matched columns of one question");
  args->dataset.add_to(*cmd);
  args->config.add_to(*cmd, false);
  auto& ro = args->ropts;
  cmd->add_option("--question-id", args->question_id, "Question to retrieve for");
  cmd->add_flag("--json", args->json, "Print the question's context as JSON (keywords, values, columns, selected columns, calls)");
  cmd->add_option("--index-dir", args->index_dir, "Index folder (default $NL2SQL_CACHE_DIR/index or ~/.cache/nl2sql/index)");
  args->threads_opt = cmd->add_option("--threads", args->threads, "Worker threads when an index must be built (0: one per core)")->capture_default_str();
  cmd->add_flag("--exhaustive", args->exhaustive, "Score every indexed value instead of the LSH candidates");
  args->min_similarity_opt = cmd->add_option("--min-similarity", ro.min_similarity, "Normalized edit similarity a value needs")->capture_default_str();
  args->per_column_opt = cmd->add_option("--per-column", ro.per_column, "Most values kept per column")->capture_default_str();
  args->top_opt = cmd->add_option("--top", ro.max_values, "Most values shown")->capture_default_str();
  cmd->add_option("--keyword", ro.extra_keywords, "Extra keyword (repeatable), merged after the heuristic ones");
  // Benchmark mode for scripts/bench/context_recall.sh (not part of the user interface).
  cmd->add_flag("--recall", args->recall, "Recall@5/10/20 of the index (LSH + short values), LSH alone and exhaustive over all questions")->group("");
  cmd->add_option("--db", args->dbs, "--recall: only these databases")->group("");
  cmd->add_option("--recall-json", args->json_out, "--recall: write the numbers as JSON")->group("");
  cmd->add_flag("--show-misses", args->show_misses, "--recall: print each pair the index misses")->group("");
  cmd->add_flag("--no-exhaustive", args->no_exhaustive, "--recall: leave out the exhaustive baseline (timing runs)")->group("");
  cmd->add_flag("--typos", args->typos, "--recall: also ask each literal with one-letter typos (as written and lowercased)")->group("");
  cmd->add_option("--max-questions", args->max_questions, "--recall: stop after this many measured questions")->group("");
  return [args] { return run_retrieve(*args); };
}

NL2SQL_REGISTER_COMMAND("retrieve", setup_retrieve);

}  // namespace
}  // namespace nl2sql::cli
