#include "nl2sql/db/schema_info.h"

#include <sqlite3.h>

#include <algorithm>

#include "nl2sql/core/text.h"
#include "nl2sql/db/executor.h"

namespace nl2sql::db {
namespace fs = std::filesystem;

const ColumnInfo* TableInfo::find_column(std::string_view name) const {
  const std::string n(name);
  for (const auto& c : columns)
    if (sqlite3_stricmp(c.name.c_str(), n.c_str()) == 0) return &c;
  return nullptr;
}

bool TableInfo::declares_collation() const {
  return core::lower(create_sql).find("collate") != std::string::npos;
}

std::vector<std::string> TableInfo::primary_key() const {
  std::vector<const ColumnInfo*> key;
  for (const auto& c : columns)
    if (c.pk_position > 0) key.push_back(&c);
  std::stable_sort(key.begin(), key.end(), [](auto* a, auto* b) { return a->pk_position < b->pk_position; });
  std::vector<std::string> out;
  for (const auto* c : key) out.push_back(c->name);
  return out;
}

const TableInfo* SchemaInfo::find(std::string_view name) const {
  const std::string n(name);
  for (const auto& t : tables)
    if (sqlite3_stricmp(t.name.c_str(), n.c_str()) == 0) return &t;
  return nullptr;
}

Result<SchemaInfo> inspect_schema(const fs::path& path) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) return not_found("no database at " + path.string());
  // Opened as the executor opens it (a WAL database is read without writing beside it), without
  // its authorizer: the statements below are ours, and they read pragmas.
  auto source = read_only_source(path);
  if (!source) return source.status();
  sqlite3* h = nullptr;
  if (sqlite3_open_v2(read_only_uri(*source).c_str(), &h, SQLITE_OPEN_READONLY | SQLITE_OPEN_URI, nullptr) != SQLITE_OK) {
    std::string msg = h ? sqlite3_errmsg(h) : "out of memory";
    sqlite3_close_v2(h);
    return Status(ErrorCode::kIo, "cannot open database " + path.string() + ": " + msg + " (" +
                                      unreadable_database_hint(path) + ")");
  }
  struct Closer {
    sqlite3* d;
    ~Closer() { sqlite3_close_v2(d); }
  } closer{h};
  // Runs a fixed statement with at most one text argument.
  auto query = [&](const char* sql, const std::string* arg, auto&& on_row) -> Status {
    sqlite3_stmt* stmt = nullptr;
    if (sqlite3_prepare_v2(h, sql, -1, &stmt, nullptr) != SQLITE_OK)
      return Status(ErrorCode::kSql, path.string() + ": " + sqlite3_errmsg(h) + " (" + unreadable_database_hint(path) + ")");
    if (arg) sqlite3_bind_text(stmt, 1, arg->c_str(), -1, SQLITE_TRANSIENT);
    int rc;
    while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) on_row(stmt);
    sqlite3_finalize(stmt);
    if (rc != SQLITE_DONE) return Status(ErrorCode::kSql, path.string() + ": " + sqlite3_errmsg(h));
    return Status::ok();
  };
  auto text = [](sqlite3_stmt* s, int i) {
    const unsigned char* t = sqlite3_column_text(s, i);
    return t ? std::string(reinterpret_cast<const char*>(t)) : std::string();
  };
  SchemaInfo schema;
  NL2SQL_RETURN_IF_ERROR(query(
      "SELECT name, type, sql FROM sqlite_master WHERE type IN ('table', 'view') AND name NOT "
      "LIKE 'sqlite_%' ORDER BY rowid",
      nullptr, [&](sqlite3_stmt* s) {
        TableInfo t;
        t.name = text(s, 0);
        t.is_view = text(s, 1) == "view";
        t.create_sql = text(s, 2);
        t.without_rowid = core::lower(t.create_sql).find("without rowid") != std::string::npos;
        schema.tables.push_back(std::move(t));
      }));
  for (auto& t : schema.tables) {
    int pk_count = 0;
    NL2SQL_RETURN_IF_ERROR(query("SELECT name, type, pk FROM pragma_table_info(?)", &t.name, [&](sqlite3_stmt* s) {
      ColumnInfo c;
      c.name = text(s, 0);
      c.type = text(s, 1);
      c.pk_position = sqlite3_column_int(s, 2);
      c.primary_key = c.pk_position > 0;
      pk_count += c.primary_key ? 1 : 0;
      t.columns.push_back(std::move(c));
    }));
    if (pk_count == 1 && !t.without_rowid && !t.is_view)
      for (size_t k = 0; k < t.columns.size(); ++k)
        if (t.columns[k].primary_key && core::lower(t.columns[k].type) == "integer") t.rowid_alias = static_cast<int>(k);
    if (t.is_view) continue;
    NL2SQL_RETURN_IF_ERROR(query("SELECT \"table\", \"from\", \"to\" FROM pragma_foreign_key_list(?)", &t.name,
                                 [&](sqlite3_stmt* s) {
                                   t.foreign_keys.push_back({text(s, 1), text(s, 0), text(s, 2)});
                                 }));
  }
  return schema;
}

}  // namespace nl2sql::db
