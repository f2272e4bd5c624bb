#include "nl2sql/core/config.h"
#include "nl2sql/core/config_schema.h"

#include <set>

#include "nl2sql/core/files.h"

namespace nl2sql::core {
namespace {

std::vector<std::string> split_key(const std::string& key) {
  std::vector<std::string> parts;
  size_t start = 0;
  for (;;) {
    size_t dot = key.find('.', start);
    parts.push_back(key.substr(start, dot - start));
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  return parts;
}

Result<nlohmann::json> load_chain(const std::filesystem::path& path,
                                  std::set<std::string>& visiting) {
  std::error_code ec;
  auto canonical = std::filesystem::weakly_canonical(path, ec).string();
  if (visiting.count(canonical))
    return invalid_input(path.string() + ": \"extends\" cycle through this file");
  visiting.insert(canonical);
  auto doc = read_json_file(path);
  if (!doc) return doc.status();
  if (!doc->is_object()) return invalid_input(path.string() + ": a config must be a JSON object");
  nlohmann::json merged = nlohmann::json::object();
  if (auto it = doc->find("extends"); it != doc->end()) {
    std::vector<std::string> bases;
    if (it->is_string()) {
      bases.push_back(it->get<std::string>());
    } else if (it->is_array()) {
      for (const auto& b : *it) {
        if (!b.is_string())
          return invalid_input(path.string() + ": key \"extends\" must hold file names");
        bases.push_back(b.get<std::string>());
      }
    } else {
      return invalid_input(path.string() + ": key \"extends\" must be a string or a list");
    }
    for (const auto& b : bases) {
      auto base = load_chain(path.parent_path() / b, visiting);
      if (!base) return base.status().with_context("extended by " + path.string());
      deep_merge(merged, *base);
    }
    doc->erase("extends");
  }
  deep_merge(merged, *doc);
  visiting.erase(canonical);
  return merged;
}

std::string type_name(const nlohmann::json& j) { return j.type_name(); }

}  // namespace

void deep_merge(nlohmann::json& base, const nlohmann::json& overlay) {
  if (!base.is_object() || !overlay.is_object()) {
    base = overlay;
    return;
  }
  for (auto it = overlay.begin(); it != overlay.end(); ++it) {
    if (it->is_object() && base.contains(it.key()) && base[it.key()].is_object())
      deep_merge(base[it.key()], *it);
    else
      base[it.key()] = *it;
  }
}

Result<Config> Config::load(const std::filesystem::path& path) {
  std::set<std::string> visiting;
  auto j = load_chain(path, visiting);
  if (!j) return j.status();
  return Config(std::move(*j));
}

void Config::merge(const nlohmann::json& overlay) { deep_merge(root_, overlay); }

Status Config::apply_overrides(const std::vector<std::string>& assignments) {
  for (const auto& a : assignments) {
    auto eq = a.find('=');
    if (eq == std::string::npos || eq == 0)
      return invalid_input("--set \"" + a + "\": expected key.path=value");
    std::string key = a.substr(0, eq);
    std::string raw = a.substr(eq + 1);
    nlohmann::json value = nlohmann::json::parse(raw, nullptr, /*allow_exceptions=*/false);
    if (value.is_discarded()) value = raw;
    set(key, std::move(value));
  }
  return Status::ok();
}

void Config::set(const std::string& key, nlohmann::json value) {
  nlohmann::json* node = &root_;
  auto parts = split_key(key);
  for (size_t i = 0; i + 1 < parts.size(); ++i) {
    if (!node->contains(parts[i]) || !(*node)[parts[i]].is_object())
      (*node)[parts[i]] = nlohmann::json::object();
    node = &(*node)[parts[i]];
  }
  (*node)[parts.back()] = std::move(value);
}

const nlohmann::json* Config::find(const std::string& key) const {
  const nlohmann::json* node = &root_;
  for (const auto& p : split_key(key)) {
    if (!node->is_object()) return nullptr;
    auto it = node->find(p);
    if (it == node->end()) return nullptr;
    node = &*it;
  }
  return node;
}

Result<std::string> Config::get_string(const std::string& key,
                                       std::optional<std::string> def) const {
  const auto* j = find(key);
  if (!j || j->is_null()) {
    if (def) return *def;
    if (const auto* d = schema_default(key); d && d->is_string()) return d->get<std::string>();
    return invalid_input("config key \"" + key + "\" is required (a string)");
  }
  if (!j->is_string())
    return invalid_input("config key \"" + key + "\" must be a string, not " + type_name(*j));
  return j->get<std::string>();
}

Result<double> Config::get_number(const std::string& key, std::optional<double> def) const {
  const auto* j = find(key);
  if (!j || j->is_null()) {
    if (def) return *def;
    if (const auto* d = schema_default(key); d && d->is_number()) return d->get<double>();
    return invalid_input("config key \"" + key + "\" is required (a number)");
  }
  if (!j->is_number())
    return invalid_input("config key \"" + key + "\" must be a number, not " + type_name(*j));
  return j->get<double>();
}

Result<int64_t> Config::get_int(const std::string& key, std::optional<int64_t> def) const {
  const auto* j = find(key);
  if (!j || j->is_null()) {
    if (def) return *def;
    if (const auto* d = schema_default(key); d && d->is_number_integer()) return d->get<int64_t>();
    return invalid_input("config key \"" + key + "\" is required (an integer)");
  }
  if (!j->is_number_integer())
    return invalid_input("config key \"" + key + "\" must be an integer, not " + type_name(*j));
  return j->get<int64_t>();
}

Result<bool> Config::get_bool(const std::string& key, std::optional<bool> def) const {
  const auto* j = find(key);
  if (!j || j->is_null()) {
    if (def) return *def;
    if (const auto* d = schema_default(key); d && d->is_boolean()) return d->get<bool>();
    return invalid_input("config key \"" + key + "\" is required (true or false)");
  }
  if (!j->is_boolean())
    return invalid_input("config key \"" + key + "\" must be true or false, not " + type_name(*j));
  return j->get<bool>();
}

}  // namespace nl2sql::core
