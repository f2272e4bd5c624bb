// Schema-aware analyses of a parsed query: which base tables and columns it reads, and which
// literals it compares with which columns.
//
// A Schema is read from the SQLite file itself (sqlite_master + pragma_table_info) on a plain
// read-only handle of our own: db::Executor's authorizer denies PRAGMA, and introspection is
// not query execution. analyze_references() resolves every column reference the way SQLite's
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
#include "nl2sql/sql/ast.h"

namespace nl2sql::sql {

struct ColumnInfo {
  std::string name;
  std::string type;
  bool primary_key = false;
};

struct TableInfo {
  std::string name;
  std::vector<ColumnInfo> columns;
  bool is_view = false;
  bool without_rowid = false;
  std::string create_sql;        // as stored in sqlite_master
  int rowid_alias = -1;          // index of an INTEGER PRIMARY KEY column, or -1
  const ColumnInfo* find_column(std::string_view name) const;  // case-insensitive
};

struct Schema {
  std::vector<TableInfo> tables;
  const TableInfo* find(std::string_view name) const;  // case-insensitive
};

// Reads tables and views (not sqlite_* internals) of the database at `db`.
Result<Schema> load_schema(const std::filesystem::path& db);

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
