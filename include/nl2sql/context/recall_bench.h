// The value-retrieval recall benchmark (scripts/bench/context_recall.sh, `nl2sql retrieve
// --recall`): how often retrieval puts a value the gold SQL compares a column with among its top
// k values. A case is a (question, column, literal) where the gold SQL writes `column =
// 'literal'` and the literal is stored in that column. Three ways of finding candidates are
// compared on the same keywords: the index as retrieval uses it (LSH bands + short values), the
// bands alone, and the exhaustive scan. With `typos`, every case whose literal is written in the
// question or the evidence is asked again with a one-letter typo of each kind (deletion,
// substitution, insertion, transposition): as written, lowercased, and alone as a one-keyword
// question. Times are the thread CPU time of each retrieve() call.
//
// This is a measurement, not a stage: it reads gold (data::Question::gold_sql) to build its
// cases, and no stage calls it.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "nl2sql/context/retrieve.h"
#include "nl2sql/context/value_index.h"
#include "nl2sql/core/status.h"
#include "nl2sql/data/dataset.h"
#include "nl2sql/db/executor.h"

namespace nl2sql::context {

struct RecallBenchOptions {
  std::vector<std::string> dbs;  // empty: every database of the dataset
  size_t max_questions = 0;      // 0: all; else stop after this many questions with cases
  bool typos = false;
  bool exhaustive_baseline = true;  // off for timing runs at scale (seconds a question)
  IndexOptions index;
  RetrievalOptions retrieval;  // max_values, match_columns and the mode flags are set per mode
  // One line per case the index misses at k = 20 (and per typo missed at k = 10); null: none.
  std::function<void(const std::string&)> on_miss;
};

// One way of finding candidates, over one set of asks.
struct RecallTally {
  size_t cases = 0;
  std::vector<size_t> hits = std::vector<size_t>(3, 0);  // at k = 5, 10, 20
  double wall_seconds = 0;
  double cpu_seconds = 0;
  std::vector<double> cpu_ms;  // per retrieve() call
  size_t edit_distances = 0;
  double recall(size_t k_index) const;
  nlohmann::json to_json() const;
};

struct RecallBench {
  static constexpr size_t kKs[] = {5, 10, 20};
  std::vector<std::string> modes;  // "index", "lsh_only" and, with the baseline, "exhaustive"
  // [set][mode]: set 0 the literals as asked, 1 typos as written, 2 typos lowercased, 3 the typo
  // alone as the whole question.
  std::vector<std::vector<RecallTally>> sets;
  size_t questions = 0, pairs = 0, unindexed_pairs = 0;
  size_t typo_pairs = 0, pairs_not_in_text = 0;
  std::map<std::string, size_t> typo_kinds;
  bool typos = false;

  // exhaustive / index query CPU time over the literals as asked (0 without the baseline).
  double time_ratio() const;
  // The layout scripts/bench/context_recall.sh and the slow tests read.
  nlohmann::json to_json() const;
  // The human-readable summary `nl2sql retrieve --recall` prints.
  std::string summary() const;
};

Result<RecallBench> run_recall_bench(const data::Dataset& ds, const RecallBenchOptions& options,
                                     const db::Executor& executor);

// `col = 'literal'` / `col = "literal"` comparisons in a SQL text (qualified or quoted column
// names allowed; doubled quotes inside the literal undone). Exposed for tests.
struct ColumnLiteral {
  std::string column, literal;
};
std::vector<ColumnLiteral> column_literal_comparisons(const std::string& sql);

// One one-letter typo of `literal` of the given kind (0 deletion, 1 substitution, 2 insertion,
// 3 adjacent transposition) at a letter drawn from `seed`; nothing when the literal has fewer
// than three code points or two letters, or when the typo normalizes to the literal itself.
std::optional<std::string> make_typo(const std::string& literal, int kind, uint64_t seed);

}  // namespace nl2sql::context
