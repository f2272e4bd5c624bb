// Result-set equalities: the ones the official evaluators apply to two result sets, plus our
// relaxed equality and the BIRD mini-dev Soft-F1. In db/ because evaluation, selection
// (execution clusters, separating instances) and the agentic generators all compare results.
// Pure functions, thread-safe.
//
// Value semantics follow Python's, since the official scripts compare Python objects:
// 1 == 1.0 (an integral REAL equals the INTEGER of the same value), '1' != 1, NULL == NULL,
// text != blob. See notes on each function for the official quirks we reproduce.
#pragma once

#include <string>
#include <string_view>

#include "nl2sql/db/value.h"

namespace nl2sql::db {

// A canonical byte key for a value under Python equality (equal values, equal keys).
std::string python_key(const Value& v);
// The same key appended to `out` (self-delimiting: a row's keys concatenated identify the row).
void append_python_key(std::string& out, const Value& v);
// Python's str(value) + str(type(value)): the Spider test-suite's row-sorting key.
std::string spider_sort_key(const Value& v);
// Python's repr of a float (shortest round-trip, '3.0', '1e+16', 'inf').
std::string python_float_repr(double d);

// BIRD: set(pred_rows) == set(gold_rows). Column order matters; duplicates and row order don't.
bool bird_equal(const ResultSet& pred, const ResultSet& gold);

// Spider test suite (exec_eval.result_eq, gold first): both empty → equal; row counts must
// match; the quick reject on per-row sorted cells; then a search over column permutations for
// list (order_matters) or set+multiset equality. The permutation search is exhaustive over the
// permutations consistent with every row (the official code samples 20 rows to prune).
bool spider_ts_equal(const ResultSet& gold, const ResultSet& pred, bool order_matters);

// Relaxed: drop rows whose cells are all NULL, then compare as sets of sets (row order, column
// order and duplicates ignored). Both empty → equal.
bool relaxed_equal(const ResultSet& pred, const ResultSet& gold);

// BIRD mini-dev Soft-F1 (row-wise value overlap after de-duplicating rows). The official code
// de-duplicates through a Python set, whose iteration order is hash-dependent for text; we keep
// first-occurrence order, which the official variant with dict.fromkeys also uses.
double soft_f1(const ResultSet& pred, const ResultSet& gold);

// True when pred holds the gold answer plus extra columns and/or rows: some injective mapping
// of gold columns onto pred columns projects pred onto a superset of gold's rows (as sets),
// and pred is not simply equal to gold. Used for the RES5 outcome.
bool contains_gold(const ResultSet& pred, const ResultSet& gold);

// Python's decode(errors="ignore"): drops bytes that are not valid UTF-8.
std::string drop_invalid_utf8(std::string_view s);

}  // namespace nl2sql::db
