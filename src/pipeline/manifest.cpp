#include "manifest.h"

#include <fmt/format.h>

#include <algorithm>
#include <ctime>
#include <set>

#include "nl2sql/core/build_info.h"
#include "nl2sql/core/files.h"
#include "nl2sql/core/log.h"
#include "nl2sql/llm/prompt_template.h"
#include "nl2sql/pipeline/question_set.h"
#include "nl2sql/run/question_record.h"

namespace nl2sql::pipeline {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

std::string utc_now() {
  auto t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

}  // namespace

Result<json> prompt_hashes(const fs::path& dir) {
  json out = json::object();
  std::error_code ec;
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(dir, ec))
    if (entry.path().extension() == ".txt") files.push_back(entry.path());
  if (ec) return io_error("cannot list prompts folder " + dir.string() + ": " + ec.message());
  std::sort(files.begin(), files.end());
  for (const auto& f : files) {
    auto t = llm::PromptTemplate::load(f);
    if (!t) return t.status();
    out[f.stem().string()] = t->hash();
  }
  return out;
}

json make_manifest(const Shared& s, const data::Dataset& ds, const std::string& fingerprint,
                   const std::vector<size_t>& picked, const json& prompts, bool simulated,
                   const std::vector<std::string>& used_profiles) {
  json ids = json::array();
  for (size_t i : picked) ids.push_back(ds.questions[i].question_id);
  json m;
  m["tool_version"] = core::build_info().version;
  m["tool_commit"] = core::build_info().commit;  // which code made the run ("-dirty": uncommitted changes)
  m["tool_build_type"] = core::build_info().build_type;
  m["created_at"] = utc_now();
  m["benchmark"] = data::benchmark_name(ds.benchmark);
  m["split"] = ds.split;
  m["dataset_fingerprint"] = fingerprint;
  m["question_ids"] = ids;
  m["shard"] = s.options->filter.shard
                   ? json{{"index", s.options->filter.shard->index}, {"count", s.options->filter.shard->count}}
                   : json(nullptr);
  m["config_hash"] = core::sha256_hex(result_relevant_config(s.config.json()).dump());
  m["prompt_hashes"] = prompts;
  if (!s.candidate_pools.empty()) m["candidate_pools"] = s.candidate_pools;
  m["simulated"] = simulated;
  m["seed"] = s.settings.seed;
  m["primary_selector"] = s.settings.primary_selector;
  m["selectors"] = s.settings.selectors;
  m["generators"] = s.generator_names;
  m["primary_metric"] = eval::metric_name(eval::primary_metric(ds.benchmark, s.settings.eval.metrics));
  m["record_version"] = run::kRecordVersion;
  // Which model answered: the profiles the run's roles resolve to, with the model and endpoint
  // as resolved (OPENAI_MODEL / OPENAI_BASE_URL included; credentials never). A resume with
  // another model or endpoint is refused like a config change.
  json models = json::object();
  for (const auto& name : used_profiles) {
    auto it = s.client->settings().profiles.find(name);
    if (it == s.client->settings().profiles.end()) continue;
    models[name] = {{"provider", it->second.provider},
                    {"model", it->second.model},
                    {"endpoint", core::mask_url(it->second.base_url)}};
  }
  m["models"] = models;
  json skipped = json::array();
  for (const auto& sk : skipped_in_selection(ds, s.options->filter))
    skipped.push_back({{"question_id", sk.question_id}, {"db_id", sk.db_id}, {"index", sk.index}, {"reason", sk.reason}});
  m["skipped"] = skipped;
  return m;
}

json result_relevant_config(const json& config) {
  json c = config;
  c.erase("extends");
  if (c.contains("run") && c["run"].is_object())
    for (const char* k : {"threads", "sql_threads", "max_cost_usd", "fail_under", "progress"})
      c["run"].erase(k);
  if (c.contains("llm") && c["llm"].is_object()) {
    json& llm = c["llm"];
    for (const char* k : {"max_in_flight", "retry", "cache", "preflight", "stop_after_repeated_errors"}) llm.erase(k);
    if (llm.contains("models") && llm["models"].is_object())
      for (auto& [name, m] : llm["models"].items())
        if (m.is_object())
          for (const char* k : {"max_in_flight", "rpm", "tpm", "timeout_s", "idle_timeout_s", "stream",
                                "api_key_env", "headers", "query"})
            m.erase(k);
  }
  return c;
}

std::vector<std::string> manifest_differences(const json& stored, const json& current) {
  std::vector<std::string> out;
  auto str = [](const json& m, const char* k) { return m.contains(k) ? m[k].dump() : "null"; };
  if (str(stored, "benchmark") != str(current, "benchmark") || str(stored, "split") != str(current, "split"))
    out.push_back("dataset: " + str(stored, "benchmark") + "/" + str(stored, "split") + " → " +
                  str(current, "benchmark") + "/" + str(current, "split"));
  if (str(stored, "dataset_fingerprint") != str(current, "dataset_fingerprint"))
    out.push_back("data: the question file or a database file changed (dataset fingerprint differs)");
  if (str(stored, "config_hash") != str(current, "config_hash"))
    out.push_back("config: the resolved config differs (compare config.resolved.json with --set/extends)");
  // Runs recorded before models were part of the manifest resume as before.
  if (stored.contains("models") && str(stored, "models") != str(current, "models"))
    out.push_back("models: " + str(stored, "models") + " → " + str(current, "models") +
                  " (another model or endpoint: OPENAI_MODEL, OPENAI_BASE_URL or the profiles changed)");
  const json empty = json::object();
  const json& sp = stored.contains("prompt_hashes") ? stored["prompt_hashes"] : empty;
  const json& cp = current.contains("prompt_hashes") ? current["prompt_hashes"] : empty;
  std::vector<std::string> changed;
  for (const auto& [k, v] : cp.items())
    if (!sp.contains(k)) changed.push_back(k + " (new)");
    else if (sp[k] != v) changed.push_back(k);
  for (const auto& [k, v] : sp.items())
    if (!cp.contains(k)) changed.push_back(k + " (removed)");
  if (!changed.empty()) {
    std::string list;
    for (const auto& c : changed) list += (list.empty() ? "" : ", ") + c;
    out.push_back("prompts: " + list);
  }
  // Candidate pools read from files: by label, the file and its content.
  auto pools = [](const json& m) {
    json out = json::object();
    for (const auto& p : m.value("candidate_pools", json::array()))
      out[p.value("label", "")] = {p.value("path", ""), p.value("hash", "")};
    return out;
  };
  if (pools(stored) != pools(current))
    out.push_back("candidate pools: " + pools(stored).dump() + " → " + pools(current).dump() +
                  " (a pool file, its path or its content changed)");
  if (str(stored, "question_ids") != str(current, "question_ids")) {
    std::set<std::string> a, b;
    for (const auto& v : stored.value("question_ids", json::array())) a.insert(v.dump());
    for (const auto& v : current.value("question_ids", json::array())) b.insert(v.dump());
    size_t added = 0, removed = 0;
    for (const auto& x : b) added += !a.count(x);
    for (const auto& x : a) removed += !b.count(x);
    out.push_back(fmt::format("questions: {} added, {} removed (--questions/--sample/--db/--shard)",
                              added, removed));
  }
  if (str(stored, "shard") != str(current, "shard"))
    out.push_back("shard: " + str(stored, "shard") + " → " + str(current, "shard"));
  return out;
}

}  // namespace nl2sql::pipeline
