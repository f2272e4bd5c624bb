// The pipeline: the only place that knows the order of the stages. run() turns a resolved config
// and a dataset into a run folder (see run/run_data.h for its contract):
//
//   per question:  context ──► generate ──► fix ──► judge ──► select ──► final record
//   per run:       manifest, run store rows as each stage finishes, reports at the end
//
// Every stage of every question is checkpointed in the run store as it finishes, so rerunning the
// same command continues where it stopped (Ctrl-C, kill -9, a crash) and redoes no finished
// stage. A resume whose config, prompts, questions or data changed is refused with a message
// saying what changed (RunOptions::force_new starts over).
//
// Concurrency: questions run on `run.threads` workers (each question's model calls are also
// bounded by the LLM layer's in-flight limits); SQL runs through one db::Executor bounded to
// `run.sql_threads` queries at a time. Weighted-majority selection (wma/rwma) is inherently
// sequential — question t's choice depends on the weights after t−1 — so those questions' select
// stage waits for the previous question in run order; everything else proceeds in parallel.
//
// Determinism: every seed derives from (run.seed, question id, stage), and completed work is
// read back from the store, so a resumed run's report equals an uninterrupted one's given the
// same LLM cache (or the sim provider).
//
// Failure handling: one bad question (a failed model call, a broken database) is recorded with
// status "error" and counts as wrong; it never stops the run. Failed model calls and retries are
// counted per stage into the records (`llm_faults`), so the reports say what a flaky endpoint
// cost. The exceptions: a failed preflight (one real request per used profile before the first
// question), an auth failure (HTTP 401/403), or the same refusal on llm.stop_after_repeated_errors
// consecutive calls: every later call would fail the same way, so it stops the run like a cancellation — in-flight questions are not
// recorded (their finished stages are), and `fatal_error` names the profile and quotes the
// server (for 401/403 the key's environment variable, never the key). A question none of whose
// candidates got an answer is recorded as failed, and a rerun attempts failed questions again. Rerunning with a valid key resumes. Cancellation (the flag, set by a
// SIGINT handler) stops scheduling, lets in-flight stages end, writes the reports of what
// finished and returns with `cancelled` set.
#pragma once

#include <atomic>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "nl2sql/core/config.h"
#include "nl2sql/core/status.h"
#include "nl2sql/data/dataset.h"
#include "nl2sql/llm/client.h"
#include "nl2sql/pipeline/question_set.h"
#include "nl2sql/run/question_record.h"

namespace nl2sql::llm {
class Transport;
}

namespace nl2sql::pipeline {

enum class ProgressMode { kAuto, kTerminal, kPlain, kOff };

struct RunOptions {
  core::Config config;                // resolved (extends and --set applied) and validated
  data::DatasetSpec dataset;
  QuestionFilter filter;
  std::filesystem::path out_dir;
  bool force_new = false;
  std::filesystem::path prompts_dir;   // empty: config key prompts.dir, else the bundled prompts
  std::filesystem::path index_dir;     // empty: context.index_dir or the default
  ProgressMode progress = ProgressMode::kAuto;
  double progress_interval_s = 10;     // plain mode: seconds between lines
  const std::atomic<bool>* cancel = nullptr;
  std::shared_ptr<llm::Transport> transport;  // tests: a fake server's transport
  // Tests: switched onto the run's db::Executor (Executor::set_fault_injector) to fail chosen
  // SQL calls deterministically (by their SQL: see Executor::set_fault_injector).
  std::function<Status(uint64_t call_number, std::string_view sql)> db_fault_injector;
};

struct RunSummary {
  std::filesystem::path out_dir;
  size_t questions = 0;      // selected for this run (this shard)
  size_t finished = 0;       // with a final record (including resumed ones)
  size_t resumed = 0;        // final records found from an earlier invocation
  size_t failed = 0;         // final records with status "error"
  size_t correct = 0;        // under the primary metric
  size_t not_started = 0;    // left out by cancellation or the budget, before they started
  size_t interrupted = 0;    // started, then stopped by the run's stop: not recorded, stages kept
  size_t unrecorded = 0;     // run, but the store refused their records (disk full): redone by a rerun
  bool cancelled = false;
  bool budget_stopped = false;
  // Non-empty: the run stopped early — a 401/403, the same refusal repeated
  // (llm.stop_after_repeated_errors), or a failed preflight; the message names the profile.
  std::string fatal_error;
  bool simulated = false;
  double cost_usd = 0;       // this invocation's model cost
  int64_t llm_calls = 0;     // this invocation's model calls (cache hits included)
  int64_t llm_failed = 0;    // … of which failed after their retries
  int64_t llm_retries = 0;   // HTTP attempts beyond the first
  double wall_s = 0;
  // Profiles whose endpoint answered "overloaded" this invocation, and how far their requests in
  // flight were lowered.
  std::vector<llm::ProfileLoad> overloaded;
  // Queries the judge executed in this invocation (gold, tie probes; not the candidates', which
  // it takes from the fix stage).
  size_t eval_executions = 0;
  // The run folder's final records as this summary read them (all of the store's, resumed and
  // other shards' included, in store order), for the reports to take instead of reading the
  // store again (report::write_run_reports).
  std::vector<run::QuestionRecord> records;
  double ex() const { return finished ? 100.0 * correct / finished : 0.0; }
};

Result<RunSummary> run(const RunOptions& options);

// The parts of the config that decide results, hashed for the resume check: everything except
// operational keys (threads, budgets, progress, rate limits, retries, cache location).
nlohmann::json result_relevant_config(const nlohmann::json& config);

// What differs between a stored manifest and a new one, one line per difference (empty: same).
std::vector<std::string> manifest_differences(const nlohmann::json& stored,
                                              const nlohmann::json& current);

}  // namespace nl2sql::pipeline
