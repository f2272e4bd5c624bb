// nl2sql metadata: builds (or loads) each database's metadata — column statistics, declared
// keys, inferred foreign keys with their evidence, optional LLM column descriptions — and
// prints it.
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

struct MetadataArgs {
  DatasetOptions dataset;
  ConfigOptions config;
  std::vector<std::string> dbs;
  std::string index_dir;
  bool force = false, describe = false, json = false, columns = false;
};

int run_metadata(const MetadataArgs& a) {
  auto config = a.config.load();  // first: a bad config stops the command before any work
  if (!config) return kExitBadInput;
  auto ds = a.dataset.load(*config);
  if (!ds) return kExitBadInput;
  auto settings = context::load_context_settings(*config);
  if (!settings) {
    spdlog::error("{}", settings.status().message());
    return kExitBadInput;
  }
  if (!a.index_dir.empty()) settings->index.index_dir = a.index_dir;
  for (const auto& want : a.dbs)
    if (!ds->db_paths.count(want)) {
      spdlog::error("--db {}: no such database in {}", want, ds->db_root.string());
      return kExitBadInput;
    }
  std::unique_ptr<llm::Client> client;
  std::optional<llm::PromptTemplate> prompt;
  if (a.describe || settings->describe) {
    auto c = sim::make_client(*config, &*ds);
    if (!c) {
      spdlog::error("{}", c.status().message());
      return kExitBadInput;
    }
    client = std::move(*c);
    auto p = llm::PromptTemplate::load_named(llm::bundled_prompts_dir(), "describe_column");
    if (!p) {
      spdlog::error("{}", p.status().message());
      return kExitBadInput;
    }
    prompt = std::move(*p);
  }
  db::Executor executor;
  nlohmann::json all = nlohmann::json::array();
  int rc = kExitOk;
  for (const auto& [id, path] : ds->db_paths) {
    if (!a.dbs.empty() && std::find(a.dbs.begin(), a.dbs.end(), id) == a.dbs.end()) continue;
    const auto& schema = ds->schemas.at(id);
    std::string action;
    auto m = context::open_metadata(id, path, schema, settings->meta, settings->index.index_dir, a.force,
                                    executor, &action);
    if (!m) {
      spdlog::error("{}", m.status().message());
      rc = kExitFailure;
      continue;
    }
    size_t described = 0;
    std::vector<std::string> errors;
    if (client) {
      described = context::describe_columns(*m, schema, *client, *prompt, errors);
      if (described > 0) {
        Status s = context::save_metadata(*m, settings->index.index_dir);
        if (!s) spdlog::error("{}", s.message());
      }
      for (const auto& e : errors) spdlog::warn("{}: description: {}", id, e);
    }
    if (a.json) {
      all.push_back(m->to_json());
      continue;
    }
    size_t rows = 0;
    for (const auto& [t, n] : m->table_rows) rows += static_cast<size_t>(n);
    std::cout << fmt::format("{}: {} tables, {} rows, {} columns, {} declared FKs, {} inferred FKs ({}, {:.2f} s to build)\n",
                             id, m->table_rows.size(), rows, m->columns.size(), m->declared_fks.size(),
                             m->inferred_fks.size(), action, m->build_seconds);
    for (const auto& f : m->inferred_fks)
      std::cout << fmt::format("  inferred FK {}.{} -> {}.{}: {}\n", f.from_table, f.from_column, f.to_table,
                               f.to_column, f.evidence());
    for (const auto& [t, c] : m->key_candidates)
      std::cout << fmt::format("  key candidate (no declared primary key) {}.{}\n", t, c);
    if (a.columns)
      for (const auto& s : m->columns)
        std::cout << fmt::format("  {}.{}: {}\n", s.table, s.column, context::stats_comment(s));
    if (client)
      std::cout << fmt::format("  {} column descriptions written, {} failed, {} cached\n", described, errors.size(),
                               m->descriptions.size());
  }
  if (a.json) std::cout << all.dump(2) << "\n";
  std::cout << std::flush;
  return rc;
}

RunFn setup_metadata(CLI::App& app) {
  auto args = std::make_shared<MetadataArgs>();
  auto* cmd = app.add_subcommand("metadata", "Build and print database metadata: column statistics, keys, inferred foreign keys with evidence");
  args->dataset.add_to(*cmd);
  args->config.add_to(*cmd, false);
  cmd->add_option("--db", args->dbs, "Only these databases (repeatable)");
  cmd->add_option("--index-dir", args->index_dir, "Where <db>.meta.json is cached (default: context.index_dir, else $NL2SQL_CACHE_DIR/index)");
  cmd->add_flag("--force", args->force, "Rebuild even when the cached metadata is fresh");
  cmd->add_flag("--describe", args->describe, "Write missing column descriptions with the model (role describe)");
  cmd->add_flag("--columns", args->columns, "Print every column's statistics");
  cmd->add_flag("--json", args->json, "Print the metadata as JSON");
  return [args] { return run_metadata(*args); };
}

NL2SQL_REGISTER_COMMAND("metadata", setup_metadata);

}  // namespace
}  // namespace nl2sql::cli
