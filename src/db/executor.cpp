#include "nl2sql/db/executor.h"
#include "nl2sql/db/writable_lock_down.h"

#include <spdlog/spdlog.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <fstream>
#include <optional>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "nl2sql/core/hash.h"

namespace nl2sql::db {
namespace {

using Clock = std::chrono::steady_clock;

// Per-connection state read by the progress handler.
struct Deadline {
  Clock::time_point at{};
  bool active = false;
  bool fired = false;
};

int progress_handler(void* arg) {
  auto* d = static_cast<Deadline*>(arg);
  if (d->active && Clock::now() >= d->at) {
    d->fired = true;
    return 1;  // interrupt
  }
  return 0;
}

// Allows only what a read-only query needs.
int authorizer(void*, int action, const char*, const char* arg2, const char*, const char*) {
  switch (action) {
    case SQLITE_SELECT:
    case SQLITE_READ:
    case SQLITE_RECURSIVE:
      return SQLITE_OK;
    case SQLITE_FUNCTION:
      // For SQLITE_FUNCTION the function's name is the second argument. fts3_tokenizer()
      // hands out (and with two arguments installs) native function pointers.
      if (arg2 && (sqlite3_stricmp(arg2, "load_extension") == 0 ||
                   sqlite3_stricmp(arg2, "readfile") == 0 ||
                   sqlite3_stricmp(arg2, "writefile") == 0 || sqlite3_stricmp(arg2, "edit") == 0 ||
                   sqlite3_stricmp(arg2, "fts3_tokenizer") == 0))
        return SQLITE_DENY;
      return SQLITE_OK;
    default:
      return SQLITE_DENY;
  }
}

std::string uri_for(const std::filesystem::path& path, bool immutable) {
  std::string p = std::filesystem::absolute(path).string();
  std::string out = "file:";
  for (char c : p) {
    if (c == '?' || c == '#' || c == '%') {
      char buf[4];
      std::snprintf(buf, sizeof(buf), "%%%02X", static_cast<unsigned char>(c));
      out += buf;
    } else {
      out.push_back(c);
    }
  }
  out += "?mode=ro";
  if (immutable) out += "&immutable=1";
  return out;
}

bool only_blank_or_comments(const char* tail) {
  // SQLite's own tokenizer decides: preparing the tail yields no statement iff it holds only
  // whitespace and comments. We avoid preparing by scanning the same way.
  const char* p = tail;
  while (*p) {
    if (std::isspace(static_cast<unsigned char>(*p)) || *p == ';') {
      ++p;
    } else if (p[0] == '-' && p[1] == '-') {
      while (*p && *p != '\n') ++p;
    } else if (p[0] == '/' && p[1] == '*') {
      const char* end = std::strstr(p + 2, "*/");
      if (!end) return true;  // unterminated comment runs to the end
      p = end + 2;
    } else {
      return false;
    }
  }
  return true;
}

size_t value_bytes(const Value& v) { return sizeof(Value) + v.s.size(); }

// Bounds on how long the caller waits past the deadline for a statement stuck inside one
// function call before it abandons the worker (see run_impl).
constexpr double kAbandonGraceMinS = 0.1;
constexpr double kAbandonGraceMaxS = 1.0;

Clock::time_point conn_deadline_plus(Clock::time_point at, std::chrono::duration<double> d) {
  return at + std::chrono::duration_cast<Clock::duration>(d);
}

// Per-connection state read by the progress handler lives in the connection; see Executor.

}  // namespace

DerivedKeys& DerivedKeys::operator=(const DerivedKeys& other) {
  if (this != &other) {
    std::lock_guard lock(mu_);
    keys_.clear();
  }
  return *this;
}

std::string DerivedKeys::get(int kind, const std::function<std::string()>& make) const {
  {
    std::lock_guard lock(mu_);
    if (auto it = keys_.find(kind); it != keys_.end()) return it->second;
  }
  std::string made = make();
  std::lock_guard lock(mu_);
  return keys_.emplace(kind, std::move(made)).first->second;
}

const char* exec_status_name(ExecStatus s) {
  switch (s) {
    case ExecStatus::kOk: return "ok";
    case ExecStatus::kError: return "error";
    case ExecStatus::kTimeout: return "timeout";
    case ExecStatus::kRowCap: return "row_cap";
    case ExecStatus::kRejected: return "rejected";
  }
  return "unknown";
}

namespace {

// nl2sql_hash(x, …): see the header. FNV-1a over a type tag and the value's bytes per argument,
// then a splitmix64 finish; the top bit is cleared so `% m` is never negative.
void hash_function(sqlite3_context* ctx, int argc, sqlite3_value** argv) {
  uint64_t h = 0xcbf29ce484222325ULL;
  auto bytes = [&](const void* p, size_t n) {
    const auto* b = static_cast<const unsigned char*>(p);
    for (size_t k = 0; k < n; ++k) h = (h ^ b[k]) * 0x100000001b3ULL;
  };
  auto tag = [&](unsigned char t) { bytes(&t, 1); };
  auto integer = [&](int64_t i) {
    tag(1);
    bytes(&i, sizeof i);
  };
  for (int k = 0; k < argc; ++k) {
    sqlite3_value* v = argv[k];
    switch (sqlite3_value_type(v)) {
      case SQLITE_INTEGER:
        integer(sqlite3_value_int64(v));
        break;
      case SQLITE_FLOAT: {
        double d = sqlite3_value_double(v);
        if (d == std::floor(d) && std::fabs(d) < 9.2e18) {
          integer(static_cast<int64_t>(d));
        } else {
          tag(2);
          bytes(&d, sizeof d);
        }
        break;
      }
      case SQLITE_TEXT:
        tag(3);
        bytes(sqlite3_value_text(v), static_cast<size_t>(sqlite3_value_bytes(v)));
        break;
      case SQLITE_BLOB:
        tag(4);
        bytes(sqlite3_value_blob(v), static_cast<size_t>(sqlite3_value_bytes(v)));
        break;
      default:
        tag(5);
    }
    tag(0xff);  // argument boundary: ("ab", "c") and ("a", "bc") differ
  }
  h += 0x9e3779b97f4a7c15ULL;
  h = (h ^ (h >> 30)) * 0xbf58476d1ce4e5b9ULL;
  h = (h ^ (h >> 27)) * 0x94d049bb133111ebULL;
  h ^= h >> 31;
  sqlite3_result_int64(ctx, static_cast<int64_t>(h >> 1));
}

// Private snapshots of databases with committed rows in their -wal. Reading a WAL database in
// place needs a -shm file beside it (created if absent: a write to the user's folder) and fails
// in a read-only folder. Instead the main file and its -wal are copied to a private temporary
// folder and checkpointed there into one plain file, which is then opened immutable. One
// snapshot per (path, main and -wal size and mtime); all are removed at process exit.
class WalSnapshots {
 public:
  ~WalSnapshots() {
    std::error_code ec;
    for (auto& [key, dir] : dirs_) std::filesystem::remove_all(dir, ec);
  }
  Result<std::filesystem::path> get(const std::filesystem::path& path) {
    std::filesystem::path wal = path;
    wal += "-wal";
    const std::string key = path.string() + "|" + file_stamp(path) + "|" + file_stamp(wal);
    std::lock_guard lock(mu_);
    if (auto it = dirs_.find(key); it != dirs_.end()) return it->second / "snapshot.sqlite";
    std::string tmpl = (std::filesystem::temp_directory_path() / "nl2sql-wal-XXXXXX").string();
    if (!::mkdtemp(tmpl.data()))
      return Status(ErrorCode::kIo, "cannot create a snapshot folder for " + path.string() +
                                        ": " + std::strerror(errno));
    const std::filesystem::path dir = tmpl;
    const std::filesystem::path copy = dir / "snapshot.sqlite";
    std::filesystem::path copy_wal = copy;
    copy_wal += "-wal";
    std::error_code ec;
    std::filesystem::copy_file(path, copy, ec);
    if (!ec) std::filesystem::copy_file(wal, copy_wal, ec);
    std::string error;
    if (!ec) error = checkpoint(copy);
    if (ec || !error.empty()) {
      std::filesystem::remove_all(dir, ec);
      return Status(ErrorCode::kIo, "cannot snapshot WAL database " + path.string() + ": " +
                                        (error.empty() ? ec.message() : error));
    }
    spdlog::info("{} has committed rows in its -wal file: reading a private snapshot ({}) so "
                 "that nothing is written beside it",
                 path.string(), copy.string());
    dirs_[key] = dir;
    return copy;
  }

