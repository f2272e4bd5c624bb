// Execution clusters of a candidate pool: candidates grouped by the result they return on the
// question's database, under the relaxed equality (rows whose cells are all NULL dropped, rows
// compared as sets of cells, the result as a set of rows — see eval::relaxed_equal) or the exact
// BIRD equality (rows as ordered tuples, the result as a set of rows). Candidates without a
// successful execution belong to no cluster. Clusters are ordered by size (largest first), then
// by their representative's rank; the representative of a cluster is its member whose generator
// comes first in the configured generator order, then the shortest SQL, then the first in the
// pool. Every selector builds on this ordering, so ties break the same way everywhere.
// Pure functions; thread-safe.
#pragma once

#include <string>
#include <vector>

#include "nl2sql/db/executor.h"
#include "nl2sql/db/value.h"
#include "nl2sql/select/selector.h"

namespace nl2sql::select {

enum class ResultEquality { kRelaxed, kExact };

struct Cluster {
  std::vector<int> members;  // indices into the pool, in pool order
  int representative = -1;
};

struct PoolClusters {
  std::vector<Cluster> clusters;  // largest first
  std::vector<int> cluster_of;    // per candidate: index into clusters, -1 when not executable
  size_t executable = 0;          // candidates that belong to a cluster
};

// A byte key equal for two results exactly when they are equal under `equality`.
std::string result_key(const db::ResultSet& result, ResultEquality equality);
// The same for an execution, read from its digest (db/result_digest.h) when the executor hashed
// it past QueryLimits::hash_rows_after, else from the digest of its rows: a result that keeps
// only its first rows gets the key its whole answer would. The key (the hash of the sorted set
// of row keys) differs from result_key(ResultSet)'s: compare keys of one kind only. Two
// results unequal under `equality` share a key only on a 128-bit hash collision.
std::string result_key(const db::ExecutionResult& execution, ResultEquality equality);

// Rank of a candidate for deterministic tie-breaks: (position of its generator in
// `generator_order`, unknown generators last; SQL length; pool index). Smaller is better.
struct CandidateRank {
  size_t generator = 0;
  size_t sql_length = 0;
  int index = 0;
  auto operator<=>(const CandidateRank&) const = default;
};
CandidateRank candidate_rank(const std::vector<PoolCandidate>& pool, int index,
                             const std::vector<std::string>& generator_order);

PoolClusters cluster_pool(const std::vector<PoolCandidate>& pool, ResultEquality equality,
                          const std::vector<std::string>& generator_order);

// True when the candidate has a result that executed successfully.
bool executable(const PoolCandidate& candidate);

}  // namespace nl2sql::select
