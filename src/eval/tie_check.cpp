#include "tie_check.h"

#include <algorithm>
#include <cctype>

#include "nl2sql/sql/parser.h"
#include "nl2sql/sql/printer.h"
#include "nl2sql/core/text.h"

namespace nl2sql::eval {
namespace {

using core::lower;

std::optional<long> integer_literal(const sql::Expr* e) {
  if (!e || e->kind != sql::ExprKind::kLiteral || e->literal != sql::LiteralKind::kNumber)
    return std::nullopt;
  if (e->text.empty() || !std::all_of(e->text.begin(), e->text.end(), ::isdigit)) return std::nullopt;
  try {
    return std::stol(e->text);
  } catch (...) {
    return std::nullopt;
  }
}

sql::ExprPtr number(long v) {
  auto e = std::make_unique<sql::Expr>();
  e->kind = sql::ExprKind::kLiteral;
  e->literal = sql::LiteralKind::kNumber;
  e->text = std::to_string(v);
  return e;
}

}  // namespace

TieCheckKind tie_check_kind(const std::string& gold_sql, TieProbe* probe) {
  if (lower(gold_sql).find("limit") == std::string::npos) return TieCheckKind::kNone;
  auto stmt = sql::parse_query(gold_sql);
  if (!stmt.is_ok()) return TieCheckKind::kReverseScan;
  sql::Select& s = *stmt->select;
  if (!s.limit) return TieCheckKind::kReverseScan;  // LIMIT only inside subqueries
  if (s.order_by.empty()) return TieCheckKind::kReverseScan;
  auto limit = integer_literal(s.limit.get());
  long offset = 0;
  if (s.offset) {
    auto o = integer_literal(s.offset.get());
    if (!o) return TieCheckKind::kNone;
    offset = *o;
  }
  if (!limit || *limit < 1 || s.cores.size() != 1 || s.cores[0].is_values) return TieCheckKind::kNone;
  sql::SelectCore& core = s.cores[0];
  for (const auto& c : core.columns)
    if (c.expr && c.expr->kind == sql::ExprKind::kStar) return TieCheckKind::kNone;
  const size_t n_out = core.columns.size();
  TieProbe p;
  std::vector<sql::ExprPtr> appended;
  for (const auto& term : s.order_by) {
    if (auto k = integer_literal(term.expr.get())) {
      if (*k < 1 || static_cast<size_t>(*k) > n_out) return TieCheckKind::kNone;
      p.key_columns.push_back(static_cast<size_t>(*k - 1));
      continue;
    }
    std::optional<size_t> alias_at;
    if (term.expr->kind == sql::ExprKind::kColumn && term.expr->names.size() == 1) {
      for (size_t i = 0; i < n_out; ++i)
        if (!core.columns[i].alias.empty() &&
            lower(core.columns[i].alias.name) == lower(term.expr->names[0].name))
          alias_at = i;
    }
    if (alias_at) {
      p.key_columns.push_back(*alias_at);
      continue;
    }
    if (core.distinct) return TieCheckKind::kNone;  // extra columns would change DISTINCT
    p.key_columns.push_back(n_out + appended.size());
    appended.push_back(term.expr->clone());
  }
  for (auto& e : appended) {
    sql::ResultColumn rc;
    rc.expr = std::move(e);
    core.columns.push_back(std::move(rc));
  }
  p.appended = p.key_columns.empty() ? 0 : core.columns.size() - n_out;
  // An appended min()/max() could change which row SQLite takes bare columns from; random()
  // makes gold's answer differ from run to run.
  bool aggregate_extremum = false;
  for (size_t i = n_out; i < core.columns.size(); ++i) {
    const std::string printed = lower(sql::to_sql(*core.columns[i].expr));
    aggregate_extremum = aggregate_extremum || printed.find("min(") != std::string::npos ||
                         printed.find("max(") != std::string::npos;
  }
  p.answers_gold = *limit == 1 && offset == 0 && !aggregate_extremum &&
                   lower(gold_sql).find("random") == std::string::npos;
  s.limit = number(2);
  s.offset = number(offset + *limit - 1);
  p.sql = sql::to_sql(s);
  *probe = std::move(p);
  return TieCheckKind::kOrderByProbe;
}

bool probe_shows_tie(const TieProbe& probe, const db::ResultSet& result) {
  if (result.rows.size() < 2) return false;
  const auto& a = result.rows[0];
  const auto& b = result.rows[1];
  for (size_t k : probe.key_columns)
    if (k >= a.size() || !(a[k] == b[k])) return false;
  size_t n_out = a.size() - probe.appended;
  for (size_t i = 0; i < n_out; ++i)
    if (!(a[i] == b[i])) return true;
  return false;
}

}  // namespace nl2sql::eval

namespace nl2sql::eval {

namespace {

// ASCII case folded, trailing spaces dropped: equal under BINARY, NOCASE or RTRIM implies equal here.
std::string collation_free(const std::string& s) {
  std::string out = s;
  while (!out.empty() && out.back() == ' ') out.pop_back();
  return core::lower(out);
}

// SQLite's storage classes in sort order; numbers form one class.
int storage_class(const db::Value& v) {
  switch (v.type) {
    case db::ValueType::kNull: return 0;
    case db::ValueType::kInteger:
    case db::ValueType::kReal: return 1;
    case db::ValueType::kText: return 2;
    case db::ValueType::kBlob: return 3;
  }
  return 4;
}

bool surely_different(const db::Value& a, const db::Value& b) {
  if (storage_class(a) != storage_class(b)) return true;
  switch (a.type) {
    case db::ValueType::kNull: return false;
    case db::ValueType::kInteger:
    case db::ValueType::kReal: {
      if (a.type == db::ValueType::kInteger && b.type == db::ValueType::kInteger) return a.i != b.i;
      const long double x = a.type == db::ValueType::kInteger ? static_cast<long double>(a.i) : a.r;
      const long double y = b.type == db::ValueType::kInteger ? static_cast<long double>(b.i) : b.r;
      return x < y || y < x;  // NaN: never "surely different"
    }
    case db::ValueType::kText: return collation_free(a.s) != collation_free(b.s);
    case db::ValueType::kBlob: return a.s != b.s;
  }
  return false;
}

}  // namespace

bool keys_told_apart(const TieProbe& probe, const db::Row& a, const db::Row& b) {
  for (size_t k : probe.key_columns)
    if (k < a.size() && k < b.size() && surely_different(a[k], b[k])) return true;
  return false;
}

}  // namespace nl2sql::eval