 private:
  static std::string file_stamp(const std::filesystem::path& p) {
    struct stat st {};
    if (::stat(p.c_str(), &st) != 0) return "-";
    return std::to_string(st.st_size) + ":" + std::to_string(st.st_mtim.tv_sec) + "." +
           std::to_string(st.st_mtim.tv_nsec);
  }
  // Folds the copied -wal into the copied main file and leaves it in rollback-journal mode, so
  // it opens immutable with no side files.
  static std::string checkpoint(const std::filesystem::path& copy) {
    sqlite3* db = nullptr;
    int rc = sqlite3_open_v2(copy.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX,
                             nullptr);
    std::string error;
    if (rc == SQLITE_OK) {
      sqlite3_db_config(db, SQLITE_DBCONFIG_DEFENSIVE, 1, nullptr);
      sqlite3_db_config(db, SQLITE_DBCONFIG_TRUSTED_SCHEMA, 0, nullptr);
      char* err = nullptr;
      rc = sqlite3_exec(db, "PRAGMA wal_checkpoint(TRUNCATE); PRAGMA journal_mode=DELETE;",
                        nullptr, nullptr, &err);
      if (err) error = err;
      sqlite3_free(err);
    }
    if (rc != SQLITE_OK && error.empty()) error = db ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
    sqlite3_close_v2(db);
    return error;
  }
  std::mutex mu_;
  std::map<std::string, std::filesystem::path> dirs_;  // guarded by mu_
};

Result<std::filesystem::path> wal_snapshot(const std::filesystem::path& path) {
  static WalSnapshots snapshots;
  return snapshots.get(path);
}

// The first 100 bytes of a database file: the format string and the read/write versions at
// offsets 18 and 19 (2 = WAL mode, per SQLite's file format); empty when unreadable or short.
std::string database_header(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::string h(100, '\0');
  if (!in.read(h.data(), static_cast<std::streamsize>(h.size()))) return "";
  return h;
}

bool is_sqlite_header(const std::string& h) { return h.compare(0, 16, std::string("SQLite format 3\0", 16)) == 0; }
bool is_wal_header(const std::string& h) { return is_sqlite_header(h) && (h[18] == 2 || h[19] == 2); }

}  // namespace

std::string unreadable_database_hint(const std::filesystem::path& path) {
  if (::access(path.c_str(), R_OK) != 0)
    return "this user cannot read the file (" + std::string(std::strerror(errno)) +
           "): make it readable, or copy the database somewhere readable";
  const std::string h = database_header(path);
  if (!is_sqlite_header(h))
    return "the file is not an SQLite 3 database (truncated or another format): replace it with a good copy";
  return "check that the file and its folder are readable";
}

Result<ReadOnlySource> read_only_source(const std::filesystem::path& path, bool immutable) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec))
    return not_found("database file not found: " + path.string());
  std::filesystem::path wal = path;
  wal += "-wal";
  if (std::filesystem::exists(wal, ec)) {
    if (std::filesystem::file_size(wal, ec) > 0 && !ec) {
      auto snap = wal_snapshot(path);
      if (!snap)
        return Status(ErrorCode::kIo, snap.status().message() +
                                          " (its -wal holds committed rows, read from a private copy in the temporary "
                                          "folder: give TMPDIR a folder with room for the database and its -wal)");
      return ReadOnlySource{*snap, true};  // the snapshot is ours and never changes
    }
    return ReadOnlySource{path, true};  // an empty -wal holds nothing
  }
  // A WAL-mode file without a -wal: every committed row is in the main file, but reading it in
  // place would need a -shm beside it (created in a writable folder, impossible on read-only
  // storage). Opened immutable, it is read as it is, with no side file.
  if (is_wal_header(database_header(path))) return ReadOnlySource{path, true};
  return ReadOnlySource{path, immutable};
}

