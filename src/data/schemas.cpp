// Schemas of a dataset: tables.json (Spider / BIRD), the database's own definitions when a
// dataset has no tables.json, and BIRD's database_description CSVs (column meanings).
#include <algorithm>
#include <cctype>
#include <map>

#include <nlohmann/json.hpp>

#include "nl2sql/core/files.h"
#include "nl2sql/core/text.h"
#include "nl2sql/data/dataset.h"
#include "nl2sql/db/schema_info.h"

namespace nl2sql::data {
namespace fs = std::filesystem;
using nlohmann::json;
using core::lower;
using core::trim;

const Table* Schema::find_table(const std::string& name) const {
  std::string n = lower(name);
  for (const auto& t : tables)
    if (lower(t.name) == n) return &t;
  return nullptr;
}

Result<std::map<std::string, Schema>> load_tables_json(const fs::path& path) {
  auto doc = core::read_json_file(path);
  if (!doc) return doc.status();
  if (!doc->is_array()) return invalid_input(path.string() + ": expected a JSON array of databases");
  std::map<std::string, Schema> out;
  try {
    for (size_t i = 0; i < doc->size(); ++i) {
      const json& d = (*doc)[i];
      std::string where = path.string() + ": database #" + std::to_string(i);
      Schema s;
      s.db_id = d.at("db_id").get<std::string>();
      const auto& tnames = d.at("table_names_original");
      const auto& tdisplay = d.contains("table_names") ? d.at("table_names") : tnames;
      for (size_t t = 0; t < tnames.size(); ++t) {
        Table tab;
        tab.name = tnames[t].get<std::string>();
        tab.display_name = t < tdisplay.size() ? tdisplay[t].get<std::string>() : tab.name;
        s.tables.push_back(std::move(tab));
      }
      const auto& cols = d.at("column_names_original");
      const auto& cdisplay = d.contains("column_names") ? d.at("column_names") : cols;
      const auto& types = d.at("column_types");
      // column index -> (table, position) for key resolution
      std::vector<std::pair<int, size_t>> where_col(cols.size(), {-1, 0});
      for (size_t c = 0; c < cols.size(); ++c) {
        int t = cols[c].at(0).get<int>();
        if (t < 0) continue;  // "*"
        if (static_cast<size_t>(t) >= s.tables.size())
          return invalid_input(where + ": column #" + std::to_string(c) + " names table " +
                               std::to_string(t) + " which does not exist");
        Column col;
        col.name = cols[c].at(1).get<std::string>();
        col.display_name = c < cdisplay.size() ? cdisplay[c].at(1).get<std::string>() : col.name;
        col.type = c < types.size() ? types[c].get<std::string>() : "";
        where_col[c] = {t, s.tables[static_cast<size_t>(t)].columns.size()};
        s.tables[static_cast<size_t>(t)].columns.push_back(std::move(col));
      }
      auto col_ref = [&](int idx) -> std::pair<const Table*, const Column*> {
        if (idx < 0 || static_cast<size_t>(idx) >= where_col.size() || where_col[idx].first < 0)
          return {nullptr, nullptr};
        const Table& t = s.tables[static_cast<size_t>(where_col[idx].first)];
        return {&t, &t.columns[where_col[idx].second]};
      };
      if (d.contains("primary_keys")) {
        for (const auto& pk : d.at("primary_keys")) {
          // Either a column index or a list of indices (composite key).
          std::vector<int> idx;
          if (pk.is_array())
            for (const auto& x : pk) idx.push_back(x.get<int>());
          else
            idx.push_back(pk.get<int>());
          for (int c : idx) {
            auto [t, col] = col_ref(c);
            if (!t) continue;
            const_cast<Table*>(t)->primary_key.push_back(col->name);
          }
        }
      }
      if (d.contains("foreign_keys")) {
        for (const auto& fk : d.at("foreign_keys")) {
          auto [ft, fc] = col_ref(fk.at(0).get<int>());
          auto [tt, tc] = col_ref(fk.at(1).get<int>());
          if (!ft || !tt) continue;
          s.foreign_keys.push_back({ft->name, fc->name, tt->name, tc->name});
        }
      }
      out[s.db_id] = std::move(s);
    }
  } catch (const json::exception& e) {
    return invalid_input(path.string() + ": unexpected structure: " + e.what());
  }
  return out;
}

Result<Schema> read_schema_from_database(const fs::path& db_path, const std::string& db_id) {
  auto info = db::inspect_schema(db_path);
  if (!info) return info.status();
  Schema s;
  s.db_id = db_id;
  for (const auto& ti : info->tables) {
    if (ti.is_view) continue;
    Table t;
    t.name = t.display_name = ti.name;
    for (const auto& ci : ti.columns) {
      Column c;
      c.name = c.display_name = ci.name;
      c.type = ci.type;
      t.columns.push_back(std::move(c));
    }
    t.primary_key = ti.primary_key();
    for (const auto& fk : ti.foreign_keys) s.foreign_keys.push_back({ti.name, fk.from_column, fk.to_table, fk.to_column});
    s.tables.push_back(std::move(t));
  }
  // An FK declared without a target column refers to the target's primary key.
  for (auto& fk : s.foreign_keys) {
    if (!fk.to_column.empty()) continue;
    if (const Table* t = s.find_table(fk.to_table); t && !t->primary_key.empty())
      fk.to_column = t->primary_key.front();
  }
  return s;
}

Result<std::vector<std::vector<std::string>>> parse_csv(std::string_view text,
                                                        const std::string& label) {
  std::vector<std::vector<std::string>> rows;
  std::vector<std::string> row;
  std::string field;
  bool in_quotes = false, field_started = false;
  size_t line = 1, quote_line = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (in_quotes) {
      if (c == '"') {
        if (i + 1 < text.size() && text[i + 1] == '"') {
          field.push_back('"');
          ++i;
        } else {
          in_quotes = false;
        }
      } else {
        if (c == '\n') ++line;
        if (c == '\r' && i + 1 < text.size() && text[i + 1] == '\n') continue;  // CRLF in field
        field.push_back(c);
      }
      continue;
    }
    if (c == '"' && !field_started) {
      in_quotes = true;
      field_started = true;
      quote_line = line;
    } else if (c == ',') {
      row.push_back(std::move(field));
      field.clear();
      field_started = false;
    } else if (c == '\n' || c == '\r') {
      if (c == '\r' && i + 1 < text.size() && text[i + 1] == '\n') ++i;
      ++line;
      row.push_back(std::move(field));
      field.clear();
      field_started = false;
      rows.push_back(std::move(row));
      row.clear();
    } else {
      field.push_back(c);
      field_started = true;
    }
  }
  if (in_quotes)
    return invalid_input(label + ":" + std::to_string(quote_line) +
                         ": quoted field is never closed");
  if (field_started || !row.empty()) {
    row.push_back(std::move(field));
    rows.push_back(std::move(row));
  }
  return rows;
}

