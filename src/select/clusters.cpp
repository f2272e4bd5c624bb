// Execution clusters: canonical result keys, then grouping and the shared tie-break order.
#include "nl2sql/select/clusters.h"

#include <algorithm>
#include <map>
#include <memory>
#include <set>
#include <string_view>
#include <vector>

#include "nl2sql/core/hash.h"
#include "nl2sql/db/result_compare.h"
#include "nl2sql/db/result_digest.h"

namespace nl2sql::select {
namespace {

void append_field(std::string& out, const std::string& field) {
  // Length-prefixed, so concatenations of different splits never collide.
  out += std::to_string(field.size());
  out += ':';
  out += field;
}

}  // namespace

std::string result_key(const db::ResultSet& result, ResultEquality equality) {
  std::set<std::string> rows;
  std::vector<std::string> cells;
  for (const auto& row : result.rows) {
    cells.clear();
    for (const auto& v : row) cells.push_back(db::python_key(v));
    if (equality == ResultEquality::kRelaxed) {
      bool all_null = std::all_of(row.begin(), row.end(), [](const db::Value& v) { return v.is_null(); });
      if (all_null) continue;
      std::sort(cells.begin(), cells.end());
      cells.erase(std::unique(cells.begin(), cells.end()), cells.end());
    }
    std::string k;
    for (const auto& c : cells) append_field(k, c);
    rows.insert(std::move(k));
  }
  std::string key;
  for (const auto& r : rows) append_field(key, r);
  return key;
}

std::string result_key(const db::ExecutionResult& execution, ResultEquality equality) {
  return execution.derived_keys.get(static_cast<int>(equality), [&] {
    std::shared_ptr<const db::ResultDigest> own;
    const db::ResultDigest* d = execution.digest.get();
    if (!d) {
      own = std::make_shared<const db::ResultDigest>(db::digest_of(execution.result));
      d = own.get();
    }
    static const db::Hash128 kNull = [] {
      db::ResultSet one;
      one.rows.push_back({db::Value::null()});
      return db::digest_of(one).cell(0, 0);
    }();
    // The same rule as result_key(ResultSet), on hashes: each row is the 128-bit hash of its
    // cells' hashes (cell(): the bytes as stored, as python_key reads them; relaxed: sorted and
    // unique, an all-NULL row dropped), and the key is the hash of the sorted set of those.
    std::vector<db::Hash128> rows;
    rows.reserve(d->rows());
    std::vector<db::Hash128> cells;
    for (size_t r = 0; r < d->rows(); ++r) {
      cells.clear();
      for (size_t c = 0; c < d->columns(); ++c) cells.push_back(d->cell(r, c));
      if (equality == ResultEquality::kRelaxed) {
        if (std::all_of(cells.begin(), cells.end(), [](const db::Hash128& h) { return h == kNull; })) continue;
        std::sort(cells.begin(), cells.end());
        cells.erase(std::unique(cells.begin(), cells.end()), cells.end());
      }
      rows.push_back(db::hash_bytes(cells.data(), cells.size() * sizeof(db::Hash128)));
    }
    std::sort(rows.begin(), rows.end());
    rows.erase(std::unique(rows.begin(), rows.end()), rows.end());
    core::KeyHasher h;
    for (const auto& r : rows)
      h.add(std::string_view(reinterpret_cast<const char*>(&r), sizeof r));  // length-prefixed fields
    return h.hex();
  });
}

bool executable(const PoolCandidate& candidate) {
  return candidate.result != nullptr && candidate.result->ok();
}

CandidateRank candidate_rank(const std::vector<PoolCandidate>& pool, int index,
                             const std::vector<std::string>& generator_order) {
  const auto& c = pool[static_cast<size_t>(index)];
  auto it = std::find(generator_order.begin(), generator_order.end(), c.generator);
  return {static_cast<size_t>(it - generator_order.begin()), c.sql.size(), index};
}

PoolClusters cluster_pool(const std::vector<PoolCandidate>& pool, ResultEquality equality,
                          const std::vector<std::string>& generator_order) {
  PoolClusters out;
  out.cluster_of.assign(pool.size(), -1);
  std::map<std::string, size_t> by_key;
  std::vector<Cluster> clusters;
  for (size_t i = 0; i < pool.size(); ++i) {
    if (!executable(pool[i])) continue;
    ++out.executable;
    auto key = result_key(*pool[i].result, equality);
    auto [it, fresh] = by_key.emplace(std::move(key), clusters.size());
    if (fresh) clusters.emplace_back();
    clusters[it->second].members.push_back(static_cast<int>(i));
  }
  for (auto& c : clusters) {
    c.representative = *std::min_element(c.members.begin(), c.members.end(), [&](int a, int b) {
      return candidate_rank(pool, a, generator_order) < candidate_rank(pool, b, generator_order);
    });
  }
  std::stable_sort(clusters.begin(), clusters.end(), [&](const Cluster& a, const Cluster& b) {
    if (a.members.size() != b.members.size()) return a.members.size() > b.members.size();
    return candidate_rank(pool, a.representative, generator_order) <
           candidate_rank(pool, b.representative, generator_order);
  });
  for (size_t k = 0; k < clusters.size(); ++k)
    for (int m : clusters[k].members) out.cluster_of[static_cast<size_t>(m)] = static_cast<int>(k);
  out.clusters = std::move(clusters);
  return out;
}

}  // namespace nl2sql::select