std::string read_only_uri(const ReadOnlySource& source) { return uri_for(source.path, source.immutable); }

Result<sqlite3*> open_read_only(const std::filesystem::path& path, bool immutable) {
  auto source = read_only_source(path, immutable);
  if (!source) return source.status();
  sqlite3* db = nullptr;
  int rc = sqlite3_open_v2(read_only_uri(*source).c_str(), &db,
                           SQLITE_OPEN_READONLY | SQLITE_OPEN_URI | SQLITE_OPEN_NOMUTEX, nullptr);
  if (rc != SQLITE_OK) {
    std::string msg = db ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
    sqlite3_close_v2(db);
    return Status(ErrorCode::kIo, "cannot open database " + path.string() + ": " + msg + " (" + unreadable_database_hint(path) + ")");
  }
  lock_down_read_only(db);
  sqlite3_create_function_v2(db, "nl2sql_hash", -1,
                             SQLITE_UTF8 | SQLITE_DETERMINISTIC | SQLITE_INNOCUOUS, nullptr,
                             hash_function, nullptr, nullptr, nullptr);
  return db;
}

void lock_down_read_only(sqlite3* db) {
  sqlite3_db_config(db, SQLITE_DBCONFIG_DEFENSIVE, 1, nullptr);
  sqlite3_db_config(db, SQLITE_DBCONFIG_ENABLE_LOAD_EXTENSION, 0, nullptr);
  sqlite3_db_config(db, SQLITE_DBCONFIG_TRUSTED_SCHEMA, 0, nullptr);
  sqlite3_limit(db, SQLITE_LIMIT_ATTACHED, 0);
  sqlite3_set_authorizer(db, authorizer, nullptr);
}

