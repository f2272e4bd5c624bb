// ResultCache: a persistent store of execution results (one SQLite file, WAL), keyed by the
// database fingerprint, the SQL text and the limits it ran under. Results of read-only queries
// on an unchanged database file are deterministic, so a second evaluation of the same dataset
// never re-executes gold SQL (and re-executes a prediction only when its text is new).
// Timeouts are never stored: they depend on machine load, not on the query; nor are results
// the executor hashed past QueryLimits::hash_rows_after (only their first rows are held).
//
// Thread-safe: one connection guarded by a mutex; lookups also go through an in-memory map.
// Two processes may share the file (WAL + busy timeout); a corrupt or unreadable entry is a
// miss, never an error.
#pragma once

#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>

#include "nl2sql/core/status.h"
#include "nl2sql/db/executor.h"

struct sqlite3;
struct sqlite3_stmt;

namespace nl2sql::db {

struct CachedExecution {
  ExecutionResult result;
  bool tie_dependent = false;  // gold only: answer set changes with tie order
  bool tie_checked = false;
  size_t row_cap = 0;  // the cap the query ran under (0: none)
};

class ResultCache {
 public:
  static Result<std::unique_ptr<ResultCache>> open(const std::filesystem::path& file);
  ~ResultCache();

  static std::string key(const std::string& db_fingerprint, std::string_view sql,
                         std::string_view variant = "");
  // A stored result, seen under `row_cap` (0: none): a stored result with more rows comes back
  // as kRowCap; a stored kRowCap whose cap was lower than `row_cap` is a miss.
  std::optional<CachedExecution> get(const std::string& key, size_t row_cap);
  void put(const std::string& key, const CachedExecution& value);
  // Writes buffered entries in one transaction (also done by the destructor).
  void flush();

  size_t hits() const { return hits_; }
  size_t misses() const { return misses_; }

  // Binary (de)serialization of a result, exposed for tests.
  static std::string serialize(const CachedExecution& e);
  static std::optional<CachedExecution> deserialize(std::string_view bytes);

 private:
  explicit ResultCache(sqlite3* db) : db_(db) {}
  void flush_locked();  // requires mu_
  std::mutex mu_;
  sqlite3* db_;                                             // guarded by mu_
  sqlite3_stmt* get_stmt_ = nullptr;                 // guarded by mu_
  std::unordered_map<std::string, std::string> pending_;   // guarded by mu_
  size_t hits_ = 0, misses_ = 0;                           // guarded by mu_
};

// Default cache directory: $NL2SQL_CACHE_DIR, else $XDG_CACHE_HOME/nl2sql, else ~/.cache/nl2sql.
std::filesystem::path default_cache_dir();

}  // namespace nl2sql::db
