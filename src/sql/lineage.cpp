#include "nl2sql/sql/lineage.h"


#include <algorithm>
#include <cctype>
#include <charconv>
#include <functional>
#include <tuple>

#include "nl2sql/core/text.h"
#include "nl2sql/db/executor.h"
#include "nl2sql/sql/features.h"
#include "nl2sql/sql/parser.h"
#include "nl2sql/sql/printer.h"

namespace nl2sql::sql {
namespace {

ExprPtr column_expr(const std::string& qualifier, char quote, const std::string& column) {
  auto e = std::make_unique<Expr>();
  e->kind = ExprKind::kColumn;
  e->names = {{qualifier, quote}, {column, 0}};
  return e;
}

ExprPtr call(const std::string& fn, ExprPtr arg) {
  auto e = std::make_unique<Expr>();
  e->kind = ExprKind::kFunction;
  e->op = fn;
  e->children.push_back(std::move(arg));
  return e;
}

ExprPtr conjoin(ExprPtr a, ExprPtr b) {
  if (!a) return b;
  if (!b) return a;
  auto both = std::make_unique<Expr>();
  both->kind = ExprKind::kBinary;
  both->op = "AND";
  both->children.push_back(std::move(a));
  both->children.push_back(std::move(b));
  return both;
}

ExprPtr binary(const std::string& op, ExprPtr lhs, ExprPtr rhs) {
  auto e = std::make_unique<Expr>();
  e->kind = ExprKind::kBinary;
  e->op = op;
  e->children.push_back(std::move(lhs));
  e->children.push_back(std::move(rhs));
  return e;
}

ExprPtr number(int64_t n) {
  auto e = std::make_unique<Expr>();
  e->kind = ExprKind::kLiteral;
  e->literal = LiteralKind::kNumber;
  e->text = std::to_string(n);
  return e;
}

// Aggregates in an expression, not looking inside subqueries.
bool has_aggregate(const Expr& e) {
  if (is_aggregate_call(e)) return true;
  for (const auto& c : e.children)
    if (has_aggregate(*c)) return true;
  return false;
}
bool has_window(const Expr& e) {
  if (e.kind == ExprKind::kFunction && (e.over || !e.over_name.empty())) return true;
  for (const auto& c : e.children)
    if (has_window(*c)) return true;
  return false;
}

std::map<std::string, int64_t> lower_keys(const std::map<std::string, int64_t>& in) {
  std::map<std::string, int64_t> out;
  for (const auto& [k, v] : in) out[core::lower(k)] = v;
  return out;
}

struct VisibleCte {
  const Cte* cte;
  bool recursive;
};

class Rewriter {
 public:
  Rewriter(const Schema& schema, const LineageOptions& options, Lineage& out)
      : schema_(schema), options_(options), out_(out) {}
  Status status;

  void select(const Select& s) {
    if (!top_) top_ = &s;
    size_t saved = ctes_.size();
    for (const auto& c : s.with) ctes_.push_back({&c, s.recursive});
    bool compound = s.cores.size() > 1;
    if (compound && (!s.order_by.empty() || s.limit))
      fallback("compound query with ORDER BY/LIMIT: lineage of every member");
    for (const auto& c : s.cores) core(c, compound ? nullptr : &s);
    ctes_.resize(saved);
  }

 private:
  void fallback(std::string why) {
    if (std::find(out_.fallbacks.begin(), out_.fallbacks.end(), why) == out_.fallbacks.end())
      out_.fallbacks.push_back(std::move(why));
  }

  void all_rows(const std::string& table, const std::string& why) {
    fallback(why);
    for (const auto& q : out_.queries)
      if (q.all_rows_of == table) return;
    WitnessQuery w;
    w.all_rows_of = table;
    out_.queries.push_back(std::move(w));
  }

  // A copy of `s` that carries every CTE visible at this point, so it runs on its own.
  SelectPtr standalone(const Select& s) const {
    SelectPtr copy = s.clone();
    std::vector<Cte> with;
    bool recursive = copy->recursive;
    for (const auto& v : ctes_) {
      with.push_back({v.cte->name, v.cte->columns, v.cte->materialized, v.cte->select->clone()});
      recursive = recursive || v.recursive;
    }
    for (auto& c : copy->with) with.push_back(std::move(c));
    copy->with = std::move(with);
    copy->recursive = recursive;
    return copy;
  }

