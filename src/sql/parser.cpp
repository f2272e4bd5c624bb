// Recursive-descent parser; expressions by precedence climbing with SQLite's levels:
//   OR < AND < NOT < (= == != <> IS IN LIKE GLOB MATCH REGEXP BETWEEN ISNULL NOTNULL)
//      < (< <= > >=) < (& | << >>) < (+ -) < (* / %) < (|| -> ->>) < COLLATE < unary (- + ~)
// Failures are thrown as a private ParseFailure inside this file and turned into a Status at
// the public boundary; nothing escapes.
#include <algorithm>
#include <cctype>
#include <set>

#include "nl2sql/sql/parser.h"
#include "nl2sql/core/text.h"

namespace nl2sql::sql {
namespace {

using core::upper;

const std::set<std::string, std::less<>>& reserved_words() {
  static const std::set<std::string, std::less<>> k = {
      "ALL",     "AND",      "AS",        "BETWEEN",  "BY",        "CASE",         "CAST",
      "COLLATE", "CROSS",    "CURRENT_DATE", "CURRENT_TIME", "CURRENT_TIMESTAMP", "DEFAULT",
      "DELETE",  "DISTINCT", "ELSE",      "END",      "ESCAPE",    "EXCEPT",       "EXISTS",
      "FROM",    "FULL",                  "GROUP",    "HAVING",    "IN",           "INDEXED",
      "INNER",   "INSERT",   "INTERSECT", "INTO",     "IS",        "ISNULL",       "JOIN",
      "LEFT",    "LIKE",     "LIMIT",                 "NATURAL",   "NOT",          "NOTNULL",
      "NULL",    "OFFSET",   "ON",        "OR",       "ORDER",     "OUTER",
      "RIGHT",   "SELECT",   "SET",       "THEN",     "UNION",     "UPDATE",       "USING",
      "VALUES",  "WHEN",     "WHERE",     "WINDOW",   "WITH",      "RETURNING"};
  return k;
}

// Words that may name a column but would be misread as an implicit alias.
bool not_implicit_alias(std::string_view u) {
  return reserved_words().count(u) || u == "ASC" || u == "DESC" || u == "NULLS" ||
         u == "FILTER" || u == "OVER" || u == "GLOB" || u == "MATCH" || u == "REGEXP";
}

struct ParseFailure {
  size_t token;
  std::string message;
};

class Parser {
 public:
  Parser(std::string_view src, const ParseOptions& opt) : src_(src), opt_(opt), toks_(tokenize(src)) {}

  Statement statement() {
    if (toks_[0].kind == TokenKind::kError) throw ParseFailure{0, toks_[0].value};
    Statement st;
    size_t start = i_;
    if (peek_kw("EXPLAIN")) {
      st.explain = true;
      return not_query(std::move(st), start);
    }
    if (peek_kw("SELECT") || peek_kw("VALUES") || peek_kw("WITH")) {
      // WITH … INSERT/UPDATE/DELETE is not a query: look past the CTEs.
      if (peek_kw("WITH")) {
        size_t save = i_;
        SelectPtr probe = std::make_unique<Select>();
        with_clause(*probe);
        bool is_select = peek_kw("SELECT") || peek_kw("VALUES");
        i_ = save;
        if (!is_select && cur().kind == TokenKind::kWord) return not_query(std::move(st), start);
      }
      st.kind = Statement::Kind::kQuery;
      st.select = select();
    } else if (cur().kind == TokenKind::kWord) {
      return not_query(std::move(st), start);
    } else {
      note("SELECT");
      note("VALUES");
      note("WITH");
      fail("expected a statement");
    }
    while (accept_op(";")) {
    }
    if (cur().kind != TokenKind::kEnd) {
      note(";");
      note("end of input");
      fail("unexpected text after the end of the statement");
    }
    return st;
  }

  // Error reporting state.
  size_t expected_at_ = 0;
  std::vector<std::string> expected_;
  const std::vector<Token>& tokens() const { return toks_; }

