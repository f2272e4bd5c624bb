// run_questions and summarize (run_parts.h): the worker pool of a run and its summary.
#include <spdlog/spdlog.h>

#include <malloc.h>

#include <algorithm>
#include <atomic>
#include <set>
#include <tuple>

#include "nl2sql/core/thread_pool.h"
#include "nl2sql/run/run_data.h"

#include "progress.h"
#include "question_run.h"
#include "run_parts.h"

namespace nl2sql::pipeline {
namespace {

// The pool's shared state: the budget's view of the questions in flight and the tallies.
class Workers {
 public:
  Workers(Shared& s, const Work& work, UsageCarry& carry, Progress& progress, const std::string& primary_metric)
      : s_(s), work_(work), carry_(carry), progress_(progress), primary_metric_(primary_metric),
        cap_(s.settings.max_cost_usd) {
    outcome_.stored_now.resize(work.pending.size());
  }

  // The k-th pending question, start to record.
  void run_one(size_t k) {
    const data::Question& q = *work_.pending[k];
    if (!admit()) {
      ++not_started_;
      release_sequence(work_.positions[k]);
      return;
    }
    progress_.question_started();
    const double cost_before = s_.client->accounting().by_question()[q.question_id].cost_usd;
    const llm::UsageTotals usage_before = s_.client->accounting().question(q.question_id);
    QuestionRun qr(s_, q, work_.positions[k]);
    run::QuestionRecord rec = qr.run();
    const bool interrupted = stopped_mid_question(q, rec, usage_before);
    const bool keep = !interrupted && store(q, rec);
    account(q, rec, qr, interrupted, keep);
    const double cost_after = s_.client->accounting().by_question()[q.question_id].cost_usd;
    {
      std::lock_guard lock(mu_);
      --in_flight_;
      if (!interrupted) {
        ++finished_now_;
        cost_finished_ += cost_after - cost_before;
      }
    }
    if (interrupted) ++interrupted_;
    else progress_.question_finished(rec.correct(primary_metric_), !rec.ok);
    if (keep) outcome_.stored_now[k] = std::move(rec);
    // What the finished question freed goes back to the system, instead of staying in its
    // thread's arena as free pages that later questions on other threads cannot use
    // (superhero x300, 30 questions: peak RSS 126-130 MiB against 140-147 MiB, same CPU).
    // Not under AddressSanitizer: its allocator serves the process, and glibc's malloc, never
    // used, would first be set up here by concurrent workers (ptmalloc_init is not
    // thread-safe: two workers initializing it at once each leave an arena reference that
    // their exits both release, and glibc aborts in __malloc_arena_thread_freeres).
#if !defined(__SANITIZE_ADDRESS__)
    malloc_trim(0);
#endif
  }

  WorkOutcome finish() {
    outcome_.not_started = not_started_;
    outcome_.interrupted = interrupted_;
    outcome_.unrecorded = unrecorded_;
    outcome_.budget_stopped = budget_stop_;
    return std::move(outcome_);
  }

 private:
  // Whether the question may start: not after a stop, nor when the budget (spent so far plus
  // what the questions in flight are expected to cost) would be passed.
  bool admit() {
    const bool cancelled = s_.client->cancelled();
    std::lock_guard lock(mu_);
    if (cap_ && !cancelled) {
      double spent = s_.client->accounting().total().cost_usd;
      double per_q = finished_now_ ? cost_finished_ / static_cast<double>(finished_now_) : 0.0;
      if (spent + per_q * static_cast<double>(in_flight_ + 1) > *cap_) budget_stop_ = true;
    }
    if (cancelled || budget_stop_) return false;
    ++in_flight_;
    return true;
  }

  // A question not run: later questions of the weighted votes would wait for it forever.
  void release_sequence(size_t position) {
    if (!s_.weights) return;
    std::lock_guard lock(s_.seq_mu);
    s_.seq_done.insert(position);
    while (s_.seq_done.count(s_.seq_next)) s_.seq_done.erase(s_.seq_next++);
    s_.seq_cv.notify_all();
  }

  // Stopping (cancel flag or an auth failure): a record that failed, or whose calls were
  // cancelled or refused, is not stored — a resume completes it from its stored stages.
  bool stopped_mid_question(const data::Question& q, const run::QuestionRecord& rec,
                            const llm::UsageTotals& usage_before) const {
    if (!s_.client->cancelled()) return false;
    const llm::UsageTotals after = s_.client->accounting().question(q.question_id);
    auto grew = [&](const char* kind) {
      auto a = after.errors_by_kind.find(kind);
      auto b = usage_before.errors_by_kind.find(kind);
      return (a == after.errors_by_kind.end() ? 0 : a->second) >
             (b == usage_before.errors_by_kind.end() ? 0 : b->second);
    };
    return !rec.ok || grew("cancelled") || grew("auth");
  }

  // The final record into the store; false when the store refused it.
  bool store(const data::Question& q, const run::QuestionRecord& rec) {
    bool stored = true;
    if (auto st = s_.store->put_stage(q.question_id, static_cast<int64_t>(q.index), run::kFinalStage,
                                      rec.ok ? run::kStageDone : run::kStageError, run::to_json(rec));
        !st) {
      spdlog::error("question {}: cannot record its result: {}", q.question_id, st.message());
      ++unrecorded_;
      stored = false;
    }
    if (!rec.ok) spdlog::warn("question {} failed: {}", q.question_id, rec.error);
    return stored;
  }