  const VisibleCte* find_cte(const std::string& name) const {
    for (auto it = ctes_.rbegin(); it != ctes_.rend(); ++it)
      if (core::lower(it->cte->name.name) == name) return &*it;
    return nullptr;
  }

  void cte(const VisibleCte& v) {
    if (!done_ctes_.insert(v.cte).second) return;
    if (v.recursive) {
      auto refs = analyze_references(*standalone(*v.cte->select), schema_);
      for (const auto& t : refs.tables) all_rows(t, "recursive CTE: every row of its tables");
      return;
    }
    fallback("CTE reference: whole lineage of the CTE");
    // The CTE body sees only the CTEs defined before it.
    std::vector<VisibleCte> saved = ctes_;
    while (!ctes_.empty() && ctes_.back().cte != v.cte) ctes_.pop_back();
    if (!ctes_.empty()) ctes_.pop_back();
    select(*v.cte->select);
    ctes_ = std::move(saved);
  }

  struct Occurrence {
    std::string qualifier;
    char quote = 0;
    const TableInfo* table;
  };

  void subquery(const Select& sub) {
    auto refs = analyze_references(*standalone(sub), schema_);
    if (refs.correlated || !refs.unresolved.empty()) {
      if (where_of_ && decorrelate(sub, *where_of_, negation_ > 0, refs.tables)) return;
      for (const auto& t : refs.tables) all_rows(t, "correlated subquery: every row of its tables");
      return;
    }
    select(sub);
  }

  void expr(const Expr& e) {
    const bool negates = (e.kind == ExprKind::kUnary && e.op == "NOT") ||
                         (e.kind == ExprKind::kInSelect && e.negated);
    if (negates) ++negation_;
    if (e.select) subquery(*e.select);
    if (e.filter) expr(*e.filter);
    for (const auto& c : e.children) expr(*c);
    if (negates) --negation_;
  }

  static bool has_subquery(const Expr& e) {
    if (e.select) return true;
    if (e.filter && has_subquery(*e.filter)) return true;
    for (const auto& c : e.children)
      if (has_subquery(*c)) return true;
    return false;
  }

  // The base tables of a FROM clause made only of tables and parenthesised joins (no derived
  // tables, table functions, CTE references, views or WITHOUT ROWID tables); false otherwise.
  bool plain_tables(const JoinList& j, std::vector<Occurrence>& occ) const {
    for (const auto& t : j.items) {
      if (t.kind == TableRef::Kind::kJoin) {
        if (!plain_tables(*t.join, occ)) return false;
        continue;
      }
      if (t.kind != TableRef::Kind::kTable || !t.schema.empty()) return false;
      if (find_cte(core::lower(t.name.name))) return false;
      const TableInfo* info = schema_.find(t.name.name);
      if (!info || info->is_view || info->without_rowid) return false;
      if (t.on && has_subquery(*t.on)) return false;
      const Ident& q = t.alias.empty() ? t.name : t.alias;
      occ.push_back({q.name, static_cast<char>(q.quote ? '"' : 0), info});
    }
    return true;
  }

  // The conjunct that is exactly `sub` as EXISTS / IN / a comparison with it: leaving that
  // one out of the witness loses nothing, since the witness joins the subquery itself.
  static const Expr* where_conjunct_of(const Select& sub, const std::vector<const Expr*>& conjuncts) {
    for (const Expr* c : conjuncts) {
      if (c->select.get() == &sub) return c;
      for (const auto& ch : c->children)
        if (ch->select.get() == &sub) return c;
    }
    return nullptr;
  }