 private:
  // ---- token helpers -------------------------------------------------------------------
  const Token& cur() const { return toks_[i_]; }
  const Token& peek(size_t k = 1) const { return toks_[std::min(i_ + k, toks_.size() - 1)]; }
  static bool word_is(const Token& t, std::string_view kw) {
    if (t.kind != TokenKind::kWord || t.text.size() != kw.size()) return false;
    for (size_t k = 0; k < kw.size(); ++k)
      if (std::toupper(static_cast<unsigned char>(t.text[k])) != kw[k]) return false;
    return true;
  }
  static bool op_is(const Token& t, std::string_view op) {
    return t.kind == TokenKind::kOperator && t.text == op;
  }
  void note(std::string what) {
    if (i_ > expected_at_) {
      expected_.clear();
      expected_at_ = i_;
    }
    if (i_ == expected_at_ &&
        std::find(expected_.begin(), expected_.end(), what) == expected_.end())
      expected_.push_back(std::move(what));
  }
  bool peek_kw(const char* kw) {
    note(kw);
    return word_is(cur(), kw);
  }
  bool accept_kw(const char* kw) {
    if (!peek_kw(kw)) return false;
    ++i_;
    return true;
  }
  void expect_kw(const char* kw) {
    if (!accept_kw(kw)) fail("");
  }
  bool peek_op(const char* op) {
    note(std::string("'") + op + "'");
    return op_is(cur(), op);
  }
  bool accept_op(const char* op) {
    if (!peek_op(op)) return false;
    ++i_;
    return true;
  }
  void expect_op(const char* op) {
    if (!accept_op(op)) fail("");
  }
  [[noreturn]] void fail(std::string message) { throw ParseFailure{i_, std::move(message)}; }

  struct DepthGuard {
    Parser& p;
    explicit DepthGuard(Parser& parser) : p(parser) {
      if (++p.depth_ > p.opt_.max_depth) p.fail("nesting too deep");
    }
    ~DepthGuard() { --p.depth_; }
  };
  // Left-deep operator chains grow the tree without recursion; bound them as well.
  void bump_chain(int& height) {
    if (++height > 8 * opt_.max_depth) fail("expression too long");
  }

  Statement not_query(Statement st, size_t start) {
    st.kind = Statement::Kind::kNotQuery;
    if (st.explain) {
      st.keyword = "EXPLAIN";
    } else {
      st.keyword = upper(cur().text);
    }
    // Skip to the end of this statement (a ';' outside parentheses) or of the input.
    int parens = 0;
    while (cur().kind != TokenKind::kEnd && !(parens == 0 && op_is(cur(), ";"))) {
      if (cur().kind == TokenKind::kError) fail(cur().value);
      if (op_is(cur(), "(")) ++parens;
      if (op_is(cur(), ")")) parens = std::max(0, parens - 1);
      ++i_;
    }
    size_t end = cur().pos.offset;
    st.text = std::string(src_.substr(toks_[start].pos.offset, end - toks_[start].pos.offset));
    while (!st.text.empty() && std::isspace(static_cast<unsigned char>(st.text.back()))) st.text.pop_back();
    while (accept_op(";")) {
    }
    if (cur().kind != TokenKind::kEnd) fail("unexpected text after the end of the statement");
    return st;
  }

  // ---- identifiers ---------------------------------------------------------------------
  bool at_name() const {
    const Token& t = cur();
    if (t.kind == TokenKind::kQuotedIdent) return true;
    return t.kind == TokenKind::kWord && !reserved_words().count(upper(t.text));
  }
  Ident name(const char* what = "identifier") {
    note(what);
    const Token& t = cur();
    if (t.kind == TokenKind::kQuotedIdent) {
      ++i_;
      return {t.value, t.quote};
    }
    if (t.kind == TokenKind::kWord && !reserved_words().count(upper(t.text))) {
      ++i_;
      return {std::string(t.text), 0};
    }
    fail("");
  }
  // Optional alias: AS name | bare name | 'string'.
  bool alias(Ident& out, bool& has_as) {
    has_as = accept_kw("AS");
    const Token& t = cur();
    if (t.kind == TokenKind::kString) {
      ++i_;
      out = {t.value, '"'};
      return true;
    }
    if (has_as) {
      if (t.kind == TokenKind::kWord) {  // after AS any word is a name
        ++i_;
        out = {std::string(t.text), 0};
        return true;
      }
      out = name("alias");
      return true;
    }
    note("AS");
    if (t.kind == TokenKind::kQuotedIdent ||
        (t.kind == TokenKind::kWord && !not_implicit_alias(upper(t.text)))) {
      out = name();
      return true;
    }
    return false;
  }

