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
};

enum class TieCheckKind { kNone, kOrderByProbe, kReverseScan };

// What check applies to `gold_sql`, and the probe when it is kOrderByProbe.
TieCheckKind tie_check_kind(const std::string& gold_sql, TieProbe* probe);

// Verdict from the probe's result rows.
bool probe_shows_tie(const TieProbe& probe, const db::ResultSet& result);

}  // namespace nl2sql::eval
