// PreSQL-based schema linking (SSEV / PET-SQL): the tables and columns that a set of
// preliminary queries reference, resolved through the SQL front end (aliases, subqueries, CTEs,
// `*` expansion), united over all queries. The union is the pruned schema the PostSQL round
// sees. A query that does not parse contributes nothing and is reported. Pure; thread-safe.
#pragma once

#include <set>
#include <string>
#include <vector>

#include "nl2sql/sql/analysis.h"

namespace nl2sql::generate {

struct SchemaLink {
  std::set<std::string> tables;   // as spelled in the schema
  std::set<std::string> columns;  // "table.column", as spelled in the schema
  std::vector<std::string> unparsed;  // one message per query that contributed nothing
};

// Tables read without any column (SELECT COUNT(*) FROM t) contribute their first primary-key
// column (else their first column) so that the pruned rendering keeps the table.
SchemaLink link_schema(const std::vector<std::string>& queries, const sql::Schema& schema);

}  // namespace nl2sql::generate
