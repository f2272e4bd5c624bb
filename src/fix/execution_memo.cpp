// One question's executions, each distinct query once (see execution_memo.h).
#include "nl2sql/fix/execution_memo.h"

#include <algorithm>
#include <cctype>
#include <set>
#include <string>

#include "nl2sql/core/text.h"
#include "nl2sql/db/result_digest.h"
#include "nl2sql/sql/parser.h"
#include "nl2sql/sql/printer.h"

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

namespace {

bool word_is(const sql::Token& t, std::string_view upper) {
  return t.kind == sql::TokenKind::kWord && core::upper(t.text) == upper;
}

// Whether ORDER BY term `e` names one of `core`'s result columns: its position, its alias, or
// the same expression.
bool names_result_column(const sql::Expr& e, const sql::SelectCore& core) {
  bool star = false;
  for (const auto& c : core.columns) star = star || c.expr->kind == sql::ExprKind::kStar;
  if (e.kind == sql::ExprKind::kLiteral && e.literal == sql::LiteralKind::kNumber) {
    if (star || e.text.empty() || e.text.size() > 9 || e.text.find_first_not_of("0123456789") != std::string::npos)
      return false;
    const size_t k = std::stoul(e.text);
    return k >= 1 && k <= core.columns.size();
  }
  if (e.kind == sql::ExprKind::kColumn && e.names.size() == 1)
    for (const auto& c : core.columns)
      if (!c.alias.empty() && core::lower(c.alias.name) == core::lower(e.names[0].name)) return true;
  const std::string text = sql::to_sql(e, {.lower_keywords = false, .lower_identifiers = true});
  for (const auto& c : core.columns)
    if (c.expr->kind != sql::ExprKind::kStar &&
        sql::to_sql(*c.expr, {.lower_keywords = false, .lower_identifiers = true}) == text)
      return true;
  return false;
}

}  // namespace

std::optional<std::string> without_distinct(std::string_view text) {
  const auto tokens = sql::tokenize(text);
  const sql::Token* distinct = nullptr;
  int depth = 0;
  for (size_t i = 0; i + 1 < tokens.size(); ++i) {
    const auto& t = tokens[i];
    if (t.kind == sql::TokenKind::kError || word_is(t, "COLLATE")) return std::nullopt;
    if (t.kind == sql::TokenKind::kOperator && t.text == "(") ++depth;
    if (t.kind == sql::TokenKind::kOperator && t.text == ")") --depth;
    if (!distinct && depth == 0 && word_is(t, "SELECT")) {
      if (!word_is(tokens[i + 1], "DISTINCT")) return std::nullopt;
      distinct = &tokens[i + 1];
    }
  }
  if (!distinct) return std::nullopt;
  auto parsed = sql::parse_query(text);
  if (!parsed || !parsed->select) return std::nullopt;
  const sql::Select& s = *parsed->select;
  if (s.cores.size() != 1 || s.limit || s.offset) return std::nullopt;
  const sql::SelectCore& core = s.cores[0];
  if (!core.distinct || core.is_values || !core.misplaced_order_by.empty() || core.misplaced_limit ||
      core.misplaced_offset)
    return std::nullopt;
  for (const auto& term : s.order_by)
    if (!names_result_column(*term.expr, core)) return std::nullopt;
  std::string plain(text.substr(0, distinct->pos.offset));
  plain += text.substr(distinct->pos.offset + distinct->text.size());
  return plain;
}

std::optional<db::ExecutionResult> distinct_of(const db::ExecutionResult& plain, size_t keep_rows) {
  if (!plain.ok()) return std::nullopt;
  db::ResultDigest local;
  if (!plain.digest) local = db::digest_of(plain.result);
  const db::ResultDigest& all = plain.digest ? *plain.digest : local;
  const std::vector<size_t> first = all.first_occurrences();
  const bool hashed = keep_rows > 0 && first.size() > keep_rows;
  const size_t shown = hashed ? keep_rows : first.size();
  // Row `i` of the plain answer, when it was kept: among the first rows, or among those kept
  // past them as the first of their kind (db::QueryLimits::keep_first_distinct).
  auto kept = [&](size_t i) -> const db::Row* {
    if (i < plain.result.rows.size()) return &plain.result.rows[i];
    auto it = std::lower_bound(plain.later_firsts.begin(), plain.later_firsts.end(), i,
                               [](const std::pair<size_t, db::Row>& e, size_t at) { return e.first < at; });
    return it != plain.later_firsts.end() && it->first == i ? &it->second : nullptr;
  };
  db::ExecutionResult out;
  out.result.rows.reserve(shown);
  for (size_t j = 0; j < shown; ++j) {
    const db::Row* row = kept(first[j]);
    if (row == nullptr) return std::nullopt;
    out.result.rows.push_back(*row);
  }
  out.status = db::ExecStatus::kOk;
  out.result.columns = plain.result.columns;
  if (hashed) out.digest = std::make_shared<const db::ResultDigest>(all.rows_at(first));
  out.elapsed_ms = plain.elapsed_ms;
  out.first_row_ms = plain.first_row_ms;
  out.statement_ms = plain.statement_ms;
  out.counters = plain.counters;
  out.from_plain_twin = true;
  return out;
}

