// BatchQueue: one batch profile's chat requests gathered into Batch API jobs (batch_api.h).
// A calling thread hands in its request body and blocks until the answer line of its request
// arrives. The first caller of a new job gathers it: it waits until no request arrived for
// `gather_ms` (or the job holds max_requests requests or max_bytes of JSONL), takes the
// gathered requests — with many questions in flight, the requests of one dependency level of
// all of them — and runs the job in its own thread: upload, create, poll with backoff (its
// status and request_counts logged as they change), read the output and error files, hand each
// waiting caller its line. Requests arriving meanwhile gather the next job, so jobs overlap.
//
// Each line's custom_id is the request's hash (made unique within the queue by a ".k" suffix),
// so the same request in a rerun has the same custom_id: a job recorded in the BatchJournal and
// not finished is polled again, and a request whose custom_id it holds waits for it instead of
// being submitted once more. A job left running at a stop is not cancelled on the server.
//
// What the caller gets: the line (answered or not: an error line, a non-2xx status), or an error
// when the job ended without a line for it (failed, expired, cancelled, the files unreadable) —
// the caller then asks once synchronously — or kCancelled when the client stops. Thread-safe.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "batch_api.h"
#include "nl2sql/llm/batch_journal.h"

namespace nl2sql::llm {

class BatchQueue {
 public:
  // `endpoint_path`: the chat endpoint as the lines and the job name it ("/v1/chat/completions").
  BatchQueue(std::string profile, BatchSettings settings, std::string endpoint_path, std::unique_ptr<BatchApi> api,
             std::shared_ptr<Clock> clock, std::function<bool()> cancelled);
  BatchQueue(const BatchQueue&) = delete;
  BatchQueue& operator=(const BatchQueue&) = delete;

  // Set before the first answer(): the journal whose unfinished jobs of this profile are resumed
  // and into which new jobs are recorded.
  void set_journal(std::shared_ptr<BatchJournal> journal);
  // The answer line of the request `body` whose hash is `request_hash`; blocks (see above).
  Result<BatchLine> answer(const std::string& request_hash, const std::string& body);
  // Jobs this queue submitted (resumed ones not counted).
  int64_t jobs_submitted();

 private:
  struct Entry;
  struct ResumedJob;
  using Lock = std::unique_lock<std::mutex>;

  void load_journal(Lock& lock);
  // The recorded unfinished job that holds this request's custom_id, claimed for this caller.
  std::shared_ptr<ResumedJob> claim_resumed(const std::string& request_hash, std::string& custom_id);
  Result<BatchLine> await_resumed(Lock& lock, const std::shared_ptr<ResumedJob>& job, const std::string& custom_id);
  std::string unique_id(const std::string& request_hash) const;
  // Gathers the next job and runs it (lock released while it runs).
  void lead(Lock& lock);
  std::vector<std::shared_ptr<Entry>> take_group();
  void run_job(const std::vector<std::shared_ptr<Entry>>& group);
  // Polls until the job ended; logs its progress.
  Result<BatchJob> follow(BatchJob job);
  // custom_id → line over the job's output and error files.
  Result<std::map<std::string, BatchLine>> collect(const BatchJob& job);
  bool sleep_unless_cancelled(double seconds);
  bool full() const;

  const std::string profile_;
  const BatchSettings settings_;
  const std::string endpoint_path_;
  std::unique_ptr<BatchApi> api_;
  std::shared_ptr<Clock> clock_;
  std::function<bool()> cancelled_;

  std::mutex mu_;
  std::condition_variable cv_;
  std::shared_ptr<BatchJournal> journal_;                 // set before the first call
  bool journal_loaded_ = false;                           // guarded by mu_
  std::deque<std::shared_ptr<Entry>> pending_;            // guarded by mu_: not yet in a job
  size_t pending_bytes_ = 0;                              // guarded by mu_
  bool gathering_ = false;                                // guarded by mu_: a caller gathers a job
  std::chrono::steady_clock::time_point last_arrival_{};  // guarded by mu_
  std::set<std::string> ids_in_use_;                      // guarded by mu_: pending and running
  std::map<std::string, std::shared_ptr<ResumedJob>> resumed_;  // guarded by mu_: by custom_id
  std::set<std::string> claimed_;                         // guarded by mu_: resumed ids taken
  int64_t jobs_ = 0;                                      // guarded by mu_
};

}  // namespace nl2sql::llm
