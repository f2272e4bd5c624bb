// The `sim` provider: an offline, deterministic stand-in for a model, derived from gold SQL.
// It is the only code that reads gold on behalf of a model: the stages tag each call
// (llm::CallTag: task, question id, candidates, …, never gold), and the simulator looks the
// gold up in the questions it was given (add) and judges candidates against it itself — with
// the run's evaluator when one is set (set_judge), else by executing both on its own executor
// and comparing as BIRD does.
// It exists for dry runs, CI of the pipeline itself and studies of selection methods when no
// model is available; every answer is labelled provider = "sim" and reports must say so.
//
// It answers in the formats a real model would, so the same parsers run:
//   kGenerate / kFix   a sentence of reasoning, then a ```sql fenced block
//   kSelectPair        reasoning, then a ```json block {"winner": "A"|"B"}
//   kRank              reasoning, then a ```json block {"ranking": [i, j, …]} (0-based, best first)
//   kChoose            a ```json block {"principles", "reasoning", "sql"}: the first correct
//                      candidate w.p. p_sel, else a wrong one (the naive listwise selection)
//   kNlEval            reasoning, then a ```text block with the answer rows (one per line)
//   kKeywords          bare JSON {"keywords": [...]} (as prompts/extract_keywords.txt asks)
//   kColumnFilter      a ```json block {"relevant": true|false}
//   kLedger            a ```json fact sheet derived from the gold SQL's tables and clauses
//   kPlan              a ```json block {"steps": [...], "expected_columns": [...]} from gold
//   kPlanCritique      a ```json block {"approved", "issues"}: rejects a plan missing a gold table
//   kSqlCritique       a ```json block {"approved", "issues"}: right w.p. p_sel; a rejection of a
//                      wrong query names a real difference against gold (table, join, condition…)
//   kValidate          a ```json block {"valid_result", "columns_not_needed", "result_empty",
//                      "suggest_fix"}; valid iff the result equals gold's
// Randomness: every draw comes from a SplitMix64 stream seeded by a hash of
// (sim.seed, task, question id, generator, sample index, and the request's seed when it sets one),
// so a rerun is identical bit for bit and samples that differ only in their seed differ.
// Thread-safe once set up: add() and set_judge() before the first answer(); answer() is then
// a function of the request (gold results are cached under a lock).
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "nl2sql/core/config.h"
#include "nl2sql/core/hash.h"
#include "nl2sql/core/status.h"
#include "nl2sql/data/dataset.h"
#include "nl2sql/db/executor.h"
#include "nl2sql/llm/client.h"
#include "nl2sql/llm/profile.h"
#include "nl2sql/llm/simulator.h"

namespace nl2sql::sim {

// The generator mistake taxonomy.
enum class SqlMistake {
  kWrongColumn,
  kDroppedCondition,
  kLiteralCase,
  kDistinctToggle,
  kExtraColumn,
  kWrongAggregate,
  kWrongJoinKey,
  kSyntaxError,
};
inline constexpr int kSqlMistakeCount = 8;
const char* sql_mistake_name(SqlMistake mistake);

// Deterministic stream of uniform draws.
using SimRng = core::SplitMix64;

// Applies `mistake` to `sql` with simple text transformations. nullopt when it does not apply
// (e.g. no WHERE to drop from, no aggregate to swap).
std::optional<std::string> apply_mistake(const std::string& sql, SqlMistake mistake,
                                         SimRng& rng);
// Draws a mistake (uniformly, falling back through the taxonomy until one applies; a syntax
// error always applies). Returns the mutated SQL and which mistake it is.
std::pair<std::string, SqlMistake> mutate_sql(const std::string& sql, SimRng& rng);

class Simulator final : public llm::Simulator {
 public:
  explicit Simulator(llm::SimSettings settings);
  ~Simulator() override;

  // The gold the simulator answers from: the question's gold SQL and difficulty, and the
  // database to judge candidates on (`db_path` may be empty: candidates then never match).
  void add(const data::Question& question, const std::filesystem::path& db_path = {});
  // Every question of a dataset whose database is present.
  void add_all(const data::Dataset& dataset);
  // How duels and rankings judge a candidate: the run's evaluator (the pipeline sets it, so the
  // simulated selector sees correctness as the report counts it). Unset: executed here and
  // compared as BIRD does (set equality of rows).
  void set_judge(std::function<bool(const std::string& question_id, const std::string& sql)> judge);

  // The answer to `request` (its tag). A task that needs gold for a question the simulator
  // was not given is a kInvalidInput error naming the question.
  Result<llm::ChatResponse> answer(const llm::ChatRequest& request) const override;
  const llm::SimSettings& settings() const { return settings_; }

 private:
  struct Gold {
    std::string gold_sql, difficulty;
    std::filesystem::path db_path;
  };
  const Gold* gold_of(const std::string& question_id) const;
  bool executes_like_gold(const std::string& question_id, const std::string& sql) const;
  bool judged_correct(const std::string& question_id, const std::string& sql) const;

  llm::SimSettings settings_;
  std::map<std::string, Gold> gold_;
  std::function<bool(const std::string&, const std::string&)> judge_;
  std::unique_ptr<db::Executor> executor_;  // its own: a run's executor counts its calls
  mutable std::mutex mu_;
  mutable std::map<std::string, db::ExecutionResult> gold_results_;  // guarded by mu_
};

// A simulator for `settings`, holding every question of `dataset` (may be null), attached to
// `options`: profiles whose provider is "sim" are answered by it. Returns it for set_judge.
std::shared_ptr<Simulator> attach(llm::ClientOptions& options, const llm::SimSettings& settings,
                                  const data::Dataset* dataset = nullptr);

// The same, when `config` defines a profile whose provider is "sim" (else nothing is attached
// and the result is null): what every command that builds a client calls.
Result<std::shared_ptr<Simulator>> attach_if_simulated(llm::ClientOptions& options, const core::Config& config,
                                                       const data::Dataset* dataset = nullptr);

// A model client for `config` with the simulator attached when a profile is simulated (it reads
// gold from `dataset` when given; keyword and description calls need none): what the commands
// and the tests that build a client use.
Result<std::unique_ptr<llm::Client>> make_client(const core::Config& config, const data::Dataset* dataset = nullptr,
                                                 llm::ClientOptions options = {});

}  // namespace nl2sql::sim
