// db::Executor: the one way SQL reaches a database.
//
// Guarantees, by construction rather than by checking the SQL text:
//  - connections are opened read-only (SQLITE_OPEN_READONLY, URI mode=ro), with defensive mode
//    on, extension loading off and ATTACH impossible (SQLITE_LIMIT_ATTACHED = 0);
//  - an authorizer allows only SELECT, table/column reads, recursive CTEs and ordinary
//    functions; PRAGMA, ATTACH/DETACH, every write, DDL, transactions and load_extension are
//    denied at prepare time;
//  - exactly one statement runs: sqlite3_stmt_readonly() must hold, and any non-blank text
//    after the first statement (other than comments) rejects the query;
//  - a deadline enforced by a progress handler (timeout) and a row cap end runaway queries.
//    With a timeout the statement steps on a worker thread: one function call that never
//    returns to SQLite's VM (LIKE/GLOB/instr over long strings, which neither the progress
//    handler nor sqlite3_interrupt reaches) is answered kTimeout shortly after the deadline
//    (grace: half the timeout, 0.1-1 s); its worker keeps the connection, which is closed,
//    never pooled again, when the call ends. That worker still uses a core until then;
//  - memory: a result's bytes are counted as rows are read, each value's size checked before
//    it is copied, and SQLite's length limit equals the byte cap, so no single value outgrows
//    it (zeroblob(1e9) is kRowCap at once);
//  - a database with committed rows in its -wal is read through a private snapshot (copied and
//    checkpointed in a temporary folder, logged), so nothing is created beside the user's files
//    and a read-only folder works; without a -wal, files open mode=ro&immutable=1.
// Expected failures are statuses inside ExecutionResult, never exceptions.
//
// Connections are pooled per path and kept for the Executor's lifetime: a database file that is
// replaced while an Executor is alive keeps being read through the old connections (with
// immutable=1 even its old pages may be served). Use a fresh Executor after replacing a file.
//
// Thread-safety: run() may be called from any number of threads. Each database path has a
// pool of connections; a thread takes one for the duration of a query and returns it, so
// connections are never shared by two threads at once.
#pragma once

#include <atomic>
#include <condition_variable>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "nl2sql/core/status.h"
#include "nl2sql/db/result_digest.h"
#include "nl2sql/db/value.h"

struct sqlite3;

namespace nl2sql::db {

enum class ExecStatus : uint8_t {
  kOk = 0,
  kError = 1,     // syntax/schema/runtime error reported by SQLite
  kTimeout = 2,   // deadline passed
  kRowCap = 3,    // more rows (or bytes) than allowed
  kRejected = 4,  // not a single read-only query; never executed
};

const char* exec_status_name(ExecStatus s);

// What SQLite did for one statement, read with sqlite3_stmt_status after its last step: the
// same on every machine and every run for one database file and one SQLite version, unlike a
// clock (eval's ves-steps / rves-steps score on them).
struct StatementCounters {
  int64_t vm_steps = 0;             // SQLITE_STMTSTATUS_VM_STEP, the whole execution
  int64_t vm_steps_first_row = 0;   // the same, when the first sqlite3_step returned
  int64_t fullscan_steps = 0;       // SQLITE_STMTSTATUS_FULLSCAN_STEP
  int64_t sorts = 0;                // SQLITE_STMTSTATUS_SORT
};

// Keys that readers derive from one result (select::result_key), computed once per result
// object and kept with it: the candidates that share a result (the question's execution memo),
// and the selectors, curves and records that cluster the same pool again, all read the first
// computation. A copy starts empty, so a copy that is then changed never reads a stale key.
class DerivedKeys {
 public:
  DerivedKeys() = default;
  DerivedKeys(const DerivedKeys&) {}
  DerivedKeys& operator=(const DerivedKeys&);
  // The key of `kind`, made by `make` the first time it is asked for (outside the lock: two
  // threads asking at once may both make it, and keep the first).
  std::string get(int kind, const std::function<std::string()>& make) const;