void lock_down_read_only(sqlite3* db, const bool* writes_open) {
  lock_down_read_only(db);
  sqlite3_set_authorizer(
      db,
      [](void* flag, int action, const char* a1, const char* a2, const char* a3, const char* a4) {
        return *static_cast<const bool*>(flag) ? SQLITE_OK : authorizer(nullptr, action, a1, a2, a3, a4);
      },
      const_cast<bool*>(writes_open));
}

namespace {

// Steps `stmt` to the end, appending typed rows to `rs`, within the row cap and the byte cap.
// A value's size is checked before it is copied, so an oversized one is never duplicated.
// When the first step returned, and the VM steps by then (for ExecutionResult's timings and
// counters).
struct FirstStep {
  Clock::time_point at{};
  int64_t vm_steps = 0;
  bool seen = false;
};

struct Hash128Lo {
  size_t operator()(const Hash128& h) const { return static_cast<size_t>(h.lo); }
};

// Past limits.hash_rows_after rows, `digest` receives every row's hashes and `rs` stops growing;
// `later_firsts` (when given) receives the rows limits.keep_first_distinct asks for.
std::pair<ExecStatus, std::string> step_rows(sqlite3_stmt* stmt, const Deadline& deadline,
                                             const QueryLimits& limits, ResultSet& rs,
                                             std::shared_ptr<const ResultDigest>& digest, FirstStep& first,
                                             const RowSink* sink = nullptr,
                                             std::vector<std::pair<size_t, Row>>* later_firsts = nullptr) {
  const int ncol = sqlite3_column_count(stmt);
  sqlite3* db = sqlite3_db_handle(stmt);
  const size_t cap = limits.max_result_bytes;
  auto over_bytes = [&] {
    return std::make_pair(ExecStatus::kRowCap,
                          "result larger than " + std::to_string(cap) + " bytes");
  };
  size_t bytes = 0;
  auto& rows = rs.rows;
  size_t streamed = 0;  // rows handed to `sink`
  std::shared_ptr<ResultDigest> hashed;  // once the result outgrows limits.hash_rows_after
  // The kinds of rows seen while later_firsts still wants rows (see keep_first_distinct).
  std::unordered_set<Hash128, Hash128Lo> kinds;
  bool want_firsts = false;
  for (;;) {
    int rc = sqlite3_step(stmt);
    if (!first.seen) {
      first.at = Clock::now();
      first.vm_steps = sqlite3_stmt_status(stmt, SQLITE_STMTSTATUS_VM_STEP, 0);
      first.seen = true;
    }
    if (rc == SQLITE_DONE) break;
    if (rc != SQLITE_ROW) {
      if (deadline.fired || rc == SQLITE_INTERRUPT)
        return {ExecStatus::kTimeout,
                "query exceeded the " + std::to_string(limits.timeout_s) + " s timeout"};
      if (rc == SQLITE_TOOBIG)
        return {ExecStatus::kRowCap,
                std::string("a value is larger than the result's byte cap: ") + sqlite3_errmsg(db)};
      if (rc == SQLITE_NOMEM)
        return {ExecStatus::kRowCap, "out of memory while computing the result"};
      return {ExecStatus::kError, sqlite3_errmsg(db)};
    }
    const size_t seen = hashed ? hashed->rows() : sink ? streamed : rows.size();
    if (limits.row_cap > 0 && seen >= limits.row_cap)
      return {ExecStatus::kRowCap, "result has more than " + std::to_string(limits.row_cap) + " rows"};
    if (!sink && !hashed && limits.hash_rows_after > 0 && rows.size() >= limits.hash_rows_after) {
      hashed = std::make_shared<ResultDigest>(static_cast<size_t>(ncol));
      for (const auto& r : rows) hashed->add(r);
      bytes += rows.size() * ResultDigest::bytes_per_row(static_cast<size_t>(ncol));
      digest = hashed;
      if (later_firsts && limits.keep_first_distinct > 0) {
        for (size_t r = 0; r < rows.size() && kinds.size() < limits.keep_first_distinct; ++r)
          kinds.insert(hashed->row_key(r));
        want_firsts = kinds.size() < limits.keep_first_distinct;
      }
    }
    Row row;
    row.reserve(static_cast<size_t>(ncol));
    for (int c = 0; c < ncol; ++c) {
      const int type = sqlite3_column_type(stmt, c);
      if (type == SQLITE_TEXT || type == SQLITE_BLOB) {
        const void* p = type == SQLITE_TEXT ? static_cast<const void*>(sqlite3_column_text(stmt, c))
                                            : sqlite3_column_blob(stmt, c);
        const auto n = static_cast<size_t>(sqlite3_column_bytes(stmt, c));
        if (cap > 0 && bytes + sizeof(Value) + n > cap) return over_bytes();
        std::string v = p ? std::string(static_cast<const char*>(p), n) : std::string();
        row.push_back(type == SQLITE_TEXT ? Value::text(std::move(v)) : Value::blob(std::move(v)));
      } else if (type == SQLITE_INTEGER) {
        row.push_back(Value::integer(sqlite3_column_int64(stmt, c)));
      } else if (type == SQLITE_FLOAT) {
        row.push_back(Value::real(sqlite3_column_double(stmt, c)));
      } else {
        row.push_back(Value::null());
      }
      if (!hashed) bytes += value_bytes(row.back());
    }
    if (hashed) {
      hashed->add(row);
      bytes += ResultDigest::bytes_per_row(static_cast<size_t>(ncol));
      if (want_firsts && kinds.insert(hashed->row_key(hashed->rows() - 1)).second) {
        for (const auto& v : row) bytes += value_bytes(v);
        later_firsts->emplace_back(hashed->rows() - 1, std::move(row));
        if (kinds.size() >= limits.keep_first_distinct) {
          want_firsts = false;
          std::unordered_set<Hash128, Hash128Lo>().swap(kinds);
        }
      }
      if (cap > 0 && bytes > cap) return over_bytes();
      continue;
    }
    if (cap > 0 && bytes > cap) return over_bytes();
    if (sink) {
      (*sink)(row);
      ++streamed;
      bytes = 0;
      continue;
    }
    rows.push_back(std::move(row));
  }
  return {ExecStatus::kOk, ""};
}

}  // namespace

