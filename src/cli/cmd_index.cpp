// nl2sql index: builds (or checks) the value index of every database of a benchmark.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <iostream>
#include <map>

#include "cli/command.h"
#include "cli/process_stats.h"
#include "cli/config_options.h"
#include "cli/dataset_options.h"
#include "nl2sql/context/question_context.h"
#include "nl2sql/context/value_index.h"
#include "nl2sql/db/executor.h"

namespace nl2sql::cli {
namespace {
namespace fs = std::filesystem;

struct IndexArgs {
  ConfigOptions config;  // the context.index.* keys: the run's config builds the run's index
  DatasetOptions dataset;
  std::vector<std::string> dbs;
  bool all_databases = false;
  bool force = false;
  bool show_skipped = false;
};

int run_index(IndexArgs& a) {
  auto config = a.config.load();
  if (!config) return kExitBadInput;
  auto settings = context::load_context_settings(*config);
  if (!settings) {
    spdlog::error("{}", settings.status().message());
    return kExitBadInput;
  }
  auto ds = a.dataset.load(*config);
  if (!ds) return kExitBadInput;
  // Every database folder under the root, not only those the split's questions use.
  if (a.all_databases) {
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(ds->db_root, ec)) {
      std::string id = e.path().filename().string();
      fs::path p = e.path() / (id + ".sqlite");
      if (ds->db_paths.count(id) || !fs::is_regular_file(p, ec)) continue;
      auto schema = data::read_schema_from_database(p, id);
      if (!schema) {
        spdlog::warn("{}: {}", id, schema.status().message());
        continue;
      }
      ds->db_paths[id] = p;
      ds->schemas[id] = std::move(*schema);
    }
  }
  std::vector<context::DatabaseRef> refs;
  for (const auto& [id, path] : ds->db_paths) {
    if (!a.dbs.empty() && std::find(a.dbs.begin(), a.dbs.end(), id) == a.dbs.end()) continue;
    refs.push_back({id, path, &ds->schemas.at(id)});
  }
  for (const auto& want : a.dbs)
    if (!ds->db_paths.count(want)) {
      spdlog::error("--db {}: no such database in {}", want, ds->db_root.string());
      return kExitBadInput;
    }
  context::IndexOptions opts = settings->index;
  opts.force = a.force;
  db::Executor executor;
  auto t0 = std::chrono::steady_clock::now();
  auto statuses = context::ensure_indexes(refs, opts, executor);
  double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (!statuses) {
    spdlog::error("{}", statuses.status().message());
    return statuses.status().code() == ErrorCode::kInvalidInput ? kExitBadInput : kExitFailure;
  }
  size_t values = 0, columns = 0, skipped = 0, built = 0;
  double scan_s = 0, index_s = 0;
  std::map<std::string, size_t> reasons;
  for (const auto& s : *statuses) {
    values += s.values;
    columns += s.columns;
    skipped += s.skipped.size();
    built += s.action != "fresh";
    scan_s += s.timings.scan_s;
    index_s += s.timings.index_s;
    std::cout << fmt::format("{:<32} {:>9} values {:>4} columns {:>4} skipped  {}\n", s.db_id,
                             s.values, s.columns, s.skipped.size(), s.action);
    for (const auto& k : s.skipped) {
      std::string reason = k.reason.substr(0, k.reason.find(" ("));
      ++reasons[reason];
      if (a.show_skipped) std::cout << fmt::format("    skipped {}.{}: {}\n", k.table, k.column, k.reason);
    }
  }
  std::cout << fmt::format("{} databases ({} built, {} fresh): {} values in {} columns, {} columns skipped\n",
                           statuses->size(), built, statuses->size() - built, values, columns, skipped);
  for (const auto& [r, n] : reasons) std::cout << fmt::format("  skipped: {:>5}  {}\n", n, r);
  std::cout << fmt::format("  {:.2f} s wall, peak RSS {:.1f} MB", wall, peak_rss_mb());
  if (scan_s + index_s > 0)
    std::cout << fmt::format(", worker time {:.2f} s: SQLite scan {:.1f}%, indexing {:.1f}%", scan_s + index_s,
                             100 * scan_s / (scan_s + index_s), 100 * index_s / (scan_s + index_s));
  std::cout << "\n  index dir: "
            << (opts.index_dir.empty() ? context::default_index_dir() : opts.index_dir).string() << "\n";
  return kExitOk;
}

RunFn setup_index(CLI::App& app) {
  auto args = std::make_shared<IndexArgs>();
  auto* cmd = app.add_subcommand("index", "Build the MinHash-LSH value index of each database (stale ones are rebuilt)");
  args->config.add_to(*cmd, /*required=*/false);
  args->dataset.add_to(*cmd);
  cmd->add_option("--db", args->dbs, "Only these databases (repeatable)");
  cmd->add_flag("--all-databases", args->all_databases, "Every <db>/<db>.sqlite under the database root, not only those the questions use");
  cmd->add_flag("--force", args->force, "Rebuild even when the index is fresh");
  cmd->add_flag("--show-skipped", args->show_skipped, "List every skipped column with its reason");
  // The index's parameters are the run's context.index.* keys (a run with the same config finds
  // the index fresh); each flag sets its key.
  args->config.add_key_flags(*cmd, {{"--index-dir", "context.index_dir"},
                                    {"--threads", "context.index.threads"},
                                    {"--ngram", "context.index.ngram"},
                                    {"--num-perm", "context.index.num_perm"},
                                    {"--bands", "context.index.bands"},
                                    {"--rows", "context.index.rows"},
                                    {"--short-length", "context.index.short_length"},
                                    {"--max-distinct", "context.index.skip.max_distinct"},
                                    {"--max-avg-length", "context.index.skip.max_avg_length"},
                                    {"--max-value-length", "context.index.skip.max_value_length"},
                                    {"--min-text-share", "context.index.skip.min_text_share"}});
  cmd->add_flag_callback("--keep-id-columns", [args] { args->config.sets.push_back("context.index.skip.id_columns=false"); },
                         "Index identifier-named columns (id, *_id, *Id) too (sets context.index.skip.id_columns to false)");
  return [args] { return run_index(*args); };
}

NL2SQL_REGISTER_COMMAND("index", setup_index);

}  // namespace
}  // namespace nl2sql::cli