 private:
  mutable std::mutex mu_;
  mutable std::map<int, std::string> keys_;  // guarded by mu_
};

struct ExecutionResult {
  ExecStatus status = ExecStatus::kOk;
  std::string error;  // SQLite's message or the guardrail's reason
  ResultSet result;
  // Set when the result outgrew QueryLimits::hash_rows_after: every row's hashes (the whole
  // answer, for comparisons), while `result` keeps only the first rows.
  std::shared_ptr<const ResultDigest> digest;
  double elapsed_ms = 0;  // the whole call: connection from the pool, prepare, every step
  // From the start of sqlite3_prepare (the connection already open) to the first step's return
  // (what Python's cursor.execute() costs), and to the last step's return (execute + fetchall).
  // 0 when the statement was never stepped.
  double first_row_ms = 0;
  double statement_ms = 0;
  StatementCounters counters;
  bool ok() const { return status == ExecStatus::kOk; }
  // Rows of the whole answer (more than result.rows holds when it was hashed).
  size_t row_count() const { return digest ? digest->rows() : result.rows.size(); }
  // Not executed: the rows of the same query without its DISTINCT, repeats dropped
  // (fix::ExecutionMemo); the timings and counters are that query's.
  bool from_plain_twin = false;
  // With QueryLimits::keep_first_distinct: rows past those `result` keeps that are the first
  // of their kind (equal as ResultDigest::first_occurrences tells rows apart), with their
  // positions in the answer, in order — what the query's DISTINCT twin shows (fix::distinct_of).
  std::vector<std::pair<size_t, Row>> later_firsts;
  DerivedKeys derived_keys;
};

struct QueryLimits {
  double timeout_s = 30.0;             // <= 0: no timeout
  size_t row_cap = 100000;             // 0: unlimited
  // Memory guard on one result, counted as rows are read; also SQLite's length limit, so no
  // single string or blob can outgrow it. 0: SQLite's maximum (1e9 bytes).
  size_t max_result_bytes = 256ull << 20;
  // Run with PRAGMA reverse_unordered_selects on: tables and indexes are scanned in reverse
  // where no order is required, so rows that tie under ORDER BY come out in another order.
  // Used to detect gold answers that depend on tie order.
  bool reverse_scan_order = false;
  // Step on the calling thread, the deadline enforced by the progress handler alone (no worker
  // thread, whose start would be measured). For timing queries already known to finish: a
  // single function call that never returns to the VM is not cut at the deadline this way.
  bool step_on_caller = false;
  // 0: keep every row. Otherwise, once a result has more rows than this, every row (those kept
  // so far included) is hashed into ExecutionResult::digest as it is read, and only the first
  // `hash_rows_after` rows stay in `result`: memory is 16 bytes per value past that point, so
  // an evaluation can compare answers of any size without a row cap. The byte cap counts the
  // digest too. Used by the evaluator (eval/evaluator.h).
  size_t hash_rows_after = 0;
  // With hash_rows_after: past the rows kept, the rows that are the first of their kind are
  // kept too (ExecutionResult::later_firsts) until this many kinds are known, kept rows
  // included; they count against the byte cap. 0: none.
  size_t keep_first_distinct = 0;
  // Temporary B-trees (DISTINCT, GROUP BY or ORDER BY without a usable index) in memory
  // (PRAGMA temp_store=MEMORY) instead of a temporary file. For our own scans whose temporary
  // tables are bounded (the value index's DISTINCT scans: a temporary file costs them about as
  // much waiting on the file system as computing).
  bool temp_store_memory = false;
};

// Receives the rows of Executor::run(db, sql, limits, sink) one at a time; a row is valid only
// during the call.
using RowSink = std::function<void(const Row&)>;

struct ExecutorOptions {
  QueryLimits limits;
  // Open databases with immutable=1 (no locking; faster). Only safe when nothing writes the
  // file while we read it; benchmark databases qualify. A non-empty -wal file always means a
  // private snapshot, opened immutable (see above).
  bool immutable = true;
  // Queries running at once across all threads (0: unlimited). The pipeline bounds SQL work
  // separately from its LLM concurrency; callers beyond the limit wait for a slot.
  size_t max_concurrent = 0;
};

class Executor {
 public:
  explicit Executor(ExecutorOptions options = {});
  ~Executor();
  Executor(const Executor&) = delete;
  Executor& operator=(const Executor&) = delete;