  // ---- SELECT ----------------------------------------------------------------------------
  void with_clause(Select& s) {
    expect_kw("WITH");
    s.recursive = accept_kw("RECURSIVE");
    do {
      Cte c;
      c.name = name("CTE name");
      if (accept_op("(")) {
        do c.columns.push_back(name("column name"));
        while (accept_op(","));
        expect_op(")");
      }
      expect_kw("AS");
      if (accept_kw("NOT")) {
        expect_kw("MATERIALIZED");
        c.materialized = -1;
      } else if (accept_kw("MATERIALIZED")) {
        c.materialized = 1;
      }
      expect_op("(");
      c.select = select();
      expect_op(")");
      s.with.push_back(std::move(c));
    } while (accept_op(","));
  }

  SelectPtr select() {
    DepthGuard guard(*this);
    auto s = std::make_unique<Select>();
    s->pos = cur().pos;
    if (peek_kw("WITH")) with_clause(*s);
    while (true) {
      s->cores.push_back(core());
      std::vector<OrderingTerm> order_by;
      ExprPtr limit, offset;
      if (accept_kw("ORDER")) {
        expect_kw("BY");
        order_by = ordering_terms();
      }
      if (accept_kw("LIMIT")) {
        limit = expr();
        if (accept_kw("OFFSET")) {
          offset = expr();
        } else if (accept_op(",")) {  // LIMIT offset, count
          offset = std::move(limit);
          limit = expr();
        }
      }
      if (accept_kw("UNION")) {
        s->ops.push_back(accept_kw("ALL") ? CompoundOp::kUnionAll : CompoundOp::kUnion);
      } else if (accept_kw("INTERSECT")) {
        s->ops.push_back(CompoundOp::kIntersect);
      } else if (accept_kw("EXCEPT")) {
        s->ops.push_back(CompoundOp::kExcept);
      } else {
        s->order_by = std::move(order_by);
        s->limit = std::move(limit);
        s->offset = std::move(offset);
        break;
      }
      // ORDER BY / LIMIT before a compound operator: SQLite rejects it, Spider's gold has it.
      SelectCore& c = s->cores.back();
      c.misplaced_order_by = std::move(order_by);
      c.misplaced_limit = std::move(limit);
      c.misplaced_offset = std::move(offset);
    }
    return s;
  }

  std::vector<OrderingTerm> ordering_terms() {
    std::vector<OrderingTerm> terms;
    do {
      OrderingTerm t;
      t.expr = expr();
      if (accept_kw("ASC")) t.direction = 1;
      else if (accept_kw("DESC")) t.direction = -1;
      if (accept_kw("NULLS")) {
        if (accept_kw("FIRST")) t.nulls = 1;
        else if (accept_kw("LAST")) t.nulls = -1;
        else fail("");
      }
      terms.push_back(std::move(t));
    } while (accept_op(","));
    return terms;
  }

  SelectCore core() {
    SelectCore c;
    c.pos = cur().pos;
    if (accept_kw("VALUES")) {
      c.is_values = true;
      do {
        expect_op("(");
        c.values.push_back(expr_list());
        expect_op(")");
      } while (accept_op(","));
      return c;
    }
    expect_kw("SELECT");
    if (accept_kw("DISTINCT")) c.distinct = true;
    else if (accept_kw("ALL")) c.all = true;
    do c.columns.push_back(result_column());
    while (accept_op(","));
    if (accept_kw("FROM")) c.from = std::make_unique<JoinList>(join_list());
    if (accept_kw("WHERE")) c.where = expr();
    if (accept_kw("GROUP")) {
      expect_kw("BY");
      c.group_by = expr_list();
    }
    if (accept_kw("HAVING")) c.having = expr();
    if (accept_kw("WINDOW")) {
      do {
        Ident n = name("window name");
        expect_kw("AS");
        expect_op("(");
        auto w = std::make_unique<WindowSpec>(window_spec());
        expect_op(")");
        c.windows.emplace_back(std::move(n), std::move(w));
      } while (accept_op(","));
    }
    return c;
  }