  // See the header: the witness of a correlated subquery of `outer`'s WHERE.
  bool decorrelate(const Select& sub, const SelectCore& outer, bool negated,
                   const std::set<std::string>& sub_tables) {
    if (sub.cores.size() != 1 || !sub.with.empty() || !outer.from) return false;
    const SelectCore& sc = sub.cores[0];
    if (sc.is_values || !sc.from || !sc.group_by.empty() || sc.having || !sc.windows.empty())
      return false;
    if (sc.where && has_subquery(*sc.where)) return false;
    for (const auto& rc : sc.columns)
      if (rc.expr && has_subquery(*rc.expr)) return false;
    std::vector<Occurrence> outer_occ, sub_occ;
    if (!plain_tables(*outer.from, outer_occ) || !plain_tables(*sc.from, sub_occ)) return false;
    std::set<std::string> names;
    for (const auto& o : outer_occ) names.insert(core::lower(o.qualifier));
    for (const auto& o : sub_occ)
      if (!names.insert(core::lower(o.qualifier)).second) return false;  // an alias would be shadowed

    auto w = std::make_unique<Select>();
    SelectCore wc;
    wc.from = std::make_unique<JoinList>(clone_join_list(*outer.from));
    JoinList inner = clone_join_list(*sc.from);
    for (size_t k = 0; k < inner.items.size(); ++k) {
      if (k == 0) {
        inner.items[k].join_kind = JoinKind::kComma;
        inner.items[k].natural = false;
        inner.items[k].outer = false;
      }
      wc.from->items.push_back(std::move(inner.items[k]));
    }
    // The outer WHERE's conjuncts without subqueries: SQLite would evaluate every subquery
    // (the correlated one among them) once per row of the joined tables, which at BIRD scale
    // takes minutes; leaving them out only adds inner rows that meet some outer row.
    ExprPtr where = sc.where ? sc.where->clone() : nullptr;
    if (!negated && outer.where) {
      std::vector<const Expr*> conjuncts;
      std::vector<const Expr*> stack{outer.where.get()};
      while (!stack.empty()) {
        const Expr* e = stack.back();
        stack.pop_back();
        if (e->kind == ExprKind::kBinary && e->op == "AND" && e->children.size() == 2) {
          stack.push_back(e->children[1].get());
          stack.push_back(e->children[0].get());
        } else {
          conjuncts.push_back(e);
        }
      }
      ExprPtr kept;
      bool dropped = false;
      for (const Expr* c : conjuncts) {
        if (!has_subquery(*c)) kept = conjoin(std::move(kept), c->clone());
        else dropped = dropped || c != where_conjunct_of(sub, conjuncts);
      }
      where = conjoin(std::move(kept), std::move(where));
      if (dropped)
        fallback("correlated subquery: inner rows meeting outer rows that pass the outer WHERE's "
                 "conditions without subqueries");
    }
    if (negated)
      fallback("correlated subquery under NOT: inner rows meeting any outer row");
    wc.where = std::move(where);
    WitnessQuery q;
    std::vector<Occurrence> occ = outer_occ;
    occ.insert(occ.end(), sub_occ.begin(), sub_occ.end());
    for (size_t k = 0; k < occ.size(); ++k) {
      ResultColumn rc;
      rc.expr = column_expr(occ[k].qualifier, occ[k].quote, rowid_name(*occ[k].table));
      rc.alias = {"__lineage_" + std::to_string(k + 1), 0};
      wc.columns.push_back(std::move(rc));
      q.tables.push_back(occ[k].table->name);
    }
    w->cores.push_back(std::move(wc));
    SelectPtr runnable = standalone(*w);
    auto refs = analyze_references(*runnable, schema_);
    // Still-correlated subqueries (the outer WHERE's own EXISTS) resolve inside the witness;
    // a name that resolves to nothing refers further out than the outer query.
    if (!refs.unresolved.empty()) return false;
    q.sql = to_sql(*runnable);
    q.all_rows_on_error.assign(sub_tables.begin(), sub_tables.end());
    out_.queries.push_back(std::move(q));
    return true;
  }

  void sources(const JoinList& j, std::vector<Occurrence>& occ) {
    for (const auto& t : j.items) {
      switch (t.kind) {
        case TableRef::Kind::kJoin:
          sources(*t.join, occ);
          break;
        case TableRef::Kind::kSubquery:
          fallback("derived table: whole lineage of the subquery");
          select(*t.select);
          break;
        case TableRef::Kind::kFunction:
          for (const auto& a : t.args) expr(*a);
          break;
        case TableRef::Kind::kTable: {
          if (t.schema.empty())
            if (const VisibleCte* v = find_cte(core::lower(t.name.name))) {
              cte(*v);
              break;
            }
          const TableInfo* info = schema_.find(t.name.name);
          if (!info) {
            status = invalid_input("no such table: " + t.name.name);
            return;
          }
          if (info->is_view) {
            Select probe;
            SelectCore c;
            ResultColumn rc;
            rc.expr = std::make_unique<Expr>();
            rc.expr->kind = ExprKind::kStar;
            c.columns.push_back(std::move(rc));
            c.from = std::make_unique<JoinList>();
            TableRef ref;
            ref.name = t.name;
            c.from->items.push_back(std::move(ref));
            probe.cores.push_back(std::move(c));
            for (const auto& b : analyze_references(probe, schema_).tables)
              all_rows(b, "view: every row of its tables");
            break;
          }
          if (info->without_rowid) {
            all_rows(info->name, "WITHOUT ROWID table: every row");
            break;
          }
          const Ident& q = t.alias.empty() ? t.name : t.alias;
          occ.push_back({q.name, static_cast<char>(q.quote ? '"' : 0), info});
          break;
        }
      }
      if (t.on) expr(*t.on);
    }
  }

