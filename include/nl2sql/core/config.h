// Config: JSON files with comments, an "extends" chain (paths relative to the extending file,
// objects merged deeply, later files win), and `--set a.b.c=value` overrides (value parsed as
// JSON when it parses, else taken as a string). Precedence: --set > config file > its bases >
// built-in defaults. Accessors take dotted key paths and fail with a message naming the key.
// A Config is an immutable value once loaded; reading it from many threads is safe.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "nl2sql/core/status.h"

namespace nl2sql::core {

class Config {
 public:
  Config() : root_(nlohmann::json::object()) {}
  explicit Config(nlohmann::json root) : root_(std::move(root)) {}

  // Loads `path`, following "extends" (a string or a list of strings).
  static Result<Config> load(const std::filesystem::path& path);
  // Applies "a.b=value" overrides in order.
  Status apply_overrides(const std::vector<std::string>& assignments);
  // Deep-merges `overlay` into this config (overlay wins).
  void merge(const nlohmann::json& overlay);

  const nlohmann::json& json() const { return root_; }
  // nullptr when any segment of the dotted path is missing.
  const nlohmann::json* find(const std::string& key) const;
  bool has(const std::string& key) const { return find(key) != nullptr; }

  Result<std::string> get_string(const std::string& key, std::optional<std::string> def = {}) const;
  Result<double> get_number(const std::string& key, std::optional<double> def = {}) const;
  Result<int64_t> get_int(const std::string& key, std::optional<int64_t> def = {}) const;
  Result<bool> get_bool(const std::string& key, std::optional<bool> def = {}) const;

  void set(const std::string& key, nlohmann::json value);

 private:
  nlohmann::json root_;
};

void deep_merge(nlohmann::json& base, const nlohmann::json& overlay);

}  // namespace nl2sql::core
