#include "nl2sql/sql/normalize.h"

#include <algorithm>
#include <cctype>
#include <map>

#include "nl2sql/core/text.h"
#include "nl2sql/sql/parser.h"
#include "nl2sql/sql/printer.h"

namespace nl2sql::sql {
namespace {

void lower(Ident& i) { i.name = core::lower(i.name); }

class Normalizer {
 public:
  void select(Select& s) {
    for (auto& c : s.with) {
      lower(c.name);
      for (auto& col : c.columns) lower(col);
      select(*c.select);
    }
    for (size_t k = 0; k < s.cores.size(); ++k) {
      bool single = s.cores.size() == 1;
      core(s.cores[k], single ? &s : nullptr);
    }
    if (s.cores.size() > 1)
      for (auto& t : s.order_by) expr(t.expr);
    if (s.limit) expr(s.limit);
    if (s.offset) expr(s.offset);
  }

 private:
  void core(SelectCore& c, Select* owner) {
    for (auto& row : c.values)
      for (auto& e : row) expr(e);
    std::map<std::string, std::string> scope;
    if (c.from) aliases(*c.from, scope);
    scopes_.push_back(std::move(scope));
    if (c.from) conditions(*c.from);
    for (auto& rc : c.columns) {
      expr(rc.expr);
      lower(rc.alias);
    }
    if (c.where) expr(c.where);
    for (auto& g : c.group_by) expr(g);
    if (c.having) expr(c.having);
    for (auto& w : c.windows) {
      lower(w.first);
      window(*w.second);
    }
    for (auto& t : c.misplaced_order_by) expr(t.expr);
    if (owner)
      for (auto& t : owner->order_by) expr(t.expr);
    scopes_.pop_back();
  }

  // Gives every FROM item a positional alias; subqueries in FROM see only enclosing scopes.
  void aliases(JoinList& j, std::map<std::string, std::string>& scope) {
    for (auto& t : j.items) {
      if (t.kind == TableRef::Kind::kJoin) {
        aliases(*t.join, scope);
        continue;
      }
      if (t.select) select(*t.select);
      for (auto& a : t.args) expr(a);
      lower(t.schema);
      lower(t.name);
      std::string old = core::lower(t.alias.empty() ? t.name.name : t.alias.name);
      std::string fresh = "t" + std::to_string(++counter_);
      scope[old] = fresh;
      t.alias = {fresh, 0};
      t.has_as = true;
      for (auto& u : t.using_columns) lower(u);
    }
  }

  void conditions(JoinList& j) {
    for (auto& t : j.items) {
      if (t.kind == TableRef::Kind::kJoin) conditions(*t.join);
      if (t.on) expr(t.on);
    }
  }

  void window(WindowSpec& w) {
    lower(w.base_name);
    for (auto& p : w.partition_by) expr(p);
    for (auto& o : w.order_by) expr(o.expr);
    if (w.frame_start.offset) expr(w.frame_start.offset);
    if (w.frame_end.offset) expr(w.frame_end.offset);
  }

  void qualified(std::vector<Ident>& names, size_t qualifier_index) {
    std::string q = core::lower(names[qualifier_index].name);
    for (auto it = scopes_.rbegin(); it != scopes_.rend(); ++it) {
      auto f = it->find(q);
      if (f != it->end()) {
        Ident last = names.back();
        names.erase(names.begin(), names.begin() + static_cast<long>(qualifier_index));
        names[0] = {f->second, 0};
        if (names.size() > 1) names.back() = last;
        break;
      }
    }
  }

  void flatten(ExprPtr& e, const std::string& op, std::vector<ExprPtr>& out) {
    if (e->kind == ExprKind::kBinary && e->op == op) {
      flatten(e->children[0], op, out);
      flatten(e->children[1], op, out);
    } else {
      out.push_back(std::move(e));
    }
  }

  void expr(ExprPtr& e) {
    if (e->kind == ExprKind::kBinary && (e->op == "AND" || e->op == "OR")) {
      std::string op = e->op;
      SourcePos pos = e->pos;
      std::vector<ExprPtr> items;
      flatten(e, op, items);
      std::vector<std::pair<std::string, ExprPtr>> keyed;
      for (auto& it : items) {
        expr(it);
        keyed.emplace_back(to_sql(*it), std::move(it));
      }
      std::stable_sort(keyed.begin(), keyed.end(),
                       [](const auto& a, const auto& b) { return a.first < b.first; });
      ExprPtr acc = std::move(keyed[0].second);
      for (size_t k = 1; k < keyed.size(); ++k) {
        auto b = std::make_unique<Expr>();
        b->kind = ExprKind::kBinary;
        b->op = op;
        b->pos = pos;
        b->children.push_back(std::move(acc));
        b->children.push_back(std::move(keyed[k].second));
        acc = std::move(b);
      }
      e = std::move(acc);
      return;
    }
    switch (e->kind) {
      case ExprKind::kColumn:
        if (e->names.size() >= 2) qualified(e->names, e->names.size() - 2);
        if (!(e->names.size() == 1 && e->names[0].quote == '"'))
          for (auto& n : e->names) lower(n);
        break;
      case ExprKind::kStar:
        if (!e->names.empty()) qualified(e->names, e->names.size() - 1);
        for (auto& n : e->names) lower(n);
        break;
      case ExprKind::kInTable:
        for (auto& n : e->names) lower(n);
        break;
      case ExprKind::kFunction:
        e->op = core::lower(e->op);
        if (e->filter) expr(e->filter);
        if (e->over) window(*e->over);
        lower(e->over_name);
        break;
      default:
        break;
    }
    if (e->select) select(*e->select);
    for (auto& c : e->children) expr(c);
  }

  std::vector<std::map<std::string, std::string>> scopes_;
  int counter_ = 0;
};

}  // namespace

SelectPtr normalize(const Select& select) {
  SelectPtr copy = select.clone();
  Normalizer n;
  n.select(*copy);
  return copy;
}

std::string normalized_sql(const Select& select) { return to_sql(*normalize(select)); }

Result<std::string> normalize_sql(std::string_view sql) {
  auto r = parse(sql);
  if (!r.is_ok()) return r.status();
  if (!r->is_query()) return r->text;
  return normalized_sql(*r->select);
}

}  // namespace nl2sql::sql
