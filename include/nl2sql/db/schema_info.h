// The physical schema of a SQLite file — tables and views with their columns, declared types,
// primary keys, rowid alias and foreign keys — read by one function, inspect_schema. The SQL
// analysis (sql::analyze_references, lineage, separating instances) works on it directly; the
// benchmark's annotated schema (data::Schema: display names, descriptions) is built from it when
// a dataset ships no tables file.
//
// inspect_schema opens its own plain read-only handle: introspection needs the PRAGMA
// table-valued functions that the query connections' authorizer denies (db/executor.h), and this
// handle runs only the fixed statements in schema_info.cpp. Pure value types; thread-safe.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "nl2sql/core/status.h"

namespace nl2sql::db {

struct ColumnInfo {
  std::string name;
  std::string type;          // as declared
  bool primary_key = false;
  int pk_position = 0;       // 1-based position in the primary key; 0 when not part of it
};

struct ForeignKeyInfo {
  std::string from_column, to_table, to_column;  // to_column empty: the target's primary key
};

struct TableInfo {
  std::string name;
  std::vector<ColumnInfo> columns;
  bool is_view = false;
  bool without_rowid = false;
  std::string create_sql;        // as stored in sqlite_master
  int rowid_alias = -1;          // index of an INTEGER PRIMARY KEY column, or -1
  std::vector<ForeignKeyInfo> foreign_keys;
  const ColumnInfo* find_column(std::string_view name) const;  // case-insensitive
  std::vector<std::string> primary_key() const;                // column names in key order
  // Whether the declaration names a collation anywhere (a column's, or a view's expression's).
  bool declares_collation() const;
};

struct SchemaInfo {
  std::vector<TableInfo> tables;                        // in creation order (sqlite_master rowid)
  const TableInfo* find(std::string_view name) const;  // case-insensitive
};

// Reads tables and views (not sqlite_* internals) of the database at `path`. A missing file is
// kNotFound, one SQLite cannot open kIo, both naming the path.
Result<SchemaInfo> inspect_schema(const std::filesystem::path& path);

}  // namespace nl2sql::db
