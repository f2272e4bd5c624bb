// Result digests and the evaluators' equalities on them (see result_digest.h). Each function
// follows its exact counterpart in result_compare.cpp step by step, with a value's Python key
// replaced by the key's 128-bit hash and a row's key by the hash of its cells' hashes.
#include "nl2sql/db/result_digest.h"

#include <algorithm>
#include <cstddef>
#include <functional>
#include <unordered_map>
#include <unordered_set>

#include <xxhash.h>

#include "nl2sql/core/files.h"
#include "nl2sql/db/result_compare.h"

namespace nl2sql::db {

Hash128 hash_bytes(const void* p, size_t n) {
  const XXH128_hash_t h = XXH3_128bits(p, n);
  return {h.low64, h.high64};
}

namespace {

struct HashOf {
  size_t operator()(const Hash128& h) const { return static_cast<size_t>(h.lo); }
};
using HashSet = std::unordered_set<Hash128, HashOf>;

// A row's key: the hash of its cells' hashes in the given order. Equal iff every cell is
// (up to a collision), as the concatenated self-delimiting Python keys are.
template <class CellAt>
Hash128 row_hash(size_t columns, CellAt cell_at) {
  Hash128 local[8];
  std::vector<Hash128> heap;
  Hash128* cells = local;
  if (columns > 8) {
    heap.resize(columns);
    cells = heap.data();
  }
  for (size_t c = 0; c < columns; ++c) cells[c] = cell_at(c);
  return hash_bytes(cells, columns * sizeof(Hash128));
}

const Hash128& null_hash() {
  static const Hash128 h = [] {
    std::string k;
    append_python_key(k, Value::null());
    return hash_bytes(k.data(), k.size());
  }();
  return h;
}

}  // namespace

void ResultDigest::add(const Row& row) {
  const size_t first = cells_.size();
  for (const auto& v : row) {
    buf_.clear();
    append_python_key(buf_, v);
    cells_.push_back(hash_bytes(buf_.data(), buf_.size()));
  }
  // Spider's view of the row: text that is not UTF-8 loses its invalid bytes.
  const Row* view = &row;
  Row decoded;
  for (size_t c = 0; c < row.size(); ++c) {
    const Value& v = row[c];
    if (v.type != ValueType::kText || core::is_valid_utf8(v.s)) continue;
    if (!invalid_utf8_) {
      invalid_utf8_ = true;
      ts_cells_.assign(cells_.begin(), cells_.begin() + static_cast<std::ptrdiff_t>(first));
    }
    if (view == &row) {
      decoded = row;
      view = &decoded;
    }
    decoded[c] = Value::text(drop_invalid_utf8(v.s));
  }
  if (invalid_utf8_) {
    for (const auto& v : *view) {
      buf_.clear();
      append_python_key(buf_, v);
      ts_cells_.push_back(hash_bytes(buf_.data(), buf_.size()));
    }
  }
  // Quick-reject key: cells ordered by Python's str(value) + str(type(value)). Cells with equal
  // sort keys have equal Python keys, so the order among them does not matter.
  std::vector<std::pair<std::string, size_t>> order;
  order.reserve(view->size());
  for (size_t c = 0; c < view->size(); ++c) order.emplace_back(spider_sort_key((*view)[c]), c);
  std::stable_sort(order.begin(), order.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  const Hash128* ts = invalid_utf8_ ? ts_cells_.data() + first : cells_.data() + first;
  ts_sorted_.push_back(row_hash(order.size(), [&](size_t i) { return ts[order[i].second]; }));
  if (columns_ == 0 && rows_ == 0) columns_ = row.size();
  ++rows_;
}

Hash128 ResultDigest::row_key(size_t row) const {
  return row_hash(columns_, [&](size_t c) { return cell(row, c); });
}

std::vector<size_t> ResultDigest::first_occurrences() const {
  HashSet seen;
  std::vector<size_t> first;
  for (size_t r = 0; r < rows_; ++r)
    if (seen.insert(row_key(r)).second) first.push_back(r);
  return first;
}

ResultDigest ResultDigest::rows_at(const std::vector<size_t>& rows) const {
  ResultDigest out(columns_);
  out.invalid_utf8_ = invalid_utf8_;
  out.rows_ = rows.size();
  out.cells_.reserve(rows.size() * columns_);
  out.ts_sorted_.reserve(rows.size());
  if (invalid_utf8_) out.ts_cells_.reserve(rows.size() * columns_);
  for (size_t r : rows) {
    const auto from = static_cast<std::ptrdiff_t>(r * columns_);
    const auto to = from + static_cast<std::ptrdiff_t>(columns_);
    out.cells_.insert(out.cells_.end(), cells_.begin() + from, cells_.begin() + to);
    if (invalid_utf8_) out.ts_cells_.insert(out.ts_cells_.end(), ts_cells_.begin() + from, ts_cells_.begin() + to);
    out.ts_sorted_.push_back(ts_sorted_[r]);
  }
  return out;
}

ResultDigest digest_of(const ResultSet& r) {
  ResultDigest d(r.rows.empty() ? r.columns.size() : r.rows[0].size());
  for (const auto& row : r.rows) d.add(row);
  return d;
}

bool bird_equal(const ResultDigest& pred, const ResultDigest& gold) {
  if (pred.invalid_utf8() || gold.invalid_utf8()) return false;
  auto rows = [](const ResultDigest& d) {
    HashSet out;
    out.reserve(d.rows());
    for (size_t r = 0; r < d.rows(); ++r)
      out.insert(row_hash(d.columns(), [&](size_t c) { return d.cell(r, c); }));
    return out;
  };
  const auto p = rows(pred);
  const auto g = rows(gold);
  if (p.size() != g.size()) return false;
  for (const auto& h : p)
    if (!g.count(h)) return false;
  return true;
}

bool spider_ts_equal(const ResultDigest& gold, const ResultDigest& pred, bool order_matters) {
  if (gold.rows() == 0 && pred.rows() == 0) return true;
  if (gold.rows() != pred.rows()) return false;
  const size_t ncols = gold.columns();
  if (pred.columns() != ncols) return false;
  const size_t n = gold.rows();

  // Quick reject on the per-row sorted cells.
  if (order_matters) {
    for (size_t r = 0; r < n; ++r)
      if (!(gold.ts_sorted_row(r) == pred.ts_sorted_row(r))) return false;
  } else {
    HashSet a, b;
    for (size_t r = 0; r < n; ++r) {
      a.insert(gold.ts_sorted_row(r));
      b.insert(pred.ts_sorted_row(r));
    }
    if (a != b) return false;
  }

  // For each gold column, the prediction's columns whose every value occurs in it.
  std::vector<HashSet> gold_cols(ncols);
  for (size_t r = 0; r < n; ++r)
    for (size_t c = 0; c < ncols; ++c) gold_cols[c].insert(gold.ts_cell(r, c));
  std::vector<std::vector<size_t>> candidates(ncols);
  for (size_t c1 = 0; c1 < ncols; ++c1)
    for (size_t c2 = 0; c2 < ncols; ++c2) {
      bool ok = true;
      for (size_t r = 0; r < n && ok; ++r) ok = gold_cols[c1].count(pred.ts_cell(r, c2)) > 0;
      if (ok) candidates[c1].push_back(c2);
    }

  std::vector<Hash128> gold_rows(n);
  for (size_t r = 0; r < n; ++r) gold_rows[r] = row_hash(ncols, [&](size_t c) { return gold.ts_cell(r, c); });
  std::unordered_map<Hash128, long, HashOf> gold_counts;
  if (!order_matters)
    for (const auto& k : gold_rows) ++gold_counts[k];

  std::vector<size_t> perm(ncols);
  std::vector<bool> used(ncols, false);
  auto check = [&]() {
    if (order_matters) {
      for (size_t r = 0; r < n; ++r)
        if (!(row_hash(ncols, [&](size_t i) { return pred.ts_cell(r, perm[i]); }) == gold_rows[r])) return false;
      return true;
    }
    auto counts = gold_counts;
    for (size_t r = 0; r < n; ++r) {
      auto it = counts.find(row_hash(ncols, [&](size_t i) { return pred.ts_cell(r, perm[i]); }));
      if (it == counts.end() || --it->second < 0) return false;
    }
    return true;
  };
  std::function<bool(size_t)> search = [&](size_t i) -> bool {
    if (i == ncols) return check();
    for (size_t c2 : candidates[i]) {
      if (used[c2]) continue;
      used[c2] = true;
      perm[i] = c2;
      const bool found = search(i + 1);
      used[c2] = false;
      if (found) return true;
    }
    return false;
  };
  return search(0);
}

bool relaxed_equal(const ResultDigest& pred, const ResultDigest& gold) {
  auto set_of_sets = [](const ResultDigest& d) {
    HashSet out;
    std::vector<Hash128> cells;
    for (size_t r = 0; r < d.rows(); ++r) {
      cells.clear();
      bool all_null = true;
      for (size_t c = 0; c < d.columns(); ++c) {
        cells.push_back(d.cell(r, c));
        all_null = all_null && cells.back() == null_hash();
      }
      if (all_null) continue;
      std::sort(cells.begin(), cells.end());
      cells.erase(std::unique(cells.begin(), cells.end()), cells.end());
      out.insert(hash_bytes(cells.data(), cells.size() * sizeof(Hash128)));
    }
    return out;
  };
  return set_of_sets(pred) == set_of_sets(gold);
}

double soft_f1(const ResultDigest& pred_in, const ResultDigest& gold_in) {
  if (pred_in.rows() == 0 && gold_in.rows() == 0) return 1.0;
  auto dedupe = [](const ResultDigest& d) {
    std::vector<std::vector<Hash128>> rows;
    HashSet seen;
    for (size_t r = 0; r < d.rows(); ++r) {
      if (!seen.insert(row_hash(d.columns(), [&](size_t c) { return d.cell(r, c); })).second) continue;
      std::vector<Hash128> keys;
      for (size_t c = 0; c < d.columns(); ++c) keys.push_back(d.cell(r, c));
      rows.push_back(std::move(keys));
    }
    return rows;
  };
  const auto pred = dedupe(pred_in);
  const auto gold = dedupe(gold_in);
  double tp = 0, fp = 0, fn = 0;
  for (size_t i = 0; i < gold.size(); ++i) {
    if (i >= pred.size()) {
      fn += 1;
      continue;
    }
    const auto& p = pred[i];
    const auto& g = gold[i];
    const double width = static_cast<double>(g.size());
    if (width == 0) continue;
    double match = 0, pred_only = 0, truth_only = 0;
    for (const auto& v : p) {
      if (std::find(g.begin(), g.end(), v) != g.end()) match += 1; else pred_only += 1;
    }
    for (const auto& v : g)
      if (std::find(p.begin(), p.end(), v) == p.end()) truth_only += 1;
    tp += match / width;
    fp += pred_only / width;
    fn += truth_only / width;
  }
  if (pred.size() > gold.size()) fp += static_cast<double>(pred.size() - gold.size());
  const double precision = tp + fp > 0 ? tp / (tp + fp) : 0.0;
  const double recall = tp + fn > 0 ? tp / (tp + fn) : 0.0;
  return precision + recall > 0 ? 2 * precision * recall / (precision + recall) : 0.0;
}

bool contains_gold(const ResultDigest& pred, const ResultDigest& gold) {
  if (gold.rows() == 0 || pred.rows() == 0) return false;
  const size_t gc = gold.columns(), pc = pred.columns();
  if (pc < gc) return false;
  if (bird_equal(pred, gold)) return false;
  std::vector<HashSet> pred_cols(pc);
  for (size_t r = 0; r < pred.rows(); ++r)
    for (size_t c = 0; c < pc; ++c) pred_cols[c].insert(pred.cell(r, c));
  std::vector<std::vector<size_t>> candidates(gc);
  for (size_t g = 0; g < gc; ++g) {
    for (size_t p = 0; p < pc; ++p) {
      bool ok = true;
      for (size_t r = 0; r < gold.rows() && ok; ++r) ok = pred_cols[p].count(gold.cell(r, g)) > 0;
      if (ok) candidates[g].push_back(p);
    }
    if (candidates[g].empty()) return false;
  }
  HashSet gold_rows;
  for (size_t r = 0; r < gold.rows(); ++r)
    gold_rows.insert(row_hash(gc, [&](size_t c) { return gold.cell(r, c); }));
  std::vector<size_t> map(gc);
  std::vector<bool> used(pc, false);
  size_t budget = 10000;  // mappings tried at most, as the exact function
  std::function<bool(size_t)> search = [&](size_t i) -> bool {
    if (budget == 0) return false;
    if (i == gc) {
      --budget;
      HashSet projected;
      for (size_t r = 0; r < pred.rows(); ++r)
        projected.insert(row_hash(gc, [&](size_t g) { return pred.cell(r, map[g]); }));
      for (const auto& k : gold_rows)
        if (!projected.count(k)) return false;
      return true;
    }
    for (size_t p : candidates[i]) {
      if (used[p]) continue;
      used[p] = true;
      map[i] = p;
      const bool found = search(i + 1);
      used[p] = false;
      if (found) return true;
    }
    return false;
  };
  return search(0);
}

}  // namespace nl2sql::db
