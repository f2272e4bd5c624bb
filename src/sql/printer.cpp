#include "nl2sql/sql/printer.h"

#include <cctype>
#include <set>
#include <string>

#include "nl2sql/sql/parser.h"
#include "nl2sql/core/text.h"

namespace nl2sql::sql {
namespace {

std::string to_upper(std::string s) {
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}
std::string to_lower(std::string_view s) { return core::lower(s); }

// Binding strength, matching the parser's levels (higher binds tighter).
int precedence(const Expr& e) {
  switch (e.kind) {
    case ExprKind::kBinary: {
      const std::string& op = e.op;
      if (op == "OR") return 1;
      if (op == "AND") return 2;
      if (op == "=" || op == "==" || op == "!=" || op == "<>" || op == "IS" || op == "IS NOT") return 4;
      if (op == "<" || op == "<=" || op == ">" || op == ">=") return 5;
      if (op == "&" || op == "|" || op == "<<" || op == ">>") return 7;
      if (op == "+" || op == "-") return 8;
      if (op == "*" || op == "/" || op == "%") return 9;
      return 10;  // || -> ->>
    }
    case ExprKind::kUnary:
      return e.op == "NOT" ? 3 : 12;
    case ExprKind::kLike:
    case ExprKind::kBetween:
    case ExprKind::kInList:
    case ExprKind::kInSelect:
    case ExprKind::kInTable:
    case ExprKind::kPostfix:
      return 4;
    case ExprKind::kCollate:
      return 11;
    default:
      return 13;
  }
}

class Printer {
 public:
  explicit Printer(const PrintOptions& o) : o_(o) {}
  std::string out;

  void kw(const char* k) { out += o_.lower_keywords ? to_lower(k) : std::string(k); }
  void kw(const std::string& k) { out += o_.lower_keywords ? to_lower(k) : to_upper(k); }
  void ident(const Ident& i) { out += quote_identifier(i, o_.lower_identifiers); }

  void expr(const Expr& e, int min_prec = 0) {
    bool paren = precedence(e) < min_prec;
    if (paren) out += '(';
    expr_body(e);
    if (paren) out += ')';
  }

  void expr_list(const std::vector<ExprPtr>& v, size_t from = 0) {
    for (size_t k = from; k < v.size(); ++k) {
      if (k > from) out += ", ";
      expr(*v[k]);
    }
  }

  void literal(const Expr& e) {
    switch (e.literal) {
      case LiteralKind::kNumber: out += e.text; break;
      case LiteralKind::kString:
        out += '\'';
        for (char c : e.text) {
          if (c == '\'') out += '\'';
          out += c;
        }
        out += '\'';
        break;
      case LiteralKind::kBlob: out += "X'" + e.text + "'"; break;
      case LiteralKind::kNull: kw("NULL"); break;
      case LiteralKind::kTrue: kw("TRUE"); break;
      case LiteralKind::kFalse: kw("FALSE"); break;
      case LiteralKind::kCurrentTime: kw("CURRENT_TIME"); break;
      case LiteralKind::kCurrentDate: kw("CURRENT_DATE"); break;
      case LiteralKind::kCurrentTimestamp: kw("CURRENT_TIMESTAMP"); break;
    }
  }

  void names(const std::vector<Ident>& n) {
    for (size_t k = 0; k < n.size(); ++k) {
      if (k) out += '.';
      ident(n[k]);
    }
  }

  // One expression without its parentheses: leaves here, each family of nodes in its own member.
  void expr_body(const Expr& e) {
    switch (e.kind) {
      case ExprKind::kLiteral: literal(e); return;
      case ExprKind::kColumn: names(e.names); return;
      case ExprKind::kStar:
        if (!e.names.empty()) {
          names(e.names);
          out += '.';
        }
        out += '*';
        return;
      case ExprKind::kParam: out += e.text; return;
      case ExprKind::kUnary: unary(e); return;
      case ExprKind::kPostfix:
        expr(*e.children[0], 4);
        out += ' ';
        kw(e.op);
        return;
      case ExprKind::kBinary: binary(e); return;
      case ExprKind::kLike: like(e); return;
      case ExprKind::kBetween: between(e); return;
      case ExprKind::kInList:
      case ExprKind::kInSelect:
      case ExprKind::kInTable: in_predicate(e); return;
      case ExprKind::kExists:
        kw("EXISTS");
        out += " (";
        select(*e.select);
        out += ')';
        return;
      case ExprKind::kSubquery:
        out += '(';
        select(*e.select);
        out += ')';
        return;
      case ExprKind::kFunction: function_call(e); return;
      case ExprKind::kCase: case_expr(e); return;
      case ExprKind::kCast:
      case ExprKind::kCollate: conversion(e); return;
      case ExprKind::kVector:
        out += '(';
        expr_list(e.children);
        out += ')';
        return;
      case ExprKind::kRaise: raise(e); return;
    }
  }

