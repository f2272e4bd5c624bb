// The `sim` provider: an offline, deterministic stand-in for a model, derived from gold SQL.
// It exists for dry runs, CI of the pipeline itself and studies of selection methods when no
// model is available; every answer is labelled provider = "sim" and reports must say so.
//
// It answers in the formats a real model would, so the same parsers run:
//   kGenerate / kFix   a sentence of reasoning, then a ```sql fenced block
//   kSelectPair        reasoning, then a ```json block {"winner": "A"|"B"}
//   kRank              reasoning, then a ```json block {"ranking": [i, j, …]} (0-based, best first)
//   kNlEval            reasoning, then a ```text block with the answer rows (one per line)
//   kKeywords          bare JSON {"keywords": [...]} (as prompts/extract_keywords.txt asks)
//   kColumnFilter      a ```json block {"relevant": true|false}
//   kLedger            a ```json fact sheet derived from the gold SQL's tables and clauses
//   kPlan              a ```json block {"steps": [...], "expected_columns": [...]} from gold
//   kPlanCritique      a ```json block {"approved", "issues"}: rejects a plan missing a gold table
//   kSqlCritique       a ```json block {"approved", "issues"}: right w.p. p_sel; a rejection of a
//                      wrong query names a real difference against gold (table, join, condition…)
//   kValidate          a ```json block {"valid_result", "columns_not_needed", "result_empty",
//                      "suggest_fix"}; valid iff the caller says the result equals gold's
// Randomness: every draw comes from a SplitMix64 stream seeded by a hash of
// (sim.seed, task, question id, generator, sample index), so a rerun is identical bit for bit.
// Thread-safe: answer() is a pure function of its inputs.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "nl2sql/core/status.h"
#include "nl2sql/llm/profile.h"
#include "nl2sql/llm/types.h"

namespace nl2sql::llm {

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
class SimRng {
 public:
  explicit SimRng(uint64_t seed) : state_(seed) {}
  uint64_t next_u64();
  double uniform();                 // [0, 1)
  uint64_t below(uint64_t n);       // [0, n), n > 0
 private:
  uint64_t state_;
};

// Applies `mistake` to `sql` with simple text transformations. nullopt when it does not apply
// (e.g. no WHERE to drop from, no aggregate to swap).
std::optional<std::string> apply_mistake(const std::string& sql, SqlMistake mistake,
                                         SimRng& rng);
// Draws a mistake (uniformly, falling back through the taxonomy until one applies; a syntax
// error always applies). Returns the mutated SQL and which mistake it is.
std::pair<std::string, SqlMistake> mutate_sql(const std::string& sql, SimRng& rng);

class SimProvider {
 public:
  explicit SimProvider(SimSettings settings) : settings_(std::move(settings)) {}
  // The answer to `request` (its `sim` context). Invalid context (e.g. kGenerate without
  // gold SQL) is a kInvalidInput error naming the question.
  Result<ChatResponse> answer(const ChatRequest& request) const;
  const SimSettings& settings() const { return settings_; }

 private:
  SimSettings settings_;
};

}  // namespace nl2sql::llm
