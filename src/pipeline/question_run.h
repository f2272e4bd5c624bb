// One question through the stages: context, generation, fixing, judging, selection, the final
// record. Each finished stage is stored (run/run_store.h) and reused on resume. Private to the
// pipeline layer; pipeline.cpp runs one QuestionRun per question on the worker pool.
#pragma once

#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "nl2sql/run/question_record.h"
#include "fix_launch.h"
#include "question_judging.h"
#include "shared.h"

namespace nl2sql::pipeline {
namespace fs = std::filesystem;
using nlohmann::json;
using fix::ExecutionMemo;

// Model calls that failed, retries and unread answers between two snapshots of a question's
// accounting: what one stage's result cost in faults.
run::LlmFaults llm_faults_between(const llm::UsageTotals& before, const llm::UsageTotals& after);

// The stages of a question, in the order run() takes them.
enum class Stage { kContext, kGenerate, kFix, kJudge, kSelect, kCurves };
const char* stage_name(Stage stage);

class QuestionRun {
 public:
  QuestionRun(Shared& shared, const data::Question& q, size_t position)
      : s_(shared), q_(q), task_(q.task()), position_(position) {}

  // Runs the missing stages; returns the final record (status "error" when a stage failed).
  run::QuestionRecord run();
  // After run(): whether a stage was read from the run store, or stored by this run. Its calls
  // are then counted by whichever record holds the stage (see pipeline.cpp's carry_usage).
  bool from_store(const std::string& stage) const { return loaded_.count(stage) > 0; }
  bool stored_now(const std::string& stage) const { return stored_.count(stage) > 0; }

 private:
  // The stages, rows of run()'s table: each `load_` takes the payload a previous run stored,
  // each `run_` runs the stage and returns the payload to store (null for a stage never stored).
  Status load_context(json stored);
  Result<json> run_context();
  Status context_ready();  // what a loaded or fresh context gives the later stages
  Status load_generate(json stored);
  Result<json> run_generate();
  Status load_fix(json stored);
  Result<json> run_fix();
  Result<json> run_judge();
  // The pool the selectors choose from (selection_input_, correct_), for select and curves.
  void prepare_selection();
  Status load_select(json stored);
  Result<json> run_select();
  Result<json> run_curves();
  run::QuestionRecord final_record();
  // Non-OK when the stage's model calls include lost ones (llm::is_lost_call).
  Status incomplete_stage(const std::string& stage, const run::LlmFaults& faults) const;
  // The record's usage per stage, summed from the call traces it holds (context, candidates and
  // their fix rounds, selections, curves).
  void add_usage(run::QuestionRecord& rec, const std::map<std::string, run::SelectionRecord>& selections) const;
  // The question's calls as its traces sum them now, over every stage.
  run::StageUsage traced_usage() const;
  // Adds to `rec` what the client counted for this question since the failed stage began and
  // no trace holds (see run()).
  void add_untraced_usage(run::QuestionRecord& rec, const char* stage) const;
  // The record's fields every outcome shares: the question, and the faults and candidates so far.
  run::QuestionRecord base_record() const;
  void wait_turn();
  void finish_turn();
  std::unique_ptr<FixLaunch> launch_fixes(size_t generators);
  // The cancel flag, or the client stopped by an auth failure.
  bool cancelled() const { return s_.client->cancelled(); }
  llm::UsageTotals usage_now() { return s_.client->accounting().question(q_.question_id); }
  // Stores a finished stage with the faults its model calls survived — unless the run is
  // stopping: a stage finishing after a cancellation may have swallowed a cancelled call, and
  // storing it would make the resumed run differ from an uninterrupted one.
  Status put(const std::string& stage, json payload, const llm::UsageTotals& before) {
    if (cancelled()) return Status(ErrorCode::kCancelled, "run stopping: stage " + stage + " not stored");
    const llm::UsageTotals now = usage_now();
    faults_[stage] = llm_faults_between(before, now);
    usage_at_put_ = now;
    // A stage that lost model calls (never answered: overload past its retries, 5xx, a dead
    // endpoint, timeouts) is incomplete: left unstored, the question fails and a rerun sends the
    // lost calls again, taking every answered one from the response cache.
    if (Status lost = incomplete_stage(stage, faults_[stage]); !lost) return lost;
    payload["llm_faults"] = run::to_json(faults_[stage]);
    Status st = s_.store->put_stage(q_.question_id, static_cast<int64_t>(q_.index), stage, run::kStageDone,
                                    payload);
    if (st) stored_.insert(stage);
    return st;
  }
  std::optional<json> stored(const std::string& stage) {
    auto r = s_.store->get_stage(q_.question_id, stage);
    if (!r || !r->has_value()) return std::nullopt;
    // Faults unreadable in a stored stage count as none (the stage's result itself is intact).
    auto it = (**r).find("llm_faults");
    auto faults = run::faults_from_json(it == (**r).end() ? json() : *it, "stage " + stage);
    faults_[stage] = faults ? *faults : run::LlmFaults{};
    loaded_.insert(stage);
    return **r;
  }
  // Candidates from a stored generate/fix payload (replacing any in memory).
  Status load_candidates(const json& payload, const std::string& stage) {
    candidates_.clear();
    const std::string where = "question " + q_.question_id + ", stored " + stage;
    auto it = payload.find("candidates");
    if (it == payload.end() || it->is_null()) return Status::ok();
    if (!it->is_array()) return invalid_input(where + ": key \"candidates\" must be a list");
    for (const auto& c : *it) {
      auto cand = generate::candidate_from_json(c);
      if (!cand) return cand.status().with_context(where);
      candidates_.push_back(std::move(*cand));
    }
    return Status::ok();
  }

