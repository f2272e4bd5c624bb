#include "batch_journal.h"

#include "nl2sql/core/log.h"

namespace nl2sql::pipeline {

using nlohmann::json;

Result<json> RunStoreBatchJournal::jobs() {
  auto v = store_.get_meta(kBatchJobsKey);
  if (!v) return v.status();
  if (!v->has_value() || !(**v).is_object()) return json::object();
  return **v;
}

Status RunStoreBatchJournal::record(const llm::RecordedBatchJob& job) {
  std::lock_guard lock(mu_);
  auto all = jobs();
  if (!all) return all.status();
  (*all)[job.batch_id] = {{"profile", job.profile}, {"custom_ids", job.custom_ids}};
  return store_.set_meta(kBatchJobsKey, *all);
}

Status RunStoreBatchJournal::finish(const std::string& batch_id) {
  std::lock_guard lock(mu_);
  auto all = jobs();
  if (!all) return all.status();
  if (!all->erase(batch_id)) return Status::ok();
  return store_.set_meta(kBatchJobsKey, *all);
}

std::vector<llm::RecordedBatchJob> RunStoreBatchJournal::unfinished() {
  std::lock_guard lock(mu_);
  std::vector<llm::RecordedBatchJob> out;
  auto all = jobs();
  if (!all) {
    spdlog::warn("run store: cannot read the recorded batch jobs ({}): none is picked up", all.status().message());
    return out;
  }
  for (const auto& [id, j] : all->items()) {
    llm::RecordedBatchJob job;
    job.batch_id = id;
    job.profile = j.value("profile", "");
    if (j.contains("custom_ids") && j["custom_ids"].is_array())
      for (const auto& c : j["custom_ids"])
        if (c.is_string()) job.custom_ids.push_back(c.get<std::string>());
    out.push_back(std::move(job));
  }
  return out;
}

}  // namespace nl2sql::pipeline
