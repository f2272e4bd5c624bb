// Test oracle for the lineage rewrite: a new SQLite file with the schema of `src` (tables,
// indexes, views) holding only the given rows (tables not mentioned are empty). Running a query
// on it must reproduce the query's answer on `src` (tests/sql/lineage_test.cpp and the gold
// slow test). Production builds its sub-databases in memory (select::MemoryDatabase); this one
// writes a file so the check runs through the same executor as the original query.
#pragma once

#include <sqlite3.h>

#include <filesystem>
#include <string>
#include <tuple>
#include <vector>

#include "nl2sql/core/status.h"
#include "nl2sql/core/text.h"
#include "nl2sql/sql/lineage.h"
#include "nl2sql/sql/printer.h"

namespace nl2sql::testing {

inline Status build_lineage_database(const std::filesystem::path& src, const sql::LineageRows& rows,
                              const std::filesystem::path& out) {
  std::error_code ec;
  std::filesystem::remove(out, ec);
  sqlite3* h = nullptr;
  if (sqlite3_open_v2(out.string().c_str(), &h, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE,
                      nullptr) != SQLITE_OK) {
    sqlite3_close_v2(h);
    return io_error("cannot create " + out.string());
  }
  auto exec = [&](const std::string& sql) -> Status {
    char* err = nullptr;
    if (sqlite3_exec(h, sql.c_str(), nullptr, nullptr, &err) != SQLITE_OK) {
      std::string msg = err ? err : "error";
      sqlite3_free(err);
      return Status(ErrorCode::kSql, msg + " in: " + sql.substr(0, 200));
    }
    return Status::ok();
  };
  auto run = [&]() -> Status {
    std::string attach = "ATTACH DATABASE '";
    for (char c : std::filesystem::absolute(src).string()) {
      if (c == '\'') attach += '\'';
      attach += c;
    }
    attach += "' AS src";
    NL2SQL_RETURN_IF_ERROR(exec("PRAGMA journal_mode = OFF; PRAGMA synchronous = OFF"));
    NL2SQL_RETURN_IF_ERROR(exec(attach));
    NL2SQL_RETURN_IF_ERROR(exec("BEGIN"));
    NL2SQL_RETURN_IF_ERROR(exec("CREATE TEMP TABLE keep_rows (tbl TEXT, id INTEGER)"));
    sqlite3_stmt* ins = nullptr;
    sqlite3_prepare_v2(h, "INSERT INTO keep_rows VALUES (?, ?)", -1, &ins, nullptr);
    for (const auto& [table, ids] : rows)
      for (int64_t id : ids) {
        sqlite3_bind_text(ins, 1, core::lower(table).c_str(), -1, SQLITE_TRANSIENT);
        sqlite3_bind_int64(ins, 2, id);
        sqlite3_step(ins);
        sqlite3_reset(ins);
      }
    sqlite3_finalize(ins);
    std::vector<std::pair<std::string, std::string>> objects;  // (type+name, sql)
    sqlite3_stmt* st = nullptr;
    sqlite3_prepare_v2(h,
                       "SELECT type, name, sql FROM src.sqlite_master WHERE sql IS NOT NULL AND "
                       "name NOT LIKE 'sqlite_%' ORDER BY type = 'table' DESC, rowid",
                       -1, &st, nullptr);
    std::vector<std::tuple<std::string, std::string, std::string>> objs;
    while (sqlite3_step(st) == SQLITE_ROW)
      objs.emplace_back(reinterpret_cast<const char*>(sqlite3_column_text(st, 0)),
                        reinterpret_cast<const char*>(sqlite3_column_text(st, 1)),
                        reinterpret_cast<const char*>(sqlite3_column_text(st, 2)));
    sqlite3_finalize(st);
    for (const auto& [type, name, sql] : objs) {
      if (type == "trigger") continue;
      NL2SQL_RETURN_IF_ERROR(exec(sql));
      if (type == "table") {
        std::string q = sql::quote_identifier({name, '"'});
        std::string lit;
        for (char c : core::lower(name)) {
          if (c == '\'') lit += '\'';
          lit += c;
        }
        NL2SQL_RETURN_IF_ERROR(exec("INSERT INTO main." + q + " SELECT * FROM src." + q +
                                    " WHERE rowid IN (SELECT id FROM keep_rows WHERE tbl = '" +
                                    lit + "')"));
      }
    }
    NL2SQL_RETURN_IF_ERROR(exec("COMMIT"));
    return exec("DETACH DATABASE src");
  };
  Status s = run();
  sqlite3_close_v2(h);
  return s;
}

}  // namespace nl2sql::testing
