#include "manifest.h"

#include <fmt/format.h>

#include <algorithm>
#include <ctime>
#include <map>
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

// A manifest's templates by what they stand for ("fix_sql", or "fix_sql as my_fix" when a
// `template` key chose the file): (hash, source).
std::map<std::string, std::pair<std::string, std::string>> templates_by_role(const json& manifest) {
  std::map<std::string, std::pair<std::string, std::string>> out;
  for (const auto& e : manifest.value("templates", json::array())) {
    std::string name = e.value("name", ""), file = e.value("file", name);
    out[file == name ? name : name + " as " + file] = {e.value("hash", ""), e.value("source", "")};
  }
  return out;
}

std::string source_change(const std::string& was, const std::string& now) {
  return was == now ? "" : " (was " + was + ", now " + now + ")";
}

// The changed, added and removed templates, as one list. A manifest written before templates
// were recorded holds "prompt_hashes" (every bundled template's hash, by file name): each
// template used now is compared with its file's old hash, and those not used now are ignored.
std::string template_differences(const json& stored, const json& current) {
  std::vector<std::string> changed;
  if (!stored.contains("templates")) {
    const json old = stored.value("prompt_hashes", json::object());
    for (const auto& e : current.value("templates", json::array())) {
      std::string name = e.value("name", ""), file = fs::path(e.value("file", name)).stem().string();
      std::string label = file == name ? name : name + " as " + file;
      if (!old.contains(file)) changed.push_back(label + " (new)");
      else if (old[file] != e.value("hash", "")) changed.push_back(label + source_change("bundled", e.value("source", "")));
    }
  } else {
    const auto was = templates_by_role(stored), now = templates_by_role(current);
    for (const auto& [k, v] : now) {
      auto it = was.find(k);
      if (it == was.end()) changed.push_back(k + " (new)");
      else if (it->second.first != v.first) changed.push_back(k + source_change(it->second.second, v.second));
    }
    for (const auto& [k, v] : was)
      if (!now.count(k)) changed.push_back(k + " (removed)");
  }
  std::string list;
  for (const auto& c : changed) list += (list.empty() ? "" : ", ") + c;
  return list.empty() ? "" : list + " (a template differs from the one the run started with)";
}

}  // namespace

json templates_json(const std::vector<llm::TemplateUse>& used) {
  json out = json::array();
  for (const auto& u : used) {
    json e = {{"name", u.name}, {"source", u.source}, {"hash", u.hash}};
    if (u.file != u.name) e["file"] = u.file;
    out.push_back(std::move(e));
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
  m["templates"] = prompts;
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
  // Where the templates come from is not a result; their texts are (the manifest's "templates").
  c.erase("prompts");
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
  if (auto prompts = template_differences(stored, current); !prompts.empty()) out.push_back("prompts: " + prompts);
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