  Shared& s_;
  const data::Question& q_;  // gold stays in this class: the stages get task_
  const data::Task task_;
  size_t position_;
  const data::Schema* schema_ = nullptr;
  fs::path db_path_;
  std::optional<context::ContextRecord> context_;  // the context stage's result once it ended
  context::Retrieval retrieval_;
  std::set<std::string> selected_columns_;
  std::shared_ptr<const context::ValueIndex> index_;
  // context.metadata.enabled: in every prompt's schema (generation, fixing, selection).
  std::shared_ptr<const context::DatabaseMetadata> metadata_;
  std::vector<generate::Candidate> candidates_;
  // Gold's run, the question's executions and the verdicts (created once the database is known).
  std::optional<QuestionJudging> judging_;
  // Fix loops started by the generate stage as its generators finish (declared after judging_
  // and candidates_: destroyed first, it waits for loops that use the memo and them).
  std::unique_ptr<FixLaunch> fix_launch_;
  std::map<std::string, bool> exec_before_fix_;  // per candidate id: executable before the fixer
  std::map<std::string, run::SelectionRecord> selections_;
  // The selectors' pool (the gold-free task and the candidates with their results) and, per
  // candidate, whether it is correct under the primary metric (gold stays in this class).
  select::SelectionInput selection_input_;
  std::vector<bool> correct_;
  std::map<int64_t, run::CurvePoint> curves_;
  std::vector<llm::LlmCallTrace> curve_calls_;  // traces of the curves' selector re-runs
  std::map<std::string, double> latency_;
  std::optional<eval::ItemResult> verdict_;
  bool turn_taken_ = false;
  std::map<std::string, run::LlmFaults> faults_;  // per stage: failed model calls and retries
  std::set<std::string> loaded_;  // stages read from the run store
  std::set<std::string> stored_;  // stages this run stored
  llm::UsageTotals usage_at_put_;  // the question's usage when the last stage was stored
  // When the running stage began: the client's count for the question and its traces' sum.
  llm::UsageTotals stage_began_counted_;
  run::StageUsage stage_began_traced_;
};

}  // namespace nl2sql::pipeline
