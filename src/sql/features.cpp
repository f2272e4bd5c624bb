#include "nl2sql/sql/features.h"

#include <algorithm>
#include <cctype>

#include "nl2sql/core/text.h"

namespace nl2sql::sql {
namespace {

bool spider_agg(const Expr& e) {
  if (e.kind != ExprKind::kFunction || e.over || !e.over_name.empty()) return false;
  std::string n = core::lower(e.op);
  return n == "max" || n == "min" || n == "count" || n == "sum" || n == "avg";
}

// ---- features ----------------------------------------------------------------------------

class FeatureWalker {
 public:
  Features f;

  void select(const Select& s, int depth) {
    f.max_nesting = std::max(f.max_nesting, depth);
    if (!s.with.empty()) f.cte = true;
    for (const auto& c : s.with) {
      ++f.subqueries;
      select(*c.select, depth + 1);
    }
    if (s.cores.size() > 1) f.set_operation = true;
    for (const auto& c : s.cores) core(c, depth);
    if (!s.order_by.empty()) f.order_by = true;
    if (s.limit) f.limit = true;
    if (depth == 0 && !s.order_by.empty() && s.limit) f.order_by_limit = true;
    for (const auto& t : s.order_by) expr(*t.expr, depth);
    if (s.limit) expr(*s.limit, depth);
    if (s.offset) expr(*s.offset, depth);
  }

  void core(const SelectCore& c, int depth) {
    if (c.distinct) f.distinct = true;
    for (const auto& row : c.values)
      for (const auto& e : row) expr(*e, depth);
    for (const auto& rc : c.columns) expr(*rc.expr, depth);
    if (c.from) from(*c.from, depth);
    if (c.where) expr(*c.where, depth);
    if (!c.group_by.empty()) f.group_by = f.aggregation = true;
    for (const auto& g : c.group_by) expr(*g, depth);
    if (c.having) {
      f.having = true;
      expr(*c.having, depth);
    }
    if (!c.windows.empty()) f.window = true;
  }

  void from(const JoinList& j, int depth) {
    for (size_t k = 0; k < j.items.size(); ++k) {
      const TableRef& t = j.items[k];
      if (k > 0) ++f.joins;
      if (t.kind == TableRef::Kind::kJoin) {
        from(*t.join, depth);
        continue;
      }
      ++f.tables;
      if (t.select) {
        ++f.subqueries;
        select(*t.select, depth + 1);
      }
      for (const auto& a : t.args) expr(*a, depth);
      if (t.on) expr(*t.on, depth);
    }
  }