  ResultColumn result_column() {
    ResultColumn rc;
    SourcePos pos = cur().pos;
    if (accept_op("*")) {
      rc.expr = std::make_unique<Expr>();
      rc.expr->kind = ExprKind::kStar;
      rc.expr->pos = pos;
      return rc;
    }
    // name.* or schema.name.*
    if ((cur().kind == TokenKind::kWord || cur().kind == TokenKind::kQuotedIdent) &&
        op_is(peek(1), ".")) {
      size_t save = i_;
      std::vector<Ident> names;
      bool star = false;
      while (true) {
        if (cur().kind != TokenKind::kWord && cur().kind != TokenKind::kQuotedIdent) break;
        names.push_back({cur().kind == TokenKind::kWord ? std::string(cur().text) : cur().value,
                         cur().quote});
        ++i_;
        if (!accept_op(".")) break;
        if (accept_op("*")) {
          star = true;
          break;
        }
      }
      if (star) {
        rc.expr = std::make_unique<Expr>();
        rc.expr->kind = ExprKind::kStar;
        rc.expr->pos = pos;
        rc.expr->names = std::move(names);
        return rc;
      }
      i_ = save;
    }
    rc.expr = expr();
    rc.has_as = false;
    alias(rc.alias, rc.has_as);
    return rc;
  }

  JoinList join_list() {
    DepthGuard guard(*this);
    JoinList j;
    j.items.push_back(table_primary());
    while (true) {
      JoinKind kind;
      bool natural = false, outer = false;
      if (accept_op(",")) {
        kind = JoinKind::kComma;
      } else {
        size_t save = i_;
        natural = accept_kw("NATURAL");
        if (accept_kw("LEFT")) {
          kind = JoinKind::kLeft;
          outer = accept_kw("OUTER");
        } else if (accept_kw("RIGHT")) {
          kind = JoinKind::kRight;
          outer = accept_kw("OUTER");
        } else if (accept_kw("FULL")) {
          kind = JoinKind::kFull;
          outer = accept_kw("OUTER");
        } else if (accept_kw("INNER")) {
          kind = JoinKind::kInner;
        } else if (accept_kw("CROSS")) {
          kind = JoinKind::kCross;
        } else {
          kind = JoinKind::kInner;
        }
        if (!accept_kw("JOIN")) {
          if (i_ != save) fail("");
          break;
        }
      }
      TableRef t = table_primary();
      t.join_kind = kind;
      t.natural = natural;
      t.outer = outer;
      if (accept_kw("ON")) {
        t.on = expr();
      } else if (accept_kw("USING")) {
        expect_op("(");
        do t.using_columns.push_back(name("column name"));
        while (accept_op(","));
        expect_op(")");
      }
      j.items.push_back(std::move(t));
    }
    return j;
  }

  TableRef table_primary() {
    TableRef t;
    t.pos = cur().pos;
    if (accept_op("(")) {
      if (peek_kw("SELECT") || peek_kw("VALUES") || peek_kw("WITH")) {
        t.kind = TableRef::Kind::kSubquery;
        t.select = select();
      } else {
        t.kind = TableRef::Kind::kJoin;
        t.join = std::make_unique<JoinList>(join_list());
      }
      expect_op(")");
    } else {
      t.name = name("table name");
      if (accept_op(".")) {
        t.schema = t.name;
        t.name = name("table name");
      }
      if (accept_op("(")) {
        t.kind = TableRef::Kind::kFunction;
        if (!peek_op(")")) t.args = expr_list();
        expect_op(")");
      }
    }
    alias(t.alias, t.has_as);
    if (accept_kw("INDEXED")) {
      expect_kw("BY");
      t.indexed = name("index name").name;
    } else if (peek_kw("NOT") && word_is(peek(1), "INDEXED")) {
      i_ += 2;
      t.indexed = "NOT INDEXED";
    }
    return t;
  }

  WindowSpec window_spec() {
    WindowSpec w;
    if (cur().kind == TokenKind::kQuotedIdent ||
        (cur().kind == TokenKind::kWord && !peek_kw("PARTITION") && !peek_kw("ORDER") &&
         !peek_kw("ROWS") && !peek_kw("RANGE") && !peek_kw("GROUPS") &&
         !reserved_words().count(upper(cur().text))))
      w.base_name = name("window name");
    if (accept_kw("PARTITION")) {
      expect_kw("BY");
      w.partition_by = expr_list();
    }
    if (accept_kw("ORDER")) {
      expect_kw("BY");
      w.order_by = ordering_terms();
    }
    for (const char* unit : {"ROWS", "RANGE", "GROUPS"}) {
      if (accept_kw(unit)) {
        w.has_frame = true;
        w.frame_unit = unit;
        break;
      }
    }
    if (w.has_frame) {
      if (accept_kw("BETWEEN")) {
        w.frame_between = true;
        w.frame_start = frame_bound();
        expect_kw("AND");
        w.frame_end = frame_bound();
      } else {
        w.frame_start = frame_bound();
      }
      if (accept_kw("EXCLUDE")) {
        if (accept_kw("NO")) {
          expect_kw("OTHERS");
          w.frame_exclude = "NO OTHERS";
        } else if (accept_kw("CURRENT")) {
          expect_kw("ROW");
          w.frame_exclude = "CURRENT ROW";
        } else if (accept_kw("GROUP")) {
          w.frame_exclude = "GROUP";
        } else if (accept_kw("TIES")) {
          w.frame_exclude = "TIES";
        } else {
          fail("");
        }
      }
    }
    return w;
  }

