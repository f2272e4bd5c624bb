// Gold SQL of the benchmarks under NL2SQL_DATA, read straight from the JSON files (the SQL
// tests do not depend on the dataset loaders): Spider dev and train, BIRD dev, BIRD mini-dev.
#pragma once

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "nl2sql/db/value.h"

namespace nl2sql::sql::testing {

struct GoldQuery {
  std::string dataset;                 // "spider-dev", "spider-train", "bird-dev", "bird-minidev"
  size_t index = 0;                    // position in its file
  std::string db_id;
  std::string sql;
  std::optional<std::filesystem::path> db;  // when the database file is present
  nlohmann::json spider_sql;           // Spider's parsed "sql" field (spider-dev only)
};

inline std::vector<GoldQuery> load_gold_queries(const std::filesystem::path& data) {
  std::vector<GoldQuery> out;
  struct Source {
    const char* dataset;
    std::filesystem::path file;
    const char* field;
    std::filesystem::path db_root;
  };
  const Source sources[] = {
      {"spider-dev", data / "spider/dev.json", "query", data / "spider/database"},
      {"spider-train", data / "spider/train_spider.json", "query", data / "spider/database"},
      {"bird-dev", data / "bird/dev.json", "SQL", data / "bird/dev_databases"},
      {"bird-minidev", data / "bird/mini_dev/mini_dev_sqlite.json", "SQL", data / "bird/dev_databases"},
  };
  for (const auto& s : sources) {
    std::ifstream in(s.file);
    if (!in) continue;
    nlohmann::json j = nlohmann::json::parse(in);
    for (size_t k = 0; k < j.size(); ++k) {
      GoldQuery q;
      q.dataset = s.dataset;
      q.index = k;
      q.db_id = j[k].value("db_id", "");
      q.sql = j[k].value(s.field, "");
      auto db = s.db_root / q.db_id / (q.db_id + ".sqlite");
      if (std::filesystem::exists(db)) q.db = db;
      if (j[k].contains("sql") && j[k]["sql"].is_object()) q.spider_sql = j[k]["sql"];
      out.push_back(std::move(q));
    }
  }
  return out;
}

// Two results are the same when their rows match value for value (types included), in order
// when `ordered`, else as multisets; the column counts must agree.
inline std::string gold_row_key(const db::Row& r) {
  std::string k;
  for (const auto& v : r) k += std::to_string(static_cast<int>(v.type)) + ":" + v.to_display() + "\x1f";
  return k;
}

inline bool same_result(const db::ResultSet& a, const db::ResultSet& b, bool ordered) {
  if (a.columns.size() != b.columns.size() || a.rows.size() != b.rows.size()) return false;
  std::vector<std::string> ka, kb;
  for (const auto& r : a.rows) ka.push_back(gold_row_key(r));
  for (const auto& r : b.rows) kb.push_back(gold_row_key(r));
  if (!ordered) {
    std::sort(ka.begin(), ka.end());
    std::sort(kb.begin(), kb.end());
  }
  return ka == kb;
}

}  // namespace nl2sql::sql::testing
