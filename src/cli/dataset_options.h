// Shared CLI options that select a dataset (--benchmark, --data, --split, --questions,
// --db-root, --tables), used by every subcommand that reads questions.
#pragma once

#include <optional>
#include <string>

#include <CLI/CLI.hpp>
#include <spdlog/spdlog.h>

#include "nl2sql/core/config.h"
#include "nl2sql/core/status.h"
#include "nl2sql/data/dataset.h"

namespace nl2sql::cli {

struct DatasetOptions {
  std::string benchmark = "bird";
  std::string data;
  std::string split = "dev";
  std::string questions;
  std::string db_root;
  std::string tables;

  void add_to(CLI::App& cmd) {
    cmd.add_option("--benchmark", benchmark, "bird | spider | jsonl")->capture_default_str();
    cmd.add_option("--data", data, "Benchmark folder (BIRD: dev.json, dev_databases/; Spider: dev.json, database/)");
    cmd.add_option("--split", split, "bird: dev | mini_dev; spider: dev | train")->capture_default_str();
    cmd.add_option("--questions-file", questions, "Question file (overrides the split's; required for jsonl)");
    cmd.add_option("--db-root", db_root, "Folder holding <db_id>/<db_id>.sqlite (required for jsonl)");
    cmd.add_option("--tables", tables, "tables.json to use instead of the split's");
  }

  // `config` gives the data.* keys (data.strict_db_root); commands without --config use the
  // schema's defaults.
  Result<data::DatasetSpec> spec(const core::Config& config = core::Config()) const {
    auto b = data::parse_benchmark(benchmark);
    if (!b) return b.status();
    auto strict = config.get_bool("data.strict_db_root");
    if (!strict) return strict.status();
    data::DatasetSpec s;
    s.strict_db_root = *strict;
    s.benchmark = *b;
    s.data_dir = data;
    s.split = split;
    s.questions = questions;
    s.db_root = db_root;
    s.tables = tables;
    return s;
  }

  // Builds the spec and loads the dataset; on failure logs the message (which names the file,
  // position or flag) and returns nullopt, and the command exits with kExitBadInput.
  std::optional<data::Dataset> load(const core::Config& config = core::Config()) const {
    auto s = spec(config);
    if (!s) {
      spdlog::error("{}", s.status().message());
      return std::nullopt;
    }
    auto ds = data::load_dataset(*s);
    if (!ds) {
      spdlog::error("{}", ds.status().message());
      return std::nullopt;
    }
    return std::move(*ds);
  }
};

}  // namespace nl2sql::cli
