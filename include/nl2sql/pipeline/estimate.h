// What a run will cost, before it runs (`nl2sql run --estimate`, `nl2sql sweep --estimate`).
//
// Every prompt that does not depend on a model answer is rendered by the run's own code: the
// estimate runs the pipeline over the chosen questions into a scratch folder, with every model
// profile answered in-process by a neutral answer (no request leaves the process; no response
// cache is read or written; the run folder is not touched). The calls this dry run makes are
// those of the run as far as the config decides them (keywords, the column filter per table,
// every generator sample, the os generator's example calls per database, selector duels) and their
// prompts are the real renderings (schema, demonstrations, templates); tokens are counted as the
// LLM client counts a prompt when a server reports none (one token per 4 bytes of the messages,
// llm::Client). What the model's answers decide is projected:
//   - retrieved values and the column filter's choice: the neutral answer names no keyword, so
//     the rendered schemas lack the question's values; low/high widen the rendered stages'
//     prompt tokens by kRenderedLow / kRenderedHigh;
//   - fix rounds: `fix.max_rounds` per candidate at worst; expected at a previous run's rate, else
//     kDefaultFixCallsPerCandidate, each prompt the size of the question's generation prompts;
//   - selection and curves: the dry run is made twice, once with every candidate a query and a
//     result of its own (the worst case: every pair a duel) and once with the candidates' SQL
//     drawn from kDefaultDistinctQueries texts with kDefaultDistinctResults results per
//     question (the expected case, unless a previous run says better);
//   - completion tokens: a previous run's mean per call of each stage, else
//     default_completion_tokens(stage); low 16 per call, high the role's output budget per call.
// Dollars are the profiles' list prices (a provider's prefix cache lowers the real bill).
//
// A previous run of the same config (its manifest's config_hash) replaces the defaults with its
// per-question means. Thread-compatible: one estimate at a time per process (the dry runs use the
// process's log level).
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "nl2sql/core/status.h"
#include "nl2sql/pipeline/pipeline.h"

namespace nl2sql::pipeline {

inline constexpr double kRenderedLow = 0.9, kRenderedHigh = 1.3;
inline constexpr double kDefaultFixCallsPerCandidate = 0.25;
inline constexpr int kDefaultDistinctQueries = 3, kDefaultDistinctResults = 2;
inline constexpr int64_t kLowCompletionPerCall = 16;

// Completion tokens per call without a previous run, by stage ("context", "generate", "fix",
// "select", "curves").
int64_t default_completion_tokens(const std::string& stage);

struct Range {
  double low = 0, expected = 0, high = 0;
  Range& operator+=(const Range& o);
};

struct StageEstimate {
  Range calls, prompt_tokens, completion_tokens, cost_usd;
  StageEstimate& operator+=(const StageEstimate& o);
};

struct Estimate {
  size_t questions = 0;
  std::map<std::string, StageEstimate> stages;  // by usage stage
  StageEstimate total;
  // Where the expected figures of the answer-dependent parts come from: "defaults", or the
  // previous run's folder and its question count.
  std::string basis = "defaults";
  std::filesystem::path previous_run;
  size_t previous_questions = 0;
  std::vector<std::string> notes;
};

struct EstimateOptions {
  RunOptions run;  // what `nl2sql run` would do; out_dir is only read (a previous run there)
  // A run folder whose per-question means to use (`--estimate-from`); empty: run.out_dir when
  // it holds a run of the same config.
  std::filesystem::path previous_run;
};

// Errors: the config, dataset or question selection (as the run would report them).
Result<Estimate> estimate_run(const EstimateOptions& options);

// {"questions", "calls", "prompt_tokens", "completion_tokens", "cost_usd" (each {"low",
// "expected", "high"}), "stages": {stage: {the same four}}, "basis", "previous_run", "notes"}.
nlohmann::json to_json(const Estimate& estimate);
nlohmann::json to_json(const StageEstimate& stage);
// A table for the terminal: totals and per stage, low / expected / high.
std::string estimate_text(const Estimate& estimate, const std::string& title);

}  // namespace nl2sql::pipeline
