// Schema-aware analyses of a parsed query: which base tables and columns it reads, and which
// literals it compares with which columns.
//
// A Schema is the database's physical schema as db::inspect_schema reads it from the SQLite
// file (db/schema_info.h). analyze_references() resolves every column reference the way SQLite's
// name resolution does — table aliases, CTE names, derived tables, views (expanded), `*` and
// `t.*`, USING/NATURAL joins, correlated references to outer queries, result-column aliases in
// WHERE/GROUP BY/HAVING/ORDER BY, rowid aliases, and SQLite's rule that an unresolvable
// "double-quoted" name is a string. The read set it returns equals what SQLite's authorizer
// reports as SQLITE_READ at prepare time (checked on every gold query by a slow test).
// Schema is immutable after loading and may be shared between threads; analyses are pure.
#pragma once

#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "nl2sql/core/status.h"
#include "nl2sql/db/schema_info.h"
#include "nl2sql/sql/ast.h"

namespace nl2sql::sql {

// The physical schema the analysis resolves names against (db/schema_info.h, read by
// db::inspect_schema).
using ColumnInfo = db::ColumnInfo;
using TableInfo = db::TableInfo;
using Schema = db::SchemaInfo;

// A (table, column) read, spelled as in the schema.
using ColumnRead = std::pair<std::string, std::string>;

struct LiteralComparison {
  ColumnRead column;
  std::string op;        // "=", "<", "LIKE", "IN", "BETWEEN", …
  std::string literal;   // the literal's value (string contents or number text)
  SourcePos pos;         // of the literal
};

struct References {
  std::set<std::string> tables;           // base tables read (views expand to their tables)
  std::set<ColumnRead> columns;           // base-table columns read
  std::vector<LiteralComparison> literals;
  std::vector<std::string> unresolved;    // names that resolved to nothing ("t.c", "c", "t")
  // True when some column of a scope (subquery) refers to an enclosing query.
  bool correlated = false;
};

References analyze_references(const Select& select, const Schema& schema);

}  // namespace nl2sql::sql
