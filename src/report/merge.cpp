#include "nl2sql/report/merge.h"

#include <chrono>
#include <cstdint>
#include <map>
#include <set>

#include <fmt/chrono.h>
#include <fmt/format.h>

#include "nl2sql/run/run_store.h"
#include "nl2sql/run/run_data.h"

namespace nl2sql::report {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// What two records of the same question must share to be the same answer (timings and
// traces may differ between machines).
json answer_of(const run::QuestionRecord& r) {
  return {{"status", r.ok ? "ok" : "error"},
          {"prediction", r.prediction},
          {"verdicts", r.verdict ? json(r.verdict->verdicts) : json()},
          {"outcome", r.verdict ? json(r.verdict->outcome) : json()}};
}

}  // namespace

Result<MergeSummary> merge_runs(const std::vector<fs::path>& inputs, const fs::path& out_dir) {
  if (inputs.size() < 2) return invalid_input("merge needs at least two run folders");
  std::vector<std::unique_ptr<run::RunStore>> stores;
  std::vector<json> manifests;
  std::vector<int> versions;  // record version of each input
  for (const auto& dir : inputs) {
    auto s = run::RunStore::open(dir, false);
    if (!s) return s.status();
    auto m = (*s)->manifest();
    if (!m) return m.status();
    auto v = run::record_version(*m);
    if (!v) return v.status().with_context(dir.string());
    versions.push_back(*v);
    manifests.push_back(*m);
    stores.push_back(std::move(*s));
  }
  for (size_t i = 1; i < inputs.size(); ++i)
    for (const char* key : {"config_hash", "dataset_fingerprint", "benchmark", "split"}) {
      const json& a = run::field(manifests[0], key);
      const json& b = run::field(manifests[i], key);
      if (a != b)
        return invalid_input(fmt::format("cannot merge {} into {}: {} differs ({} vs {})", inputs[i].string(),
                                         inputs[0].string(), key, b.dump(), a.dump()));
    }

  std::vector<run::StageRow> rows;
  std::map<std::string, std::pair<size_t, json>> finals;  // question -> (input, answer)
  std::set<std::string> taken;                           // (question, stage) rows already kept
  std::set<std::string> questions;
  std::map<std::string, int64_t> index_of;
  size_t overlapping = 0;
  for (size_t i = 0; i < stores.size(); ++i) {
    auto all = stores[i]->all_rows();
    if (!all) return all.status();
    for (const auto& r : *all) {
      index_of[r.question_id] = r.index;
      if (r.stage == run::kFinalStage) {
        auto rec = run::record_from_json(r.payload, versions[i]);
        if (!rec)
          return rec.status().with_context(inputs[i].string() + " (record version " + std::to_string(versions[i]) + ")");
        json ans = answer_of(*rec);
        auto it = finals.find(r.question_id);
        if (it != finals.end() && it->second.second != ans)
          return invalid_input(fmt::format("cannot merge: question {} disagrees between {} and {} (first {}, then {})",
                                           r.question_id, inputs[it->second.first].string(), inputs[i].string(),
                                           it->second.second.dump(), ans.dump()));
        if (it == finals.end()) finals[r.question_id] = {i, ans};
      }
      // An agreeing overlap keeps the first input's row of each stage.
      if (!taken.insert(r.question_id + '\x1f' + r.stage).second) continue;
      questions.insert(r.question_id);
      rows.push_back(r);
    }
  }
  // Count overlaps: questions seen in more than one input.
  {
    std::map<std::string, size_t> seen;
    for (auto& s : stores) {
      auto ids = s->question_ids();
      if (!ids) return ids.status();
      for (const auto& q : *ids) seen[q]++;
    }
    for (const auto& [q, n] : seen) overlapping += n > 1 ? 1 : 0;
  }

  auto out = run::RunStore::open(out_dir, true);
  if (!out) return out.status();
  auto existing = (*out)->question_ids();
  if (!existing) return existing.status();
  if (!existing->empty())
    return invalid_input("merge output " + out_dir.string() + " already holds a run; choose an empty folder");
  NL2SQL_RETURN_IF_ERROR((*out)->put_rows(rows));

  // Merged manifest: the first input's, with the union of the expected questions.
  json manifest = manifests[0];
  std::vector<std::string> ids;
  std::set<std::string> seen_ids;
  for (const auto& m : manifests)
    if (run::field(m, "question_ids").is_array())
      for (const auto& q : m["question_ids"])
        if (q.is_string() && seen_ids.insert(q.get<std::string>()).second) ids.push_back(q.get<std::string>());
  for (const auto& [q, _] : index_of)
    if (seen_ids.insert(q).second) ids.push_back(q);
  std::stable_sort(ids.begin(), ids.end(), [&](const std::string& a, const std::string& b) {
    auto ia = index_of.find(a), ib = index_of.find(b);
    int64_t xa = ia == index_of.end() ? INT64_MAX : ia->second, xb = ib == index_of.end() ? INT64_MAX : ib->second;
    return xa < xb;
  });
  manifest["question_ids"] = ids;
  manifest["shard"] = nullptr;
  json from = json::array();
  for (size_t i = 0; i < inputs.size(); ++i)
    from.push_back({{"run", inputs[i].filename().string().empty() ? inputs[i].parent_path().filename().string() : inputs[i].filename().string()},
                    {"shard", run::field(manifests[i], "shard")},
                    {"created_at", run::field(manifests[i], "created_at")}});
  manifest["merged_from"] = from;
  manifest["created_at"] = fmt::format("{:%Y-%m-%dT%H:%M:%SZ}", fmt::gmtime(std::chrono::system_clock::to_time_t(std::chrono::system_clock::now())));
  NL2SQL_RETURN_IF_ERROR((*out)->save_manifest(manifest));
  // Run-wide calls (preflights) of every shard, summed.
  for (const auto& st : stores) {
    auto u = st->get_meta(run::kRunUsageKey);
    if (!u) return u.status();
    if (!*u || !(*u)->is_object()) continue;
    for (const auto& [stage, v] : (*u)->items())
      if (v.is_object())
        NL2SQL_RETURN_IF_ERROR(run::add_run_usage(**out, stage, v));
  }
  auto cfg = stores[0]->get_meta("config");
  if (!cfg) return cfg.status();
  if (*cfg) NL2SQL_RETURN_IF_ERROR((*out)->save_resolved_config(**cfg));

  MergeSummary s;
  s.inputs = inputs.size();
  s.questions = questions.size();
  s.rows = rows.size();
  s.overlapping = overlapping;
  s.manifest = manifest;
  return s;
}

}  // namespace nl2sql::report
