// A read-only lock-down (db::lock_down_read_only) that its owner can lift for its own writes:
// for a connection the program fills itself and then hands SQL it was given (the reloadable
// in-memory separating instance, select/separating_instance.h), so that refilling it does not
// mean building a new connection.
#pragma once

struct sqlite3;

namespace nl2sql::db {

// lock_down_read_only(db), except that while `*writes_open` is true every statement is
// authorized. The owner sets the flag only around statements it wrote itself, never while SQL
// it was given is prepared or run; `writes_open` must outlive the connection.
void lock_down_read_only(sqlite3* db, const bool* writes_open);

}  // namespace nl2sql::db
