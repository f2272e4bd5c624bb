#include "nl2sql/pipeline/model_use.h"

#include <set>

#include "nl2sql/select/external.h"
#include "nl2sql/select/selector.h"

namespace nl2sql::pipeline {
namespace {

Result<bool> flag(const core::Config& config, const std::string& key, bool def) {
  return config.get_bool(key, def);
}

}  // namespace

std::vector<std::string> configured_selectors(const core::Config& config) {
  std::set<std::string> out;
  if (const auto* list = config.find("run.selectors"); list && list->is_array())
    for (const auto& s : *list)
      if (s.is_string()) out.insert(s.get<std::string>());
  for (const char* key : {"run.primary_selector", "select.method"})
    if (const auto* m = config.find(key); m && m->is_string()) out.insert(m->get<std::string>());
  return {out.begin(), out.end()};
}

Result<ModelUse> model_use(const core::Config& config, const std::vector<std::string>& selectors) {
  std::set<std::string> roles, profiles;
  auto keywords = flag(config, "context.keywords.llm", false);
  if (!keywords) return keywords.status();
  if (*keywords) roles.insert("keywords");
  auto filter = flag(config, "context.column_filter.enabled", false);
  if (!filter) return filter.status();
  if (*filter) roles.insert("column_filter");
  auto metadata = flag(config, "context.metadata.enabled", false);
  if (!metadata) return metadata.status();
  auto describe = flag(config, "context.metadata.describe", false);
  if (!describe) return describe.status();
  if (*metadata && *describe) roles.insert("describe");

  // Generators: each item's profiles, else its role (default "generate"). A config without
  // generators still gets the baseline, which asks the generate role.
  const auto* gens = config.find("generate.generators");
  if (!gens || !gens->is_array() || gens->empty()) roles.insert("generate");
  if (gens && gens->is_array()) {
    for (const auto& g : *gens) {
      if (!g.is_object()) {
        roles.insert("generate");
        continue;
      }
      if (g.value("name", "") == "file") continue;  // a pool read from a file asks no model
      if (g.contains("profiles") && g["profiles"].is_array() && !g["profiles"].empty()) {
        for (const auto& p : g["profiles"])
          if (p.is_string()) profiles.insert(p.get<std::string>());
      } else {
        roles.insert(g.contains("role") && g["role"].is_string() ? g["role"].get<std::string>() : "generate");
      }
    }
  }
  auto fix = flag(config, "fix.enabled", true);
  if (!fix) return fix.status();
  if (*fix) {
    if (const auto* p = config.find("fix.profile"); p && p->is_string() && !p->get<std::string>().empty()) {
      profiles.insert(p->get<std::string>());
    } else {
      auto role = config.get_string("fix.role");
      if (!role) return role.status();
      roles.insert(*role);
    }
  }
  for (const auto& s : selectors) {
    auto traits = select::method_traits(s, config);
    if (!traits) return invalid_input("config key run.selectors: " + traits.status().message());
    if (traits->calls_model) roles.emplace(traits->model_role);
  }
  return ModelUse{{roles.begin(), roles.end()}, {profiles.begin(), profiles.end()}};
}

}  // namespace nl2sql::pipeline