struct Executor::Connection {
  sqlite3* db = nullptr;
  Deadline deadline;
  bool reverse_scan = false;
  bool temp_in_memory = false;
  ~Connection() {
    if (db) sqlite3_close_v2(db);
  }
  // Sets the connection's pragmas and length limit for one statement of `sql_size` bytes.
  void apply(const QueryLimits& limits, size_t sql_size);
};

void Executor::Connection::apply(const QueryLimits& limits, size_t sql_size) {
  if (reverse_scan != limits.reverse_scan_order) {
    // A fixed statement of ours, run with the authorizer briefly lifted (it denies PRAGMA).
    sqlite3_set_authorizer(db, nullptr, nullptr);
    sqlite3_exec(db,
                 limits.reverse_scan_order ? "PRAGMA reverse_unordered_selects=1"
                                           : "PRAGMA reverse_unordered_selects=0",
                 nullptr, nullptr, nullptr);
    sqlite3_set_authorizer(db, authorizer, nullptr);
    reverse_scan = limits.reverse_scan_order;
  }
  if (temp_in_memory != limits.temp_store_memory) {
    // The same for where temporary B-trees live (DEFAULT: SQLite's, a temporary file).
    sqlite3_set_authorizer(db, nullptr, nullptr);
    sqlite3_exec(db, limits.temp_store_memory ? "PRAGMA temp_store=MEMORY" : "PRAGMA temp_store=DEFAULT",
                 nullptr, nullptr, nullptr);
    sqlite3_set_authorizer(db, authorizer, nullptr);
    temp_in_memory = limits.temp_store_memory;
  }
  // No single string or blob may outgrow the result's byte budget: SQLite would otherwise
  // build it (zeroblob(1e9), a huge replace()/printf) before the row loop could count it.
  // The floor keeps the SQL text itself (and ordinary values) within the limit.
  const size_t cap = limits.max_result_bytes == 0 ? size_t{1000000000} : limits.max_result_bytes;
  const size_t floor = std::max<size_t>(sql_size + 64, size_t{1} << 20);
  sqlite3_limit(db, SQLITE_LIMIT_LENGTH, static_cast<int>(std::min<size_t>(std::max(cap, floor), 1000000000)));
}

class Executor::Pool {
 public:
  Pool(std::filesystem::path path, bool immutable) : path_(std::move(path)), immutable_(immutable) {}

  Result<std::unique_ptr<Connection>> acquire() {
    {
      std::lock_guard lock(mu_);
      if (!idle_.empty()) {
        auto c = std::move(idle_.back());
        idle_.pop_back();
        return c;
      }
    }
    auto db = open_read_only(path_, immutable_);
    if (!db) return db.status();
    auto c = std::make_unique<Connection>();
    c->db = *db;
    sqlite3_progress_handler(c->db, 1000, progress_handler, &c->deadline);
    return c;
  }
  void release(std::unique_ptr<Connection> c) {
    std::lock_guard lock(mu_);
    idle_.push_back(std::move(c));
  }

 private:
  std::filesystem::path path_;
  bool immutable_;
  std::mutex mu_;
  std::vector<std::unique_ptr<Connection>> idle_;  // guarded by mu_
};

