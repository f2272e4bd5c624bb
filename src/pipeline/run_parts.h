// The units pipeline::run() is made of, in the order it calls them (pipeline.cpp reads as this
// list):
//   set_up            the services: model client (with the simulator when a profile is
//                     simulated), executor, folder lock, result cache, judge, context, generators,
//                     fixer, selectors (a voting selector's weight store first); starts the
//                     preflight early when the run folder is new
//   open_store        the manifest and the resume check: the run store, or a refusal naming
//                     what changed since the folder's run started
//   load_work         the questions to run now (no final record yet), finished ones, failed
//                     ones to redo
//   set_slot_priority the scheduling policy of model requests (oldest question first, a head
//                     start for requests with more of their question's calls after them)
//   replay_weights    a resumed run's expert-weight updates, replayed in question order
//   PreflightGate     the preflight's verdict gating every question's model calls
//   run_questions     the worker pool: the budget, one QuestionRun per question, what is stored
//                     and what is carried (UsageCarry), malloc_trim
//   summarize         the summary from the store
// Private to the pipeline layer; not thread-safe unless a unit says so.
#pragma once

#include <functional>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "nl2sql/llm/client.h"
#include "nl2sql/run/question_record.h"
#include "nl2sql/run/run_lock.h"
#include "nl2sql/run/run_store.h"

#include "shared.h"

namespace nl2sql::pipeline {

// The preflight (one real request per profile the run uses) and the gate it keeps: the checks
// are sent on their own thread while the run gets ready; questions start meanwhile with their
// model calls held until the verdict; a failed check stops the client before the held calls go.
class PreflightGate {
 public:
  // `enabled`: llm.preflight on and a cache mode that sends requests.
  void configure(llm::Client* client, std::vector<std::string> profiles, bool enabled);
  // Sends the checks now (once; nothing when disabled).
  void start();
  bool started() const { return checks_.valid(); }
  // With checks sent, the client's model calls wait for decide().
  void hold_calls();
  // Waits for the checks, counts their usage in the run store (stage "preflight"), logs each
  // profile's answer, and opens the gate — or stops the client with a status naming the profile
  // and how to check it (held calls then fail as cancelled). Nothing when no check was sent.
  void decide(run::RunStore& store);

 private:
  llm::Client* client_ = nullptr;
  std::vector<std::string> profiles_;
  bool enabled_ = false;
  std::future<std::vector<llm::PreflightResult>> checks_;
  std::promise<Status> passed_;
};

// What set_up leaves to the rest of the run.
struct Services {
  std::unique_ptr<run::RunFolderLock> lock;  // one run per folder, held until run() returns
  std::vector<std::string> used_profiles;    // the profiles the run's roles resolve to
  bool simulated = false;                    // a used profile is the gold-derived simulator
};
Result<Services> set_up(Shared& s, const data::Dataset& ds, const std::vector<size_t>& picked,
                        PreflightGate& preflight);

// The run store of s.options->out_dir (s.store points into it), its manifest saved; refused when
// the folder's run was started with different inputs (config, data, prompts, models).
struct OpenedStore {
  std::unique_ptr<run::RunStore> store;
  std::string primary_metric;  // the metric a record's correctness is read with
};
Result<OpenedStore> open_store(Shared& s, const data::Dataset& ds, const std::vector<size_t>& picked,
                               const Services& services);

// The picked questions, split by what the store holds (fills s.order, the run order).
struct Work {
  std::vector<const data::Question*> pending;  // no final record, or a failed one: run now
  std::vector<size_t> positions;               // each pending question's position in s.order
  std::map<std::string, run::QuestionRecord> finals;         // finished earlier: not run again
  std::map<std::string, run::QuestionRecord> failed_before;  // redone now; their spend is carried
  bool store_had_finals = false;
};
Result<Work> load_work(Shared& s, const data::Dataset& ds, const std::vector<size_t>& picked);

// The rank of a model request waiting for a slot (lower goes first): its question's position in
// run order, minus a head start per dependent call of its question still to follow it.
int64_t slot_rank(int64_t question_position, const std::string& stage);
void set_slot_priority(llm::Client& client, const std::vector<std::string>& order);

// Replays the stored weight updates in run order, up to the first unfinished question, and
// marks the finished ones after it as done for the question-order sequencing.
void replay_weights(Shared& s, const std::map<std::string, run::QuestionRecord>& finals);

// Every call the server answered stays in the report's totals, also when no stored record holds
// it: a question interrupted by a stop (not stored) leaves the calls of the stages it ran but did
// not store; a failed question redone now leaves those of the stages its new record does not
// take over from the store. Their usage goes to the run-wide usage (run_usage), by the record's
// stage names.
//
// An interrupted question's stages that this run stored are counted in the run usage too (a
// stopped run's report then shows everything it spent), and noted as provisional
// (run::kProvisionalUsageKey): when the question finishes in a later run, its record counts them
// again, and settle() takes the provisional amount out of the run usage. Thread-safe.
class UsageCarry {
 public:
  explicit UsageCarry(run::RunStore& store) : store_(store) {}
  using StageTest = std::function<bool(const std::string& pipeline_stage)>;
  // The record's stage usage that `counted` does not cover goes to the run usage; what
  // `provisional` marks is noted as provisional.
  void carry(const run::QuestionRecord& record, const StageTest& counted, const StageTest& provisional);
  void settle(const std::string& question_id);

 private:
  void add(const std::string& question_id, const std::string& stage, const nlohmann::json& usage, int sign);
  run::RunStore& store_;
  std::mutex mu_;
};

// What the worker pool did.
struct WorkOutcome {
  size_t not_started = 0;  // left out by the stop or the budget before they started
  size_t interrupted = 0;  // started, stopped by the run's stop before their record
  size_t unrecorded = 0;   // finished, but the run store refused the final record
  bool budget_stopped = false;
  // The records stored by this invocation, as they were stored (per pending question).
  std::vector<std::optional<run::QuestionRecord>> stored_now;
};
// Runs the pending questions on run.threads workers; decides the preflight once they are queued.
WorkOutcome run_questions(Shared& s, const Work& work, PreflightGate& preflight, UsageCarry& carry,
                          Progress& progress, const std::string& primary_metric);

// The summary from the store (the source of truth, resumed questions included) and the client.
Status summarize(Shared& s, const Work& work, WorkOutcome& outcome, const std::string& primary_metric,
                 RunSummary& summary);

}  // namespace nl2sql::pipeline