  // ---- operators ----

  void unary(const Expr& e) {
    if (e.op == "NOT") {
      kw("NOT");
      out += ' ';
      expr(*e.children[0], 3);
      return;
    }
    Printer operand(o_);
    operand.expr(*e.children[0], 12);
    out += e.op;
    // "- -1" must not become the comment "--1".
    if (!operand.out.empty() && (operand.out[0] == '-' || operand.out[0] == '+')) out += ' ';
    out += operand.out;
  }

  void binary(const Expr& e) {
    const int p = precedence(e);
    expr(*e.children[0], p);
    out += ' ';
    if (std::isalpha(static_cast<unsigned char>(e.op[0]))) kw(e.op);
    else out += e.op;
    out += ' ';
    expr(*e.children[1], p + 1);
  }

  // ---- predicates: LIKE (GLOB, REGEXP, MATCH), BETWEEN, IN ----

  void like(const Expr& e) {
    expr(*e.children[0], 4);
    out += ' ';
    if (e.negated) kw("NOT ");
    kw(e.op);
    out += ' ';
    expr(*e.children[1], 5);
    if (e.children.size() > 2) {
      out += ' ';
      kw("ESCAPE");
      out += ' ';
      expr(*e.children[2], 5);
    }
  }

  void between(const Expr& e) {
    expr(*e.children[0], 4);
    out += ' ';
    if (e.negated) kw("NOT ");
    kw("BETWEEN");
    out += ' ';
    expr(*e.children[1], 5);
    out += ' ';
    kw("AND");
    out += ' ';
    expr(*e.children[2], 5);
  }

  // x IN table, x IN (SELECT …), x IN (a, b, …).
  void in_predicate(const Expr& e) {
    expr(*e.children[0], 4);
    out += ' ';
    if (e.negated) kw("NOT ");
    kw("IN");
    out += ' ';
    if (e.kind == ExprKind::kInTable) {
      names(e.names);
    } else if (e.kind == ExprKind::kInSelect) {
      out += '(';
      select(*e.select);
      out += ')';
    } else {
      out += '(';
      expr_list(e.children, 1);
      out += ')';
    }
  }

  // ---- calls and compound expressions ----

  // name([DISTINCT] args | *) [FILTER (WHERE …)] [OVER (window) | OVER name].
  void function_call(const Expr& e) {
    out += o_.lower_keywords ? to_lower(e.op) : to_upper(e.op);
    out += '(';
    if (e.star) {
      out += '*';
    } else {
      if (e.distinct) kw("DISTINCT ");
      expr_list(e.children);
    }
    out += ')';
    if (e.filter) {
      out += ' ';
      kw("FILTER");
      out += " (";
      kw("WHERE");
      out += ' ';
      expr(*e.filter);
      out += ')';
    }
    if (e.over) {
      out += ' ';
      kw("OVER");
      out += " (";
      window(*e.over);
      out += ')';
    } else if (!e.over_name.empty()) {
      out += ' ';
      kw("OVER");
      out += ' ';
      ident(e.over_name);
    }
  }

  void case_expr(const Expr& e) {
    kw("CASE");
    size_t k = 0;
    if (e.has_operand) {
      out += ' ';
      expr(*e.children[k++]);
    }
    size_t pairs_end = e.children.size() - (e.has_else ? 1 : 0);
    for (; k < pairs_end; k += 2) {
      out += ' ';
      kw("WHEN");
      out += ' ';
      expr(*e.children[k]);
      out += ' ';
      kw("THEN");
      out += ' ';
      expr(*e.children[k + 1]);
    }
    if (e.has_else) {
      out += ' ';
      kw("ELSE");
      out += ' ';
      expr(*e.children.back());
    }
    out += ' ';
    kw("END");
  }

  // CAST(x AS type) and x COLLATE name.
  void conversion(const Expr& e) {
    if (e.kind == ExprKind::kCast) {
      kw("CAST");
      out += '(';
      expr(*e.children[0]);
      out += ' ';
      kw("AS");
      out += ' ';
      kw(e.op);
      out += ')';
      return;
    }
    expr(*e.children[0], 11);
    out += ' ';
    kw("COLLATE");
    out += ' ';
    ident(Ident{e.op, 0});
  }

  void raise(const Expr& e) {
    kw("RAISE");
    out += '(';
    kw(e.text);
    if (!e.children.empty()) {
      out += ", ";
      expr(*e.children[0]);
    }
    out += ')';
  }

