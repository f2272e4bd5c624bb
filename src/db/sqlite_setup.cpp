#include "nl2sql/db/sqlite_setup.h"

#include <sqlite3.h>

#include <algorithm>
#include <chrono>
#include <thread>

namespace nl2sql::db {

int exec_setup(sqlite3* db, const char* sql, std::string& error, int timeout_ms, int* attempts) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  auto pause = std::chrono::milliseconds(2);
  if (attempts) *attempts = 0;
  for (;;) {
    if (attempts) ++*attempts;
    char* err = nullptr;
    int rc = sqlite3_exec(db, sql, nullptr, nullptr, &err);
    error = err ? err : (rc == SQLITE_OK ? "" : sqlite3_errstr(rc));
    sqlite3_free(err);
    const int primary = rc & 0xff;
    if ((primary != SQLITE_BUSY && primary != SQLITE_LOCKED) || std::chrono::steady_clock::now() >= until)
      return rc;
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::milliseconds(50));
  }
}

}  // namespace nl2sql::db