  // Whether GROUP BY, HAVING or (with `ordered`) ORDER BY of this core names one of its output
  // columns: a position, or an alias (SQLite looks these up before table columns). A subquery
  // there counts as naming one (not looked into).
  static bool names_output(const SelectCore& c, const Select* ordered) {
    std::set<std::string> aliases;
    for (const auto& rc : c.columns)
      if (!rc.alias.name.empty()) aliases.insert(core::lower(rc.alias.name));
    std::function<bool(const Expr&)> names = [&](const Expr& e) {
      if (e.select) return true;
      if (e.kind == ExprKind::kColumn && e.names.size() == 1 && aliases.count(core::lower(e.names[0].name))) return true;
      for (const auto& ch : e.children)
        if (ch && names(*ch)) return true;
      return e.filter && names(*e.filter);
    };
    auto position = [](const Expr& e) { return e.kind == ExprKind::kLiteral && e.literal == LiteralKind::kNumber; };
    for (const auto& g : c.group_by)
      if (position(*g) || names(*g)) return true;
    if (c.having && names(*c.having)) return true;
    if (ordered)
      for (const auto& t : ordered->order_by)
        if (position(*t.expr) || names(*t.expr)) return true;
    return false;
  }

  static std::string rowid_name(const TableInfo& t) {
    for (const char* n : {"rowid", "_rowid_", "oid"})
      if (!t.find_column(n)) return n;
    return "rowid";
  }

  // What the walk of a core found: an aggregate (or GROUP BY, HAVING), a window function, `*`.
  struct CoreShape {
    bool aggregated = false;
    bool windowed = false;
    bool star = false;
  };

  // A core's subqueries are visited, then its own witness is added (when it reads a table).
  void core(const SelectCore& c, const Select* owner) {
    if (c.is_values) {
      for (const auto& row : c.values)
        for (const auto& e : row) expr(*e);
      return;
    }
    const SelectCore* saved_where_of = where_of_;
    const int saved_negation = negation_;
    where_of_ = nullptr;  // a subquery outside WHERE is not decorrelated
    negation_ = 0;
    struct Restore {
      Rewriter* r;
      const SelectCore* w;
      int n;
      ~Restore() { r->where_of_ = w, r->negation_ = n; }
    } restore{this, saved_where_of, saved_negation};
    std::vector<Occurrence> occ;
    if (c.from) sources(*c.from, occ);
    if (!status.is_ok()) return;
    const CoreShape shape = walk(c, owner);
    if (occ.empty()) return;
    witness(c, owner, occ, shape);
  }

  // Visits every expression of a core (and its owner's ORDER BY, LIMIT, OFFSET).
  CoreShape walk(const SelectCore& c, const Select* owner) {
    CoreShape shape;
    shape.aggregated = !c.group_by.empty();
    for (const auto& rc : c.columns) {
      if (rc.expr->kind == ExprKind::kStar) shape.star = true;
      else {
        expr(*rc.expr);
        shape.aggregated = shape.aggregated || has_aggregate(*rc.expr);
        shape.windowed = shape.windowed || has_window(*rc.expr);
      }
    }
    if (c.where) {
      where_of_ = &c;
      expr(*c.where);
      where_of_ = nullptr;
    }
    for (const auto& g : c.group_by) expr(*g);
    if (c.having) {
      expr(*c.having);
      shape.aggregated = true;
    }
    if (owner) {
      for (const auto& t : owner->order_by) {
        expr(*t.expr);
        shape.aggregated = shape.aggregated || has_aggregate(*t.expr);
        shape.windowed = shape.windowed || has_window(*t.expr);
      }
      if (owner->limit) expr(*owner->limit);
      if (owner->offset) expr(*owner->offset);
    }
    return shape;
  }