  // What the question spent that no stored record holds goes to the run usage (UsageCarry).
  void account(const data::Question& q, const run::QuestionRecord& rec, const QuestionRun& qr, bool interrupted,
               bool keep) {
    auto from_store = [&](const std::string& stage) { return qr.from_store(stage); };
    if (interrupted) {
      carry_.carry(rec, from_store, [&](const std::string& stage) { return qr.stored_now(stage); });
    } else if (keep) {
      if (auto old = work_.failed_before.find(q.question_id); old != work_.failed_before.end())
        carry_.carry(old->second, from_store, [](const std::string&) { return false; });
      carry_.settle(q.question_id);
    }
  }

  Shared& s_;
  const Work& work_;
  UsageCarry& carry_;
  Progress& progress_;
  const std::string& primary_metric_;
  const std::optional<double> cap_;
  std::mutex mu_;
  size_t in_flight_ = 0, finished_now_ = 0;  // guarded by mu_
  double cost_finished_ = 0;                 // guarded by mu_: cost of questions finished now
  bool budget_stop_ = false;                 // guarded by mu_
  std::atomic<size_t> not_started_{0};
  std::atomic<size_t> interrupted_{0};
  std::atomic<size_t> unrecorded_{0};
  WorkOutcome outcome_;  // stored_now: each slot written by its own question's worker
};

}  // namespace

WorkOutcome run_questions(Shared& s, const Work& work, PreflightGate& preflight, UsageCarry& carry,
                          Progress& progress, const std::string& primary_metric) {
  Workers workers(s, work, carry, progress, primary_metric);
  core::ThreadPool pool(std::min(s.settings.threads, std::max<size_t>(1, work.pending.size())));
  for (size_t k = 0; k < work.pending.size(); ++k) pool.submit([&workers, k] { workers.run_one(k); });
  preflight.decide(*s.store);
  pool.wait_idle();
  return workers.finish();
}

Status summarize(Shared& s, const Work& work, WorkOutcome& outcome, const std::string& primary_metric,
                 RunSummary& summary) {
  const RunOptions& options = *s.options;
  summary.eval_executions = s.judge->executions();
  s.exec_cache->flush();
  if (s.weights) {
    auto st = s.weights->save(options.out_dir / "weights.json");
    if (!st) spdlog::warn("cannot save weights.json: {}", st.message());
  }
  // When the store held no final record at the start, it holds now exactly those this
  // invocation stored: they are taken as they were stored, in the store's order, instead of
  // read back (the end of a run waits for that read).
  Result<std::vector<run::QuestionRecord>> recs = std::vector<run::QuestionRecord>();
  if (work.store_had_finals) {
    recs = run::read_final_records(*s.store, options.out_dir);
    if (!recs) return recs.status();
  } else {
    for (auto& r : outcome.stored_now)
      if (r) recs->push_back(std::move(*r));
    std::sort(recs->begin(), recs->end(), [](const run::QuestionRecord& a, const run::QuestionRecord& b) {
      return std::tie(a.index, a.question_id) < std::tie(b.index, b.question_id);
    });
  }
  std::set<std::string> wanted(s.order.begin(), s.order.end());
  for (const auto& r : *recs) {
    if (!wanted.count(r.question_id)) continue;
    ++summary.finished;
    if (!r.ok) ++summary.failed;
    if (r.correct(primary_metric)) ++summary.correct;
  }
  summary.not_started = outcome.not_started;
  summary.interrupted = outcome.interrupted;
  summary.unrecorded = outcome.unrecorded;
  if (summary.unrecorded)
    spdlog::error("{} questions could not be recorded (the run store refused the writes: disk full?); "
                  "free space and rerun the same command to redo them",
                  summary.unrecorded);
  summary.cancelled = options.cancel && options.cancel->load();
  if (auto fatal = s.client->fatal_error()) {
    summary.fatal_error = fatal->message();
    spdlog::error("run stopped early: {}; {} questions interrupted and {} not started — finished stages "
                  "are kept, rerun the same command to resume once it is fixed",
                  summary.fatal_error, summary.interrupted, summary.not_started);
  }
  const auto usage = s.client->accounting().total();
  summary.llm_calls = usage.calls;
  summary.llm_failed = usage.errors;
  summary.llm_retries = usage.retries;
  for (const auto& load : s.client->profile_loads()) {
    if (load.overloads == 0) continue;
    summary.overloaded.push_back(load);
    if (auto st = run::add_endpoint_load(*s.store, load.profile, load.overloads, load.max_in_flight,
                                         load.lowest_in_flight);
        !st)
      spdlog::warn("run store: the endpoint load was not recorded: {}", st.message());
  }
  summary.budget_stopped = outcome.budget_stopped;
  summary.cost_usd = usage.cost_usd;
  if (summary.budget_stopped)
    spdlog::warn("budget: stopped scheduling at ${:.4f} spent (cap ${:.4f}); {} questions not started",
                 summary.cost_usd, s.settings.max_cost_usd.value_or(0.0), summary.not_started);
  summary.records = std::move(*recs);
  return Status::ok();
}

}  // namespace nl2sql::pipeline
