#include "hardness.h"

namespace nl2sql::eval {
namespace {

using nlohmann::json;
constexpr int kLikeOp = 9;  // WHERE_OPS.index('like')

// Python truthiness of unit[0] != 0 for the element kinds that occur.
bool first_is_nonzero(const json& unit) {
  if (unit.is_string()) return true;  // 'and' / 'or': 'a' != 0
  if (!unit.is_array() || unit.empty()) return false;
  const json& f = unit[0];
  if (f.is_boolean()) return f.get<bool>();
  if (f.is_number()) return f.get<double>() != 0;
  return !f.is_null();
}

int count_agg(const std::vector<json>& units) {
  int n = 0;
  for (const auto& u : units) n += first_is_nonzero(u) ? 1 : 0;
  return n;
}

std::vector<json> every_other(const json& list, size_t start) {
  std::vector<json> out;
  if (!list.is_array()) return out;
  for (size_t i = start; i < list.size(); i += 2) out.push_back(list[i]);
  return out;
}

const json& field(const json& sql, const char* key) {
  static const json kEmpty = json::array();
  auto it = sql.find(key);
  return it == sql.end() || it->is_null() ? kEmpty : *it;
}

std::vector<json> all_conds(const json& sql, size_t start) {
  std::vector<json> out;
  for (const json* l : {&field(field(sql, "from"), "conds"), &field(sql, "where"),
                        &field(sql, "having")}) {
    auto part = every_other(*l, start);
    out.insert(out.end(), part.begin(), part.end());
  }
  return out;
}

}  // namespace

sql::SpiderHardness spider_hardness_components(const json& sql) {
  sql::SpiderHardness h;
  const json& from = sql.contains("from") ? sql["from"] : json::object();
  const json& where = field(sql, "where");
  const json& group_by = field(sql, "groupBy");
  const json& order_by = field(sql, "orderBy");
  const json& having = field(sql, "having");

  int c1 = 0;
  if (!where.empty()) ++c1;
  if (!group_by.empty()) ++c1;
  if (!order_by.empty()) ++c1;
  if (sql.contains("limit") && !sql["limit"].is_null()) ++c1;
  const json& units = field(from, "table_units");
  if (!units.empty()) c1 += static_cast<int>(units.size()) - 1;
  for (const auto& t : all_conds(sql, 1))
    if (t.is_string() && t.get<std::string>() == "or") ++c1;
  for (const auto& cu : all_conds(sql, 0))
    if (cu.is_array() && cu.size() > 1 && cu[1].is_number() && cu[1].get<int>() == kLikeOp) ++c1;
  h.component1 = c1;

  int c2 = 0;
  for (const auto& cu : all_conds(sql, 0)) {
    if (!cu.is_array()) continue;
    if (cu.size() > 3 && cu[3].is_object()) ++c2;
    if (cu.size() > 4 && cu[4].is_object()) ++c2;
  }
  for (const char* k : {"intersect", "except", "union"})
    if (sql.contains(k) && !sql[k].is_null()) ++c2;
  h.component2 = c2;

  int agg = 0;
  const json& select = sql.contains("select") ? sql["select"] : json::array();
  const json& select_units = select.size() > 1 ? select[1] : json::array();
  agg += count_agg(std::vector<json>(select_units.begin(), select_units.end()));
  agg += count_agg(every_other(where, 0));
  agg += count_agg(std::vector<json>(group_by.begin(), group_by.end()));
  if (!order_by.empty() && order_by.size() > 1) {
    std::vector<json> cols;
    for (const auto& vu : order_by[1])
      if (vu.size() > 1 && !vu[1].is_null()) cols.push_back(vu[1]);
    for (const auto& vu : order_by[1])
      if (vu.size() > 2 && !vu[2].is_null()) cols.push_back(vu[2]);
    agg += count_agg(cols);
  }
  agg += count_agg(std::vector<json>(having.begin(), having.end()));
  int others = 0;
  if (agg > 1) ++others;
  if (select_units.size() > 1) ++others;
  if (where.size() > 1) ++others;
  if (group_by.size() > 1) ++others;
  h.others = others;
  return h;
}

std::string spider_hardness(const json& sql) {
  if (!sql.is_object() || !sql.contains("select")) return "";
  return sql::spider_hardness_level(spider_hardness_components(sql));
}

}  // namespace nl2sql::eval
