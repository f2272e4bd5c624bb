// Tie-order check for gold queries: does the gold answer depend on how the engine breaks ties?
//
// For a query whose top level is `… ORDER BY keys LIMIT n [OFFSET m]` (one SELECT core, integer
// literals), tie_probe() builds a probe query that returns the last kept row and the first cut
// row, each with its ORDER BY key values appended. The answer depends on tie order when both
// rows exist, their keys are equal and their output columns differ. Queries with LIMIT but no
// ORDER BY are checked by re-running them with SQLite scanning in reverse order.
// Pure functions; the evaluator executes the probes.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "nl2sql/db/value.h"

namespace nl2sql::eval {

struct TieProbe {
  std::string sql;                 // the probe query
  std::vector<size_t> key_columns;  // positions of the ORDER BY keys in the probe's result
  size_t appended = 0;              // key columns appended after the original output columns
  // Gold is `… ORDER BY keys LIMIT 1` (no OFFSET, nothing random, no min/max among the appended
  // keys): when the probe's first row is the only one with its keys (keys_told_apart), that
  // row's output columns are gold's whole answer, and gold need not run (see the evaluator).
  bool answers_gold = false;
};

enum class TieCheckKind { kNone, kOrderByProbe, kReverseScan };

// What check applies to `gold_sql`, and the probe when it is kOrderByProbe.
TieCheckKind tie_check_kind(const std::string& gold_sql, TieProbe* probe);

// Verdict from the probe's result rows.
bool probe_shows_tie(const TieProbe& probe, const db::ResultSet& result);

// Whether rows `a` and `b` of the probe differ in some ORDER BY key under every collation SQLite
// has (BINARY, NOCASE, RTRIM) and across number types (3 and 3.0 are equal keys), so SQLite
// can never order them as a tie. False whenever in doubt.
bool keys_told_apart(const TieProbe& probe, const db::Row& a, const db::Row& b);

}  // namespace nl2sql::eval
