// nl2sql config keys | check | show: the documented config keys (docs/config-reference.md's table is generated
// from the same schema fragments), validation of a config with its --set overrides, and the
// resolved config after "extends" and overrides, with the prompt templates it would use.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <iostream>

#include "cli/command.h"
#include "nl2sql/core/config.h"
#include "nl2sql/core/config_schema.h"
#include "nl2sql/generate/generator.h"
#include "nl2sql/llm/prompt_library.h"
#include "nl2sql/select/selector.h"

namespace nl2sql::cli {
namespace {

struct ConfigArgs {
  std::string config_path;
  std::vector<std::string> sets;
  std::string schema_dir;
  bool json = false;
  bool templates = false;
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

// Loads every `template` key's file through the library (checking its placeholders), so that
// used() lists them: generate.generators[].template, fix.template, select.<method>.template.
Status load_template_keys(const core::Config& config, const llm::PromptLibrary& prompts) {
  auto load = [&](const std::string& key, const Result<std::string>& role) -> Status {
    const auto* file = config.find(key);
    if (!file || !file->is_string() || file->get<std::string>().empty()) return Status::ok();
    if (!role) return role.status().with_context("config key \"" + key + "\"");
    auto t = prompts.load_as(*role, file->get<std::string>());
    return t ? Status::ok() : t.status().with_context("config key \"" + key + "\"");
  };
  if (const auto* gens = config.find("generate.generators"); gens && gens->is_array())
    for (size_t i = 0; i < gens->size(); ++i) {
      const auto& item = (*gens)[i];
      if (!item.is_object() || !item.contains("name") || !item["name"].is_string()) continue;
      NL2SQL_RETURN_IF_ERROR(load("generate.generators[" + std::to_string(i) + "].template",
                                  generate::generator_template_role(item["name"].get<std::string>())));
    }
  NL2SQL_RETURN_IF_ERROR(load("fix.template", std::string("fix_sql")));
  for (const auto& method : select::selector_methods()) {
    auto role = select::selector_template_role(method);
    NL2SQL_RETURN_IF_ERROR(load("select." + method + ".template",
                                role ? Result<std::string>(*role)
                                     : Result<std::string>(invalid_input(method + " takes no template"))));
  }
  return Status::ok();
}

// The effective templates: every bundled one (replaced or not), then the files `template` keys
// choose; one line each with its source and hash.
Result<std::string> templates_table(const core::Config& config) {
  auto prompts = llm::PromptLibrary::from_config(config);
  if (!prompts) return prompts.status();
  NL2SQL_RETURN_IF_ERROR(load_template_keys(config, *prompts));
  auto effective = prompts->effective();
  if (!effective) return effective.status();
  std::string out = "prompt templates (bundled: " + prompts->bundled_dir().string() +
                    (prompts->override_dir().empty() ? "" : "; prompts.dir: " + prompts->override_dir().string()) +
                    ")\n";
  auto line = [&](const std::string& name, const std::string& source, const std::string& hash) {
    out += fmt::format("  {:<40} {:<34} {}\n", name, hash, source);
  };
  line("template", "source", "hash");
  for (const auto& t : *effective) line(t.name, t.source, t.hash);
  for (const auto& t : prompts->used())
    if (t.file != t.name) line(t.name + " ← " + t.file, t.source, t.hash);
  return out;
}

int run_show(const ConfigArgs& a) {
  auto config = load_config(a);
  if (!config) {
    spdlog::error("{}", config.status().message());
    return kExitBadInput;
  }
  auto table = templates_table(*config);
  if (!table) {
    spdlog::error("{}", table.status().message());
    return kExitBadInput;
  }
  // stdout stays the resolved config alone (it is a valid config file); the templates go to
  // stderr unless asked for alone.
  if (a.templates) {
    std::cout << *table;
    return kExitOk;
  }
  std::cout << config->json().dump(2) << "\n";
  std::cerr << *table;
  return kExitOk;
}

RunFn setup_config(CLI::App& app) {
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
  show->add_option_function<std::string>(
          "--prompts", [show_args](const std::string& dir) { show_args->sets.push_back("prompts.dir=" + nlohmann::json(dir).dump()); },
          "Folder whose <name>.txt files replace the bundled prompt templates (sets config key prompts.dir)")
      ->type_name("DIR");
  show->add_flag("--templates", show_args->templates,
                 "Print only the effective prompt templates (name, source, hash) instead of the config; "
                 "without it they go to stderr");
  return [=] {
    if (keys->parsed()) return run_keys(*keys_args);
    if (check->parsed()) return run_check(*check_args);
    return run_show(*show_args);
  };
}

NL2SQL_REGISTER_COMMAND("config", setup_config);

}  // namespace
}  // namespace nl2sql::cli