  FrameBound frame_bound() {
    FrameBound b;
    if (accept_kw("UNBOUNDED")) {
      if (accept_kw("PRECEDING")) b.kind = FrameBoundKind::kUnboundedPreceding;
      else if (accept_kw("FOLLOWING")) b.kind = FrameBoundKind::kUnboundedFollowing;
      else fail("");
      return b;
    }
    if (peek_kw("CURRENT") && word_is(peek(1), "ROW")) {
      i_ += 2;
      b.kind = FrameBoundKind::kCurrentRow;
      return b;
    }
    b.offset = comparison();
    if (accept_kw("PRECEDING")) b.kind = FrameBoundKind::kPreceding;
    else if (accept_kw("FOLLOWING")) b.kind = FrameBoundKind::kFollowing;
    else fail("");
    return b;
  }

  // ---- expressions -----------------------------------------------------------------------
  std::vector<ExprPtr> expr_list() {
    std::vector<ExprPtr> v;
    do v.push_back(expr());
    while (accept_op(","));
    return v;
  }

  static ExprPtr make(ExprKind kind, SourcePos pos) {
    auto e = std::make_unique<Expr>();
    e->kind = kind;
    e->pos = pos;
    return e;
  }
  static ExprPtr binary(std::string op, ExprPtr l, ExprPtr r) {
    auto e = make(ExprKind::kBinary, l->pos);
    e->op = std::move(op);
    e->children.push_back(std::move(l));
    e->children.push_back(std::move(r));
    return e;
  }

  ExprPtr expr() {
    DepthGuard guard(*this);
    ExprPtr l = and_expr();
    int h = 0;
    while (accept_kw("OR")) {
      bump_chain(h);
      l = binary("OR", std::move(l), and_expr());
    }
    return l;
  }

  ExprPtr and_expr() {
    ExprPtr l = not_expr();
    int h = 0;
    while (accept_kw("AND")) {
      bump_chain(h);
      l = binary("AND", std::move(l), not_expr());
    }
    return l;
  }

  ExprPtr not_expr() {
    if (peek_kw("NOT")) {
      DepthGuard guard(*this);
      auto e = make(ExprKind::kUnary, cur().pos);
      ++i_;
      e->op = "NOT";
      e->children.push_back(not_expr());
      return e;
    }
    return equality();
  }

  ExprPtr equality() {
    ExprPtr l = comparison();
    int h = 0;
    while (true) {
      bump_chain(h);
      const Token& t = cur();
      if (peek_op("=") || peek_op("==") || peek_op("!=") || peek_op("<>")) {
        ++i_;
        l = binary(std::string(t.text), std::move(l), comparison());
        continue;
      }
      if (accept_kw("IS")) {
        bool neg = accept_kw("NOT");
        if (accept_kw("DISTINCT")) {
          expect_kw("FROM");
          neg = !neg;
        }
        l = binary(neg ? "IS NOT" : "IS", std::move(l), comparison());
        continue;
      }
      if (peek_kw("ISNULL") || peek_kw("NOTNULL") ||
          (peek_kw("NOT") && word_is(peek(1), "NULL"))) {
        auto e = make(ExprKind::kPostfix, l->pos);
        if (word_is(t, "NOT")) {
          e->op = "NOT NULL";
          i_ += 2;
        } else {
          e->op = upper(t.text);
          ++i_;
        }
        e->children.push_back(std::move(l));
        l = std::move(e);
        continue;
      }
      bool neg = false;
      if (peek_kw("NOT")) {
        const Token& n = peek(1);
        if (word_is(n, "LIKE") || word_is(n, "GLOB") || word_is(n, "REGEXP") ||
            word_is(n, "MATCH") || word_is(n, "BETWEEN") || word_is(n, "IN")) {
          neg = true;
          ++i_;
        } else {
          break;
        }
      }
      if (peek_kw("LIKE") || peek_kw("GLOB") || peek_kw("REGEXP") || peek_kw("MATCH")) {
        auto e = make(ExprKind::kLike, l->pos);
        e->op = upper(cur().text);
        ++i_;
        e->negated = neg;
        e->children.push_back(std::move(l));
        e->children.push_back(comparison());
        if (accept_kw("ESCAPE")) e->children.push_back(comparison());
        l = std::move(e);
        continue;
      }
      if (accept_kw("BETWEEN")) {
        auto e = make(ExprKind::kBetween, l->pos);
        e->negated = neg;
        e->children.push_back(std::move(l));
        e->children.push_back(comparison());
        expect_kw("AND");
        e->children.push_back(comparison());
        l = std::move(e);
        continue;
      }
      if (accept_kw("IN")) {
        auto e = make(ExprKind::kInList, l->pos);
        e->negated = neg;
        e->children.push_back(std::move(l));
        if (accept_op("(")) {
          if (peek_kw("SELECT") || peek_kw("VALUES") || peek_kw("WITH")) {
            e->kind = ExprKind::kInSelect;
            e->select = select();
          } else if (!peek_op(")")) {
            for (auto& x : expr_list()) e->children.push_back(std::move(x));
          }
          expect_op(")");
        } else {
          e->kind = ExprKind::kInTable;
          e->names.push_back(name("table name"));
          if (accept_op(".")) e->names.push_back(name("table name"));
        }
        l = std::move(e);
        continue;
      }
      if (neg) fail("");
      break;
    }
    return l;
  }