Executor::Executor(ExecutorOptions options) : options_(options) {}
Executor::~Executor() = default;

void Executor::set_fault_injector(FaultInjector injector) {
  fault_injector_ = std::move(injector);
}

ExecutionResult Executor::run(const std::filesystem::path& db, std::string_view sql) const {
  return run_impl(db, sql, nullptr, options_.limits, false);
}
ExecutionResult Executor::run(const std::filesystem::path& db, std::string_view sql,
                              const QueryLimits& limits) const {
  return run_impl(db, sql, nullptr, limits, false);
}
ExecutionResult Executor::run(const std::filesystem::path& db, std::string_view sql,
                              const QueryLimits& limits, const RowSink& sink) const {
  return run_impl(db, sql, &sink, limits, false);
}
ExecutionResult Executor::explain_query_plan(const std::filesystem::path& db,
                                             std::string_view sql) const {
  return run_impl(db, sql, nullptr, options_.limits, true);
}

namespace {

// Why a statement is refused, and as what (kRejected, or kError for SQL that does not prepare).
struct Refusal {
  ExecStatus status;
  std::string why;
};

// The refusal of a prepared statement (`rc` from sqlite3_prepare), if any: a prepare error, an
// empty statement, more than one, a write, an EXPLAIN (unless `explain`: ours), no columns.
std::optional<Refusal> refusal_of(sqlite3* db, int rc, sqlite3_stmt* stmt, const char* tail, bool explain) {
  if (rc != SQLITE_OK) {
    std::string msg = sqlite3_errmsg(db);
    if (rc == SQLITE_AUTH || msg.find("not authorized") != std::string::npos)
      return Refusal{ExecStatus::kRejected, "not read-only: " + msg};
    return Refusal{ExecStatus::kError, msg};
  }
  if (stmt == nullptr) return Refusal{ExecStatus::kRejected, "empty statement"};
  if (tail && !only_blank_or_comments(tail)) return Refusal{ExecStatus::kRejected, "more than one statement"};
  if (!sqlite3_stmt_readonly(stmt)) return Refusal{ExecStatus::kRejected, "not read-only"};
  if (!explain && sqlite3_stmt_isexplain(stmt)) return Refusal{ExecStatus::kRejected, "EXPLAIN is not a query"};
  // Every query returns at least one column; REINDEX, ANALYZE, BEGIN and the like return none.
  if (sqlite3_column_count(stmt) == 0) return Refusal{ExecStatus::kRejected, "not a query (returns no columns)"};
  return std::nullopt;
}

// EXPLAIN QUERY PLAN never runs its statement, so SQLite calls it read-only whatever it wraps
// (REINDEX, DROP …): the statement itself must pass the checks a query passes.
std::optional<Refusal> refusal_to_explain(sqlite3* db, std::string_view sql) {
  sqlite3_stmt* probe = nullptr;
  const char* probe_tail = nullptr;
  int prc = sqlite3_prepare_v3(db, sql.data(), static_cast<int>(sql.size()), 0, &probe, &probe_tail);
  auto refused = refusal_of(db, prc, probe, probe_tail, false);
  sqlite3_finalize(probe);
  return refused;
}

// Timings and counters of a statement that ran (its last step has returned).
void record_statement(ExecutionResult& out, const FirstStep& first, Clock::time_point prepare_started,
                      sqlite3_stmt* s) {
  const auto done = Clock::now();
  if (first.seen) out.first_row_ms = std::chrono::duration<double, std::milli>(first.at - prepare_started).count();
  out.statement_ms = std::chrono::duration<double, std::milli>(done - prepare_started).count();
  out.counters.vm_steps = sqlite3_stmt_status(s, SQLITE_STMTSTATUS_VM_STEP, 0);
  out.counters.vm_steps_first_row = first.vm_steps;
  out.counters.fullscan_steps = sqlite3_stmt_status(s, SQLITE_STMTSTATUS_FULLSCAN_STEP, 0);
  out.counters.sorts = sqlite3_stmt_status(s, SQLITE_STMTSTATUS_SORT, 0);
}


// A slot of the bounded SQL pool (ExecutorOptions::max_concurrent; 0: unbounded), held for one
// call: waits for a free one, counts the peak, and gives it back when it goes.
class SqlSlot {
 public:
  SqlSlot(size_t max, std::mutex& mu, std::condition_variable& cv, size_t& active, size_t& peak)
      : max_(max), mu_(mu), cv_(cv), active_(active) {
    if (!max_) return;
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return active_ < max_; });
    ++active_;
    peak = std::max(peak, active_);
  }
  ~SqlSlot() {
    if (!max_) return;
    {
      std::lock_guard lock(mu_);
      --active_;
    }
    cv_.notify_one();
  }
  SqlSlot(const SqlSlot&) = delete;
  SqlSlot& operator=(const SqlSlot&) = delete;

 private:
  size_t max_;
  std::mutex& mu_;
  std::condition_variable& cv_;
  size_t& active_;  // guarded by mu_
};