  // The witness of a core reading the tables of `occ`: the core with its rowid columns.
  void witness(const SelectCore& c, const Select* owner, const std::vector<Occurrence>& occ, const CoreShape& shape) {
    auto w = std::make_unique<Select>();
    w->cores.push_back(clone_core(c));
    SelectCore& wc = w->cores[0];
    wc.misplaced_order_by.clear();
    wc.misplaced_limit.reset();
    wc.misplaced_offset.reset();
    bool aggregated = shape.aggregated;
    bool keep_order_limit = owner != nullptr;
    drop_distinct(wc, owner, shape, aggregated, keep_order_limit);
    WitnessQuery q;
    q.grouped = aggregated;
    // A witness's rows (or groups) are set by its FROM, WHERE, GROUP BY and HAVING, and by ORDER
    // BY when a LIMIT/OFFSET cuts them; what it selects, and its DISTINCT, change none of them
    // unless one of those names an output column (by alias or position). Then it returns its
    // rowid columns alone, so two queries that differ only in their select list (another or an
    // extra column, DISTINCT or not) share one witness text, which select::InstanceBuilder runs
    // once. Without a cut, a plain witness's order carries nothing either.
    const bool cut = keep_order_limit && (owner->limit || owner->offset);
    if (!aggregated && !cut) {
      wc.columns.clear();
      keep_order_limit = false;
    } else if (!names_output(wc, keep_order_limit ? owner : nullptr)) {
      wc.columns.clear();
    }
    // Each row of the top query's own plain witness is one row of its result (before DISTINCT):
    // an empty result has an empty witness.
    if (!aggregated) q.rows_are_output = owner != nullptr && owner == top_;
    q.of_top_query = owner != nullptr && owner == top_;
    for (size_t k = 0; k < occ.size(); ++k) {
      ExprPtr col = column_expr(occ[k].qualifier, occ[k].quote, rowid_name(*occ[k].table));
      if (aggregated) col = call("group_concat", std::move(col));
      ResultColumn rc;
      rc.expr = std::move(col);
      rc.alias = {"__lineage_" + std::to_string(k + 1), 0};
      wc.columns.push_back(std::move(rc));
      q.tables.push_back(occ[k].table->name);
    }
    if (keep_order_limit) {
      SelectPtr copy = owner->clone();
      w->order_by = std::move(copy->order_by);
      w->limit = std::move(copy->limit);
      w->offset = std::move(copy->offset);
    }
    q.sql = to_sql(*standalone(*w));
    if (!shape.windowed && aggregated)
      if (Sample sample = group_sample(c, wc, occ); sample.where) {
        q.exact_sql = std::move(q.sql);
        wc.where = conjoin(std::move(sample.where), std::move(wc.where));
        q.sql = to_sql(*standalone(*w));
        q.sample_one_in = sample.one_in;
        if (std::find(out_.sampled.begin(), out_.sampled.end(), sample.what) == out_.sampled.end())
          out_.sampled.push_back(std::move(sample.what));
      }
    out_.queries.push_back(std::move(q));
  }

  // The witness drops the core's DISTINCT. A window function or a DISTINCT over groups makes it
  // keep every row (or group), the owner's cut dropped (a fallback when a LIMIT is lost); a plain
  // DISTINCT under a LIMIT becomes a GROUP BY of every output column, so the cut still applies to
  // distinct rows.
  void drop_distinct(SelectCore& wc, const Select* owner, const CoreShape& shape, bool& aggregated,
                     bool& keep_order_limit) {
    if (shape.windowed) {
      // A window function reads every row of its partition: keep all surviving rows.
      if (owner && owner->limit) fallback("window function: every row passing WHERE");
      keep_order_limit = false;
      wc.distinct = false;
    }
    if (!aggregated && wc.distinct) {
      if (owner && owner->limit && !shape.star && !shape.windowed) {
        for (size_t k = 0; k < wc.columns.size(); ++k) {
          auto pos = std::make_unique<Expr>();
          pos->kind = ExprKind::kLiteral;
          pos->text = std::to_string(k + 1);
          wc.group_by.push_back(std::move(pos));
        }
        aggregated = true;
      } else {
        keep_order_limit = false;  // DISTINCT drops no contributing row
      }
      wc.distinct = false;
    } else if (aggregated && wc.distinct) {
      if (owner && owner->limit) fallback("DISTINCT over groups: every group");
      keep_order_limit = false;
      wc.distinct = false;
    }
  }

