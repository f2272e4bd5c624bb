// Neighbour queries: every modification site of the tree is numbered by one walk; a neighbour is
// a fresh copy of the tree walked again until its site's number, where the modification is
// applied and the walk stops. Counting and applying share the walk, so the numbering cannot
// drift between them.
#include "nl2sql/sql/neighbours.h"

#include <fmt/format.h>

#include <cctype>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <limits>
#include <set>

#include "nl2sql/core/text.h"
#include "nl2sql/sql/printer.h"

namespace nl2sql::sql {
namespace {

bool is_comparison(const std::string& op) {
  return op == "=" || op == "==" || op == "!=" || op == "<>" || op == "<" || op == "<=" ||
         op == ">" || op == ">=";
}

std::vector<std::string> comparison_alternatives(const std::string& op) {
  if (op == "=" || op == "==") return {"!="};
  if (op == "!=" || op == "<>") return {"="};
  if (op == "<") return {"<=", ">"};
  if (op == "<=") return {"<", ">="};
  if (op == ">") return {">=", "<"};
  if (op == ">=") return {">", "<="};
  return {};
}

std::string lower_name(const std::string& s) { return core::lower(s); }

bool is_aggregate(const Expr& e) {
  if (e.kind != ExprKind::kFunction || e.over || !e.over_name.empty()) return false;
  std::string n = lower_name(e.op);
  return n == "count" || n == "sum" || n == "avg" || n == "min" || n == "max" || n == "total";
}

// A table visible in one SELECT core's FROM clause, under the name the query uses for it.
struct Visible {
  std::string name;  // alias, or the table's own name (lower-cased)
  const TableInfo* table = nullptr;
};

enum class Place { kOther, kPredicate, kJoinOn, kOrdinal };

class Walker {
 public:
  Walker(const Schema& schema, const NeighbourOptions& options, size_t target)
      : schema_(schema), options_(options), target_(target) {}

  void walk(Select& s) { select(s); }
  size_t count() const { return counter_; }
  bool applied() const { return done_; }
  const std::string& kind() const { return kind_; }

 private:
  bool offer(const char* kind, const std::function<void()>& apply) {
    if (done_) return true;
    if (counter_++ == target_) {
      apply();
      kind_ = kind;
      done_ = true;
    }
    return done_;
  }

  void select(Select& s) {
    for (auto& cte : s.with)
      if (cte.select && !done_) select(*cte.select);
    for (size_t i = 0; i < s.ops.size() && !done_; ++i) {
      CompoundOp alt = s.ops[i];
      switch (s.ops[i]) {
        case CompoundOp::kUnion: alt = CompoundOp::kUnionAll; break;
        case CompoundOp::kUnionAll: alt = CompoundOp::kUnion; break;
        case CompoundOp::kIntersect: alt = CompoundOp::kExcept; break;
        case CompoundOp::kExcept: alt = CompoundOp::kIntersect; break;
      }
      offer("compound", [&s, i, alt] { s.ops[i] = alt; });
    }
    // ORDER BY terms resolve against the last core's FROM (or its result aliases).
    for (size_t c = 0; c < s.cores.size() && !done_; ++c) core(s.cores[c], c + 1 == s.cores.size() ? &s : nullptr);
  }

  void core(SelectCore& c, Select* owner) {
    if (c.is_values) return;
    std::vector<Visible> visible;
    if (c.from) collect_from(*c.from, visible);
    scopes_.push_back(std::move(visible));
    if (c.from) from_items(*c.from);
    offer("distinct", [&c] { c.distinct = !c.distinct; });
    for (auto& rc : c.columns)
      if (!done_) expr(rc.expr, Place::kOther);
    if (c.where && !done_) {
      offer("predicate", [&c] { c.where = nullptr; });
      expr(c.where, Place::kPredicate);
    }
    for (auto& g : c.group_by)
      if (!done_) expr(g, Place::kOrdinal);
    if (c.having && !done_) {
      offer("predicate", [&c] { c.having = nullptr; });
      expr(c.having, Place::kPredicate);
    }
    if (owner && !done_) order_and_limit(*owner);
    scopes_.pop_back();
  }

  void order_and_limit(Select& s) {
    for (size_t i = 0; i < s.order_by.size() && !done_; ++i) {
      offer("order", [&s, i] { s.order_by[i].direction = s.order_by[i].direction == -1 ? 1 : -1; });
      expr(s.order_by[i].expr, Place::kOrdinal);
    }
    if (s.limit && !done_) {
      const Expr& l = *s.limit;
      if (l.kind == ExprKind::kLiteral && l.literal == LiteralKind::kNumber) {
        char* end = nullptr;
        long long n = std::strtoll(l.text.c_str(), &end, 10);
        if (end && *end == 0 && n >= 0)
          offer("limit", [&s, n] { s.limit->text = std::to_string(n + 1); });
      }
      offer("limit", [&s] {
        s.limit = nullptr;
        s.offset = nullptr;
      });
    }
  }