// With a deadline the statement steps on a worker thread. The progress handler ends it at the
// deadline between VM steps; a single function call that never returns to the VM (LIKE, GLOB,
// instr over long strings; sqlite3_interrupt does not reach them) would hold the caller for as
// long as it runs. So after a grace period the caller answers kTimeout and abandons the worker:
// it keeps the statement and the connection, which it closes when the call ends; the
// connection never goes back to the pool. (Templated on the executor's private connection type.)
template <typename Connection>
class WatchedStep {
 public:
  struct Job {
    std::mutex mu;
    std::condition_variable cv;
    bool done = false;       // guarded by mu
    bool abandoned = false;  // guarded by mu
    std::unique_ptr<Connection> conn;
    sqlite3_stmt* stmt = nullptr;
    QueryLimits limits;
    ExecStatus status = ExecStatus::kOk;
    std::string error;
    ResultSet result;
    FirstStep first;
    std::shared_ptr<const ResultDigest> digest;
    std::vector<std::pair<size_t, Row>> later_firsts;
  };

  // Starts stepping `stmt` (owned by the job from now on) of `conn`.
  WatchedStep(std::unique_ptr<Connection> conn, sqlite3_stmt* stmt, const QueryLimits& limits,
              const std::vector<std::string>& columns)
      : job_(std::make_shared<Job>()) {
    job_->conn = std::move(conn);
    job_->stmt = stmt;
    job_->limits = limits;
    job_->result.columns = columns;
    auto work = [job = job_] { step(*job); };
    try {
      worker_ = std::thread(work);
    } catch (const std::system_error&) {
      work();  // no thread to be had: run here, bounded only by the progress handler
    }
  }
  WatchedStep(const WatchedStep&) = delete;
  WatchedStep& operator=(const WatchedStep&) = delete;

  // Waits until the deadline plus the grace period: false when the worker was abandoned then
  // (it keeps the job); true when it finished, the job's results are the caller's.
  bool finished() {
    const auto grace = std::chrono::duration<double>(
        std::clamp(job_->limits.timeout_s * 0.5, kAbandonGraceMinS, kAbandonGraceMaxS));
    const auto give_up = conn_deadline_plus(job_->conn->deadline.at, grace);
    std::unique_lock lock(job_->mu);
    if (!job_->cv.wait_until(lock, give_up, [&] { return job_->done; })) {
      job_->abandoned = true;
      sqlite3_interrupt(job_->conn->db);  // may end it early where SQLite checks; harmless otherwise
      lock.unlock();
      worker_.detach();
      return false;
    }
    lock.unlock();
    if (worker_.joinable()) worker_.join();
    return true;
  }
  Job& job() { return *job_; }

 private:
  static void step(Job& job) {
    auto [st, err] = step_rows(job.stmt, job.conn->deadline, job.limits, job.result, job.digest, job.first, nullptr,
                               &job.later_firsts);
    job.conn->deadline.active = false;
    bool abandoned;
    {
      std::lock_guard lock(job.mu);
      job.status = st;
      job.error = std::move(err);
      job.done = true;
      abandoned = job.abandoned;
    }
    if (abandoned) {
      sqlite3_finalize(job.stmt);
      job.stmt = nullptr;
      job.conn.reset();  // closes the connection
      job.result.rows.clear();
      job.digest.reset();
      job.later_firsts.clear();
    } else {
      job.cv.notify_all();
    }
  }

  std::shared_ptr<Job> job_;
  std::thread worker_;
};

}  // namespace

