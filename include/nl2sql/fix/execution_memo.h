// fix::ExecutionMemo: one question's executions, each distinct query run once.
//
// A question's candidates repeat each other (21 candidates are often a handful of distinct
// queries) and the fixer, the judge and the selectors all want the same results. The memo keys a
// query by its normalized text (normalize_sql: runs of blanks outside literals, identifiers and
// comments become one, leading/trailing blanks dropped — nothing that can change what SQLite
// runs) and executes it once through the runner it was given (in the pipeline, the run's
// db::Executor); every later request, from any thread, gets the same shared, immutable result.
// Two threads asking for the same new query at once: one executes, the other waits for it.
//
// DISTINCT twins: candidates often differ only by a top-level DISTINCT, and at BIRD scale both
// forms cost the same scan. With derive_distinct() on, `SELECT DISTINCT …` is answered from the
// result of the same text without DISTINCT, repeats dropped, when that query has been asked for
// or is announced by expect() (without_distinct() says when this is exactly what SQLite's DISTINCT
// returns). The plain query runs then (or is waited for), and the DISTINCT one only when the
// plain one did not finish within the limits or kept too few rows to show the first distinct
// ones. The derived result is marked db::ExecutionResult::from_plain_twin.
//
// Memory: with QueryLimits::hash_rows_after set (fix.keep_rows in the pipeline), a result held
// here keeps its first rows and a digest of the whole answer (db/result_digest.h), never more.
//
// Lifetime: one memo per question (results are held until it is destroyed). Thread-safe.
#pragma once

#include <cstddef>
#include <filesystem>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "nl2sql/db/executor.h"

namespace nl2sql::fix {

// `sql` with every run of blanks outside string literals, quoted identifiers and comments
// collapsed to one space (a newline after a `--` comment, which still ends there), and leading
// and trailing blanks removed.
std::string normalize_sql(std::string_view sql);

// `sql` without its top-level DISTINCT keyword, when dropping repeated rows from that query's
// result gives exactly a result SQLite may return for `sql`: one SELECT (no compound, no VALUES)
// written `SELECT DISTINCT`, no LIMIT or OFFSET (they count rows after DISTINCT), every ORDER BY
// term a result column (its alias, its position, or the same expression), and no COLLATE in the
// text. The columns' declared collations are not seen here: the caller turns derivation on only
// for databases that declare none (DISTINCT then compares with BINARY, as a digest's row_key does).
// nullopt otherwise, or when `sql` does not parse.
std::optional<std::string> without_distinct(std::string_view sql);

// The result of `SELECT DISTINCT …` made from `plain`, the same query's result without DISTINCT:
// its rows in order with every repeat of an earlier row dropped, shaped as the executor shapes
// a result under QueryLimits::hash_rows_after = `keep_rows` (past it: the first rows and the
// digest of the whole answer). nullopt when `plain` did not succeed, or holds only the first rows
// and the first distinct rows to keep are not all among them nor among its later_firsts (run
// `plain` with QueryLimits::keep_first_distinct = `keep_rows` to have them).
std::optional<db::ExecutionResult> distinct_of(const db::ExecutionResult& plain, size_t keep_rows);

// `whole`, a run of a query to its whole answer, as a run of the same query under `limits` gives
// it: stopped at the row cap (status kRowCap, the executor's message), else its rows, or past
// limits.hash_rows_after its first rows, the digest of the whole answer and the first rows of
// each kind (limits.keep_first_distinct); the timings are `whole`'s. `whole` is either a run
// that kept every row, or a run under `limits` without the row cap (taken as it is). nullopt
// when that cannot be told from `whole`: it failed, took longer than limits' timeout, or was
// hashed past another number of rows.
std::optional<db::ExecutionResult> shaped_as(const db::ExecutionResult& whole, const db::QueryLimits& limits);

class ExecutionMemo {
 public:
  using Runner = std::function<db::ExecutionResult(const std::string& sql)>;
  using Shared = std::shared_ptr<const db::ExecutionResult>;

  explicit ExecutionMemo(Runner runner) : runner_(std::move(runner)) {}
  // The runner executes through `executor` on `db_path` with the executor's limits.
  ExecutionMemo(const db::Executor& executor, std::filesystem::path db_path);
  // The same with `limits` (the pipeline's: the executor's with QueryLimits::hash_rows_after set,
  // so a large result keeps its first rows and the digest of the whole answer).
  ExecutionMemo(const db::Executor& executor, std::filesystem::path db_path, db::QueryLimits limits);

  // The result of `sql`: executed by the runner the first time its normalized text is seen,
  // shared afterwards.
  Shared run(const std::string& sql);
  // The result of `sql` when it has been executed (or is being executed: waits), or can be
  // derived from its plain twin's; nullptr when the memo has not seen it.
  Shared find(const std::string& sql);

  // Answers `SELECT DISTINCT …` from its plain twin (see above); `keep_rows` is the runner's
  // QueryLimits::hash_rows_after. Off by default.
  void derive_distinct(size_t keep_rows);
  // Announces a query that will be asked for: a DISTINCT twin asked before it takes its result
  // from it instead of running on its own.
  void expect(const std::string& sql);
  // `sql`'s result comes from elsewhere (gold's run, made by the judge from the question's
  // start): a run of `sql` waits for `pending` and takes what it gives, executing nothing; when
  // that is null, `sql` runs as usual.
  void provide(const std::string& sql, std::shared_future<Shared> pending);

  // Queries executed (distinct normalized texts), requests answered, and results made from a
  // plain twin's (not executed).
  size_t executions() const;
  size_t requests() const;
  size_t derived() const;

 private:
  // The result of `sql` (normalized: `key`); `count` says whether it is a caller's request.
  Shared obtain(const std::string& sql, const std::string& key, bool count);
  // The plain twin of `sql` when derivation is on and it has one.
  std::optional<std::string> twin_of(const std::string& sql) const;

  Runner runner_;
  mutable std::mutex mu_;
  std::map<std::string, std::shared_future<Shared>> results_;  // guarded by mu_
  std::set<std::string> expected_;                             // guarded by mu_
  std::map<std::string, std::shared_future<Shared>> provided_; // guarded by mu_
  size_t executions_ = 0;                                      // guarded by mu_
  size_t requests_ = 0;                                        // guarded by mu_
  size_t derived_ = 0;                                         // guarded by mu_
  std::optional<size_t> derive_keep_;                          // set before use
};

}  // namespace nl2sql::fix
