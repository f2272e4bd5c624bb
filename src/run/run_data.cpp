#include "nl2sql/run/run_data.h"

#include "nl2sql/run/run_store.h"

namespace nl2sql::run {
using nlohmann::json;

Result<RunData> load_run(const std::filesystem::path& dir) {
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
  auto records = (*store)->final_records();
  if (!records) return records.status();
  for (auto& r : *records) {
    NL2SQL_RETURN_IF_ERROR(check_record(r).with_context((dir / RunStore::kFileName).string()));
    run.records.push_back(std::move(r));
  }
  return run;
}

Status check_record(const json& r) {
  if (!r.is_object()) return invalid_input("a final record must be a JSON object");
  std::string id = r.contains("question_id") && r["question_id"].is_string() ? r["question_id"].get<std::string>() : "?";
  if (id == "?") return invalid_input("final record without a string \"question_id\"");
  if (!r.contains("index") || !r["index"].is_number_integer())
    return invalid_input("question " + id + ": final record without an integer \"index\"");
  if (r.contains("status") && !r["status"].is_string())
    return invalid_input("question " + id + ": \"status\" must be \"ok\" or \"error\"");
  for (const char* obj : {"selections", "usage", "latency_s", "curves", "bounds"})
    if (r.contains(obj) && !r[obj].is_object() && !r[obj].is_null())
      return invalid_input("question " + id + ": \"" + obj + "\" must be an object");
  if (r.contains("candidates") && !r["candidates"].is_array() && !r["candidates"].is_null())
    return invalid_input("question " + id + ": \"candidates\" must be a list");
  return Status::ok();
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

bool record_correct(const json& record, const std::string& metric) {
  if (string_field(record, "status", "ok") != "ok") return false;
  const json& verdict = field(record, "verdict");
  const json& v = field(field(verdict, "verdicts"), metric.c_str());
  // A verdict without the metric (an older run): the evaluator's outcome RES3 means correct
  // under its primary metric.
  if (v.is_null()) return string_field(verdict, "outcome") == "RES3";
  return tri_bool(v) == 1;
}

}  // namespace nl2sql::run