std::optional<db::ExecutionResult> shaped_as(const db::ExecutionResult& whole, const db::QueryLimits& limits) {
  if (!whole.ok()) return std::nullopt;
  if (limits.timeout_s > 0 && whole.elapsed_ms > limits.timeout_s * 1000) return std::nullopt;
  db::ExecutionResult out;
  out.elapsed_ms = whole.elapsed_ms;
  out.first_row_ms = whole.first_row_ms;
  out.statement_ms = whole.statement_ms;
  out.counters = whole.counters;
  out.result.columns = whole.result.columns;
  if (limits.row_cap > 0 && whole.row_count() > limits.row_cap) {
    out.status = db::ExecStatus::kRowCap;
    out.error = "result has more than " + std::to_string(limits.row_cap) + " rows";
    return out;
  }
  if (whole.digest) {
    // Hashed past the same number of rows: a run under these limits but the row cap.
    if (limits.hash_rows_after == 0 || whole.result.rows.size() != limits.hash_rows_after) return std::nullopt;
    return whole;
  }
  const auto& rows = whole.result.rows;
  const size_t n = rows.size();
  out.status = db::ExecStatus::kOk;
  const size_t kept = limits.hash_rows_after;
  if (kept == 0 || n <= kept) {
    out.result.rows = rows;
    return out;
  }
  auto digest = std::make_shared<db::ResultDigest>(db::digest_of(whole.result));
  out.result.rows.assign(rows.begin(), rows.begin() + static_cast<std::ptrdiff_t>(kept));
  // As the executor picks them: the kinds among the kept rows first, then each new kind past
  // them until keep_first_distinct kinds are known.
  const size_t want = limits.keep_first_distinct;
  if (want > 0) {
    std::set<db::Hash128> kinds;
    for (size_t r = 0; r < kept && kinds.size() < want; ++r) kinds.insert(digest->row_key(r));
    for (size_t r = kept; r < n && kinds.size() < want; ++r)
      if (kinds.insert(digest->row_key(r)).second) out.later_firsts.emplace_back(r, rows[r]);
  }
  out.digest = std::move(digest);
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

void ExecutionMemo::derive_distinct(size_t keep_rows) { derive_keep_ = keep_rows; }

void ExecutionMemo::provide(const std::string& sql, std::shared_future<Shared> pending) {
  std::string key = normalize_sql(sql);
  std::lock_guard lock(mu_);
  provided_.insert_or_assign(std::move(key), std::move(pending));
}

void ExecutionMemo::expect(const std::string& sql) {
  std::string key = normalize_sql(sql);
  std::lock_guard lock(mu_);
  expected_.insert(std::move(key));
}

std::optional<std::string> ExecutionMemo::twin_of(const std::string& sql) const {
  if (!derive_keep_ || core::lower(sql).find("distinct") == std::string::npos) return std::nullopt;
  return without_distinct(sql);
}

ExecutionMemo::Shared ExecutionMemo::run(const std::string& sql) { return obtain(sql, normalize_sql(sql), true); }

ExecutionMemo::Shared ExecutionMemo::obtain(const std::string& sql, const std::string& key, bool count) {
  const auto twin = twin_of(sql);
  const std::string twin_key = twin ? normalize_sql(*twin) : std::string();
  std::promise<Shared> promise;
  bool from_twin = false;
  std::shared_future<Shared> provided;
  {
    std::unique_lock lock(mu_);
    if (count) ++requests_;
    if (auto it = results_.find(key); it != results_.end()) {
      auto pending = it->second;
      lock.unlock();
      return pending.get();
    }
    results_.emplace(key, promise.get_future().share());
    if (auto p = provided_.find(key); p != provided_.end()) provided = p->second;
    from_twin = !provided.valid() && twin && (results_.count(twin_key) || expected_.count(twin_key));
    if (!from_twin && !provided.valid()) ++executions_;
  }
  if (provided.valid()) {
    if (Shared given = provided.get()) {
      promise.set_value(given);
      return given;
    }
    std::lock_guard lock(mu_);
    ++executions_;
  }
  // Executed outside the lock: other queries of the question run meanwhile. The plain twin has
  // no top-level DISTINCT, so it never waits for this one.
  std::optional<db::ExecutionResult> made;
  if (from_twin) {
    made = distinct_of(*obtain(*twin, twin_key, false), *derive_keep_);
    std::lock_guard lock(mu_);
    ++(made ? derived_ : executions_);
  }
  Shared result = std::make_shared<const db::ExecutionResult>(made ? std::move(*made) : runner_(sql));
  promise.set_value(result);
  return result;
}

ExecutionMemo::Shared ExecutionMemo::find(const std::string& sql) {
  const std::string key = normalize_sql(sql);
  std::shared_future<Shared> pending;
  {
    std::lock_guard lock(mu_);
    if (auto it = results_.find(key); it != results_.end()) pending = it->second;
  }
  if (pending.valid()) return pending.get();
  // Not asked for, but its plain twin was: made from it, without running anything.
  const auto twin = twin_of(sql);
  if (!twin) return nullptr;
  const std::string twin_key = normalize_sql(*twin);
  {
    std::lock_guard lock(mu_);
    if (!results_.count(twin_key)) return nullptr;
  }
  auto d = distinct_of(*obtain(*twin, twin_key, false), *derive_keep_);
  if (!d) return nullptr;
  auto made = std::make_shared<const db::ExecutionResult>(std::move(*d));
  std::promise<Shared> promise;
  promise.set_value(made);
  std::shared_future<Shared> theirs;
  {
    std::lock_guard lock(mu_);
    auto [it, fresh] = results_.emplace(key, promise.get_future().share());
    if (fresh) {
      ++derived_;
      return made;
    }
    theirs = it->second;  // asked for meanwhile by another caller: theirs
  }
  return theirs.get();
}

size_t ExecutionMemo::executions() const {
  std::lock_guard lock(mu_);
  return executions_;
}

size_t ExecutionMemo::derived() const {
  std::lock_guard lock(mu_);
  return derived_;
}

size_t ExecutionMemo::requests() const {
  std::lock_guard lock(mu_);
  return requests_;
}

}  // namespace nl2sql::fix