  void ordering(const std::vector<OrderingTerm>& terms) {
    for (size_t k = 0; k < terms.size(); ++k) {
      if (k) out += ", ";
      expr(*terms[k].expr);
      if (terms[k].direction == 1) { out += ' '; kw("ASC"); }
      if (terms[k].direction == -1) { out += ' '; kw("DESC"); }
      if (terms[k].nulls == 1) { out += ' '; kw("NULLS FIRST"); }
      if (terms[k].nulls == -1) { out += ' '; kw("NULLS LAST"); }
    }
  }

  void bound(const FrameBound& b) {
    switch (b.kind) {
      case FrameBoundKind::kUnboundedPreceding: kw("UNBOUNDED PRECEDING"); break;
      case FrameBoundKind::kUnboundedFollowing: kw("UNBOUNDED FOLLOWING"); break;
      case FrameBoundKind::kCurrentRow: kw("CURRENT ROW"); break;
      case FrameBoundKind::kPreceding: expr(*b.offset, 5); out += ' '; kw("PRECEDING"); break;
      case FrameBoundKind::kFollowing: expr(*b.offset, 5); out += ' '; kw("FOLLOWING"); break;
    }
  }

  void window(const WindowSpec& w) {
    bool space = false;
    auto sep = [&] {
      if (space) out += ' ';
      space = true;
    };
    if (!w.base_name.empty()) {
      sep();
      ident(w.base_name);
    }
    if (!w.partition_by.empty()) {
      sep();
      kw("PARTITION BY ");
      expr_list(w.partition_by);
    }
    if (!w.order_by.empty()) {
      sep();
      kw("ORDER BY ");
      ordering(w.order_by);
    }
    if (w.has_frame) {
      sep();
      kw(w.frame_unit);
      out += ' ';
      if (w.frame_between) {
        kw("BETWEEN ");
        bound(w.frame_start);
        out += ' ';
        kw("AND ");
        bound(w.frame_end);
      } else {
        bound(w.frame_start);
      }
      if (!w.frame_exclude.empty()) {
        out += ' ';
        kw("EXCLUDE ");
        kw(w.frame_exclude);
      }
    }
  }

  void join_list(const JoinList& j) {
    for (size_t k = 0; k < j.items.size(); ++k) {
      const TableRef& t = j.items[k];
      if (k > 0) {
        if (t.join_kind == JoinKind::kComma && !t.natural) {
          out += ", ";
        } else {
          out += ' ';
          if (t.natural) kw("NATURAL ");
          switch (t.join_kind) {
            case JoinKind::kLeft: kw("LEFT "); break;
            case JoinKind::kRight: kw("RIGHT "); break;
            case JoinKind::kFull: kw("FULL "); break;
            case JoinKind::kCross: kw("CROSS "); break;
            default: break;
          }
          kw("JOIN ");
        }
      }
      table_ref(t);
      if (t.on) {
        out += ' ';
        kw("ON ");
        expr(*t.on);
      } else if (!t.using_columns.empty()) {
        out += ' ';
        kw("USING ");
        out += '(';
        for (size_t c = 0; c < t.using_columns.size(); ++c) {
          if (c) out += ", ";
          ident(t.using_columns[c]);
        }
        out += ')';
      }
    }
  }

  void table_ref(const TableRef& t) {
    switch (t.kind) {
      case TableRef::Kind::kTable:
      case TableRef::Kind::kFunction:
        if (!t.schema.empty()) {
          ident(t.schema);
          out += '.';
        }
        ident(t.name);
        if (t.kind == TableRef::Kind::kFunction) {
          out += '(';
          expr_list(t.args);
          out += ')';
        }
        break;
      case TableRef::Kind::kSubquery:
        out += '(';
        select(*t.select);
        out += ')';
        break;
      case TableRef::Kind::kJoin:
        out += '(';
        join_list(*t.join);
        out += ')';
        break;
    }
    if (!t.alias.empty()) {
      out += ' ';
      kw("AS ");
      ident(t.alias);
    }
    if (t.indexed == "NOT INDEXED") {
      out += ' ';
      kw("NOT INDEXED");
    } else if (!t.indexed.empty()) {
      out += ' ';
      kw("INDEXED BY ");
      ident(Ident{t.indexed, 0});
    }
  }

  void core(const SelectCore& c) {
    if (c.is_values) {
      kw("VALUES ");
      for (size_t r = 0; r < c.values.size(); ++r) {
        if (r) out += ", ";
        out += '(';
        expr_list(c.values[r]);
        out += ')';
      }
      return;
    }
    kw("SELECT ");
    if (c.distinct) kw("DISTINCT ");
    if (c.all) kw("ALL ");
    for (size_t k = 0; k < c.columns.size(); ++k) {
      if (k) out += ", ";
      expr(*c.columns[k].expr);
      if (!c.columns[k].alias.empty()) {
        out += ' ';
        kw("AS ");
        ident(c.columns[k].alias);
      }
    }
    if (c.from) {
      out += ' ';
      kw("FROM ");
      join_list(*c.from);
    }
    if (c.where) {
      out += ' ';
      kw("WHERE ");
      expr(*c.where);
    }
    if (!c.group_by.empty()) {
      out += ' ';
      kw("GROUP BY ");
      expr_list(c.group_by);
    }
    if (c.having) {
      out += ' ';
      kw("HAVING ");
      expr(*c.having);
    }
    if (!c.windows.empty()) {
      out += ' ';
      kw("WINDOW ");
      for (size_t k = 0; k < c.windows.size(); ++k) {
        if (k) out += ", ";
        ident(c.windows[k].first);
        out += ' ';
        kw("AS");
        out += " (";
        window(*c.windows[k].second);
        out += ')';
      }
    }
  }

