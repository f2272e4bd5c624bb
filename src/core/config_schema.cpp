#include "nl2sql/core/config_schema.h"
#include "nl2sql/core/text.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <set>

#include <fmt/format.h>

#include "nl2sql/core/files.h"
#include "nl2sql/core/install_layout.h"

namespace nl2sql::core {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

const std::set<std::string> kSpecFields = {"type", "enum", "min", "max", "default", "nullable", "doc"};
const std::set<std::string> kTypes = {"string", "number", "integer", "boolean", "array", "object"};

// "a.b[].c" -> {"a", "b", "[]", "c"}
std::vector<std::string> split_pattern(const std::string& pattern) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= pattern.size()) {
    size_t dot = pattern.find('.', start);
    std::string seg = pattern.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    size_t arrays = 0;
    while (seg.size() >= 2 && seg.compare(seg.size() - 2, 2, "[]") == 0) {
      seg.resize(seg.size() - 2);
      ++arrays;
    }
    if (!seg.empty()) out.push_back(seg);
    for (size_t i = 0; i < arrays; ++i) out.push_back("[]");
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  return out;
}

std::string join_segments(const std::vector<std::string>& segs) {
  std::string s;
  for (const auto& seg : segs) {
    if (seg == "[]") {
      s += "[]";
    } else {
      if (!s.empty()) s += '.';
      s += seg;
    }
  }
  return s;
}

bool segment_matches(const std::string& pat, const std::string& seg) {
  if (pat == "[]" || seg == "[]") return pat == seg;
  return pat == "*" || pat == seg;
}

std::string type_of(const json& v) {
  if (v.is_null()) return "null";
  if (v.is_boolean()) return "boolean";
  if (v.is_number_integer() || v.is_number_unsigned()) return "integer";
  if (v.is_number()) return "number";
  if (v.is_string()) return "string";
  if (v.is_array()) return "array";
  return "object";
}

bool has_type(const json& v, const std::string& type) {
  if (type == "number") return v.is_number();
  if (type == "integer")
    // A whole float counts (2.0), but not one beyond int64: get_int() could not hold it.
    return v.is_number_integer() || v.is_number_unsigned() ||
           (v.is_number_float() && std::floor(v.get<double>()) == v.get<double>() &&
            std::fabs(v.get<double>()) < 9.2e18);
  return type_of(v) == type;
}

std::string short_value(const json& v) {
  std::string s = v.dump();
  if (s.size() > 40) s = s.substr(0, 37) + "...";
  return s;
}

std::string join_list(const std::vector<std::string>& items, const std::string& sep) {
  std::string s;
  for (const auto& i : items) s += (s.empty() ? "" : sep) + i;
  return s;
}

struct Pattern {
  std::vector<std::string> segs;
  const ConfigKeySpec* spec;
};

class Validator {
 public:
  explicit Validator(const std::vector<ConfigKeySpec>& keys) {
    for (const auto& k : keys) patterns_.push_back({split_pattern(k.pattern), &k});
  }

  void walk(const json& node, std::vector<std::string>& segs, const std::string& display,
            std::vector<std::string>& errors) const {
    const ConfigKeySpec* spec = exact(segs);
    if (spec) {
      if (!check_value(node, *spec, display, errors)) return;
      if (node.is_object() && has_children(segs)) walk_children(node, segs, display, errors);
      if (node.is_array()) {
        segs.push_back("[]");
        if (has_children(segs, /*inclusive=*/true))
          for (size_t i = 0; i < node.size(); ++i)
            walk(node[i], segs, display + "[" + std::to_string(i) + "]", errors);
        segs.pop_back();
      }
      return;
    }
    if (has_children(segs)) {
      if (!node.is_object()) {
        errors.push_back(fmt::format("config key \"{}\": expected an object, got {} {}", display,
                                     type_of(node), short_value(node)));
        return;
      }
      walk_children(node, segs, display, errors);
      return;
    }
    errors.push_back(fmt::format("unknown config key \"{}\" (closest known key: \"{}\")", display,
                                 closest(segs)));
  }

 private:
  void walk_children(const json& node, std::vector<std::string>& segs, const std::string& display,
                     std::vector<std::string>& errors) const {
    for (auto it = node.begin(); it != node.end(); ++it) {
      if (segs.empty() && it.key() == "extends") continue;
      segs.push_back(it.key());
      walk(it.value(), segs, display.empty() ? it.key() : display + "." + it.key(), errors);
      segs.pop_back();
    }
  }

  static bool prefix_matches(const std::vector<std::string>& pat, const std::vector<std::string>& segs) {
    if (pat.size() < segs.size()) return false;
    for (size_t i = 0; i < segs.size(); ++i)
      if (!segment_matches(pat[i], segs[i])) return false;
    return true;
  }

