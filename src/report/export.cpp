#include "nl2sql/report/export.h"
#include "nl2sql/run/run_data.h"
#include "nl2sql/core/text.h"

#include <map>

namespace nl2sql::report {
using nlohmann::json;

Result<ExportFormat> parse_export_format(const std::string& name) {
  if (name == "bird") return ExportFormat::kBird;
  if (name == "spider") return ExportFormat::kSpider;
  if (name == "jsonl") return ExportFormat::kJsonl;
  return invalid_input("--format \"" + name + "\": expected bird, spider or jsonl");
}

namespace {

std::string one_line(const std::string& s) { return core::squash_spaces(s); }

}  // namespace

std::string export_predictions(const run::RunData& run, ExportFormat format, ExportStats* stats) {
  ExportStats st;
  std::map<int64_t, const run::QuestionRecord*> by_pos;
  for (const auto& r : run.records) by_pos[r.index] = &r;
  auto sql_of = [&](const run::QuestionRecord* r) -> std::string {
    if (!r || !r->ok) return "";
    return one_line(r->prediction);
  };
  std::string out;
  if (format == ExportFormat::kJsonl) {
    for (const auto& r : run.records) {
      json line = {{"question_id", r.question_id}, {"db_id", r.db_id}, {"sql", sql_of(&r)}};
      out += line.dump(-1, ' ', false, json::error_handler_t::replace) + "\n";
      ++st.written;
    }
  } else {
    int64_t last = by_pos.empty() ? -1 : by_pos.rbegin()->first;
    json bird = json::object();
    for (int64_t pos = 0; pos <= last; ++pos) {
      auto it = by_pos.find(pos);
      const run::QuestionRecord* r = it == by_pos.end() ? nullptr : it->second;
      std::string sql = sql_of(r);
      if (sql.empty()) {
        sql = kNoPredictionSql;
        ++st.placeholders;
      } else {
        ++st.written;
      }
      if (format == ExportFormat::kSpider) {
        out += sql + "\n";
      } else {
        bird[std::to_string(pos)] = sql + "\t----- bird -----\t" + (r ? r->db_id : std::string());
      }
    }
    // Keys in position order, as the official file lists them (nlohmann sorts keys as strings).
    if (format == ExportFormat::kBird) {
      out = "{\n";
      for (int64_t pos = 0; pos <= last; ++pos) {
        std::string key = std::to_string(pos);
        out += "    " + json(key).dump() + ": " + bird[key].dump(-1, ' ', false, json::error_handler_t::replace) +
               (pos == last ? "\n" : ",\n");
      }
      out += "}\n";
    }
  }
  if (stats) *stats = st;
  return out;
}

}  // namespace nl2sql::report
