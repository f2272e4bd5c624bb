// Canonical SQL text from the AST.
//
// to_sql() prints a tree on one line with single spaces, upper-case keywords (or lower-case with
// PrintOptions), parentheses only where operator precedence needs them, string literals in
// single quotes, identifiers bare when that is unambiguous and double-quoted otherwise (a name
// written in double quotes stays double-quoted: SQLite reads an unresolvable "x" as a string).
// Guarantee, checked on every gold query of the benchmarks: parse(to_sql(parse(s))) prints to
// the same text, and executes to the same result as s. Pure functions, thread-safe.
#pragma once

#include <string>

#include "nl2sql/sql/ast.h"

namespace nl2sql::sql {

struct PrintOptions {
  bool lower_keywords = false;
  bool lower_identifiers = false;  // used by the normalizer (SQLite names are case-insensitive)
};

std::string to_sql(const Statement& stmt, const PrintOptions& options = {});
std::string to_sql(const Select& select, const PrintOptions& options = {});
std::string to_sql(const Expr& expr, const PrintOptions& options = {});

// An identifier as the printer writes it (bare or double-quoted).
std::string quote_identifier(const Ident& ident, bool lower = false);

}  // namespace nl2sql::sql