  // A literal pattern wins over a wildcard one ("llm.models.*" vs a documented name).
  const ConfigKeySpec* exact(const std::vector<std::string>& segs) const {
    const ConfigKeySpec* best = nullptr;
    int best_wild = 1 << 20;
    for (const auto& p : patterns_) {
      if (p.segs.size() != segs.size() || !prefix_matches(p.segs, segs)) continue;
      int wild = static_cast<int>(std::count(p.segs.begin(), p.segs.end(), "*"));
      if (wild < best_wild) {
        best = p.spec;
        best_wild = wild;
      }
    }
    return best;
  }

  bool has_children(const std::vector<std::string>& segs, bool inclusive = false) const {
    for (const auto& p : patterns_)
      if ((p.segs.size() > segs.size() || (inclusive && p.segs.size() == segs.size())) &&
          prefix_matches(p.segs, segs))
        return true;
    return false;
  }

  std::string closest(const std::vector<std::string>& segs) const {
    std::string target = join_segments(segs);
    std::string best;
    size_t best_d = std::string::npos;
    for (const auto& p : patterns_) {
      std::vector<std::string> inst = p.segs;
      for (size_t i = 0; i < inst.size() && i < segs.size(); ++i)
        if (inst[i] == "*" && segs[i] != "[]") inst[i] = segs[i];
      std::string cand = join_segments(inst);
      size_t d = edit_distance(target, cand);
      if (d < best_d) {
        best_d = d;
        best = cand;
      }
    }
    return best;
  }

  static bool check_value(const json& v, const ConfigKeySpec& spec, const std::string& key,
                          std::vector<std::string>& errors) {
    if (v.is_null()) {
      if (spec.nullable) return false;
      errors.push_back(fmt::format("config key \"{}\": expected {}, got null", key,
                                   join_list(spec.types, " or ")));
      return false;
    }
    bool type_ok = spec.types.empty();
    for (const auto& t : spec.types) type_ok = type_ok || has_type(v, t);
    if (!type_ok) {
      errors.push_back(fmt::format("config key \"{}\": expected {}, got {} {}", key,
                                   join_list(spec.types, " or "), type_of(v), short_value(v)));
      return false;
    }
    if (spec.enum_values.is_array() && !spec.enum_values.empty()) {
      bool found = false;
      for (const auto& e : spec.enum_values) found = found || e == v;
      if (!found) {
        std::vector<std::string> allowed;
        for (const auto& e : spec.enum_values) allowed.push_back(e.dump());
        errors.push_back(fmt::format("config key \"{}\": {} is not one of {}", key, short_value(v),
                                     join_list(allowed, ", ")));
        return false;
      }
    }
    if (v.is_number()) {
      double x = v.get<double>();
      if ((spec.min && x < *spec.min) || (spec.max && x > *spec.max)) {
        std::string range = spec.min && spec.max ? fmt::format("[{}, {}]", *spec.min, *spec.max)
                            : spec.min           ? fmt::format(">= {}", *spec.min)
                                                 : fmt::format("<= {}", *spec.max);
        errors.push_back(fmt::format("config key \"{}\": {} is out of range (allowed: {})", key,
                                     short_value(v), range));
        return false;
      }
    }
    return true;
  }

  std::vector<Pattern> patterns_;
};

}  // namespace

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j)
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

Status ConfigSchema::add_fragment(const std::string& name, const json& fragment) {
  if (!fragment.is_object())
    return invalid_input(name + ": a schema fragment must be a JSON object {\"key.path\": {spec}}");
  for (auto it = fragment.begin(); it != fragment.end(); ++it) {
    const std::string& key = it.key();
    const json& s = it.value();
    auto where = [&](const std::string& what) { return invalid_input(name + ": key \"" + key + "\": " + what); };
    if (key.empty() || split_pattern(key).empty()) return where("empty key pattern");
    if (!s.is_object()) return where("the spec must be an object");
    for (auto f = s.begin(); f != s.end(); ++f)
      if (!kSpecFields.count(f.key()))
        return where("unknown spec field \"" + f.key() + "\" (known: type, enum, min, max, default, nullable, doc)");
    ConfigKeySpec spec;
    spec.pattern = join_segments(split_pattern(key));
    spec.fragment = name;
    if (!s.contains("doc") || !s["doc"].is_string() || s["doc"].get<std::string>().empty())
      return where("\"doc\" (one sentence) is required");
    spec.doc = s["doc"].get<std::string>();
    if (!s.contains("type")) return where("\"type\" is required");
    std::vector<json> types = s["type"].is_array() ? s["type"].get<std::vector<json>>()
                                                   : std::vector<json>{s["type"]};
    for (const auto& t : types) {
      if (!t.is_string() || !kTypes.count(t.get<std::string>()))
        return where("\"type\" must be one of string, number, integer, boolean, array, object (or a list)");
      spec.types.push_back(t.get<std::string>());
    }
    if (s.contains("enum")) {
      if (!s["enum"].is_array() || s["enum"].empty()) return where("\"enum\" must be a non-empty list");
      spec.enum_values = s["enum"];
    }
    for (const char* f : {"min", "max"}) {
      if (!s.contains(f)) continue;
      if (!s[f].is_number()) return where(std::string("\"") + f + "\" must be a number");
      (std::string(f) == "min" ? spec.min : spec.max) = s[f].get<double>();
    }
    if (s.contains("nullable")) {
      if (!s["nullable"].is_boolean()) return where("\"nullable\" must be true or false");
      spec.nullable = s["nullable"].get<bool>();
    }
    if (s.contains("default")) spec.default_value = s["default"];
    if (const auto* prior = find(spec.pattern))
      return where("already documented in fragment \"" + prior->fragment + "\"");
    keys_.push_back(std::move(spec));
  }
  return Status::ok();
}

