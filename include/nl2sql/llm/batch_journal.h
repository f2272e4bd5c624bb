// BatchJournal: where the client keeps the batch jobs it submitted until they ended, so that a
// run stopped while a job runs (Ctrl-C, a crash) and started again waits for that job instead of
// submitting (and paying for) its requests a second time. The pipeline keeps it in the run
// store (src/pipeline/batch_journal.cpp); without one, a job outlives only its process.
// Implementations must be thread-safe: every batch profile's queue calls them.
#pragma once

#include <string>
#include <vector>

#include "nl2sql/core/status.h"

namespace nl2sql::llm {

struct RecordedBatchJob {
  std::string batch_id;
  std::string profile;
  std::vector<std::string> custom_ids;  // one per request line of the job
};

class BatchJournal {
 public:
  virtual ~BatchJournal() = default;
  // A job was submitted (before any answer of it is awaited).
  virtual Status record(const RecordedBatchJob& job) = 0;
  // The job ended (completed, failed, expired, cancelled) and its answers were handed out.
  virtual Status finish(const std::string& batch_id) = 0;
  // The jobs recorded and not finished, in the order they were recorded.
  virtual std::vector<RecordedBatchJob> unfinished() = 0;
};

}  // namespace nl2sql::llm