  struct Sample {
    ExprPtr where;       // nl2sql_hash(…) % one_in = 0; null: no sample
    int64_t one_in = 0;
    std::string what;    // for Lineage::sampled
  };

  // The sampling conjunct of an aggregating witness over a large table (see the header):
  // nl2sql_hash(group keys) % m = 0, or of the large table's rowid for a single group.
  // Positional keys become the result column they name.
  Sample group_sample(const SelectCore& original, const SelectCore& wc,
                      const std::vector<Occurrence>& occ) const {
    if (options_.group_budget <= 0) return {};
    int64_t largest = 0;
    const Occurrence* big = nullptr;
    for (const auto& o : occ) {
      auto it = table_rows_.find(core::lower(o.table->name));
      if (it != table_rows_.end() && it->second > largest) largest = it->second, big = &o;
    }
    if (largest <= options_.group_budget || !big) return {};
    auto hash = std::make_unique<Expr>();
    hash->kind = ExprKind::kFunction;
    hash->op = "nl2sql_hash";
    const int64_t one_in = (largest + options_.group_budget - 1) / options_.group_budget;
    if (wc.group_by.empty()) {
      // One group (an aggregate without GROUP BY): a hash sample of the large table's rows. Not
      // with HAVING, which would judge the sample instead of the group.
      if (wc.having) return {};
      hash->children.push_back(column_expr(big->qualifier, big->quote, rowid_name(*big->table)));
      return {binary("=", binary("%", std::move(hash), number(one_in)), number(0)), one_in,
              "rows of " + big->table->name + " in the single group: 1 rowid bucket in " + std::to_string(one_in)};
    }
    for (const auto& g : wc.group_by) {
      const Expr* key = g.get();
      if (key->kind == ExprKind::kLiteral && key->literal == LiteralKind::kNumber &&
          !key->text.empty() && std::all_of(key->text.begin(), key->text.end(),
                      [](char ch) { return std::isdigit(static_cast<unsigned char>(ch)) != 0; })) {
        size_t k = key->text.size() > 6 ? 0 : std::stoul(key->text);
        if (k < 1 || k > original.columns.size()) return {};
        key = original.columns[k - 1].expr.get();
      }
      if (key->kind == ExprKind::kStar || has_aggregate(*key) || has_window(*key) || has_subquery(*key))
        return {};
      hash->children.push_back(key->clone());
    }
    return {binary("=", binary("%", std::move(hash), number(one_in)), number(0)), one_in,
            "groups over " + big->table->name + ": 1 key bucket in " + std::to_string(one_in)};
  }

