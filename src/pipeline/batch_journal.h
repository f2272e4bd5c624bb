// The run store as the llm client's BatchJournal: the batch jobs a run submitted and has not
// finished, kept in the store's meta table under "batch_jobs" ({batch id: {profile,
// custom_ids}}), so `nl2sql run` started again in the same folder picks up a job that a stop
// left running instead of submitting its requests a second time. Thread-safe (one mutex over
// the read-modify-write of the key; the store itself is thread-safe).
#pragma once

#include <mutex>

#include "nl2sql/llm/batch_journal.h"
#include "nl2sql/run/run_store.h"

namespace nl2sql::pipeline {

inline constexpr const char* kBatchJobsKey = "batch_jobs";

class RunStoreBatchJournal : public llm::BatchJournal {
 public:
  explicit RunStoreBatchJournal(run::RunStore& store) : store_(store) {}
  Status record(const llm::RecordedBatchJob& job) override;
  Status finish(const std::string& batch_id) override;
  std::vector<llm::RecordedBatchJob> unfinished() override;

 private:
  Result<nlohmann::json> jobs();  // the key's object (empty when unset); under mu_
  run::RunStore& store_;
  std::mutex mu_;  // guards the key's read-modify-write
};

}  // namespace nl2sql::pipeline
