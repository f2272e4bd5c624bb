// ContextRecord JSON: the stored context stage, read strictly.
#include "nl2sql/context/context_record.h"

#include <nlohmann/json.hpp>

#include "nl2sql/core/json_read.h"

namespace nl2sql::context {
namespace {

using core::read_key;
using nlohmann::json;

// Each element of the list `key`, read by `read_one` (absent: empty).
template <typename T, typename F>
Status read_list(const json& j, const char* key, std::vector<T>& out, const std::string& where, F read_one) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return Status::ok();
  if (!it->is_array()) return invalid_input(where + ": key \"" + key + "\" must be a list");
  for (const auto& e : *it) {
    auto one = read_one(e, where + ", " + key);
    if (!one) return one.status();
    out.push_back(std::move(*one));
  }
  return Status::ok();
}

Result<Keyword> keyword_from_json(const json& j, const std::string& where) {
  NL2SQL_RETURN_IF_ERROR(core::known_keys_only(j, {"text", "source"}, where));
  Keyword k;
  NL2SQL_RETURN_IF_ERROR(read_key(j, "text", k.text, where));
  NL2SQL_RETURN_IF_ERROR(read_key(j, "source", k.source, where));
  return k;
}

Result<ValueMatch> value_from_json(const json& j, const std::string& where) {
  NL2SQL_RETURN_IF_ERROR(core::known_keys_only(j, {"table", "column", "value", "score", "keyword"}, where));
  ValueMatch m;
  NL2SQL_RETURN_IF_ERROR(read_key(j, "table", m.table, where));
  NL2SQL_RETURN_IF_ERROR(read_key(j, "column", m.column, where));
  NL2SQL_RETURN_IF_ERROR(read_key(j, "value", m.value, where));
  NL2SQL_RETURN_IF_ERROR(read_key(j, "score", m.score, where));
  NL2SQL_RETURN_IF_ERROR(read_key(j, "keyword", m.keyword, where));
  return m;
}

Result<ColumnMatch> column_from_json(const json& j, const std::string& where) {
  NL2SQL_RETURN_IF_ERROR(core::known_keys_only(j, {"table", "column", "score", "keyword", "via"}, where));
  ColumnMatch m;
  NL2SQL_RETURN_IF_ERROR(read_key(j, "table", m.table, where));
  NL2SQL_RETURN_IF_ERROR(read_key(j, "column", m.column, where));
  NL2SQL_RETURN_IF_ERROR(read_key(j, "score", m.score, where));
  NL2SQL_RETURN_IF_ERROR(read_key(j, "keyword", m.keyword, where));
  NL2SQL_RETURN_IF_ERROR(read_key(j, "via", m.via, where));
  return m;
}

}  // namespace

Retrieval ContextRecord::retrieval() const {
  Retrieval r;
  r.keywords = keywords;
  r.values = values;
  r.columns = columns;
  return r;
}

json to_json(const ContextRecord& c) {
  json j;
  j["question_id"] = c.question_id;
  j["db_id"] = c.db_id;
  j["keywords"] = json::array();
  for (const auto& k : c.keywords) j["keywords"].push_back({{"text", k.text}, {"source", k.source}});
  j["values"] = json::array();
  for (const auto& v : c.values)
    j["values"].push_back({{"table", v.table}, {"column", v.column}, {"value", v.value}, {"score", v.score},
                           {"keyword", v.keyword}});
  j["columns"] = json::array();
  for (const auto& m : c.columns)
    j["columns"].push_back({{"table", m.table}, {"column", m.column}, {"score", m.score}, {"keyword", m.keyword},
                            {"via", m.via}});
  j["selected_columns"] = c.selected_columns;
  j["calls"] = json::array();
  for (const auto& call : c.calls) j["calls"].push_back(llm::to_json(call));
  j["errors"] = c.errors;
  core::write_optional(j, "latency_s", c.latency_s);
  return j;
}

Result<ContextRecord> context_record_from_json(const json& j, const std::string& where) {
  NL2SQL_RETURN_IF_ERROR(core::known_keys_only(j, {"question_id", "db_id", "keywords", "values", "columns",
                                                   "selected_columns", "calls", "errors", "latency_s"},
                                               where));
  ContextRecord c;
  NL2SQL_RETURN_IF_ERROR(read_key(j, "question_id", c.question_id, where));
  NL2SQL_RETURN_IF_ERROR(read_key(j, "db_id", c.db_id, where));
  NL2SQL_RETURN_IF_ERROR(read_list(j, "keywords", c.keywords, where, keyword_from_json));
  NL2SQL_RETURN_IF_ERROR(read_list(j, "values", c.values, where, value_from_json));
  NL2SQL_RETURN_IF_ERROR(read_list(j, "columns", c.columns, where, column_from_json));
  NL2SQL_RETURN_IF_ERROR(read_key(j, "selected_columns", c.selected_columns, where));
  NL2SQL_RETURN_IF_ERROR(read_list(j, "calls", c.calls, where, llm::call_trace_from_json));
  NL2SQL_RETURN_IF_ERROR(read_key(j, "errors", c.errors, where));
  NL2SQL_RETURN_IF_ERROR(core::read_optional(j, "latency_s", c.latency_s, where));
  return c;
}

}  // namespace nl2sql::context
