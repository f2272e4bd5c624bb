// One question's executions, each distinct query once (see execution_memo.h).
#include "nl2sql/fix/execution_memo.h"

#include <cctype>

namespace nl2sql::fix {

std::string normalize_sql(std::string_view sql) {
  std::string out;
  out.reserve(sql.size());
  size_t i = 0;
  const size_t n = sql.size();
  auto blank = [](char ch) { return std::isspace(static_cast<unsigned char>(ch)) != 0; };
  bool in_line_comment = false;  // the last thing copied was a `--` comment
  while (i < n) {
    const char ch = sql[i];
    if (blank(ch)) {
      for (; i < n && blank(sql[i]); ++i) {}
      if (!out.empty() && i < n) out.push_back(in_line_comment ? '\n' : ' ');
      in_line_comment = false;
      continue;
    }
    in_line_comment = false;
    if (ch == '-' && i + 1 < n && sql[i + 1] == '-') {
      // A line comment: copied as is up to (not including) its newline, which the blanks after
      // it become again.
      const size_t end = sql.find('\n', i);
      const size_t stop = end == std::string_view::npos ? n : end;
      out.append(sql.substr(i, stop - i));
      i = stop;
      in_line_comment = true;
      continue;
    }
    if (ch == '/' && i + 1 < n && sql[i + 1] == '*') {
      const size_t end = sql.find("*/", i + 2);
      const size_t stop = end == std::string_view::npos ? n : end + 2;
      out.append(sql.substr(i, stop - i));
      i = stop;
      continue;
    }
    if (ch == '\'' || ch == '"' || ch == '`' || ch == '[') {
      // A literal or quoted identifier, copied verbatim; a doubled quote stays inside it.
      const char close = ch == '[' ? ']' : ch;
      size_t j = i + 1;
      while (j < n) {
        if (sql[j] == close) {
          if (close != ']' && j + 1 < n && sql[j + 1] == close) {
            j += 2;
            continue;
          }
          ++j;
          break;
        }
        ++j;
      }
      out.append(sql.substr(i, j - i));
      i = j;
      continue;
    }
    out.push_back(ch);
    ++i;
  }
  return out;
}

ExecutionMemo::ExecutionMemo(const db::Executor& executor, std::filesystem::path db_path)
    : runner_([&executor, db_path = std::move(db_path)](const std::string& sql) {
        return executor.run(db_path, sql);
      }) {}

ExecutionMemo::ExecutionMemo(const db::Executor& executor, std::filesystem::path db_path, db::QueryLimits limits)
    : runner_([&executor, db_path = std::move(db_path), limits](const std::string& sql) {
        return executor.run(db_path, sql, limits);
      }) {}

ExecutionMemo::Shared ExecutionMemo::run(const std::string& sql) {
  std::string key = normalize_sql(sql);
  std::promise<Shared> promise;
  {
    std::unique_lock lock(mu_);
    ++requests_;
    if (auto it = results_.find(key); it != results_.end()) {
      auto pending = it->second;
      lock.unlock();
      return pending.get();
    }
    results_.emplace(key, promise.get_future().share());
    ++executions_;
  }
  // Executed outside the lock: other queries of the question run meanwhile.
  Shared result = std::make_shared<const db::ExecutionResult>(runner_(sql));
  promise.set_value(result);
  return result;
}

ExecutionMemo::Shared ExecutionMemo::find(const std::string& sql) const {
  std::shared_future<Shared> pending;
  {
    std::lock_guard lock(mu_);
    auto it = results_.find(normalize_sql(sql));
    if (it == results_.end()) return nullptr;
    pending = it->second;
  }
  return pending.get();
}

size_t ExecutionMemo::executions() const {
  std::lock_guard lock(mu_);
  return executions_;
}

size_t ExecutionMemo::requests() const {
  std::lock_guard lock(mu_);
  return requests_;
}

}  // namespace nl2sql::fix
