// Value and column retrieval for one question: which stored values and which columns the
// question (and its evidence) talks about.
//
// Keywords come from a heuristic (extract_keywords): quoted strings, evidence comparisons
// (`= 'x'`), capitalised spans, numbers and the word 1..3-grams of the question and evidence that
// are not all stop words. An LLM keyword list (prompts/extract_keywords.txt) can be merged in by
// the caller through RetrievalOptions::extra_keywords.
//
// Values: each keyword is normalized, its candidates (ValueIndex::candidates: the LSH bands plus
// the deletion neighbourhood of short values) are re-ranked by normalized edit distance over code
// points, and a value's score is its best similarity to any keyword. Values at or above min_similarity are kept, at most per_column per column, then ranked
// over all columns (score, then shorter value, then id) and cut to max_values. The exhaustive
// variant scores every indexed value against every keyword: the baseline the LSH is measured
// against, identical otherwise.
//
// Columns: a keyword matches a column when it is similar to the column's name or display name
// (underscores read as spaces) or occurs as a whole word in its description.
//
// All functions are pure given the index; thread-safe.
#pragma once

#include <string>
#include <vector>

#include "nl2sql/context/value_index.h"
#include "nl2sql/data/dataset.h"

namespace nl2sql::context {

struct Keyword {
  std::string text;
  std::string source;  // quoted | evidence | capitalized | number | ngram | extra | llm
};

// True when every word of `keyword` is a stop word ("How", "the", "how many", "name"): such a
// keyword matches stored values only by accident, so keywords from a model are dropped by it.
bool only_stop_words(const std::string& keyword);

// Deduplicated by normalized text; the first source found wins. Deterministic order.
std::vector<Keyword> extract_keywords(const std::string& question, const std::string& evidence,
                                      int max_ngram = 3);

struct RetrievalOptions {
  double min_similarity = 0.6;  // normalized edit similarity a value needs
  size_t per_column = 5;        // best values kept per column
  size_t max_values = 20;       // values returned over all columns
  double min_column_score = 0.8;
  size_t max_columns = 10;
  bool exhaustive = false;      // score every value (baseline), not just LSH candidates
  bool short_values = true;     // add the short-value index's candidates to the LSH ones
  bool match_columns = true;
  std::vector<std::string> extra_keywords;  // e.g. from the LLM; merged after the heuristic ones
  std::string extra_source = "extra";       // Keyword::source of the extra keywords ("llm", …)
};

struct ValueMatch {
  std::string table, column, value;
  double score = 0;
  std::string keyword;  // the keyword that scored best
  uint32_t value_id = 0;
};

struct ColumnMatch {
  std::string table, column;
  double score = 0;
  std::string keyword;
  std::string via;  // name | description
};

struct Retrieval {
  std::vector<Keyword> keywords;
  std::vector<ValueMatch> values;    // best first
  std::vector<ColumnMatch> columns;  // best first
  size_t candidates_scored = 0;      // edit distances computed
};

Retrieval retrieve(const ValueIndex& index, const data::Schema& schema, const std::string& question,
                   const std::string& evidence, const RetrievalOptions& options = {});

}  // namespace nl2sql::context