Result<ConfigSchema> ConfigSchema::load_dir(const fs::path& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return not_found("config schema folder " + dir.string() + " does not exist");
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (e.path().extension() == ".json") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  ConfigSchema schema;
  for (const auto& f : files) {
    auto doc = read_json_file(f);
    if (!doc) return doc.status();
    NL2SQL_RETURN_IF_ERROR(schema.add_fragment(f.stem().string(), *doc).with_context(f.string()));
  }
  return schema;
}

const ConfigKeySpec* ConfigSchema::find(const std::string& pattern) const {
  std::string norm = join_segments(split_pattern(pattern));
  for (const auto& k : keys_)
    if (k.pattern == norm) return &k;
  return nullptr;
}

const ConfigKeySpec* ConfigSchema::spec_for(const std::string& key) const {
  const auto segs = split_pattern(key);
  const ConfigKeySpec* best = nullptr;
  long best_wild = 1L << 20;
  for (const auto& k : keys_) {
    const auto pat = split_pattern(k.pattern);
    if (pat.size() != segs.size()) continue;
    bool ok = true;
    for (size_t i = 0; i < segs.size() && ok; ++i) ok = segment_matches(pat[i], segs[i]);
    if (!ok) continue;
    const long wild = std::count(pat.begin(), pat.end(), "*");
    if (wild < best_wild) {
      best = &k;
      best_wild = wild;
    }
  }
  return best;
}

const Result<ConfigSchema>& default_schema() {
  static const Result<ConfigSchema> schema = ConfigSchema::load_dir(default_schema_dir());
  return schema;
}

const json* schema_default(const std::string& key) {
  const auto& schema = default_schema();
  if (!schema) return nullptr;
  const ConfigKeySpec* spec = schema->spec_for(key);
  return spec && !spec->default_value.is_null() ? &spec->default_value : nullptr;
}

std::vector<std::string> ConfigSchema::validate(const json& config) const {
  std::vector<std::string> errors;
  if (!config.is_object()) {
    errors.push_back("a config must be a JSON object");
    return errors;
  }
  Validator v(keys_);
  std::vector<std::string> segs;
  v.walk(config, segs, "", errors);
  return errors;
}

Status ConfigSchema::check(const Config& config) const {
  auto errors = validate(config.json());
  if (errors.empty()) return Status::ok();
  std::string msg = fmt::format("{} config problem{}:", errors.size(), errors.size() == 1 ? "" : "s");
  for (const auto& e : errors) msg += "\n  " + e;
  return invalid_input(msg);
}

std::string ConfigSchema::markdown_table() const {
  std::string out = "| key | type | default | allowed | meaning |\n|---|---|---|---|---|\n";
  for (const auto& k : keys_) {
    std::string allowed;
    if (k.enum_values.is_array()) {
      std::vector<std::string> vals;
      for (const auto& e : k.enum_values) vals.push_back("`" + (e.is_string() ? e.get<std::string>() : e.dump()) + "`");
      allowed = join_list(vals, ", ");
    } else if (k.min && k.max) {
      allowed = fmt::format("{} … {}", *k.min, *k.max);
    } else if (k.min) {
      allowed = fmt::format("≥ {}", *k.min);
    } else if (k.max) {
      allowed = fmt::format("≤ {}", *k.max);
    }
    if (k.nullable) allowed += allowed.empty() ? "null" : ", null";
    std::string def = k.default_value.is_null() ? "" : "`" + markdown_cell(k.default_value.dump()) + "`";
    out += fmt::format("| `{}` | {} | {} | {} | {} |\n", markdown_cell(k.pattern), join_list(k.types, " \\| "),
                       def, markdown_cell(allowed), markdown_cell(k.doc));
  }
  return out;
}

fs::path default_schema_dir() {
  if (const char* env = std::getenv("NL2SQL_SCHEMA_DIR"); env && *env) return env;
  return share_dir().value_or(expected_share_dir()) / "configs" / "schema";
}

}  // namespace nl2sql::core