void attach_bird_descriptions(const fs::path& dir, Schema& schema,
                              std::vector<std::string>& warnings) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return;
  std::map<std::string, fs::path> files;  // lower-cased stem -> path
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (e.path().extension() == ".csv") files[lower(e.path().stem().string())] = e.path();
  for (auto& table : schema.tables) {
    auto it = files.find(lower(table.name));
    if (it == files.end()) continue;
    auto bytes = core::read_file(it->second);
    if (!bytes) {
      warnings.push_back(bytes.status().message());
      continue;
    }
    auto rows = parse_csv(core::decode_text(*bytes), it->second.string());
    if (!rows) {
      warnings.push_back(rows.status().message());
      continue;
    }
    if (rows->empty()) continue;
    // Header: original_column_name,column_name,column_description,data_format,value_description
    std::map<std::string, int> col_of;
    const auto& header = rows->front();
    for (size_t i = 0; i < header.size(); ++i) col_of[lower(trim(header[i]))] = static_cast<int>(i);
    auto get = [&](const std::vector<std::string>& r, const char* key) -> std::string {
      auto c = col_of.find(key);
      if (c == col_of.end() || static_cast<size_t>(c->second) >= r.size()) return "";
      return trim(r[static_cast<size_t>(c->second)]);
    };
    if (!col_of.count("original_column_name")) {
      warnings.push_back(it->second.string() + ":1: no original_column_name header");
      continue;
    }
    for (size_t r = 1; r < rows->size(); ++r) {
      const auto& row = (*rows)[r];
      std::string name = lower(get(row, "original_column_name"));
      if (name.empty()) continue;
      for (auto& col : table.columns) {
        if (lower(trim(col.name)) != name) continue;
        std::string display = get(row, "column_name");
        if (!display.empty()) col.display_name = display;
        col.description = get(row, "column_description");
        col.data_format = get(row, "data_format");
        col.value_description = get(row, "value_description");
      }
    }
  }
}

}  // namespace nl2sql::data