  void collect_from(const JoinList& j, std::vector<Visible>& out) {
    for (const auto& item : j.items) {
      if (item.kind == TableRef::Kind::kTable) {
        const TableInfo* t = schema_.find(item.name.name);
        if (t && !t->is_view)
          out.push_back({lower_name(item.alias.empty() ? item.name.name : item.alias.name), t});
      } else if (item.kind == TableRef::Kind::kJoin && item.join) {
        collect_from(*item.join, out);
      }
    }
  }

  void from_items(JoinList& j) {
    for (size_t i = 0; i < j.items.size() && !done_; ++i) {
      TableRef& item = j.items[i];
      if (item.kind == TableRef::Kind::kSubquery && item.select) select(*item.select);
      if (item.kind == TableRef::Kind::kJoin && item.join) from_items(*item.join);
      if (i > 0 && !item.natural && (item.on || !item.using_columns.empty())) {
        if (item.join_kind == JoinKind::kInner || item.join_kind == JoinKind::kComma)
          offer("join", [&item] { item.join_kind = JoinKind::kLeft; item.outer = false; });
        else if (item.join_kind == JoinKind::kLeft)
          offer("join", [&item] { item.join_kind = JoinKind::kInner; item.outer = false; });
      }
      if (item.on && !done_) expr(item.on, Place::kJoinOn);
    }
  }

  // The table a column reference reads, when it names exactly one.
  const TableInfo* resolve(const Expr& e) const {
    if (e.names.size() == 1) {
      const TableInfo* found = nullptr;
      int hits = 0;
      if (scopes_.empty()) return nullptr;
      for (const auto& v : scopes_.back())
        if (v.table->find_column(e.names[0].name)) {
          if (found != v.table) ++hits;
          found = v.table;
        }
      return hits == 1 ? found : nullptr;
    }
    if (e.names.size() == 2) {
      std::string q = lower_name(e.names[0].name);
      for (auto it = scopes_.rbegin(); it != scopes_.rend(); ++it)
        for (const auto& v : *it)
          if (v.name == q) return v.table->find_column(e.names[1].name) ? v.table : nullptr;
    }
    return nullptr;
  }

  void column(ExprPtr& slot, Place place) {
    const TableInfo* t = resolve(*slot);
    if (!t) return;
    const ColumnInfo* self = t->find_column(slot->names.back().name);
    if (!self) return;
    std::string cls = type_class(self->type);
    size_t offered = 0;
    for (const auto& col : t->columns) {
      if (offered >= options_.max_columns_per_site || done_) break;
      if (lower_name(col.name) == lower_name(self->name) || type_class(col.type) != cls) continue;
      ++offered;
      std::string name = col.name;
      offer(place == Place::kJoinOn ? "join key" : "column", [&slot, name] {
        slot->names.back().name = name;
        slot->names.back().quote = 0;
      });
    }
  }

  void literal(ExprPtr& slot) {
    Expr& e = *slot;
    if (e.literal == LiteralKind::kString) {
      std::string p = perturb_text(e.text);
      offer("literal", [&slot, p] { slot->text = p; });
      return;
    }
    if (e.literal != LiteralKind::kNumber) return;
    const std::string& t = e.text;
    if (t.size() > 1 && (t[1] == 'x' || t[1] == 'X')) return;  // hex: leave alone
    char* end = nullptr;
    bool integral = t.find_first_of(".eE") == std::string::npos;
    if (integral) {
      long long n = std::strtoll(t.c_str(), &end, 10);
      if (!end || *end || n == std::numeric_limits<long long>::max()) return;
      offer("literal", [&slot, n] { slot->text = std::to_string(n + 1); });
      if (n > 0) offer("literal", [&slot, n] { slot->text = std::to_string(n - 1); });
    } else {
      double d = std::strtod(t.c_str(), &end);
      if (!end || *end || !std::isfinite(d)) return;
      offer("literal", [&slot, d] { slot->text = fmt::format("{}", d + 1.0); });
    }
  }

