#include "nl2sql/run/run_data.h"

#include <algorithm>

#include "nl2sql/core/thread_pool.h"
#include "nl2sql/run/run_store.h"

namespace nl2sql::run {
using nlohmann::json;

Result<RunData> load_run(const std::filesystem::path& dir, std::optional<std::vector<QuestionRecord>> known) {
  auto store = RunStore::open(dir, /*create=*/false);
  if (!store) return store.status();
  RunData run;
  run.dir = dir;
  run.name = std::filesystem::absolute(dir).lexically_normal().filename().string();
  if (run.name.empty()) run.name = std::filesystem::absolute(dir).lexically_normal().parent_path().filename().string();
  auto m = (*store)->get_meta("manifest");
  if (!m) return m.status();
  if (*m && (*m)->is_object()) run.manifest = **m;
  auto c = (*store)->get_meta("config");
  if (!c) return c.status();
  if (*c && (*c)->is_object()) run.config = **c;
  auto u = (*store)->get_meta(kRunUsageKey);
  if (!u) return u.status();
  if (*u && (*u)->is_object()) run.run_usage = **u;
  auto load = (*store)->get_meta(kEndpointLoadKey);
  if (!load) return load.status();
  if (*load && (*load)->is_object()) run.endpoint_load = **load;
  auto version = record_version(run.manifest);
  if (!version) return version.status().with_context((dir / "manifest.json").string());
  if (known && *version == kRecordVersion) {
    run.records = std::move(*known);
    return run;
  }
  auto records = read_final_records(**store, dir, *version);
  if (!records) return records.status();
  run.records = std::move(*records);
  return run;
}

Result<std::vector<QuestionRecord>> read_final_records(const RunStore& store, const std::filesystem::path& dir,
                                                       int version) {
  auto rows = store.final_records();
  if (!rows) return rows.status();
  auto recs = core::parallel_map<Result<QuestionRecord>>(rows->size(), core::default_threads(), [&](size_t i) {
    auto rec = record_from_json((*rows)[i], version);
    (*rows)[i] = json();
    return rec;
  });
  std::vector<QuestionRecord> out;
  out.reserve(recs.size());
  for (auto& rec : recs) {
    // The file and the version its manifest names: a record this build cannot read says where
    // it is and which layout it was read as.
    if (!rec)
      return rec.status().with_context((dir / RunStore::kFileName).string() + " (record version " +
                                       std::to_string(version) + ")");
    out.push_back(std::move(*rec));
  }
  return out;
}


Status add_run_usage(RunStore& store, const std::string& stage, const json& delta) {
  auto current = store.get_meta(kRunUsageKey);
  if (!current) return current.status();
  json usage = *current && (*current)->is_object() ? **current : json::object();
  json& acc = usage[stage];
  if (!acc.is_object()) acc = json::object();
  for (const auto& [k, v] : delta.items()) {
    if (v.is_number_integer()) acc[k] = acc.value(k, int64_t{0}) + v.get<int64_t>();
    else if (v.is_number()) acc[k] = acc.value(k, 0.0) + v.get<double>();
  }
  return store.set_meta(kRunUsageKey, usage);
}

json run_usage_delta(const StageUsage& u, int sign) {
  const int64_t s = sign;
  return {{"calls", s * u.calls},
          {"prompt_tokens", s * u.prompt_tokens},
          {"completion_tokens", s * u.completion_tokens},
          {"cached_tokens", s * u.cached_tokens},
          {"calls_reporting_cached", s * u.calls_reporting_cached},
          {"reasoning_tokens", s * u.reasoning_tokens},
          {"calls_reporting_reasoning", s * u.calls_reporting_reasoning},
          {"cost_usd", static_cast<double>(sign) * u.cost_usd},
          {"latency_s", static_cast<double>(sign) * u.latency_s}};
}

Status add_endpoint_load(RunStore& store, const std::string& profile, int64_t overloads, int64_t max_in_flight,
                         int64_t lowest_in_flight) {
  auto current = store.get_meta(kEndpointLoadKey);
  if (!current) return current.status();
  json load = *current && (*current)->is_object() ? **current : json::object();
  json& acc = load[profile];
  if (!acc.is_object()) acc = json::object();
  acc["overloads"] = acc.value("overloads", int64_t{0}) + overloads;
  acc["max_in_flight"] = max_in_flight;
  acc["lowest_in_flight"] = std::min(acc.value("lowest_in_flight", max_in_flight), lowest_in_flight);
  return store.set_meta(kEndpointLoadKey, load);
}

const json& field(const json& obj, const char* key) {
  static const json kNull;
  if (!obj.is_object()) return kNull;
  auto it = obj.find(key);
  return it == obj.end() ? kNull : *it;
}

std::string string_field(const json& obj, const char* key, const std::string& def) {
  const json& v = field(obj, key);
  if (v.is_string()) return v.get<std::string>();
  if (v.is_number()) return v.dump();
  return def;
}

double number_field(const json& obj, const char* key, double def) {
  const json& v = field(obj, key);
  return v.is_number() ? v.get<double>() : def;
}

int tri_bool(const json& v) { return v.is_boolean() ? (v.get<bool>() ? 1 : 0) : -1; }

std::string primary_metric(const json& manifest) {
  std::string m = string_field(manifest, "primary_metric");
  if (!m.empty()) return m;
  return string_field(manifest, "benchmark") == "spider" ? "spider_ts" : "bird";
}

}  // namespace nl2sql::run