  ExprPtr comparison() {
    ExprPtr l = bitwise();
    int h = 0;
    while (peek_op("<") || peek_op("<=") || peek_op(">") || peek_op(">=")) {
      bump_chain(h);
      std::string op(cur().text);
      ++i_;
      l = binary(op, std::move(l), bitwise());
    }
    return l;
  }

  ExprPtr bitwise() {
    ExprPtr l = additive();
    int h = 0;
    while (peek_op("&") || peek_op("|") || peek_op("<<") || peek_op(">>")) {
      bump_chain(h);
      std::string op(cur().text);
      ++i_;
      l = binary(op, std::move(l), additive());
    }
    return l;
  }

  ExprPtr additive() {
    ExprPtr l = multiplicative();
    int h = 0;
    while (peek_op("+") || peek_op("-")) {
      bump_chain(h);
      std::string op(cur().text);
      ++i_;
      l = binary(op, std::move(l), multiplicative());
    }
    return l;
  }

  ExprPtr multiplicative() {
    ExprPtr l = concat();
    int h = 0;
    while (peek_op("*") || peek_op("/") || peek_op("%")) {
      bump_chain(h);
      std::string op(cur().text);
      ++i_;
      l = binary(op, std::move(l), concat());
    }
    return l;
  }

  ExprPtr concat() {
    ExprPtr l = collate();
    int h = 0;
    while (peek_op("||") || peek_op("->") || peek_op("->>")) {
      bump_chain(h);
      std::string op(cur().text);
      ++i_;
      l = binary(op, std::move(l), collate());
    }
    return l;
  }

  ExprPtr collate() {
    ExprPtr l = unary();
    int h = 0;
    while (accept_kw("COLLATE")) {
      bump_chain(h);
      auto e = make(ExprKind::kCollate, l->pos);
      e->op = name("collation name").name;
      e->children.push_back(std::move(l));
      l = std::move(e);
    }
    return l;
  }

  ExprPtr unary() {
    if (peek_op("-") || peek_op("+") || peek_op("~")) {
      DepthGuard guard(*this);
      auto e = make(ExprKind::kUnary, cur().pos);
      e->op = std::string(cur().text);
      ++i_;
      e->children.push_back(unary());
      return e;
    }
    if (peek_kw("NOT")) return not_expr();  // `a = NOT b`: SQLite accepts a prefix NOT here
    return primary();
  }

  // A primary expression: a literal token, a parenthesized expression, list or subquery, a
  // quoted column name, or what a word starts (word_primary).
  ExprPtr primary() {
    const Token& t = cur();
    SourcePos pos = t.pos;
    note("expression");
    switch (t.kind) {
      case TokenKind::kNumber: return token_literal(LiteralKind::kNumber);
      case TokenKind::kString: return token_literal(LiteralKind::kString);
      case TokenKind::kBlob: return token_literal(LiteralKind::kBlob);
      case TokenKind::kParam: {
        auto e = make(ExprKind::kParam, pos);
        e->text = t.value;
        ++i_;
        return e;
      }
      case TokenKind::kError:
        fail(t.value);
      case TokenKind::kOperator:
        if (accept_op("(")) return parenthesized(pos);
        fail("");
      case TokenKind::kQuotedIdent:
        return column_ref();
      case TokenKind::kWord:
        return word_primary(t, pos);
      case TokenKind::kEnd:
        fail("");
    }
    fail("");
  }

