// PreSQL → linked schema (see schema_linking.h).
#include "schema_linking.h"

#include "nl2sql/sql/parser.h"

namespace nl2sql::generate {

SchemaLink link_schema(const std::vector<std::string>& queries, const sql::Schema& schema) {
  SchemaLink link;
  for (size_t i = 0; i < queries.size(); ++i) {
    auto st = sql::parse_query(queries[i]);
    if (!st) {
      link.unparsed.push_back("query " + std::to_string(i + 1) + ": " + st.status().message());
      continue;
    }
    auto refs = sql::analyze_references(*st->select, schema);
    for (const auto& t : refs.tables) link.tables.insert(t);
    for (const auto& [t, c] : refs.columns) link.columns.insert(t + "." + c);
  }
  for (const auto& t : link.tables) {
    bool has_column = false;
    const std::string prefix = t + ".";
    for (const auto& c : link.columns)
      if (c.rfind(prefix, 0) == 0) has_column = true;
    if (has_column) continue;
    const sql::TableInfo* info = schema.find(t);
    if (!info || info->columns.empty()) continue;
    const sql::ColumnInfo* pick = &info->columns.front();
    for (const auto& c : info->columns)
      if (c.primary_key) { pick = &c; break; }
    link.columns.insert(info->name + "." + pick->name);
  }
  return link;
}

}  // namespace nl2sql::generate