  void select(const Select& s) {
    if (!s.with.empty()) {
      kw("WITH ");
      if (s.recursive) kw("RECURSIVE ");
      for (size_t k = 0; k < s.with.size(); ++k) {
        const Cte& c = s.with[k];
        if (k) out += ", ";
        ident(c.name);
        if (!c.columns.empty()) {
          out += '(';
          for (size_t i = 0; i < c.columns.size(); ++i) {
            if (i) out += ", ";
            ident(c.columns[i]);
          }
          out += ')';
        }
        out += ' ';
        kw("AS ");
        if (c.materialized == 1) kw("MATERIALIZED ");
        if (c.materialized == -1) kw("NOT MATERIALIZED ");
        out += '(';
        select(*c.select);
        out += ')';
      }
      out += ' ';
    }
    for (size_t k = 0; k < s.cores.size(); ++k) {
      if (k) {
        out += ' ';
        switch (s.ops[k - 1]) {
          case CompoundOp::kUnion: kw("UNION"); break;
          case CompoundOp::kUnionAll: kw("UNION ALL"); break;
          case CompoundOp::kIntersect: kw("INTERSECT"); break;
          case CompoundOp::kExcept: kw("EXCEPT"); break;
        }
        out += ' ';
      }
      core(s.cores[k]);
      order_limit(s.cores[k].misplaced_order_by, s.cores[k].misplaced_limit.get(),
                  s.cores[k].misplaced_offset.get());
    }
    order_limit(s.order_by, s.limit.get(), s.offset.get());
  }

  void order_limit(const std::vector<OrderingTerm>& order_by, const Expr* limit, const Expr* offset) {
    if (!order_by.empty()) {
      out += ' ';
      kw("ORDER BY ");
      ordering(order_by);
    }
    if (limit) {
      out += ' ';
      kw("LIMIT ");
      expr(*limit);
      if (offset) {
        out += ' ';
        kw("OFFSET ");
        expr(*offset);
      }
    }
  }

 private:
  PrintOptions o_;
};

bool plain_identifier(const std::string& n) {
  if (n.empty()) return false;
  unsigned char c0 = static_cast<unsigned char>(n[0]);
  if (!(std::isalpha(c0) || c0 == '_')) return false;
  for (char ch : n) {
    unsigned char c = static_cast<unsigned char>(ch);
    if (!(std::isalnum(c) || c == '_')) return false;
  }
  std::string u = to_upper(n);
  // Keywords SQLite's grammar never reads as a bare name, beyond those our parser reserves
  // (SQLite 3.40: `SELECT index FROM t` is a syntax error). Checked against every SQLite keyword
  // by SqlPrinter.EveryKeywordNamedColumnPrintsAsSqliteReadsIt.
  static const std::set<std::string, std::less<>> kSqliteOnly = {
      "ADD",     "ALTER",      "AUTOINCREMENT", "CHECK", "COMMIT", "CONSTRAINT",  "CREATE",
      "DEFERRABLE", "DROP",    "FOREIGN",       "INDEX", "NOTHING", "PRIMARY",    "RAISE",
      "REFERENCES", "TABLE",   "TO",            "TRANSACTION",     "UNIQUE"};
  return !is_reserved_word(u) && !kSqliteOnly.count(u) && u != "TRUE" && u != "FALSE";
}

}  // namespace

std::string quote_identifier(const Ident& ident, bool lower) {
  std::string n = lower ? to_lower(ident.name) : ident.name;
  if (ident.quote != '"' && plain_identifier(n)) return n;
  return core::quote_sql_identifier(n);
}

std::string to_sql(const Statement& stmt, const PrintOptions& options) {
  if (!stmt.is_query()) return stmt.text;
  return to_sql(*stmt.select, options);
}

std::string to_sql(const Select& select, const PrintOptions& options) {
  Printer p(options);
  p.select(select);
  return std::move(p.out);
}

std::string to_sql(const Expr& expr, const PrintOptions& options) {
  Printer p(options);
  p.expr(expr);
  return std::move(p.out);
}

}  // namespace nl2sql::sql
