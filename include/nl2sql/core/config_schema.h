// ConfigSchema: the documented set of config keys, loaded from the fragments in
// `configs/schema/*.json` (one per stage, each owned by that stage), and the validation of a
// resolved Config against it.
//
// A fragment is a JSON object mapping a dotted key pattern to a spec. In a pattern, `[]` means
// "every element of this array" (`generate.generators[].name`) and `*` means "any key of this
// object" (`llm.models.*.model`). Spec fields: "type" (string|number|integer|boolean|array|
// object, or a list of them), optional "enum", "min", "max", "default", "nullable" (null is
// accepted), and "doc" (one sentence, required). Objects that are only a prefix of documented
// keys are implicit; an "object" or "array" key without documented children is opaque (its
// contents are not checked). The top-level "extends" key is always accepted.
//
// validate() reports every problem at once: an unknown key names the closest documented key,
// a wrong type / enum / range names the key and what is allowed. The schema is an immutable
// value after loading; validate() and markdown_table() are safe from many threads.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "nl2sql/core/config.h"
#include "nl2sql/core/status.h"

namespace nl2sql::core {

struct ConfigKeySpec {
  std::string pattern;              // e.g. "llm.models.*.temperature"
  std::vector<std::string> types;   // allowed JSON types (see above)
  nlohmann::json enum_values;       // null or an array of allowed values
  std::optional<double> min, max;
  nlohmann::json default_value;     // null when the key has no default
  bool nullable = false;
  std::string doc;
  std::string fragment;             // file stem the key came from ("llm", "run", …)
};

class ConfigSchema {
 public:
  // Loads every `*.json` fragment in `dir` (sorted by name). A malformed fragment, a spec with
  // an unknown field or a key documented twice is an error naming the file and the key.
  static Result<ConfigSchema> load_dir(const std::filesystem::path& dir);
  // Adds one fragment (`name` is used in messages and in the table).
  Status add_fragment(const std::string& name, const nlohmann::json& fragment);

  const std::vector<ConfigKeySpec>& keys() const { return keys_; }
  const ConfigKeySpec* find(const std::string& pattern) const;
  // The spec documenting a concrete dotted key ("llm.models.main.timeout_s" →
  // "llm.models.*.timeout_s"; a literal pattern wins over a wildcard one); nullptr if none.
  const ConfigKeySpec* spec_for(const std::string& key) const;

  // Every problem of `config`, one message per problem (empty: valid).
  std::vector<std::string> validate(const nlohmann::json& config) const;
  // validate() folded into one Status (kInvalidInput, one problem per line).
  Status check(const Config& config) const;

  // The table in docs/config-reference.md: | key | type | default | allowed | meaning |, one row per key, grouped by
  // fragment in file order.
  std::string markdown_table() const;

 private:
  std::vector<ConfigKeySpec> keys_;
};

// Where the fragments are: $NL2SQL_SCHEMA_DIR, else `configs/schema` of the installed data files
// (core::share_dir(); in a build tree, the source tree's), else where an install would have it.
std::filesystem::path default_schema_dir();

// The schema in default_schema_dir(), loaded once per process (the error when it cannot be read).
const Result<ConfigSchema>& default_schema();

// The documented default of a concrete key, from default_schema(); nullptr when the key has no default or the schema cannot be read. This is
// where Config's accessors find a default the caller did not give: defaults live in the schema.
const nlohmann::json* schema_default(const std::string& key);

// Levenshtein distance over bytes (used for "did you mean").
size_t edit_distance(const std::string& a, const std::string& b);

}  // namespace nl2sql::core