  const Schema& schema_;
  const LineageOptions& options_;
  const Select* top_ = nullptr;  // the query rewritten (the first select visited)
  std::map<std::string, int64_t> table_rows_ = lower_keys(options_.table_rows);
  Lineage& out_;
  const SelectCore* where_of_ = nullptr;  // the core whose WHERE is being visited
  int negation_ = 0;                      // NOT / NOT IN levels around the current expression
  std::vector<VisibleCte> ctes_;
  std::set<const Cte*> done_ctes_;
};

}  // namespace

Result<Lineage> rewrite_lineage(const Select& select, const Schema& schema,
                                const LineageOptions& options) {
  Lineage out;
  Rewriter r(schema, options, out);
  r.select(select);
  if (!r.status.is_ok()) return r.status;
  return out;
}

Result<std::map<std::string, int64_t>> count_table_rows(const Select& select, const Schema& schema,
                                                        const std::filesystem::path& db,
                                                        const db::Executor& executor,
                                                        std::map<std::string, int64_t>* cache) {
  std::map<std::string, int64_t> out;
  for (const auto& t : analyze_references(select, schema).tables) {
    if (cache)
      if (auto it = cache->find(t); it != cache->end()) {
        out[t] = it->second;
        continue;
      }
    auto n = executor.run(db, "SELECT count(*) FROM " + quote_identifier({t, '"'}));
    if (!n.ok() || n.result.rows.empty() || n.result.rows[0].empty() ||
        n.result.rows[0][0].type != db::ValueType::kInteger)
      return Status(ErrorCode::kSql, "counting the rows of " + t + ": " + (n.ok() ? "no count" : n.error));
    out[t] = n.result.rows[0][0].i;
    if (cache) (*cache)[t] = out[t];
  }
  return out;
}

db::ExecutionResult run_witness(const WitnessQuery& q, const std::filesystem::path& db,
                                const db::Executor& executor, const db::QueryLimits& limits) {
  auto r = executor.run(db, q.sql, limits);
  if (q.sample_one_in == 0 || !r.ok()) return r;
  // The sample kept nothing: no group, or a single group with no row (all rowid columns NULL).
  const size_t n = q.tables.size();
  bool kept = false;
  for (const auto& row : r.result.rows)
    for (size_t k = row.size() >= n ? row.size() - n : 0; k < row.size() && !kept; ++k)
      kept = !row[k].is_null() && !(row[k].type == db::ValueType::kText && row[k].s.empty());
  return kept ? r : executor.run(db, q.exact_sql, limits);
}

db::ExecutionResult run_witness(const WitnessQuery& q, const std::filesystem::path& db,
                                const db::Executor& executor, const db::QueryLimits& limits,
                                const db::RowSink& sink) {
  const size_t n = q.tables.size();
  bool kept = false;
  auto r = executor.run(db, q.sql, limits, [&](const db::Row& row) {
    for (size_t k = row.size() >= n ? row.size() - n : 0; k < row.size() && !kept; ++k)
      kept = !row[k].is_null() && !(row[k].type == db::ValueType::kText && row[k].s.empty());
    sink(row);
  });
  if (q.sample_one_in == 0 || !r.ok() || kept) return r;
  return executor.run(db, q.exact_sql, limits, sink);
}

Result<LineageRows> collect_lineage_rows(const Lineage& lineage, const std::filesystem::path& db,
                                         const db::Executor& executor) {
  LineageRows rows;
  db::QueryLimits limits = executor.options().limits;
  limits.row_cap = 0;
  for (const auto& q : lineage.queries) {
    std::string sql = q.sql;
    if (!q.all_rows_of.empty()) sql = "SELECT rowid FROM " + quote_identifier({q.all_rows_of, '"'});
    // Rows are streamed into this query's own sets, merged once it has run: a witness that
    // fails part way leaves nothing behind.
    LineageRows found;
    Status row_error = Status::ok();
    const size_t n = q.all_rows_of.empty() ? q.tables.size() : 1;
    auto take = [&](const db::Row& row) {
      if (!row_error.is_ok()) return;
      if (row.size() < n) {
        row_error = internal_error("lineage query returned too few columns");
        return;
      }
      for (size_t k = 0; k < n; ++k) {
        auto& set = found[q.all_rows_of.empty() ? q.tables[k] : q.all_rows_of];
        if (!for_each_rowid(row[row.size() - n + k], [&](int64_t id) { set.insert(id); })) {
          row_error = internal_error("lineage query returned a malformed rowid list");
          return;
        }
      }
    };
    auto r = q.all_rows_of.empty() ? run_witness(q, db, executor, limits, take)
                                   : executor.run(db, sql, limits, take);
    if (!r.ok() && !q.all_rows_on_error.empty()) {
      for (const auto& t : q.all_rows_on_error) {
        auto& set = rows[t];
        auto all = executor.run(db, "SELECT rowid FROM " + quote_identifier({t, '"'}), limits,
                                [&](const db::Row& row) {
                                  if (!row.empty() && row[0].type == db::ValueType::kInteger) set.insert(row[0].i);
                                });
        if (!all.ok()) return Status(ErrorCode::kSql, "lineage of " + t + ": " + all.error);
      }
      continue;
    }
    if (!r.ok()) return Status(ErrorCode::kSql, "lineage query failed: " + r.error + "\n" + sql);
    if (!row_error.is_ok()) return row_error;
    for (auto& [table, ids] : found) rows[table].merge(ids);
  }
  return rows;
}

}  // namespace nl2sql::sql
