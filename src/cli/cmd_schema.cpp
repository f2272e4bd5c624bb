// nl2sql schema: one database rendered as the generators see it (CREATE TABLE with types, keys,
// descriptions, examples), optionally with a question's retrieved values, a column subset,
// statistics and inferred foreign keys from the metadata.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <iostream>

#include "cli/command.h"
#include "cli/config_options.h"
#include "cli/dataset_options.h"
#include "nl2sql/context/metadata.h"
#include "nl2sql/context/question_context.h"
#include "nl2sql/context/schema_render.h"
#include "nl2sql/db/executor.h"
#include "nl2sql/llm/client.h"
#include "nl2sql/sim/simulator.h"

namespace nl2sql::cli {
namespace {

struct SchemaArgs {
  DatasetOptions dataset;
  ConfigOptions config;
  std::string db_id, question_id, index_dir;
  size_t examples = 3;
  bool no_descriptions = false;
  std::optional<uint64_t> shuffle_seed;
  std::vector<std::string> columns;
  bool stats = false, inferred_fks = false;
};

// The database to render: --db, or the question's (--question-id); both must agree. `q`: the
// question, when one is given. Errors are logged.
std::optional<std::string> database_to_render(const SchemaArgs& a, const data::Dataset& ds, const data::Question** q) {
  std::string db_id = a.db_id;
  if (!a.question_id.empty()) {
    *q = ds.find_question(a.question_id);
    if (!*q) {
      spdlog::error("--question-id {}: not found in {}", a.question_id, ds.questions_file.string());
      return std::nullopt;
    }
    if (!db_id.empty() && db_id != (*q)->db_id) {
      spdlog::error("--db {} but question {} is on database {}", db_id, (*q)->question_id, (*q)->db_id);
      return std::nullopt;
    }
    db_id = (*q)->db_id;
  }
  if (db_id.empty()) {
    spdlog::error("--db or --question-id is required");
    return std::nullopt;
  }
  if (!ds.db_paths.count(db_id)) {
    spdlog::error("--db {}: no such database in {}", db_id, ds.db_root.string());
    return std::nullopt;
  }
  return db_id;
}

// The context settings of the config for a schema: model features only matter for a question
// (keywords, column filter) or descriptions; --stats and --inferred-fks need the metadata.
Result<context::ContextSettings> schema_settings(const SchemaArgs& a, const core::Config& config, bool question) {
  auto settings = context::load_context_settings(config);
  if (!settings) return settings.status();
  if (!a.index_dir.empty()) settings->index.index_dir = a.index_dir;
  if (!question) {
    settings->llm_keywords = false;
    settings->column_filter = false;
    settings->embeddings.profile.clear();
  }
  if (a.stats || a.inferred_fks) settings->metadata = true;
  return settings;
}

// The flags as render options; a --columns entry that is not table.column is logged.
std::optional<context::RenderOptions> render_options(const SchemaArgs& a) {
  context::RenderOptions ro;
  ro.examples = a.examples;
  ro.descriptions = !a.no_descriptions;
  ro.shuffle_seed = a.shuffle_seed;
  ro.stats = a.stats;
  ro.inferred_fks = a.inferred_fks;
  for (const auto& c : a.columns) {
    if (c.find('.') == std::string::npos) {
      spdlog::error("--columns {}: expected table.column", c);
      return std::nullopt;
    }
    ro.columns.insert(c);
  }
  return ro;
}

int run_schema(const SchemaArgs& a) {
  auto config = a.config.load();  // first: a bad config stops the command before any work
  if (!config) return kExitBadInput;
  auto ds = a.dataset.load(*config);
  if (!ds) return kExitBadInput;
  const data::Question* q = nullptr;
  const auto db_id = database_to_render(a, *ds, &q);
  if (!db_id) return kExitBadInput;
  auto settings = schema_settings(a, *config, q != nullptr);
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
  auto builder = context::ContextBuilder::create(*settings, client.get(), executor);
  if (!builder) {
    spdlog::error("{}", builder.status().message());
    return kExitBadInput;
  }
  const auto& schema = ds->schemas.at(*db_id);
  const auto& path = ds->db_paths.at(*db_id);
  auto index = (*builder)->index(*db_id, path, schema);
  if (!index) {
    spdlog::error("{}", index.status().message());
    return kExitFailure;
  }
  auto ro = render_options(a);
  if (!ro) return kExitBadInput;
  std::shared_ptr<const context::DatabaseMetadata> meta;
  if (settings->metadata) {
    auto m = (*builder)->metadata(*db_id, path, schema);
    if (!m) {
      spdlog::error("{}", m.status().message());
      return kExitFailure;
    }
    meta = *m;
  }
  std::optional<context::QuestionContext> ctx;
  if (q) {
    auto c = (*builder)->build(*q, schema, path, a.shuffle_seed.value_or(0));
    if (!c) {
      spdlog::error("{}", c.status().message());
      return kExitFailure;
    }
    ctx = std::move(*c);
    if (ro->columns.empty()) ro->columns = ctx->selected_columns;
    for (const auto& e : ctx->errors) spdlog::warn("{}", e);
    std::cout << fmt::format("-- question {}: {}\n", q->question_id, q->question);
    if (!ctx->selected_columns.empty())
      std::cout << fmt::format("-- columns selected by the column filter: {}\n", ctx->selected_columns.size());
  }
  std::cout << context::render_schema(schema, *ro, index->get(), ctx ? &ctx->retrieval.values : nullptr, meta.get());
  return kExitOk;
}

RunFn setup_schema(CLI::App& app) {
  auto args = std::make_shared<SchemaArgs>();
  auto* cmd = app.add_subcommand("schema", "Print a database's schema as the generators' prompts render it");
  args->dataset.add_to(*cmd);
  args->config.add_to(*cmd, false);
  cmd->add_option("--db", args->db_id, "Database to render");
  cmd->add_option("--question-id", args->question_id, "Attach this question's retrieved values (and its column filter selection when the config enables it)");
  cmd->add_option("--index-dir", args->index_dir, "Index folder (default: context.index_dir, else $NL2SQL_CACHE_DIR/index)");
  cmd->add_option("--examples", args->examples, "Example values per indexed column")->capture_default_str();
  cmd->add_flag("--no-descriptions", args->no_descriptions, "Leave out column descriptions");
  cmd->add_option("--shuffle-seed", args->shuffle_seed, "Shuffle tables and non-key columns with this seed");
  cmd->add_option("--columns", args->columns, "Only these table.column (comma-separated; join keys are kept)")->delimiter(',');
  cmd->add_flag("--stats", args->stats, "Add column statistics from the metadata (built when missing)");
  cmd->add_flag("--inferred-fks", args->inferred_fks, "Add inferred foreign keys with their evidence");
  return [args] { return run_schema(*args); };
}

NL2SQL_REGISTER_COMMAND("schema", setup_schema);

}  // namespace
}  // namespace nl2sql::cli
