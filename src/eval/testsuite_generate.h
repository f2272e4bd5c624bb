// The test-suite build's data side: value pools sampled from an original database, and candidate
// databases generated from them (see nl2sql/eval/testsuite.h for the method). Private to eval.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "nl2sql/core/status.h"
#include "nl2sql/db/executor.h"
#include "nl2sql/db/schema_info.h"
#include "nl2sql/db/value.h"
#include "nl2sql/eval/testsuite.h"

namespace nl2sql::eval {

struct ColumnPool {
  std::vector<db::Value> sampled;   // the column's values in the sampled rows (repeats kept)
  std::vector<db::Value> literals;  // gold literals compared with it, and their perturbations
  double null_share = 0;            // share of NULL in the sample
};

struct TablePool {
  const db::TableInfo* table = nullptr;
  std::vector<db::Row> rows;        // sampled real rows, columns in schema order
  std::vector<ColumnPool> columns;  // schema order
  size_t lineage_rows = 0;          // how many of `rows` came from the gold queries' lineage
};

struct ValuePools {
  std::vector<TablePool> tables;         // in the order they are generated (parents first)
  std::vector<std::string> index_sql;    // the original's CREATE INDEX statements
  std::vector<std::string> view_sql;     // and CREATE VIEW statements
  std::vector<std::string> notes;        // lineage that could not be computed, and why
};

// Samples the pools from `db` (whose physical schema is `schema`, which must outlive the pools)
// for the gold queries `golds`.
Result<ValuePools> sample_value_pools(const std::filesystem::path& db, const db::SchemaInfo& schema,
                                      const std::vector<std::string>& golds, const SuiteOptions& options,
                                      const db::Executor& executor);

struct GeneratedDatabase {
  size_t rows = 0;
  size_t refused = 0;  // draws the schema's constraints refused
};

// Writes one candidate database to `file` (which must not exist), deterministically from `seed`.
Result<GeneratedDatabase> write_candidate(const std::filesystem::path& file, const ValuePools& pools,
                                          uint64_t seed, size_t max_rows);

}  // namespace nl2sql::eval
