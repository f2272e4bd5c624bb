#include "nl2sql/sql/ast.h"

namespace nl2sql::sql {
namespace {

ExprPtr clone_or_null(const ExprPtr& e) { return e ? e->clone() : nullptr; }
SelectPtr clone_or_null(const SelectPtr& s) { return s ? s->clone() : nullptr; }

FrameBound clone_bound(const FrameBound& b) { return {b.kind, clone_or_null(b.offset)}; }

std::vector<OrderingTerm> clone_terms(const std::vector<OrderingTerm>& terms) {
  std::vector<OrderingTerm> out;
  for (const auto& t : terms) out.push_back({clone_or_null(t.expr), t.direction, t.nulls});
  return out;
}

std::vector<ExprPtr> clone_exprs(const std::vector<ExprPtr>& v) {
  std::vector<ExprPtr> out;
  out.reserve(v.size());
  for (const auto& e : v) out.push_back(clone_or_null(e));
  return out;
}

TableRef clone_table_ref(const TableRef& t) {
  TableRef r;
  r.kind = t.kind;
  r.pos = t.pos;
  r.schema = t.schema;
  r.name = t.name;
  r.args = clone_exprs(t.args);
  r.select = clone_or_null(t.select);
  if (t.join) r.join = std::make_unique<JoinList>(clone_join_list(*t.join));
  r.alias = t.alias;
  r.has_as = t.has_as;
  r.indexed = t.indexed;
  r.join_kind = t.join_kind;
  r.natural = t.natural;
  r.outer = t.outer;
  r.on = clone_or_null(t.on);
  r.using_columns = t.using_columns;
  return r;
}

}  // namespace

WindowSpec clone_window(const WindowSpec& w) {
  WindowSpec r;
  r.base_name = w.base_name;
  r.partition_by = clone_exprs(w.partition_by);
  r.order_by = clone_terms(w.order_by);
  r.has_frame = w.has_frame;
  r.frame_unit = w.frame_unit;
  r.frame_between = w.frame_between;
  r.frame_start = clone_bound(w.frame_start);
  r.frame_end = clone_bound(w.frame_end);
  r.frame_exclude = w.frame_exclude;
  return r;
}

JoinList clone_join_list(const JoinList& j) {
  JoinList r;
  for (const auto& t : j.items) r.items.push_back(clone_table_ref(t));
  return r;
}

SelectCore clone_core(const SelectCore& c) {
  SelectCore r;
  r.pos = c.pos;
  r.is_values = c.is_values;
  for (const auto& row : c.values) r.values.push_back(clone_exprs(row));
  r.distinct = c.distinct;
  r.all = c.all;
  for (const auto& col : c.columns) r.columns.push_back({clone_or_null(col.expr), col.alias, col.has_as});
  if (c.from) r.from = std::make_unique<JoinList>(clone_join_list(*c.from));
  r.where = clone_or_null(c.where);
  r.group_by = clone_exprs(c.group_by);
  r.having = clone_or_null(c.having);
  for (const auto& [name, w] : c.windows)
    r.windows.emplace_back(name, std::make_unique<WindowSpec>(clone_window(*w)));
  r.misplaced_order_by = clone_terms(c.misplaced_order_by);
  r.misplaced_limit = clone_or_null(c.misplaced_limit);
  r.misplaced_offset = clone_or_null(c.misplaced_offset);
  return r;
}

ExprPtr Expr::clone() const {
  auto e = std::make_unique<Expr>();
  e->kind = kind;
  e->pos = pos;
  e->op = op;
  e->text = text;
  e->literal = literal;
  e->names = names;
  e->children = clone_exprs(children);
  e->select = clone_or_null(select);
  e->negated = negated;
  e->distinct = distinct;
  e->star = star;
  e->has_operand = has_operand;
  e->has_else = has_else;
  e->filter = clone_or_null(filter);
  if (over) e->over = std::make_unique<WindowSpec>(clone_window(*over));
  e->over_name = over_name;
  return e;
}

SelectPtr Select::clone() const {
  auto s = std::make_unique<Select>();
  s->pos = pos;
  s->recursive = recursive;
  for (const auto& c : with) s->with.push_back({c.name, c.columns, c.materialized, clone_or_null(c.select)});
  for (const auto& c : cores) s->cores.push_back(clone_core(c));
  s->ops = ops;
  s->order_by = clone_terms(order_by);
  s->limit = clone_or_null(limit);
  s->offset = clone_or_null(offset);
  return s;
}

}  // namespace nl2sql::sql
