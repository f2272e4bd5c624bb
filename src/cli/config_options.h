// Shared CLI options that load a config (--config FILE with its "extends" chain, then --set
// a.b=value overrides in order) and validate it against the documented keys
// (configs/schema/*.json), for every subcommand that runs pipeline stages.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <spdlog/spdlog.h>

#include "nl2sql/core/config.h"
#include "nl2sql/core/config_schema.h"
#include "nl2sql/core/text.h"

namespace nl2sql::cli {

struct ConfigOptions {
  std::string path;
  std::vector<std::string> sets;

  void add_to(CLI::App& cmd, bool required) {
    auto* opt = cmd.add_option("--config", path, "Config file (JSON with comments; \"extends\" chains)");
    if (required) opt->required();
    cmd.add_option("--set", sets, "Override a config key: a.b=value (repeatable; value parsed as JSON, else a string)");
  }

  // Flags that are config keys, defined once: each flag sets its key exactly as `--set
  // key=value` would (after the --set overrides, so the flag wins over them and over the file),
  // and its help is the key's documentation in the schema. A command lists its flags in one
  // table ({"--max-cost-usd", "run.max_cost_usd"}, …) instead of keeping a variable, a default
  // and a help text of its own beside the config key.
  struct KeyFlag {
    const char* flag;
    const char* key;
  };
  void add_key_flags(CLI::App& cmd, std::initializer_list<KeyFlag> flags) {
    const auto& schema = core::default_schema();
    for (const auto& f : flags) {
      std::string help = std::string("Sets config key ") + f.key, type = "VALUE";
      if (schema)
        if (const auto* spec = schema->spec_for(f.key)) {
          help = spec->doc + " (sets config key " + f.key + ")";
          if (!spec->types.empty()) type = core::upper(spec->types.front());
        }
      const std::string key = f.key;
      cmd.add_option_function<std::string>(
             f.flag, [this, key](const std::string& value) { sets.push_back(key + "=" + value); }, help)
          ->type_name(type);
    }
  }

  // Flags without a value that set a key to a fixed value (--keep-distinct sets
  // eval.keep_distinct=true, --no-tie-check eval.check_ties=false); like key flags, they win
  // over --set and the file.
  struct KeySwitch {
    const char* flag;
    const char* key;
    const char* value;  // JSON
    const char* help;
  };
  void add_key_switches(CLI::App& cmd, std::initializer_list<KeySwitch> switches) {
    for (const auto& f : switches) {
      const std::string set = std::string(f.key) + "=" + f.value;
      cmd.add_flag_callback(f.flag, [this, set] { sets.push_back(set); },
                            std::string(f.help) + " (sets config key " + set + ")");
    }
  }

  // --prompts DIR: sets config key prompts.dir (as a string, whatever DIR looks like).
  void add_prompts_flag(CLI::App& cmd) {
    cmd.add_option_function<std::string>(
           "--prompts", [this](const std::string& dir) { sets.push_back("prompts.dir=" + nlohmann::json(dir).dump()); },
           "Folder whose <name>.txt files replace the bundled prompt templates of that name (sets config key "
           "prompts.dir)")
        ->type_name("DIR");
  }

  // The config's file stem ("chase" for configs/chase.json), for default run folder names.
  std::string name() const {
    return path.empty() ? std::string("default") : std::filesystem::path(path).stem().string();
  }

  // Loads, applies overrides and validates; on failure logs every problem (each names its key)
  // and returns nullopt, and the command exits with kExitBadInput.
  std::optional<core::Config> load() const {
    core::Config config;
    if (!path.empty()) {
      auto loaded = core::Config::load(path);
      if (!loaded) {
        spdlog::error("{}", loaded.status().message());
        return std::nullopt;
      }
      config = std::move(*loaded);
    }
    if (auto st = config.apply_overrides(sets); !st) {
      spdlog::error("{}", st.message());
      return std::nullopt;
    }
    const auto& schema = core::default_schema();
    if (!schema) {
      spdlog::error("{}", schema.status().message());
      return std::nullopt;
    }
    auto errors = schema->validate(config.json());
    if (!errors.empty()) {
      spdlog::error("{} config problem{} in {}:", errors.size(), errors.size() == 1 ? "" : "s",
                    path.empty() ? std::string("--set overrides") : path);
      for (const auto& e : errors) spdlog::error("  {}", e);
      return std::nullopt;
    }
    return config;
  }
};

}  // namespace nl2sql::cli
