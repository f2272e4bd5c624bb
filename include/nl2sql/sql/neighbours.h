// Neighbour queries of a gold query (Zhong, Yu & Klein, EMNLP 2020, "Semantic Evaluation for
// Text-to-SQL with Distilled Test Suites", §3): queries one modification away from the gold, so
// close to it that a database telling them apart from the gold is a database a wrong prediction
// would most likely fail on. A distilled test suite is judged by how many of them it tells apart.
//
// One modification per neighbour, at one place of the tree:
//   comparison  swap a comparison operator (= ↔ !=, < ↔ <= ↔ > ↔ >=)
//   predicate   drop one side of an AND / OR, or a whole WHERE / HAVING / ON; AND ↔ OR
//   negation    IN ↔ NOT IN, LIKE ↔ NOT LIKE, BETWEEN ↔ NOT BETWEEN, EXISTS ↔ NOT EXISTS
//   aggregate   MAX ↔ MIN, SUM ↔ AVG, COUNT(x) ↔ COUNT(DISTINCT x) and the like
//   distinct    SELECT ↔ SELECT DISTINCT
//   order       ASC ↔ DESC on one ORDER BY term
//   limit       LIMIT n → n + 1, LIMIT dropped
//   column      a column replaced by another column of the same table and type class
//   join key    the same, on a join condition's column
//   join        INNER ↔ LEFT join
//   compound    UNION ↔ UNION ALL, INTERSECT ↔ EXCEPT
//   literal     number n → n ± 1; string → perturb_text(string) (LIKE keeps its wildcards)
// Columns resolve against the schema through the FROM clause of their own SELECT (aliases
// included); a name that resolves to no single table is not replaced. Neighbours are printed
// with the canonical printer, de-duplicated, and never equal the gold's printed text. Pure
// functions, thread-safe.
#pragma once

#include <string>
#include <vector>

#include "nl2sql/sql/analysis.h"
#include "nl2sql/sql/ast.h"

namespace nl2sql::sql {

struct Neighbour {
  std::string kind;  // one of the kinds above ("comparison", "join key", …)
  std::string sql;   // canonical text
};

struct NeighbourOptions {
  size_t max_neighbours = 400;         // most per query (kept evenly across the enumeration)
  size_t max_columns_per_site = 6;     // replacement columns tried per column reference
};

std::vector<Neighbour> neighbour_queries(const Select& gold, const Schema& schema,
                                         const NeighbourOptions& options = {});

// The one perturbation of a text value shared by the neighbour generator and the test-suite
// database generator, so a perturbed literal also occurs in generated data: the last letter or
// digit moves to the next one ('a' → 'b', 'z' → 'a', '9' → '0'); a value without one gets "x"
// appended. SQL LIKE wildcards (% and _) are left in place.
std::string perturb_text(const std::string& text);

// "numeric" (INT, REAL, FLOAT, DOUBLE, NUMERIC, DECIMAL, BOOL…), "text" or "other" (BLOB, no
// type): a declared type's class as SQLite's affinity rules read it.
std::string type_class(const std::string& declared_type);

}  // namespace nl2sql::sql