ExecutionResult Executor::run_impl(const std::filesystem::path& db_path, std::string_view sql, const RowSink* sink,
                                   const QueryLimits& limits, bool explain) const {
  SqlSlot slot(options_.max_concurrent, slots_mu_, slots_cv_, active_, peak_active_);  // on every return path
  auto started = Clock::now();
  ExecutionResult out;
  auto finish = [&](ExecStatus st, std::string err) {
    out.status = st;
    out.error = std::move(err);
    out.elapsed_ms = std::chrono::duration<double, std::milli>(Clock::now() - started).count();
    if (st != ExecStatus::kOk) {
      out.result.rows.clear();
      out.digest.reset();
      out.later_firsts.clear();
    }
    return std::move(out);
  };

  uint64_t call = calls_.fetch_add(1) + 1;
  if (fault_injector_) {
    Status injected = fault_injector_(call, sql);
    if (!injected) return finish(ExecStatus::kError, "injected fault: " + injected.message());
  }

  Pool* pool;
  {
    std::lock_guard lock(pools_mu_);
    auto& slot = pools_[db_path.string()];
    if (!slot) slot = std::make_unique<Pool>(db_path, options_.immutable);
    pool = slot.get();
  }
  auto conn_or = pool->acquire();
  if (!conn_or) return finish(ExecStatus::kError, conn_or.status().message());
  std::unique_ptr<Connection> conn = std::move(*conn_or);
  struct Return {
    Pool* pool;
    std::unique_ptr<Connection>& conn;
    ~Return() {
      if (conn) pool->release(std::move(conn));
    }
  } give_back{pool, conn};
  conn->apply(limits, sql.size());

  if (explain) {
    if (auto refused = refusal_to_explain(conn->db, sql)) return finish(refused->status, std::move(refused->why));
  }

  std::string text(sql);
  if (explain) text = "EXPLAIN QUERY PLAN " + text;

  sqlite3_stmt* stmt = nullptr;
  const char* tail = nullptr;
  const auto prepare_started = Clock::now();
  FirstStep first;
  int rc = sqlite3_prepare_v3(conn->db, text.c_str(), static_cast<int>(text.size()), 0, &stmt,
                              &tail);
  struct Finalize {
    sqlite3_stmt*& s;
    ~Finalize() { sqlite3_finalize(s); }
  } fin{stmt};
  if (auto refused = refusal_of(conn->db, rc, stmt, tail, explain)) return finish(refused->status, std::move(refused->why));

  int ncol = sqlite3_column_count(stmt);
  out.result.columns.reserve(static_cast<size_t>(ncol));
  for (int c = 0; c < ncol; ++c) {
    const char* name = sqlite3_column_name(stmt, c);
    out.result.columns.emplace_back(name ? name : "");
  }

  conn->deadline.fired = false;
  conn->deadline.active = limits.timeout_s > 0;
  if (conn->deadline.active)
    conn->deadline.at =
        started + std::chrono::duration_cast<Clock::duration>(
                      std::chrono::duration<double>(limits.timeout_s));

  if (!conn->deadline.active || limits.step_on_caller || sink) {
    auto [st, err] = step_rows(stmt, conn->deadline, limits, out.result, out.digest, first, sink, &out.later_firsts);
    record_statement(out, first, prepare_started, stmt);
    conn->deadline.active = false;
    return finish(st, std::move(err));
  }

  WatchedStep<Connection> watched(std::move(conn), stmt, limits, out.result.columns);
  stmt = nullptr;  // owned by the job now
  if (!watched.finished())
    return finish(ExecStatus::kTimeout,
                  "query exceeded the " + std::to_string(limits.timeout_s) +
                      " s timeout inside one function call; its connection was discarded");
  auto& job = watched.job();
  conn = std::move(job.conn);
  stmt = job.stmt;  // finalized by `fin`
  job.stmt = nullptr;
  first = job.first;
  record_statement(out, first, prepare_started, stmt);
  out.result = std::move(job.result);
  out.digest = std::move(job.digest);
  out.later_firsts = std::move(job.later_firsts);
  return finish(job.status, std::move(job.error));
}

Result<std::string> database_fingerprint(const std::filesystem::path& path) {
  static std::mutex mu;
  static std::unordered_map<std::string, std::pair<std::string, std::string>> memo;  // guarded
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return not_found("database file not found: " + path.string());
  auto stamp_of = [](const struct stat& s) {
    return std::to_string(s.st_size) + ":" + std::to_string(s.st_mtim.tv_sec) + "." +
           std::to_string(s.st_mtim.tv_nsec);
  };
  std::string stamp = stamp_of(st);
  // Committed rows may live in the -wal file: its content is part of what a query sees.
  std::filesystem::path wal = path;
  wal += "-wal";
  struct stat wst {};
  const bool has_wal = ::stat(wal.c_str(), &wst) == 0 && wst.st_size > 0;
  if (has_wal) stamp += "|wal:" + stamp_of(wst);
  {
    std::lock_guard lock(mu);
    auto it = memo.find(path.string());
    if (it != memo.end() && it->second.first == stamp) return it->second.second;
  }
  auto h = core::xxh128_file(path);
  if (!h) return h.status();
  std::string fp = *h;
  if (has_wal) {
    auto wh = core::xxh128_file(wal);
    if (!wh) return wh.status();
    fp = core::xxh128_hex(fp + "+wal:" + *wh);
  }
  std::lock_guard lock(mu);
  memo[path.string()] = {stamp, fp};
  return fp;
}

}  // namespace nl2sql::db
