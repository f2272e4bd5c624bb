// BatchQueue (batch_queue.h): gathering, the job's run, resuming recorded jobs.
#include "batch_queue.h"

#include <algorithm>

#include "nl2sql/core/log.h"

namespace nl2sql::llm {

// A request waiting for its line.
struct BatchQueue::Entry {
  std::string custom_id;
  std::string line;    // the JSONL line, without its newline
  bool taken = false;  // in a job
  bool done = false;
  Result<BatchLine> result = internal_error("no answer yet");
};

// A job recorded by an earlier process: polled by the first of its requests to arrive.
struct BatchQueue::ResumedJob {
  std::string batch_id;
  bool polling = false;
  bool done = false;
  Status failure;                        // why lines are missing, when the job brought none
  std::map<std::string, BatchLine> lines;
};

namespace {

constexpr auto kWaitSlice = std::chrono::milliseconds(100);

// "ended expired: 3 of 8 requests answered" and the like, for errors and logs.
std::string describe_end(const BatchJob& job) {
  std::string s = "batch job " + job.id + " ended " + job.status + " (" + std::to_string(job.counts.completed) +
                  " of " + std::to_string(job.counts.total) + " requests completed, " +
                  std::to_string(job.counts.failed) + " failed)";
  if (!job.errors.empty()) s += ": " + job.errors;
  return s;
}

}  // namespace

BatchQueue::BatchQueue(std::string profile, BatchSettings settings, std::string endpoint_path,
                       std::unique_ptr<BatchApi> api, std::shared_ptr<Clock> clock,
                       std::function<bool()> cancelled)
    : profile_(std::move(profile)),
      settings_(std::move(settings)),
      endpoint_path_(std::move(endpoint_path)),
      api_(std::move(api)),
      clock_(std::move(clock)),
      cancelled_(std::move(cancelled)) {}

void BatchQueue::set_journal(std::shared_ptr<BatchJournal> journal) {
  std::lock_guard lock(mu_);
  journal_ = std::move(journal);
  journal_loaded_ = false;
}

int64_t BatchQueue::jobs_submitted() {
  std::lock_guard lock(mu_);
  return jobs_;
}

void BatchQueue::load_journal(Lock&) {
  journal_loaded_ = true;
  if (!journal_) return;
  for (const auto& recorded : journal_->unfinished()) {
    if (recorded.profile != profile_) continue;
    auto job = std::make_shared<ResumedJob>();
    job->batch_id = recorded.batch_id;
    for (const auto& id : recorded.custom_ids) resumed_[id] = job;
    spdlog::debug("llm profile {}: batch job {} of an earlier run holds {} requests", profile_, recorded.batch_id,
                  recorded.custom_ids.size());
  }
}

std::shared_ptr<BatchQueue::ResumedJob> BatchQueue::claim_resumed(const std::string& request_hash,
                                                                  std::string& custom_id) {
  for (int k = 0;; ++k) {
    const std::string id = k == 0 ? request_hash : request_hash + "." + std::to_string(k);
    auto it = resumed_.find(id);
    if (it == resumed_.end()) return nullptr;
    if (claimed_.insert(id).second) {
      custom_id = id;
      return it->second;
    }
  }
}

std::string BatchQueue::unique_id(const std::string& request_hash) const {
  std::string id = request_hash;
  for (int k = 1; ids_in_use_.count(id) || resumed_.count(id); ++k) id = request_hash + "." + std::to_string(k);
  return id;
}

Result<BatchLine> BatchQueue::answer(const std::string& request_hash, const std::string& body) {
  Lock lock(mu_);
  if (!journal_loaded_) load_journal(lock);
  std::string resumed_id;
  if (auto job = claim_resumed(request_hash, resumed_id)) return await_resumed(lock, job, resumed_id);

  auto entry = std::make_shared<Entry>();
  entry->custom_id = unique_id(request_hash);
  entry->line = batch_input_line(entry->custom_id, endpoint_path_, body);
  ids_in_use_.insert(entry->custom_id);
  pending_.push_back(entry);
  pending_bytes_ += entry->line.size() + 1;
  last_arrival_ = std::chrono::steady_clock::now();
  cv_.notify_all();
  for (;;) {
    if (entry->done) {
      ids_in_use_.erase(entry->custom_id);
      return std::move(entry->result);
    }
    if (cancelled_()) {
      if (!entry->taken) {
        pending_.erase(std::find(pending_.begin(), pending_.end(), entry));
        pending_bytes_ -= entry->line.size() + 1;
      }
      ids_in_use_.erase(entry->custom_id);
      return make_call_error(CallErrorKind::kCancelled, "shutdown requested while waiting for a batch job");
    }
    if (!entry->taken && !gathering_) {
      lead(lock);
      continue;
    }
    cv_.wait_for(lock, kWaitSlice);
  }
}

bool BatchQueue::full() const {
  return static_cast<int64_t>(pending_.size()) >= settings_.max_requests ||
         static_cast<int64_t>(pending_bytes_) >= settings_.max_bytes;
}

void BatchQueue::lead(Lock& lock) {
  gathering_ = true;
  const auto gather = std::chrono::duration_cast<std::chrono::steady_clock::duration>(
      std::chrono::duration<double, std::milli>(settings_.gather_ms));
  while (!cancelled_() && !full()) {
    const auto quiet = std::chrono::steady_clock::now() - last_arrival_;
    if (quiet >= gather) break;
    cv_.wait_for(lock, std::min<std::chrono::steady_clock::duration>(gather - quiet, kWaitSlice));
  }
  std::vector<std::shared_ptr<Entry>> group = cancelled_() ? std::vector<std::shared_ptr<Entry>>{} : take_group();
  gathering_ = false;
  cv_.notify_all();  // what is left over gathers the next job
  if (group.empty()) return;
  lock.unlock();
  run_job(group);
  lock.lock();
}

std::vector<std::shared_ptr<BatchQueue::Entry>> BatchQueue::take_group() {
  std::vector<std::shared_ptr<Entry>> group;
  size_t bytes = 0;
  while (!pending_.empty() && static_cast<int64_t>(group.size()) < settings_.max_requests) {
    const size_t line_bytes = pending_.front()->line.size() + 1;
    if (!group.empty() && static_cast<int64_t>(bytes + line_bytes) > settings_.max_bytes) break;
    bytes += line_bytes;
    pending_bytes_ -= line_bytes;
    pending_.front()->taken = true;
    group.push_back(pending_.front());
    pending_.pop_front();
  }
  return group;
}

void BatchQueue::run_job(const std::vector<std::shared_ptr<Entry>>& group) {
  std::string jsonl;
  RecordedBatchJob recorded;
  recorded.profile = profile_;
  for (const auto& e : group) {
    jsonl += e->line;
    jsonl += '\n';
    recorded.custom_ids.push_back(e->custom_id);
  }
  auto deliver = [&](const Result<std::map<std::string, BatchLine>>& lines, const std::string& why_missing) {
    std::lock_guard lock(mu_);
    for (const auto& e : group) {
      if (lines) {
        if (auto it = lines->find(e->custom_id); it != lines->end()) e->result = it->second;
        else e->result = make_call_error(CallErrorKind::kServer, why_missing);
      } else {
        e->result = lines.status();
      }
      e->done = true;
    }
    cv_.notify_all();
  };
  auto file = api_->upload(jsonl);
  Result<BatchJob> created = file ? api_->create(*file, endpoint_path_, settings_.window) : Result<BatchJob>(file.status());
  if (!created) {
    deliver(created.status().with_context("llm profile " + profile_ + ": batch of " + std::to_string(group.size()) +
                                          " requests not submitted"), "");
    return;
  }
  recorded.batch_id = created->id;
  {
    std::lock_guard lock(mu_);
    ++jobs_;
  }
  if (journal_)
    if (Status st = journal_->record(recorded); !st)
      spdlog::warn("llm profile {}: batch job {} could not be recorded in the run folder ({}): a rerun before it "
                   "ends would submit its requests again",
                   profile_, created->id, st.message());
  spdlog::info("llm profile {}: batch job {} submitted: {} requests, {} bytes", profile_, created->id, group.size(),
               jsonl.size());
  auto ended = follow(*created);
  if (!ended && call_error_kind(ended.status()) == CallErrorKind::kCancelled) {
    spdlog::warn("llm profile {}: batch job {} is left running on the server; rerun the same command to pick up "
                 "its answers instead of paying for them again",
                 profile_, created->id);
    deliver(ended.status(), "");
    return;
  }
  Result<std::map<std::string, BatchLine>> lines = ended ? collect(*ended) : Result<std::map<std::string, BatchLine>>(ended.status());
  deliver(lines, ended ? describe_end(*ended) + "; no line for this request" : "");
  if (journal_ && lines)
    if (Status st = journal_->finish(created->id); !st)
      spdlog::warn("llm profile {}: batch job {} could not be marked finished: {}", profile_, created->id, st.message());
}

bool BatchQueue::sleep_unless_cancelled(double seconds) {
  Clock::Duration wait = std::chrono::duration_cast<Clock::Duration>(std::chrono::duration<double>(seconds));
  const Clock::Duration slice = std::chrono::milliseconds(250);
  while (wait.count() > 0) {
    if (cancelled_()) return false;
    const Clock::Duration d = std::min(wait, slice);
    clock_->sleep_for(d);
    wait -= d;
  }
  return !cancelled_();
}

Result<BatchJob> BatchQueue::follow(BatchJob job) {
  double delay = settings_.poll_s;
  std::string seen;
  for (;;) {
    const std::string now = job.status + " " + std::to_string(job.counts.completed) + "/" +
                            std::to_string(job.counts.total) + " " + std::to_string(job.counts.failed);
    if (now != seen) {
      spdlog::info("llm profile {}: batch job {} {}: {} of {} requests done, {} failed", profile_, job.id, job.status,
                   job.counts.completed, job.counts.total, job.counts.failed);
      seen = now;
    }
    if (job.ended()) return job;
    if (!sleep_unless_cancelled(delay))
      return make_call_error(CallErrorKind::kCancelled, "shutdown requested while batch job " + job.id + " runs");
    delay = std::min(delay * 2, settings_.poll_max_s);
    auto next = api_->retrieve(job.id);
    if (!next) return next.status();
    job = std::move(*next);
  }
}

Result<std::map<std::string, BatchLine>> BatchQueue::collect(const BatchJob& job) {
  std::map<std::string, BatchLine> lines;
  // The error file first: a request in both (it should not be) keeps its output line.
  for (const std::string* file : {&job.error_file_id, &job.output_file_id}) {
    if (file->empty()) continue;
    auto text = api_->content(*file);
    if (!text) return text.status();
    for (auto& [id, line] : parse_batch_lines(*text)) lines[id] = std::move(line);
  }
  if (job.status != "completed") spdlog::warn("llm profile {}: {}; the requests without an answer are sent synchronously",
                                              profile_, describe_end(job));
  return lines;
}

Result<BatchLine> BatchQueue::await_resumed(Lock& lock, const std::shared_ptr<ResumedJob>& job,
                                            const std::string& custom_id) {
  for (;;) {
    if (job->done) {
      if (auto it = job->lines.find(custom_id); it != job->lines.end()) return it->second;
      return job->failure.is_ok() ? make_call_error(CallErrorKind::kServer, "batch job " + job->batch_id +
                                                                               " has no line for this request")
                                  : Result<BatchLine>(job->failure);
    }
    if (cancelled_())
      return make_call_error(CallErrorKind::kCancelled, "shutdown requested while waiting for batch job " + job->batch_id);
    if (!job->polling) {
      job->polling = true;
      lock.unlock();
      spdlog::info("llm profile {}: batch job {} of an earlier run holds this run's requests: picked up, not sent again",
                   profile_, job->batch_id);
      Result<std::map<std::string, BatchLine>> lines = internal_error("not read");
      auto current = api_->retrieve(job->batch_id);
      auto ended = current ? follow(*current) : Result<BatchJob>(current.status());
      lines = ended ? collect(*ended) : Result<std::map<std::string, BatchLine>>(ended.status());
      const bool stopped = !ended && call_error_kind(ended.status()) == CallErrorKind::kCancelled;
      if (journal_ && lines)
        if (Status st = journal_->finish(job->batch_id); !st)
          spdlog::warn("llm profile {}: batch job {} could not be marked finished: {}", profile_, job->batch_id,
                       st.message());
      lock.lock();
      if (stopped) {
        job->polling = false;  // left for the next run
        cv_.notify_all();
        return ended.status();
      }
      if (lines) job->lines = std::move(*lines);
      else job->failure = lines.status();
      job->done = true;
      cv_.notify_all();
      continue;
    }
    cv_.wait_for(lock, kWaitSlice);
  }
}

}  // namespace nl2sql::llm