  void expr(const Expr& e, int depth) {
    switch (e.kind) {
      case ExprKind::kFunction:
        if (e.over || !e.over_name.empty()) f.window = true;
        else if (is_aggregate_call(e)) f.aggregation = true;
        if (e.filter) expr(*e.filter, depth);
        break;
      case ExprKind::kCase: f.case_expr = true; break;
      case ExprKind::kLike:
        if (e.op == "LIKE") f.like = true;
        if (e.negated) f.negation = true;
        break;
      case ExprKind::kBetween:
      case ExprKind::kInList:
      case ExprKind::kInTable:
        if (e.negated) f.negation = true;
        break;
      case ExprKind::kInSelect:
        if (e.negated) f.negation = true;
        break;
      case ExprKind::kUnary:
        if (e.op == "NOT") f.negation = true;
        break;
      case ExprKind::kBinary:
        if (e.op == "!=" || e.op == "<>" || e.op == "IS NOT") f.negation = true;
        break;
      default: break;
    }
    if (e.select) {
      ++f.subqueries;
      select(*e.select, depth + 1);
    }
    for (const auto& c : e.children) expr(*c, depth);
  }
};

// ---- Spider hardness ---------------------------------------------------------------------

// Leaves and connectives of an AND/OR tree, read flat.
void flatten(const Expr* e, std::vector<const Expr*>& leaves, int& ors, int& ands) {
  if (!e) return;
  if (e->kind == ExprKind::kBinary && (e->op == "AND" || e->op == "OR")) {
    (e->op == "OR" ? ors : ands)++;
    flatten(e->children[0].get(), leaves, ors, ands);
    flatten(e->children[1].get(), leaves, ors, ands);
    return;
  }
  leaves.push_back(e);
}

bool negated_condition(const Expr& e) {
  switch (e.kind) {
    case ExprKind::kLike:
    case ExprKind::kBetween:
    case ExprKind::kInList:
    case ExprKind::kInSelect:
    case ExprKind::kInTable:
      return e.negated;
    default:
      return false;
  }
}

// Subqueries among a condition's right-hand operands (Spider's val1 / val2).
int nested_operands(const Expr& e) {
  switch (e.kind) {
    case ExprKind::kInSelect: return 1;
    case ExprKind::kBinary:
    case ExprKind::kLike: return e.children[1]->kind == ExprKind::kSubquery ? 1 : 0;
    case ExprKind::kBetween:
      return (e.children[1]->kind == ExprKind::kSubquery ? 1 : 0) +
             (e.children[2]->kind == ExprKind::kSubquery ? 1 : 0);
    default: return 0;
  }
}

void collect_from(const JoinList& j, int& units, std::vector<const Expr*>& ons) {
  for (const auto& t : j.items) {
    if (t.kind == TableRef::Kind::kJoin) collect_from(*t.join, units, ons);
    else ++units;
    if (t.on) ons.push_back(t.on.get());
  }
}

}  // namespace

bool is_aggregate_call(const Expr& e) {
  if (e.kind != ExprKind::kFunction || e.over || !e.over_name.empty()) return false;
  std::string n = core::lower(e.op);
  if (n == "min" || n == "max") return e.children.size() == 1;
  return n == "count" || n == "sum" || n == "avg" || n == "total" || n == "group_concat" ||
         n == "string_agg";
}

std::vector<std::string> Features::tags() const {
  std::vector<std::string> t;
  if (joins > 0) t.push_back("join");
  if (subqueries > 0) t.push_back("nested");
  if (aggregation) t.push_back("aggregation");
  if (group_by) t.push_back("group_by");
  if (having) t.push_back("having");
  if (order_by_limit) t.push_back("order_by_limit");
  if (set_operation) t.push_back("set_op");
  if (distinct) t.push_back("distinct");
  if (case_expr) t.push_back("case");
  if (window) t.push_back("window");
  if (cte) t.push_back("cte");
  if (like) t.push_back("like");
  if (negation) t.push_back("negation");
  if (t.empty()) t.push_back("simple");
  return t;
}

Features compute_features(const Select& select) {
  FeatureWalker w;
  w.select(select, 0);
  return w.f;
}

SpiderHardness spider_hardness_components(const Select& s) {
  SpiderHardness h;
  const SelectCore& c = s.cores[0];
  bool compound = s.cores.size() > 1;
  const auto& order_by = compound ? c.misplaced_order_by : s.order_by;
  const Expr* limit = compound ? c.misplaced_limit.get() : s.limit.get();

  int units = 0;
  std::vector<const Expr*> ons;
  if (c.from) collect_from(*c.from, units, ons);
  std::vector<const Expr*> join_leaves, where_leaves, having_leaves;
  int ors = 0, ands = 0, having_ors = 0, having_ands = 0;
  for (const Expr* on : ons) flatten(on, join_leaves, ors, ands);
  flatten(c.where.get(), where_leaves, ors, ands);
  flatten(c.having.get(), having_leaves, having_ors, having_ands);

  int c1 = 0;
  if (c.where) ++c1;
  if (!c.group_by.empty()) ++c1;
  if (!order_by.empty()) ++c1;
  if (limit) ++c1;
  if (units > 0) c1 += units - 1;
  c1 += ors + having_ors;
  int c2 = compound ? 1 : 0;
  for (const auto* leaves : {&join_leaves, &where_leaves, &having_leaves})
    for (const Expr* e : *leaves) {
      if (e->kind == ExprKind::kLike && e->op == "LIKE") ++c1;  // NOT LIKE too
      c2 += nested_operands(*e);
    }
  h.component1 = c1;
  h.component2 = c2;

  int agg = 0;
  for (const auto& rc : c.columns)
    if (spider_agg(*rc.expr)) ++agg;
  for (const Expr* e : where_leaves)
    if (negated_condition(*e)) ++agg;
  for (const auto& g : c.group_by)
    if (spider_agg(*g)) ++agg;
  for (const auto& t : order_by) {
    const Expr& e = *t.expr;
    if (spider_agg(e)) ++agg;
    else if (e.kind == ExprKind::kBinary)
      for (const auto& ch : e.children)
        if (spider_agg(*ch)) ++agg;
  }
  for (const Expr* e : having_leaves)
    if (negated_condition(*e)) ++agg;
  agg += having_ors + having_ands;
  int others = 0;
  if (agg > 1) ++others;
  if (c.columns.size() > 1) ++others;
  if (where_leaves.size() > 1) ++others;
  if (c.group_by.size() > 1) ++others;
  h.others = others;
  return h;
}

std::string spider_hardness(const Select& select) { return spider_hardness_level(spider_hardness_components(select)); }

std::string spider_hardness_level(const SpiderHardness& h) {
  const int c1 = h.component1, c2 = h.component2, o = h.others;
  if (c1 <= 1 && o == 0 && c2 == 0) return "easy";
  if ((o <= 2 && c1 <= 1 && c2 == 0) || (c1 <= 2 && o < 2 && c2 == 0)) return "medium";
  if ((o > 2 && c1 <= 2 && c2 == 0) || (c1 > 2 && c1 <= 3 && o <= 2 && c2 == 0) ||
      (c1 <= 1 && o == 0 && c2 <= 1))
    return "hard";
  return "extra";
}

}  // namespace nl2sql::sql