  // The current token's value as a literal of kind `k`.
  ExprPtr token_literal(LiteralKind k) {
    const Token& t = cur();
    auto e = make(ExprKind::kLiteral, t.pos);
    e->literal = k;
    e->text = t.value;
    ++i_;
    return e;
  }

  // After "(": a subquery, one expression, or a vector of them.
  ExprPtr parenthesized(SourcePos pos) {
    if (peek_kw("SELECT") || peek_kw("VALUES") || peek_kw("WITH")) {
      auto e = make(ExprKind::kSubquery, pos);
      e->select = select();
      expect_op(")");
      return e;
    }
    DepthGuard guard(*this);
    std::vector<ExprPtr> items = expr_list();
    expect_op(")");
    if (items.size() == 1) return std::move(items[0]);
    auto e = make(ExprKind::kVector, pos);
    e->children = std::move(items);
    return e;
  }

  // A word: a keyword literal (NULL, TRUE, CURRENT_DATE …), CASE, CAST, EXISTS, RAISE, a
  // function call or a column name.
  ExprPtr word_primary(const Token& t, SourcePos pos) {
    std::string u = upper(t.text);
    auto literal = [&](LiteralKind k) {
      auto e = make(ExprKind::kLiteral, pos);
      e->literal = k;
      e->text = u;
      ++i_;
      return e;
    };
    if (u == "NULL") return literal(LiteralKind::kNull);
    if (u == "TRUE" && !op_is(peek(1), ".") && !op_is(peek(1), "(")) return literal(LiteralKind::kTrue);
    if (u == "FALSE" && !op_is(peek(1), ".") && !op_is(peek(1), "(")) return literal(LiteralKind::kFalse);
    if (u == "CURRENT_TIME") return literal(LiteralKind::kCurrentTime);
    if (u == "CURRENT_DATE") return literal(LiteralKind::kCurrentDate);
    if (u == "CURRENT_TIMESTAMP") return literal(LiteralKind::kCurrentTimestamp);
    if (u == "CASE") return case_expr();
    if (u == "CAST" && op_is(peek(1), "(")) return cast_expr(pos);
    if (u == "EXISTS" && op_is(peek(1), "(")) {
      ++i_;
      expect_op("(");
      auto e = make(ExprKind::kExists, pos);
      e->select = select();
      expect_op(")");
      return e;
    }
    if (u == "RAISE" && op_is(peek(1), "(")) {
      i_ += 2;
      auto e = make(ExprKind::kRaise, pos);
      if (cur().kind != TokenKind::kWord) fail("");
      e->text = upper(cur().text);
      ++i_;
      if (accept_op(",")) e->children.push_back(expr());
      expect_op(")");
      return e;
    }
    if (op_is(peek(1), "(") && u != "SELECT" && u != "VALUES" && u != "WITH") return function_call();
    if (reserved_words().count(u)) fail("");
    return column_ref();
  }

  // CAST(expr AS type name [(n[, m])]).
  ExprPtr cast_expr(SourcePos pos) {
    ++i_;
    expect_op("(");
    auto e = make(ExprKind::kCast, pos);
    e->children.push_back(expr());
    expect_kw("AS");
    e->op = type_name();
    expect_op(")");
    return e;
  }

  // A type name as written: its words (quoted parts keep their quotes), then "(n)" or "(n, m)".
  std::string type_name() {
    std::string type;
    while (cur().kind == TokenKind::kWord || cur().kind == TokenKind::kQuotedIdent) {
      if (!type.empty()) type += ' ';
      type += std::string(cur().text);  // a quoted part keeps its quotes
      ++i_;
    }
    if (accept_op("(")) {
      type += '(';
      do {
        if (accept_op("-")) type += '-';
        else if (accept_op("+")) type += '+';
        if (cur().kind != TokenKind::kNumber) fail("");
        type += cur().value;
        ++i_;
        if (peek_op(",")) type += ", ";
      } while (accept_op(","));
      expect_op(")");
      type += ')';
    }
    return type;
  }

