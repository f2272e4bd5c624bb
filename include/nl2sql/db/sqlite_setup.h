// Setting up a SQLite file that several processes may open at once (the response cache, the
// result cache, a run store): switching a new file to WAL needs an exclusive lock taken while
// a shared one is held, and SQLite answers SQLITE_BUSY at once instead of calling the busy
// handler (it would risk a deadlock). So the set-up statements are retried here until the
// timeout.
#pragma once

#include <string>

struct sqlite3;

namespace nl2sql::db {

// Runs `sql` (one or more statements) with sqlite3_exec, retrying while it fails with
// SQLITE_BUSY or SQLITE_LOCKED for up to `timeout_ms`. Returns the SQLite result code; on
// failure `error` holds the message. `attempts`, when given, receives how many times the
// statements ran (1: no contention was met).
int exec_setup(sqlite3* db, const char* sql, std::string& error, int timeout_ms = 10000,
               int* attempts = nullptr);

}  // namespace nl2sql::db
