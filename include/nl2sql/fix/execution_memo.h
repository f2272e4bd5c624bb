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
#include <string>
#include <string_view>

#include "nl2sql/db/executor.h"

namespace nl2sql::fix {

// `sql` with every run of blanks outside string literals, quoted identifiers and comments
// collapsed to one space (a newline after a `--` comment, which still ends there), and leading
// and trailing blanks removed.
std::string normalize_sql(std::string_view sql);

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
  // The result of `sql` when it has been executed (or is being executed: waits); nullptr when
  // the memo has not seen it.
  Shared find(const std::string& sql) const;

  // Queries executed (distinct normalized texts) and requests answered.
  size_t executions() const;
  size_t requests() const;

 private:
  Runner runner_;
  mutable std::mutex mu_;
  std::map<std::string, std::shared_future<Shared>> results_;  // guarded by mu_
  size_t executions_ = 0;                                      // guarded by mu_
  size_t requests_ = 0;                                        // guarded by mu_
};

}  // namespace nl2sql::fix