  ExprPtr column_ref() {
    auto e = make(ExprKind::kColumn, cur().pos);
    e->names.push_back(name("column name"));
    while (e->names.size() < 3 && accept_op(".")) e->names.push_back(name("column name"));
    return e;
  }

  ExprPtr case_expr() {
    auto e = make(ExprKind::kCase, cur().pos);
    ++i_;
    if (!peek_kw("WHEN")) {
      e->has_operand = true;
      e->children.push_back(expr());
    }
    expect_kw("WHEN");
    do {
      e->children.push_back(expr());
      expect_kw("THEN");
      e->children.push_back(expr());
    } while (accept_kw("WHEN"));
    if (accept_kw("ELSE")) {
      e->has_else = true;
      e->children.push_back(expr());
    }
    expect_kw("END");
    return e;
  }

  ExprPtr function_call() {
    auto e = make(ExprKind::kFunction, cur().pos);
    e->op = std::string(cur().text);
    i_ += 2;  // name and '('
    if (accept_op("*")) {
      e->star = true;
    } else if (!peek_op(")")) {
      if (accept_kw("DISTINCT")) e->distinct = true;
      else accept_kw("ALL");
      e->children = expr_list();
    }
    expect_op(")");
    if (peek_kw("FILTER") && op_is(peek(1), "(")) {
      i_ += 2;
      expect_kw("WHERE");
      e->filter = expr();
      expect_op(")");
    }
    if (accept_kw("OVER")) {
      if (accept_op("(")) {
        e->over = std::make_unique<WindowSpec>(window_spec());
        expect_op(")");
      } else {
        e->over_name = name("window name");
      }
    }
    return e;
  }

  std::string_view src_;
  ParseOptions opt_;
  std::vector<Token> toks_;
  size_t i_ = 0;
  int depth_ = 0;
};

std::string describe(const Token& t) {
  switch (t.kind) {
    case TokenKind::kEnd: return "end of input";
    case TokenKind::kError: return "'" + std::string(t.text) + "'";
    default: {
      std::string s(t.text.substr(0, 40));
      return "'" + s + (t.text.size() > 40 ? "…'" : "'");
    }
  }
}

std::string excerpt(std::string_view src, const SourcePos& pos) {
  size_t line_start = pos.offset - (pos.column - 1);
  size_t line_end = src.find('\n', pos.offset);
  if (line_end == std::string_view::npos) line_end = src.size();
  size_t col = pos.column - 1;
  size_t from = col > 60 ? col - 60 : 0;
  size_t len = std::min<size_t>(line_end - line_start - from, 120);
  std::string out = "  ";
  if (from > 0) out += "…";
  out += std::string(src.substr(line_start + from, len));
  out += "\n  ";
  if (from > 0) out += " ";
  out += std::string(col - from, ' ');
  out += "^";
  return out;
}

}  // namespace

bool is_reserved_word(std::string_view upper_word) { return not_implicit_alias(upper_word); }

Result<Statement> parse(std::string_view sql, const ParseOptions& options, ParseError* error) {
  Parser p(sql, options);
  try {
    return p.statement();
  } catch (const ParseFailure& f) {
    const Token& t = p.tokens()[std::min(f.token, p.tokens().size() - 1)];
    ParseError e;
    e.pos = t.pos;
    if (p.expected_at_ == f.token) e.expected = p.expected_;
    std::string msg = f.message;
    if (msg.empty()) {
      if (!e.expected.empty()) {
        msg = e.expected.size() == 1 ? "expected " : "expected one of ";
        for (size_t k = 0; k < e.expected.size(); ++k) msg += (k ? ", " : "") + e.expected[k];
        msg += "; ";
      }
      msg += "found " + describe(t);
    } else if (t.kind != TokenKind::kError) {
      msg += " (at " + describe(t) + ")";
    }
    e.message = msg;
    e.excerpt = excerpt(sql, t.pos);
    std::string full = "line " + std::to_string(t.pos.line) + ", column " +
                       std::to_string(t.pos.column) + ": " + msg + "\n" + e.excerpt;
    if (error) *error = std::move(e);
    return invalid_input(std::move(full));
  }
}

Result<Statement> parse_query(std::string_view sql, const ParseOptions& options) {
  auto r = parse(sql, options);
  if (!r.is_ok()) return r;
  if (!r->is_query()) return invalid_input("not a query: a " + r->keyword + " statement");
  return r;
}

}  // namespace nl2sql::sql
