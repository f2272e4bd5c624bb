// The SQL abstract syntax tree for the SELECT side of SQLite.
//
// A parsed Statement owns its whole tree through unique_ptrs (no sharing, no parent links), so
// a tree is a plain value: movable, deep-copyable with clone(), and safe to read from many
// threads at once. Every node carries the SourcePos of its first token in the original text.
// Expressions are one node type (Expr) with a kind and an ordered list of children, which keeps
// traversal, printing and rewriting uniform; the meaning of children per kind is documented on
// ExprKind. Parentheses are not nodes: the printer re-inserts them from operator precedence, so
// redundant parentheses disappear and a printed tree re-parses to the same tree.
// Statements that are not queries (DML, DDL, PRAGMA, ATTACH, …) become a Statement of kind
// kNotQuery holding the leading keyword and the raw text, never an error.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace nl2sql::sql {

struct SourcePos {
  uint32_t offset = 0;  // byte offset in the source text
  uint32_t line = 1;    // 1-based
  uint32_t column = 1;  // 1-based, in bytes
};

// An identifier as written. `quote` is 0 (bare), '"', '`' or '['. The quote style matters for
// one SQLite rule: a double-quoted name that resolves to no column is a string literal, so the
// printer keeps double quotes where they were.
struct Ident {
  std::string name;
  char quote = 0;
  bool empty() const { return name.empty(); }
};

struct Select;
struct Expr;
using ExprPtr = std::unique_ptr<Expr>;
using SelectPtr = std::unique_ptr<Select>;

enum class ExprKind : uint8_t {
  kLiteral,     // text = literal text as written (numbers), decoded value (strings, blobs: hex)
  kColumn,      // names = [schema,] [table,] column  (1–3 parts)
  kStar,        // `*` or `t.*` in a result list; names = [] or [table]
  kParam,       // ?, ?NNN, :name, @name, $name; text = as written
  kUnary,       // op in {"-", "+", "~", "NOT"}; children = [operand]
  kPostfix,     // op in {"ISNULL", "NOTNULL", "NOT NULL"}; children = [operand]
  kBinary,      // op: "||" "->" "->>" "*" "/" "%" "+" "-" "<<" ">>" "&" "|" "<" "<=" ">" ">="
                //     "=" "==" "!=" "<>" "IS" "IS NOT" "AND" "OR"; children = [lhs, rhs]
  kLike,        // op in {"LIKE","GLOB","REGEXP","MATCH"}; negated; children = [lhs, pattern(, escape)]
  kBetween,     // negated; children = [operand, low, high]
  kInList,      // negated; children = [operand, items...]
  kInSelect,    // negated; children = [operand]; select
  kInTable,     // negated; children = [operand]; names = [schema,] table  (x IN tbl)
  kExists,      // select (NOT EXISTS is kUnary NOT over kExists)
  kSubquery,    // scalar subquery; select
  kFunction,    // name; distinct; star (count(*)); children = args; filter; over
  kCase,        // has_operand; children = [operand?] when1 then1 … [else?]; has_else
  kCast,        // type_name; children = [operand]
  kCollate,     // collation; children = [operand]
  kVector,      // row value (a, b, …); children = items (at least 2)
  kRaise,       // RAISE(IGNORE|ROLLBACK|ABORT|FAIL[, msg]); text = action; children = [msg?]
};

enum class LiteralKind : uint8_t {
  kNumber, kString, kBlob, kNull, kTrue, kFalse, kCurrentTime, kCurrentDate, kCurrentTimestamp
};

enum class FrameBoundKind : uint8_t {
  kUnboundedPreceding, kPreceding, kCurrentRow, kFollowing, kUnboundedFollowing
};

struct FrameBound {
  FrameBoundKind kind = FrameBoundKind::kCurrentRow;
  ExprPtr offset;  // for kPreceding / kFollowing
};

struct OrderingTerm;

struct WindowSpec {
  Ident base_name;                  // an existing window this one extends
  std::vector<ExprPtr> partition_by;
  std::vector<OrderingTerm> order_by;
  bool has_frame = false;
  std::string frame_unit;           // "ROWS" | "RANGE" | "GROUPS"
  bool frame_between = false;
  FrameBound frame_start, frame_end;
  std::string frame_exclude;        // "", "NO OTHERS", "CURRENT ROW", "GROUP", "TIES"
};

