#include "nl2sql/sql/analysis.h"


#include <algorithm>
#include <cctype>
#include <memory>
#include <optional>
#include <set>

#include "nl2sql/sql/parser.h"
#include "nl2sql/sql/printer.h"

namespace nl2sql::sql {
namespace {

std::string lc(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

bool is_rowid_name(const std::string& lower) {
  return lower == "rowid" || lower == "oid" || lower == "_rowid_";
}

// The SELECT inside "CREATE VIEW name [(cols)] AS select".
std::string view_body(const std::string& create_sql) {
  auto toks = tokenize(create_sql);
  int depth = 0;
  for (size_t k = 0; k + 1 < toks.size(); ++k) {
    const Token& t = toks[k];
    if (t.kind == TokenKind::kOperator && t.text == "(") ++depth;
    if (t.kind == TokenKind::kOperator && t.text == ")") --depth;
    if (depth == 0 && t.kind == TokenKind::kWord && lc(t.text) == "as" &&
        toks[k + 1].kind == TokenKind::kWord) {
      std::string next = lc(toks[k + 1].text);
      if (next == "select" || next == "with" || next == "values")
        return create_sql.substr(toks[k + 1].pos.offset);
    }
  }
  return "";
}

struct Source {
  std::string qualifier;                 // lower-case alias, or table name without alias
  const TableInfo* base = nullptr;       // a base table (not a view)
  std::vector<std::string> columns;      // lower-case output names (derived tables, CTEs, views)
  bool opaque = false;                   // table-valued function: columns unknown

  bool has_column(const std::string& col) const {
    if (base) return base->find_column(col) != nullptr;
    return std::find(columns.begin(), columns.end(), col) != columns.end();
  }
};

struct Scope {
  std::vector<Source> sources;
  const Scope* parent = nullptr;
  std::vector<std::string> aliases;      // lower-case result-column aliases of this core
};

struct CteEntry {
  std::string name;
  const Cte* cte = nullptr;
  std::vector<std::string> columns;
  bool analyzed = false;
  bool recursive = false;
  std::vector<std::shared_ptr<CteEntry>> visible;  // CTEs its body may see
};

class Analyzer {
 public:
  Analyzer(const Schema& schema, References& out) : schema_(schema), out_(out) {}

  // Analyzes `s` and returns its output column names (lower-case).
  std::vector<std::string> select(const Select& s, const Scope* outer) {
    size_t saved = ctes_.size();
    for (const auto& c : s.with) {
      auto e = std::make_shared<CteEntry>();
      e->name = lc(c.name.name);
      e->cte = &c;
      e->recursive = s.recursive;
      e->visible = ctes_;
      for (const auto& col : c.columns) e->columns.push_back(lc(col.name));
      ctes_.push_back(e);
      if (s.recursive) e->visible.push_back(e);
    }
    std::vector<std::string> names;
    for (size_t k = 0; k < s.cores.size(); ++k) {
      bool single = s.cores.size() == 1;
      auto n = core(s.cores[k], outer, single ? &s : nullptr);
      if (k == 0) names = std::move(n);
    }
    // Compound ORDER BY terms name result columns of the compound: they read nothing new.
    if (s.limit) expr(*s.limit, outer, false);
    if (s.offset) expr(*s.offset, outer, false);
    ctes_.resize(saved);
    return names;
  }

 private:
  std::vector<std::string> core(const SelectCore& c, const Scope* outer, const Select* owner) {
    Scope scope;
    scope.parent = outer;
    if (c.is_values) {
      for (const auto& row : c.values)
        for (const auto& e : row) expr(*e, outer, false);
      std::vector<std::string> names;
      if (!c.values.empty())
        for (size_t k = 0; k < c.values[0].size(); ++k) names.push_back("column" + std::to_string(k + 1));
      return names;
    }
    if (c.from) {
      add_sources(*c.from, scope, outer);
      join_conditions(*c.from, scope);
    }
    for (const auto& rc : c.columns)
      if (!rc.alias.empty()) scope.aliases.push_back(lc(rc.alias.name));
    std::vector<std::string> names;
    for (const auto& rc : c.columns) {
      if (rc.expr->kind == ExprKind::kStar) {
        std::string qual = rc.expr->names.empty() ? "" : lc(rc.expr->names.back().name);
        for (const auto& src : scope.sources) {
          if (!qual.empty() && src.qualifier != qual) continue;
          if (src.base) {
            for (const auto& col : src.base->columns) {
              read(*src.base, col.name);
              names.push_back(lc(col.name));
            }
          } else {
            names.insert(names.end(), src.columns.begin(), src.columns.end());
          }
        }
        continue;
      }
      expr(*rc.expr, &scope, false);
      if (!rc.alias.empty()) names.push_back(lc(rc.alias.name));
      else if (rc.expr->kind == ExprKind::kColumn) names.push_back(lc(rc.expr->names.back().name));
      else names.push_back(lc(to_sql(*rc.expr)));
    }
    if (c.where) expr(*c.where, &scope, true);
    for (const auto& g : c.group_by) {
      if (g->kind == ExprKind::kLiteral && g->literal == LiteralKind::kNumber) continue;
      expr(*g, &scope, true);
    }
    if (c.having) expr(*c.having, &scope, true);
    for (const auto& w : c.windows) window(*w.second, &scope);
    auto order = [&](const std::vector<OrderingTerm>& terms) {
      for (const auto& t : terms) {
        const Expr& e = *t.expr;
        if (e.kind == ExprKind::kLiteral && e.literal == LiteralKind::kNumber) continue;
        if (e.kind == ExprKind::kColumn && e.names.size() == 1 &&
            std::find(scope.aliases.begin(), scope.aliases.end(), lc(e.names[0].name)) !=
                scope.aliases.end())
          continue;  // ORDER BY an output alias
        expr(e, &scope, true);
      }
    };
    if (owner) order(owner->order_by);
    order(c.misplaced_order_by);
    return names;
  }

  void add_sources(const JoinList& j, Scope& scope, const Scope* outer) {
    for (const auto& t : j.items) {
      Source src;
      switch (t.kind) {
        case TableRef::Kind::kJoin:
          add_sources(*t.join, scope, outer);
          continue;
        case TableRef::Kind::kSubquery:
          src.columns = select(*t.select, outer);
          src.qualifier = lc(t.alias.name);
          break;
        case TableRef::Kind::kFunction:
          for (const auto& a : t.args) expr(*a, outer, false);
          src.opaque = true;
          src.qualifier = lc(t.alias.empty() ? t.name.name : t.alias.name);
          break;
        case TableRef::Kind::kTable: {
          std::string name = lc(t.name.name);
          src.qualifier = lc(t.alias.empty() ? t.name.name : t.alias.name);
          std::shared_ptr<CteEntry> cte;
          if (t.schema.empty())
            for (auto it = ctes_.rbegin(); it != ctes_.rend(); ++it)
              if ((*it)->name == name) {
                cte = *it;
                break;
              }
          if (cte) {
            src.columns = cte_columns(*cte);
          } else if (const TableInfo* info = schema_.find(t.name.name)) {
            if (info->is_view) {
              src.columns = view_columns(*info);
            } else {
              src.base = info;
              out_.tables.insert(info->name);
            }
          } else {
            out_.unresolved.push_back(t.name.name);
            src.opaque = true;
          }
          break;
        }
      }
      scope.sources.push_back(std::move(src));
    }
  }

  // ON / USING / NATURAL conditions of a join list whose sources are all in `scope`.
  void join_conditions(const JoinList& j, Scope& scope) {
    for (size_t k = 0; k < j.items.size(); ++k) {
      const TableRef& t = j.items[k];
      if (t.kind == TableRef::Kind::kJoin) join_conditions(*t.join, scope);
      if (t.on) expr(*t.on, &scope, false);
    }
    // USING and NATURAL read the named columns on both sides.
    size_t idx = 0;
    std::vector<size_t> first_of_item;
    count_sources(j, first_of_item, idx);
    for (size_t k = 1; k < j.items.size(); ++k) {
      const TableRef& t = j.items[k];
      if (t.using_columns.empty() && !t.natural) continue;
      size_t right = first_of_item[k];
      const Source& r = scope.sources[right];
      std::vector<std::string> cols;
      if (t.natural) {
        for (const auto& c : source_columns(r))
          for (size_t l = 0; l < right; ++l)
            if (scope.sources[l].has_column(c)) {
              cols.push_back(c);
              break;
            }
      } else {
        for (const auto& u : t.using_columns) cols.push_back(lc(u.name));
      }
      for (const auto& c : cols) {
        if (r.base) read(*r.base, c);
        for (size_t l = 0; l < right; ++l)
          if (scope.sources[l].has_column(c)) {
            if (scope.sources[l].base) read(*scope.sources[l].base, c);
            break;
          }
      }
    }
  }

  void count_sources(const JoinList& j, std::vector<size_t>& first, size_t& idx) {
    for (const auto& t : j.items) {
      first.push_back(idx);
      if (t.kind == TableRef::Kind::kJoin) {
        std::vector<size_t> inner;
        count_sources(*t.join, inner, idx);
      } else {
        ++idx;
      }
    }
  }

  static std::vector<std::string> source_columns(const Source& s) {
    if (!s.base) return s.columns;
    std::vector<std::string> out;
    for (const auto& c : s.base->columns) out.push_back(lc(c.name));
    return out;
  }

  std::vector<std::string> cte_columns(CteEntry& e) {
    if (e.analyzed) return e.columns;
    e.analyzed = true;
    bool explicit_columns = !e.cte->columns.empty();
    if (!explicit_columns) {
      // A recursive reference inside the body needs the names before the body is analyzed.
      for (const auto& rc : e.cte->select->cores[0].columns)
        e.columns.push_back(lc(!rc.alias.empty() ? rc.alias.name
                               : rc.expr->kind == ExprKind::kColumn ? rc.expr->names.back().name
                                                                     : to_sql(*rc.expr)));
    }
    auto saved = std::move(ctes_);
    ctes_ = e.visible;
    auto names = select(*e.cte->select, nullptr);
    ctes_ = std::move(saved);
    if (!explicit_columns) e.columns = std::move(names);
    return e.columns;
  }

  std::vector<std::string> view_columns(const TableInfo& view) {
    std::vector<std::string> cols;
    for (const auto& c : view.columns) cols.push_back(lc(c.name));
    if (analyzed_views_.insert(lc(view.name)).second) {
      auto r = parse(view_body(view.create_sql));
      if (r.is_ok() && r->is_query()) {
        auto saved = std::move(ctes_);
        ctes_.clear();
        select(*r->select, nullptr);
        ctes_ = std::move(saved);
      } else {
        out_.unresolved.push_back(view.name);
      }
    }
    return cols;
  }

  void read(const TableInfo& t, const std::string& col) {
    if (const ColumnInfo* c = t.find_column(col)) {
      out_.columns.insert({t.name, c->name});
    } else if (is_rowid_name(lc(col))) {
      out_.columns.insert({t.name, t.rowid_alias >= 0 ? t.columns[t.rowid_alias].name : "ROWID"});
    }
  }

  void window(const WindowSpec& w, const Scope* scope) {
    for (const auto& p : w.partition_by) expr(*p, scope, false);
    for (const auto& o : w.order_by) expr(*o.expr, scope, false);
    if (w.frame_start.offset) expr(*w.frame_start.offset, scope, false);
    if (w.frame_end.offset) expr(*w.frame_end.offset, scope, false);
  }

  // Resolves a column reference; returns the base column read, if any.
  std::optional<ColumnRead> column(const Expr& e, const Scope* scope, bool allow_alias) {
    std::string col = lc(e.names.back().name);
    std::string qual = e.names.size() >= 2 ? lc(e.names[e.names.size() - 2].name) : "";
    int level = 0;
    for (const Scope* s = scope; s; s = s->parent, ++level) {
      const Source* found = nullptr;
      for (const auto& src : s->sources) {
        if (!qual.empty()) {
          if (src.qualifier == qual) {
            found = &src;
            break;
          }
        } else if (src.has_column(col)) {
          found = &src;
          break;
        }
      }
      if (!found && qual.empty() && is_rowid_name(col)) {
        for (const auto& src : s->sources)
          if (src.base) {
            found = &src;
            break;
          }
      }
      if (found) {
        if (level > 0) out_.correlated = true;
        if (found->base) {
          if (!found->base->find_column(col) && !is_rowid_name(col)) {
            out_.unresolved.push_back(qual + "." + col);
            return std::nullopt;
          }
          read(*found->base, col);
          const ColumnInfo* ci = found->base->find_column(col);
          return ColumnRead{found->base->name,
                            ci ? ci->name
                               : (found->base->rowid_alias >= 0
                                      ? found->base->columns[found->base->rowid_alias].name
                                      : "ROWID")};
        }
        return std::nullopt;
      }
      if (qual.empty() && allow_alias && level == 0 &&
          std::find(s->aliases.begin(), s->aliases.end(), col) != s->aliases.end())
        return std::nullopt;
    }
    if (!(e.names.size() == 1 && e.names[0].quote == '"'))
      out_.unresolved.push_back(qual.empty() ? col : qual + "." + col);
    return std::nullopt;
  }

  static const Expr* literal_of(const Expr& e) {
    if (e.kind == ExprKind::kLiteral &&
        (e.literal == LiteralKind::kString || e.literal == LiteralKind::kNumber))
      return &e;
    if (e.kind == ExprKind::kUnary && e.op == "-" && e.children[0]->kind == ExprKind::kLiteral &&
        e.children[0]->literal == LiteralKind::kNumber)
      return &e;
    return nullptr;
  }

  // A double-quoted name that resolves to nothing is a string literal in SQLite.
  bool is_string_fallback(const Expr& e, const Scope* scope) {
    if (e.kind != ExprKind::kColumn || e.names.size() != 1 || e.names[0].quote != '"') return false;
    std::string col = lc(e.names[0].name);
    for (const Scope* s = scope; s; s = s->parent)
      for (const auto& src : s->sources)
        if (src.has_column(col) || src.opaque) return false;
    return true;
  }

  void pair(const Expr& col_side, const Expr& lit_side, const std::string& op, const Scope* scope) {
    if (col_side.kind != ExprKind::kColumn) return;
    std::string value;
    if (const Expr* l = literal_of(lit_side)) {
      value = l->kind == ExprKind::kUnary ? "-" + l->children[0]->text : l->text;
    } else if (is_string_fallback(lit_side, scope)) {
      value = lit_side.names[0].name;
    } else {
      return;
    }
    References scratch;
    Analyzer probe(schema_, scratch);
    auto read = probe.column(col_side, scope, false);
    if (read) out_.literals.push_back({*read, op, value, lit_side.pos});
  }

  void expr(const Expr& e, const Scope* scope, bool allow_alias) {
    switch (e.kind) {
      case ExprKind::kColumn:
        column(e, scope, allow_alias);
        return;
      case ExprKind::kInSelect:
        expr(*e.children[0], scope, allow_alias);
        select(*e.select, scope);
        return;
      case ExprKind::kExists:
      case ExprKind::kSubquery:
        select(*e.select, scope);
        return;
      case ExprKind::kBinary: {
        static const std::set<std::string> kCmp = {"=", "==", "!=", "<>", "<", "<=", ">", ">=", "IS", "IS NOT"};
        if (kCmp.count(e.op)) {
          pair(*e.children[0], *e.children[1], e.op, scope);
          pair(*e.children[1], *e.children[0], e.op, scope);
        }
        break;
      }
      case ExprKind::kLike:
        pair(*e.children[0], *e.children[1], e.op, scope);
        break;
      case ExprKind::kBetween:
        pair(*e.children[0], *e.children[1], "BETWEEN", scope);
        pair(*e.children[0], *e.children[2], "BETWEEN", scope);
        break;
      case ExprKind::kInList:
        for (size_t k = 1; k < e.children.size(); ++k) pair(*e.children[0], *e.children[k], "IN", scope);
        break;
      case ExprKind::kFunction:
        if (e.filter) expr(*e.filter, scope, allow_alias);
        if (e.over) window(*e.over, scope);
        break;
      default:
        break;
    }
    for (const auto& c : e.children) expr(*c, scope, allow_alias);
  }

  const Schema& schema_;
  References& out_;
  std::vector<std::shared_ptr<CteEntry>> ctes_;
  std::set<std::string> analyzed_views_;
};

}  // namespace

References analyze_references(const Select& select, const Schema& schema) {
  References out;
  Analyzer a(schema, out);
  a.select(select, nullptr);
  return out;
}

}  // namespace nl2sql::sql
