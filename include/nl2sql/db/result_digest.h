// ResultDigest: a result set reduced to 128-bit hashes of its values, so that the evaluators'
// equalities (result_compare.h) can be decided on results too large to keep in memory.
//
// Every value becomes the XXH3-128 hash of its Python-equality key (python_key: 1 and 1.0 hash
// alike, '1' and 1 apart, text apart from blob); a row is the list of its cells' hashes, in
// column order, plus the hash of the Spider quick-reject key (the row's cells sorted by
// spider_sort_key). Memory is 16 bytes per cell plus 16 per row, whatever the values' sizes.
// The functions below apply the same rules as the exact ones in result_compare.h to these
// hashes; two different keys share a hash with probability about 2^-128 per pair, so a verdict
// differs from the exact one only on such a collision. Tests check them against the exact
// functions on tricky and random pairs (tests/db/result_digest_test.cpp).
//
// Text that is not valid UTF-8 is handled as each evaluator does: bird scores it 0, spider-ts
// reads Python's decode(errors="ignore") view (kept as a second set of cell hashes, only once
// such text has been seen), relaxed and Soft-F1 read the bytes as stored.
//
// Built row by row (add), so an executor can hash a result as SQLite produces it and keep no
// row. Not thread-safe while being built; const member functions are safe to share.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "nl2sql/db/value.h"

namespace nl2sql::db {

struct Hash128 {
  uint64_t lo = 0, hi = 0;
  bool operator==(const Hash128& o) const { return lo == o.lo && hi == o.hi; }
  bool operator<(const Hash128& o) const { return hi != o.hi ? hi < o.hi : lo < o.lo; }
};

class ResultDigest {
 public:
  explicit ResultDigest(size_t columns = 0) : columns_(columns) {}
  // Appends one row (its size must equal columns()).
  void add(const Row& row);

  size_t rows() const { return rows_; }
  size_t columns() const { return columns_; }
  bool invalid_utf8() const { return invalid_utf8_; }
  // Hash of the Python key of the value at (row, column), as stored.
  const Hash128& cell(size_t row, size_t column) const { return cells_[row * columns_ + column]; }
  // The same cell as the Spider test-suite evaluator reads it (invalid UTF-8 bytes dropped).
  const Hash128& ts_cell(size_t row, size_t column) const {
    return invalid_utf8_ ? ts_cells_[row * columns_ + column] : cell(row, column);
  }
  // Hash of the row's Spider quick-reject key (its decoded cells sorted by spider_sort_key).
  const Hash128& ts_sorted_row(size_t row) const { return ts_sorted_[row]; }
  // The first row of each set of equal rows, in order: rows are equal when every value's cell
  // is (up to a collision), which is SQLite's DISTINCT equality under the BINARY collation (1
  // and 1.0 alike, '1' and 1 apart, text and blob by their bytes).
  std::vector<size_t> first_occurrences() const;
  // The key first_occurrences() tells rows apart by: the hash of row `row`'s cells.
  Hash128 row_key(size_t row) const;
  // The digest of rows `rows` (indices into this one, in that order).
  ResultDigest rows_at(const std::vector<size_t>& rows) const;
  // Bytes held by the digest.
  size_t bytes() const { return (cells_.capacity() + ts_cells_.capacity() + ts_sorted_.capacity()) * sizeof(Hash128); }
  // Bytes add() takes per row at most (without the decoded view).
  static size_t bytes_per_row(size_t columns) { return (columns + 1) * sizeof(Hash128); }

 private:
  size_t columns_ = 0;
  size_t rows_ = 0;
  bool invalid_utf8_ = false;
  std::vector<Hash128> cells_;
  std::vector<Hash128> ts_cells_;  // empty until a text value that is not UTF-8 is seen
  std::vector<Hash128> ts_sorted_;
  std::string buf_;                // scratch
};

// XXH3-128 of `n` bytes (the hash the digest's cells are made of).
Hash128 hash_bytes(const void* p, size_t n);

// The digest of a materialized result (columns from its first row, else its column names).
ResultDigest digest_of(const ResultSet& r);

// The equalities of result_compare.h, on digests (same argument order, same rules).
bool bird_equal(const ResultDigest& pred, const ResultDigest& gold);
bool spider_ts_equal(const ResultDigest& gold, const ResultDigest& pred, bool order_matters);
bool relaxed_equal(const ResultDigest& pred, const ResultDigest& gold);
double soft_f1(const ResultDigest& pred, const ResultDigest& gold);
bool contains_gold(const ResultDigest& pred, const ResultDigest& gold);

}  // namespace nl2sql::db
