// Which questions a run covers: `--questions 0-99,120` (indices into the split, in file order),
// `--sample N --seed S` (a seeded sample, kept in file order), `--db ID` (only that database's
// questions) and `--shard I/N` (a deterministic slice: the i-th selected question belongs to
// shard i mod N, so shards get a similar mix of databases and their union is the unsharded run).
// Applied in that order. Pure functions; errors name the flag and the bad part.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "nl2sql/core/status.h"
#include "nl2sql/data/dataset.h"

namespace nl2sql::pipeline {

struct Shard {
  size_t index = 0;  // 0-based
  size_t count = 1;
};

struct QuestionFilter {
  std::string ranges;                 // "0-99,120" (inclusive); empty: all
  std::optional<size_t> sample;       // keep this many, chosen with `seed`
  uint64_t seed = 0;
  std::string db_id;                  // empty: every database
  std::optional<Shard> shard;
};

// "I/N" with 0 <= I < N.
Result<Shard> parse_shard(const std::string& text);
// "0-99,120,200-210" → sorted unique indices; each must be < `count`.
Result<std::vector<size_t>> parse_ranges(const std::string& text, size_t count);

// Positions into ds.questions, in file order. `ranges` count positions in the question file
// (Question::index), before questions whose database is missing are set aside, so they name the
// same questions whatever databases a machine has.
Result<std::vector<size_t>> select_questions(const data::Dataset& ds, const QuestionFilter& filter);

// The set-aside questions (database missing) that the filter's ranges and --db would have
// picked: a run lists them in report.json with the reason.
std::vector<data::SkippedQuestion> skipped_in_selection(const data::Dataset& ds, const QuestionFilter& filter);

}  // namespace nl2sql::pipeline