struct Expr {
  ExprKind kind = ExprKind::kLiteral;
  SourcePos pos;
  std::string op;                   // operator / function name / cast type / collation / action
  std::string text;                 // literal or parameter text
  LiteralKind literal = LiteralKind::kNumber;
  std::vector<Ident> names;         // column / star qualifier / IN table
  std::vector<ExprPtr> children;
  SelectPtr select;                 // kInSelect, kExists, kSubquery
  bool negated = false;
  bool distinct = false;            // kFunction
  bool star = false;                // kFunction: f(*)
  bool has_operand = false;         // kCase
  bool has_else = false;            // kCase
  ExprPtr filter;                   // kFunction: FILTER (WHERE …)
  std::unique_ptr<WindowSpec> over; // kFunction: OVER (…)
  Ident over_name;                  // kFunction: OVER name

  ExprPtr clone() const;
};

struct OrderingTerm {
  ExprPtr expr;
  int direction = 0;  // 0 unspecified, 1 ASC, -1 DESC
  int nulls = 0;      // 0 unspecified, 1 NULLS FIRST, -1 NULLS LAST
};

struct ResultColumn {
  ExprPtr expr;       // kStar for * / t.*
  Ident alias;
  bool has_as = true;
};

enum class JoinKind : uint8_t { kComma, kInner, kLeft, kRight, kFull, kCross };

struct TableRef;
// A FROM clause: a left-deep list; element i > 0 is joined to everything before it.
struct JoinList {
  std::vector<TableRef> items;
};

struct TableRef {
  enum class Kind : uint8_t { kTable, kSubquery, kFunction, kJoin } kind = Kind::kTable;
  SourcePos pos;
  Ident schema;
  Ident name;                       // table or table-valued function name
  std::vector<ExprPtr> args;        // table-valued function arguments
  SelectPtr select;                 // kSubquery
  std::unique_ptr<JoinList> join;   // kJoin: a parenthesised join
  Ident alias;
  bool has_as = false;
  std::string indexed;              // "" | "NOT INDEXED" | index name (INDEXED BY)
  // How this item joins the ones before it (ignored for the first item).
  JoinKind join_kind = JoinKind::kComma;
  bool natural = false;
  bool outer = false;               // LEFT OUTER etc. written with OUTER
  ExprPtr on;
  std::vector<Ident> using_columns;
};

struct SelectCore {
  SourcePos pos;
  bool is_values = false;
  std::vector<std::vector<ExprPtr>> values;  // VALUES rows
  bool distinct = false;
  bool all = false;
  std::vector<ResultColumn> columns;
  std::unique_ptr<JoinList> from;   // null when there is no FROM
  ExprPtr where;
  std::vector<ExprPtr> group_by;
  ExprPtr having;
  std::vector<std::pair<Ident, std::unique_ptr<WindowSpec>>> windows;
  // Not SQLite: ORDER BY / LIMIT written on a compound member other than the last
  // ("… LIMIT 3 INTERSECT SELECT …", found in Spider's gold). Kept so such text still parses
  // and prints back faithfully; SQLite rejects it when executed.
  std::vector<OrderingTerm> misplaced_order_by;
  ExprPtr misplaced_limit;
  ExprPtr misplaced_offset;
};

enum class CompoundOp : uint8_t { kUnion, kUnionAll, kIntersect, kExcept };

struct Cte {
  Ident name;
  std::vector<Ident> columns;
  int materialized = 0;  // 0 unspecified, 1 MATERIALIZED, -1 NOT MATERIALIZED
  SelectPtr select;
};

struct Select {
  SourcePos pos;
  bool recursive = false;
  std::vector<Cte> with;
  std::vector<SelectCore> cores;    // at least one
  std::vector<CompoundOp> ops;      // ops[i] joins cores[i] and cores[i + 1]
  std::vector<OrderingTerm> order_by;
  ExprPtr limit;
  ExprPtr offset;

  SelectPtr clone() const;
};

struct Statement {
  enum class Kind : uint8_t { kQuery, kNotQuery } kind = Kind::kQuery;
  SelectPtr select;          // kQuery
  bool explain = false;      // EXPLAIN [QUERY PLAN] prefix was present (kNotQuery)
  std::string keyword;       // kNotQuery: leading keyword, upper-cased ("INSERT", "PRAGMA", …)
  std::string text;          // kNotQuery: the statement's source text
  bool is_query() const { return kind == Kind::kQuery; }
};

// Deep copies (the tree has unique ownership).
WindowSpec clone_window(const WindowSpec& w);
JoinList clone_join_list(const JoinList& j);
SelectCore clone_core(const SelectCore& c);

}  // namespace nl2sql::sql