  ExecutionResult run(const std::filesystem::path& db, std::string_view sql) const;
  ExecutionResult run(const std::filesystem::path& db, std::string_view sql,
                      const QueryLimits& limits) const;
  // The same, every row handed to `sink` as it is read instead of kept (result.rows stays
  // empty; row_cap counts the rows handed over, max_result_bytes applies to each row alone).
  // Steps on the calling thread (as with step_on_caller), so `sink` is never called after
  // run() returns.
  ExecutionResult run(const std::filesystem::path& db, std::string_view sql,
                      const QueryLimits& limits, const RowSink& sink) const;

  // EXPLAIN QUERY PLAN rows (id, parent, detail) for a read-only query.
  ExecutionResult explain_query_plan(const std::filesystem::path& db, std::string_view sql) const;

  const ExecutorOptions& options() const { return options_; }
  // Most queries seen running at once (tracked only when max_concurrent is set).
  size_t peak_concurrent() const {
    std::lock_guard lock(slots_mu_);
    return peak_active_;
  }

  // Fault injection for tests: when set, called with the 1-based number of each run() call and
  // the SQL it was given; a non-OK status returned makes that call fail with it (kError)
  // without executing. Calls may come from several threads at once (a question's gold runs
  // beside its candidates), so a test that picks calls should pick them by their SQL.
  using FaultInjector = std::function<Status(uint64_t call_number, std::string_view sql)>;
  void set_fault_injector(FaultInjector injector);

 private:
  struct Connection;
  class Pool;
  ExecutionResult run_impl(const std::filesystem::path& db, std::string_view sql, const RowSink* sink,
                           const QueryLimits& limits, bool explain) const;

  ExecutorOptions options_;
  mutable std::mutex pools_mu_;
  mutable std::map<std::string, std::unique_ptr<Pool>> pools_;  // guarded by pools_mu_
  mutable std::atomic<uint64_t> calls_{0};
  mutable std::mutex slots_mu_;
  mutable std::condition_variable slots_cv_;
  mutable size_t active_ = 0;  // guarded by slots_mu_
  mutable size_t peak_active_ = 0;  // guarded by slots_mu_
  FaultInjector fault_injector_;
};

// What a read-only connection to `path` opens, so that every committed row is seen and nothing
// is ever written beside the user's file (read-only storage included): a database whose -wal
// holds committed rows is read from a private snapshot (the file and its -wal copied to a
// temporary folder, checkpointed there; removed at exit); a WAL-mode file without a -wal, or one
// with an empty -wal, is opened immutable (no -shm needed); any other file as asked.
struct ReadOnlySource {
  std::filesystem::path path;  // the user's file or its snapshot
  bool immutable = false;
};
Result<ReadOnlySource> read_only_source(const std::filesystem::path& path, bool immutable = false);
// The SQLite URI of `source` (mode=ro, immutable=1 when set), for sqlite3_open_v2 with SQLITE_OPEN_URI.
std::string read_only_uri(const ReadOnlySource& source);

// Why the database at `path` cannot be read, and what to do, for an error message: no read
// permission, or not an SQLite 3 file (its header), else a general hint.
std::string unreadable_database_hint(const std::filesystem::path& path);

// Opens `path` read-only with the same guardrails (authorizer included) and functions, for code
// that needs the raw handle (schema introspection). Caller closes with sqlite3_close_v2.
// Besides SQLite's built-ins, every connection has nl2sql_hash(x, …): a deterministic 63-bit
// hash of its arguments' values (a number hashes the same as integer or as integral real, as
// GROUP BY compares them; text by its bytes, so a NOCASE key's case variants hash apart). The
// lineage sample keys groups by it (sql/lineage.h).
Result<sqlite3*> open_read_only(const std::filesystem::path& path, bool immutable = false);

// Locks a connection down to what a read-only query needs: defensive mode, no extensions, no
// untrusted schema, no ATTACH, and an authorizer allowing only reads and functions other than
// the file/pointer ones (load_extension, readfile, writefile, edit, fts3_tokenizer). Every
// connection of the executor gets it; any other connection that runs model-written SQL (the
// in-memory separating instance) must get it too, so there is one policy.
void lock_down_read_only(sqlite3* db);

// XXH3-128 of the database file's bytes, memoized per (path, size, mtime); when a non-empty
// -wal file exists, a hash of both files' hashes (the -wal holds committed rows).
Result<std::string> database_fingerprint(const std::filesystem::path& path);

}  // namespace nl2sql::db
