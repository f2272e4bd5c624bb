// Normalization of queries for de-duplication of candidates.
//
// normalize() rewrites a copy of the tree so that queries differing only in spelling print the
// same: every FROM item gets a positional alias (t1, t2, … in order of appearance, qualifiers
// rewritten in its scope and in correlated subqueries), identifiers are lower-cased (SQLite
// names are case-insensitive; a single-part "double-quoted" name keeps its case because SQLite
// may read it as a string), the operands of AND / OR chains are sorted, and the canonical
// printer removes redundant parentheses and normalizes keyword case and whitespace.
// Two queries with the same normal form return the same result on every database; the
// converse does not hold (normalization is syntactic). Pure functions.
#pragma once

#include <string>
#include <string_view>

#include "nl2sql/core/status.h"
#include "nl2sql/sql/ast.h"

namespace nl2sql::sql {

SelectPtr normalize(const Select& select);
std::string normalized_sql(const Select& select);
// Parses and normalizes; a statement that is not a query normalizes to its trimmed text.
Result<std::string> normalize_sql(std::string_view sql);

}  // namespace nl2sql::sql
