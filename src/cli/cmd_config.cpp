// nl2sql config keys | check | show: the documented config keys (docs/config-reference.md's table is generated
// from the same schema fragments), validation of a config with its --set overrides, and the
// resolved config after "extends" and overrides.
#include <spdlog/spdlog.h>

#include <iostream>

#include "cli/command.h"
#include "nl2sql/core/config.h"
#include "nl2sql/core/config_schema.h"

namespace nl2sql::cli {
namespace {

struct ConfigArgs {
  std::string config_path;
  std::vector<std::string> sets;
  std::string schema_dir;
  bool json = false;
};

Result<core::ConfigSchema> load_schema(const ConfigArgs& a) {
  return core::ConfigSchema::load_dir(a.schema_dir.empty() ? core::default_schema_dir() : std::filesystem::path(a.schema_dir));
}

Result<core::Config> load_config(const ConfigArgs& a) {
  core::Config config;
  if (!a.config_path.empty()) {
    auto loaded = core::Config::load(a.config_path);
    if (!loaded) return loaded.status();
    config = std::move(loaded).value();
  }
  NL2SQL_RETURN_IF_ERROR(config.apply_overrides(a.sets));
  return config;
}

int run_keys(const ConfigArgs& a) {
  auto schema = load_schema(a);
  if (!schema) {
    spdlog::error("{}", schema.status().message());
    return kExitBadInput;
  }
  if (a.json) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& k : schema->keys()) {
      nlohmann::json e = {{"key", k.pattern}, {"type", k.types}, {"doc", k.doc}, {"fragment", k.fragment}};
      if (!k.enum_values.is_null()) e["enum"] = k.enum_values;
      if (k.min) e["min"] = *k.min;
      if (k.max) e["max"] = *k.max;
      if (!k.default_value.is_null()) e["default"] = k.default_value;
      if (k.nullable) e["nullable"] = true;
      out.push_back(e);
    }
    std::cout << out.dump(2) << "\n";
  } else {
    std::cout << schema->markdown_table();
  }
  return kExitOk;
}

int run_check(const ConfigArgs& a) {
  auto schema = load_schema(a);
  if (!schema) {
    spdlog::error("{}", schema.status().message());
    return kExitBadInput;
  }
  auto config = load_config(a);
  if (!config) {
    spdlog::error("{}", config.status().message());
    return kExitBadInput;
  }
  auto errors = schema->validate(config->json());
  if (!errors.empty()) {
    std::cout << errors.size() << " config problem" << (errors.size() == 1 ? "" : "s") << " in "
              << (a.config_path.empty() ? std::string("the defaults") : a.config_path) << ":\n";
    for (const auto& e : errors) std::cout << "  " << e << "\n";
    return kExitBadInput;
  }
  std::cout << "OK: " << (a.config_path.empty() ? std::string("(no file)") : a.config_path) << " is valid against "
            << schema->keys().size() << " documented keys\n";
  return kExitOk;
}

int run_show(const ConfigArgs& a) {
  auto config = load_config(a);
  if (!config) {
    spdlog::error("{}", config.status().message());
    return kExitBadInput;
  }
  std::cout << config->json().dump(2) << "\n";
  return kExitOk;
}

RunFn setup(CLI::App& app) {
  auto* cmd = app.add_subcommand("config", "Config keys, validation and the resolved config");
  cmd->require_subcommand(1);
  auto keys_args = std::make_shared<ConfigArgs>();
  auto check_args = std::make_shared<ConfigArgs>();
  auto show_args = std::make_shared<ConfigArgs>();
  auto* keys = cmd->add_subcommand("keys", "Every documented config key as a markdown table (docs/config-reference.md's)");
  keys->add_option("--schema-dir", keys_args->schema_dir, "Folder of schema fragments (default configs/schema)");
  keys->add_flag("--json", keys_args->json, "JSON instead of markdown");
  auto* check = cmd->add_subcommand("check", "Validate a config (with its extends chain and --set overrides)");
  check->add_option("--config", check_args->config_path, "Config file")->required();
  check->add_option("--set", check_args->sets, "Override key.path=value (repeatable)");
  check->add_option("--schema-dir", check_args->schema_dir, "Folder of schema fragments (default configs/schema)");
  auto* show = cmd->add_subcommand("show", "Print the resolved config (extends followed, overrides applied)");
  show->add_option("--config", show_args->config_path, "Config file")->required();
  show->add_option("--set", show_args->sets, "Override key.path=value (repeatable)");
  return [=] {
    if (keys->parsed()) return run_keys(*keys_args);
    if (check->parsed()) return run_check(*check_args);
    return run_show(*show_args);
  };
}

NL2SQL_REGISTER_COMMAND("config", setup);

}  // namespace
}  // namespace nl2sql::cli