  void expr(ExprPtr& slot, Place place) {
    if (!slot || done_) return;
    Expr& e = *slot;
    switch (e.kind) {
      case ExprKind::kBinary:
        if (is_comparison(e.op)) {
          for (const auto& alt : comparison_alternatives(e.op)) offer("comparison", [&e, alt] { e.op = alt; });
        } else if ((e.op == "AND" || e.op == "OR") && place != Place::kOther) {
          offer("predicate", [&slot] { slot = std::move(slot->children[1]); });
          offer("predicate", [&slot] { slot = std::move(slot->children[0]); });
          offer("predicate", [&e] { e.op = e.op == "AND" ? "OR" : "AND"; });
        }
        break;
      case ExprKind::kInList:
      case ExprKind::kInSelect:
      case ExprKind::kLike:
      case ExprKind::kBetween:
        offer("negation", [&e] { e.negated = !e.negated; });
        break;
      case ExprKind::kUnary:
        if (e.op == "NOT" && !e.children.empty() && e.children[0] && e.children[0]->kind == ExprKind::kExists) {
          offer("negation", [&slot] { slot = std::move(slot->children[0]); });
          // Not the EXISTS itself: NOT NOT EXISTS would be the gold again.
          if (!done_ && e.children[0]->select) select(*e.children[0]->select);
          return;
        }
        break;
      case ExprKind::kExists:
        offer("negation", [&slot] {
          auto n = std::make_unique<Expr>();
          n->kind = ExprKind::kUnary;
          n->op = "NOT";
          n->pos = slot->pos;
          n->children.push_back(std::move(slot));
          slot = std::move(n);
        });
        break;
      case ExprKind::kFunction:
        if (is_aggregate(e)) {
          std::string n = lower_name(e.op);
          if (n == "max") offer("aggregate", [&e] { e.op = "MIN"; });
          if (n == "min") offer("aggregate", [&e] { e.op = "MAX"; });
          if (n == "sum") offer("aggregate", [&e] { e.op = "AVG"; });
          if (n == "avg") offer("aggregate", [&e] { e.op = "SUM"; });
          if (n == "count" && e.star) break;
          if (n == "count" || n == "sum" || n == "avg")
            offer("aggregate", [&e] { e.distinct = !e.distinct; });
        }
        break;
      case ExprKind::kColumn:
        column(slot, place);
        return;
      case ExprKind::kLiteral:
        if (place != Place::kOrdinal) literal(slot);
        return;
      default:
        break;
    }
    if (done_) return;
    Place inner = place == Place::kOrdinal ? Place::kOther : place;
    for (auto& child : e.children)
      if (!done_) expr(child, inner);
    if (e.select && !done_) select(*e.select);
    if (e.filter && !done_) expr(e.filter, Place::kPredicate);
  }

  const Schema& schema_;
  const NeighbourOptions& options_;
  size_t target_;
  size_t counter_ = 0;
  bool done_ = false;
  std::string kind_;
  std::vector<std::vector<Visible>> scopes_;
};

}  // namespace

std::string perturb_text(const std::string& text) {
  std::string out = text;
  for (size_t i = out.size(); i-- > 0;) {
    unsigned char c = static_cast<unsigned char>(out[i]);
    if (c >= 0x80 || !std::isalnum(c)) continue;
    if (c == 'z') out[i] = 'a';
    else if (c == 'Z') out[i] = 'A';
    else if (c == '9') out[i] = '0';
    else out[i] = static_cast<char>(c + 1);
    return out;
  }
  return out + "x";
}

std::string type_class(const std::string& declared_type) {
  std::string t = core::lower(declared_type);
  // SQLite's affinity rules, in their order.
  if (t.find("int") != std::string::npos) return "numeric";
  if (t.find("char") != std::string::npos || t.find("clob") != std::string::npos ||
      t.find("text") != std::string::npos)
    return "text";
  if (t.empty() || t.find("blob") != std::string::npos) return "other";
  return "numeric";
}

std::vector<Neighbour> neighbour_queries(const Select& gold, const Schema& schema,
                                         const NeighbourOptions& options) {
  Walker counter(schema, options, std::numeric_limits<size_t>::max());
  {
    SelectPtr copy = gold.clone();
    counter.walk(*copy);
  }
  size_t sites = counter.count();
  std::vector<size_t> targets;
  if (options.max_neighbours == 0 || sites <= options.max_neighbours) {
    for (size_t i = 0; i < sites; ++i) targets.push_back(i);
  } else {
    for (size_t k = 0; k < options.max_neighbours; ++k) targets.push_back(k * sites / options.max_neighbours);
  }
  std::string gold_text = to_sql(gold);
  std::set<std::string> seen{gold_text};
  std::vector<Neighbour> out;
  for (size_t t : targets) {
    SelectPtr copy = gold.clone();
    Walker w(schema, options, t);
    w.walk(*copy);
    if (!w.applied()) continue;
    std::string text = to_sql(*copy);
    if (seen.insert(text).second) out.push_back({w.kind(), std::move(text)});
  }
  return out;
}

}  // namespace nl2sql::sql
