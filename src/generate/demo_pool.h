// Demonstrations chosen per question by similarity (the dc and qp generators' few-shot pairs).
// A DemoPool holds the (question, SQL) pairs of a train split (or a JSONL file), each with its
// masked question and the schema words its SQL uses, computed once when the pool is built. For
// the question under evaluation, every pair is scored
//
//   score = (1 - schema_weight) * J(masked question tokens) + schema_weight * J(schema words)
//
// where J is the Jaccard index of two sets. A masked question is its lower-case word tokens with
// quoted literals and capitalised words inside the sentence replaced by <val>, numbers by <num>
// and words naming a table or column of the pair's own database by <sch> (a plural "s"/"es"
// stripped to match), so "How many singers are from France?" and "How many teams are from
// 1990?" share the shape words. The schema words of the question under evaluation are the
// schema words it mentions; those of a pair are the words of the tables and columns its SQL
// reads (schema linking, as SSEV's pruning). Pairs are ranked by score, ties by file order —
// deterministic — and chosen one per database first (see choose()). The pair with the same question text is never chosen, and with
// exclude_same_db (the default) no pair of the question's own database is, so a pool that is
// the evaluated split itself cannot show a question's neighbours' gold.
//
// Built once per run; immutable afterwards except the memo of QP plans, which a mutex guards.
// rank() and qp_demos() may run on many threads at once.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "nl2sql/core/status.h"
#include "nl2sql/data/dataset.h"
#include "nl2sql/db/executor.h"
#include "qp_demos.h"

namespace nl2sql::generate {

struct DemoPoolOptions {
  size_t count = 3;            // demonstrations per question
  double schema_weight = 0.3;  // weight of the schema-word overlap; the masked question gets the rest
  bool exclude_same_db = true;
};

// The masked tokens of `question` (sorted, unique) given the schema words of its database.
std::vector<std::string> masked_question(const std::string& question, const std::set<std::string>& schema_words);
// The schema words the question mentions (a token that matches after plural stripping is given
// as the schema's word).
std::set<std::string> mentioned_schema_words(const std::string& question, const std::set<std::string>& schema_words);
// Lower-case words of table and column names (split at non-alphanumerics and camelCase).
std::set<std::string> schema_words_of(const data::Schema& schema);
std::set<std::string> name_words(const std::string& name);

struct ScoredDemo {
  size_t index = 0;  // into DemoPool::pairs()
  double score = 0, question_similarity = 0, schema_similarity = 0;
};

class DemoPool {
 public:
  // Reads the source and precomputes every pair's masked question and schema words. Pairs whose
  // database cannot be inspected are dropped (counted in dropped()).
  static Result<std::shared_ptr<const DemoPool>> build(const QpDemoSource& source, DemoPoolOptions options);
  // For tests: a pool over given pairs.
  static Result<std::shared_ptr<const DemoPool>> from_pairs(std::vector<DemoPair> pairs, DemoPoolOptions options);

  const std::vector<DemoPair>& pairs() const { return pairs_; }
  const DemoPoolOptions& options() const { return options_; }
  size_t dropped() const { return dropped_; }

  // Every eligible pair for the question, best first (eligibility: see the header paragraph).
  std::vector<ScoredDemo> rank(const data::Task& question, const data::Schema& schema) const;
  // The best `count` pairs as (question, hint, SQL) demonstrations, one per database first:
  // the best pair of each database in rank order, then the others in rank order (so three
  // near-copies from one database do not crowd out the next-best schema).
  std::vector<ScoredDemo> choose(const data::Task& question, const data::Schema& schema) const;
  // The best `count` pairs that plan, in the same order as choose(), as QP demonstrations (plans memoized); `chosen`, when
  // given, receives their scores.
  std::vector<QpDemo> qp_demos(const data::Task& question, const data::Schema& schema, const db::Executor& executor,
                               std::vector<ScoredDemo>* chosen = nullptr) const;

 private:
  DemoPool() = default;
  std::vector<ScoredDemo> diverse(std::vector<ScoredDemo> ranked) const;
  std::vector<DemoPair> pairs_;
  std::vector<std::vector<std::string>> masked_;     // per pair, sorted unique
  std::vector<std::vector<std::string>> sql_words_;  // per pair, sorted unique
  std::vector<std::string> normalized_question_;     // per pair: lower-case, spaces squashed
  DemoPoolOptions options_;
  size_t dropped_ = 0;
  mutable std::mutex plans_mu_;
  mutable std::map<size_t, std::optional<QpDemo>> plans_;  // guarded by plans_mu_; nullopt: does not plan
};

// Demonstrations as the dc prompt shows them ("" when there are none).
std::string format_similar_demos(const DemoPool& pool, const std::vector<ScoredDemo>& chosen);
// "demos: N similar pair(s) from the pool: db/id (score) …", the note on a candidate's reasoning.
std::string demo_note(const DemoPool& pool, const std::vector<ScoredDemo>& chosen);

}  // namespace nl2sql::generate
