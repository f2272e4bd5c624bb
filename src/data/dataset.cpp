#include "nl2sql/data/dataset.h"
#include "nl2sql/db/schema_info.h"


#include <algorithm>
#include <cctype>
#include <set>

#include "nl2sql/core/files.h"
#include "nl2sql/core/hash.h"
#include "nl2sql/db/executor.h"
#include "nl2sql/core/text.h"

namespace nl2sql::data {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

using core::lower;
using core::trim;

// A field of a question object as a string; numbers are printed; missing/null → "".
Result<std::string> string_field(const json& obj, const char* key, bool required,
                                 const std::string& where) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) {
    if (required) return invalid_input(where + ": missing field \"" + key + "\"");
    return std::string();
  }
  if (it->is_string()) return it->get<std::string>();
  if (it->is_number_integer()) return std::to_string(it->get<int64_t>());
  return invalid_input(where + ": field \"" + key + "\" must be a string, not " +
                       std::string(it->type_name()));
}

struct Layout {
  fs::path questions;
  fs::path tables;
  fs::path db_root;
};

Result<Layout> resolve_layout(const DatasetSpec& spec) {
  Layout l;
  const fs::path& d = spec.data_dir;
  switch (spec.benchmark) {
    case Benchmark::kBird:
      if (spec.split == "dev") {
        l.questions = d / "dev.json";
        l.tables = d / "dev_tables.json";
      } else if (spec.split == "mini_dev" || spec.split == "minidev") {
        l.questions = d / "mini_dev" / "mini_dev_sqlite.json";
        l.tables = d / "mini_dev" / "mini_dev_sqlite_tables.json";
      } else {
        return invalid_input("--split \"" + spec.split + "\": BIRD splits are dev, mini_dev");
      }
      l.db_root = d / "dev_databases";
      break;
    case Benchmark::kSpider:
      if (spec.split == "dev") {
        l.questions = d / "dev.json";
      } else if (spec.split == "train") {
        l.questions = d / "train_spider.json";
      } else {
        return invalid_input("--split \"" + spec.split + "\": Spider splits are dev, train");
      }
      l.tables = d / "tables.json";
      l.db_root = d / "database";
      break;
    case Benchmark::kJsonl:
      if (spec.questions.empty()) return invalid_input("--benchmark jsonl needs --questions-file FILE");
      if (spec.db_root.empty()) return invalid_input("--benchmark jsonl needs --db-root DIR");
      break;
  }
  if (!spec.questions.empty()) l.questions = spec.questions;
  if (!spec.db_root.empty()) l.db_root = spec.db_root;
  if (!spec.tables.empty()) l.tables = spec.tables;
  if (spec.benchmark != Benchmark::kJsonl && spec.data_dir.empty() && spec.questions.empty())
    return invalid_input("--data DIR is required for --benchmark " +
                         std::string(benchmark_name(spec.benchmark)));
  return l;
}

// Splits text into lines, dropping a trailing CR.
std::vector<std::string_view> split_lines(std::string_view text) {
  std::vector<std::string_view> lines;
  size_t start = 0;
  while (start <= text.size()) {
    size_t nl = text.find('\n', start);
    size_t end = nl == std::string_view::npos ? text.size() : nl;
    std::string_view line = text.substr(start, end - start);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    lines.push_back(line);
    if (nl == std::string_view::npos) break;
    start = nl + 1;
  }
  if (!lines.empty() && lines.back().empty()) lines.pop_back();
  return lines;
}

Result<std::vector<Question>> read_json_questions(const fs::path& path, Benchmark b,
                                                 std::vector<std::string>& warnings) {
  auto doc = core::read_json_file(path);
  if (!doc) return doc.status();
  if (!doc->is_array()) return invalid_input(path.string() + ": expected a JSON array of questions");
  std::vector<Question> out;
  out.reserve(doc->size());
  std::map<std::string, size_t> seen;  // question id -> position, for the duplicate check
  for (size_t i = 0; i < doc->size(); ++i) {
    const json& o = (*doc)[i];
    std::string where = path.string() + ": question #" + std::to_string(i);
    if (!o.is_object()) return invalid_input(where + ": expected an object");
    Question q;
    q.index = i;
    auto db = string_field(o, "db_id", true, where);
    if (!db) return db.status();
    q.db_id = *db;
    auto text = string_field(o, "question", false, where);
    if (!text) return text.status();
    q.question = *text;
    if (b == Benchmark::kBird) {
      auto id = string_field(o, "question_id", false, where);
      if (!id) return id.status();
      q.question_id = id->empty() ? std::to_string(i) : *id;
      // A run and its store are keyed by the id, so two questions with one id would silently
      // become one. The official BIRD mini-dev file repeats two ids (137 and 138, each twice, as
      // the same question) and its evaluator pairs predictions by position: keep both, the later
      // one under "<id>@<position>", and say so.
      if (auto [it, fresh] = seen.emplace(q.question_id, i); !fresh) {
        const std::string original = q.question_id;
        q.question_id = original + "@" + std::to_string(i);
        warnings.push_back(where + ": repeats question_id \"" + original + "\" of question #" +
                           std::to_string(it->second) + "; kept as \"" + q.question_id +
                           "\" (BIRD pairs predictions by position)");
        seen.emplace(q.question_id, i);
      }
      auto ev = string_field(o, "evidence", false, where);
      if (!ev) return ev.status();
      q.evidence = *ev;
      auto sql = string_field(o, o.contains("sql") && !o.contains("SQL") ? "sql" : "SQL", true, where);
      if (!sql) return sql.status();
      q.gold_sql = *sql;
      auto diff = string_field(o, "difficulty", false, where);
      if (!diff) return diff.status();
      q.difficulty = *diff;
    } else {
      q.question_id = std::to_string(i);
      auto sql = string_field(o, "query", true, where);
      if (!sql) return sql.status();
      q.gold_sql = *sql;
      if (auto it = o.find("sql"); it != o.end() && it->is_object()) q.spider_sql = *it;
    }
    out.push_back(std::move(q));
  }
  return out;
}

// Plain gold files: "SQL<TAB>db_id" per line.
Result<std::vector<Question>> read_gold_file(const fs::path& path) {
  auto text = core::read_file(path);
  if (!text) return text.status();
  std::vector<Question> out;
  auto lines = split_lines(*text);
  for (size_t i = 0; i < lines.size(); ++i) {
    auto tab = lines[i].rfind('\t');
    if (tab == std::string_view::npos)
      return invalid_input(path.string() + ":" + std::to_string(i + 1) +
                           ": expected \"SQL<TAB>db_id\"");
    Question q;
    q.index = i;
    q.question_id = std::to_string(i);
    q.gold_sql = trim(lines[i].substr(0, tab));
    q.db_id = trim(lines[i].substr(tab + 1));
    out.push_back(std::move(q));
  }
  return out;
}

Result<std::vector<Question>> read_jsonl_questions(const fs::path& path) {
  auto text = core::read_file(path);
  if (!text) return text.status();
  std::vector<Question> out;
  auto lines = split_lines(*text);
  std::set<std::string> seen;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (trim(lines[i]).empty()) continue;
    std::string label = path.string() + ":" + std::to_string(i + 1);
    auto o = core::parse_json(lines[i], label);
    if (!o) return o.status();
    if (!o->is_object()) return invalid_input(label + ": expected a JSON object");
    Question q;
    q.index = out.size();
    auto id = string_field(*o, "question_id", true, label);
    if (!id) return id.status();
    q.question_id = *id;
    if (!seen.insert(q.question_id).second)
      return invalid_input(label + ": duplicate question_id \"" + q.question_id + "\"");
    auto db = string_field(*o, "db_id", true, label);
    if (!db) return db.status();
    q.db_id = *db;
    auto sql = string_field(*o, "sql", true, label);
    if (!sql) return sql.status();
    q.gold_sql = *sql;
    for (auto [field, dst] : {std::pair{"question", &q.question}, {"evidence", &q.evidence},
                              {"difficulty", &q.difficulty}}) {
      auto v = string_field(*o, field, false, label);
      if (!v) return v.status();
      *dst = *v;
    }
    out.push_back(std::move(q));
  }
  return out;
}

// Why `db_id` cannot name a folder under the database root (nullopt when it can): it must be one
// path component, so "../x", "/etc", "a/b", "a\\b", "." and a NUL never reach files outside it.
std::optional<std::string> invalid_db_id(const std::string& db_id) {
  if (db_id.empty()) return "is empty";
  if (db_id == "." || db_id == "..") return "is not a database name";
  if (db_id.find('/') != std::string::npos || db_id.find('\\') != std::string::npos)
    return "holds a path separator (a db_id is one folder name under the database root)";
  if (db_id.find('\0') != std::string::npos) return "holds a NUL byte";
  return std::nullopt;
}

}  // namespace

Result<Benchmark> parse_benchmark(const std::string& name) {
  if (name == "bird") return Benchmark::kBird;
  if (name == "spider") return Benchmark::kSpider;
  if (name == "jsonl") return Benchmark::kJsonl;
  return invalid_input("--benchmark \"" + name + "\": expected bird, spider or jsonl");
}

const char* benchmark_name(Benchmark b) {
  switch (b) {
    case Benchmark::kBird: return "bird";
    case Benchmark::kSpider: return "spider";
    case Benchmark::kJsonl: return "jsonl";
  }
  return "?";
}

const Table* Schema::find_table(const std::string& name) const {
  std::string n = lower(name);
  for (const auto& t : tables)
    if (lower(t.name) == n) return &t;
  return nullptr;
}

const Question* Dataset::find_question(const std::string& question_id) const {
  for (const auto& q : questions)
    if (q.question_id == question_id) return &q;
  return nullptr;
}

Result<std::string> Dataset::fingerprint() const {
  core::KeyHasher h;
  auto qh = core::xxh128_file(questions_file);
  if (!qh) return qh.status();
  h.add(questions_file.filename().string()).add(*qh);
  for (const auto& [db_id, path] : db_paths) {
    auto dh = db::database_fingerprint(path);
    if (!dh) return dh.status();
    h.add(db_id).add(*dh);
  }
  return h.hex();
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

Result<Dataset> load_dataset(const DatasetSpec& spec) {
  auto layout = resolve_layout(spec);
  if (!layout) return layout.status();
  Dataset ds;
  ds.benchmark = spec.benchmark;
  ds.split = spec.split;
  ds.questions_file = layout->questions;
  ds.db_root = layout->db_root;

  Result<std::vector<Question>> qs = std::vector<Question>{};
  std::string ext = lower(layout->questions.extension().string());
  if (spec.benchmark == Benchmark::kJsonl || ext == ".jsonl")
    qs = read_jsonl_questions(layout->questions);
  else if (ext == ".sql" || ext == ".txt")
    qs = read_gold_file(layout->questions);
  else
    qs = read_json_questions(layout->questions, spec.benchmark, ds.warnings);
  if (!qs) return qs.status();
  ds.total_questions = qs->size();

  std::map<std::string, Schema> tables;
  std::error_code ec;
  if (!layout->tables.empty() && fs::exists(layout->tables, ec)) {
    auto t = load_tables_json(layout->tables);
    if (!t) return t.status();
    tables = std::move(*t);
  } else if (!spec.tables.empty()) {
    return not_found("tables file not found: " + spec.tables.string());
  }

  std::map<std::string, bool> present;
  for (auto& q : *qs) {
    if (auto why = invalid_db_id(q.db_id))
      return invalid_input(layout->questions.string() + ": question " + q.question_id + ": db_id \"" +
                           q.db_id + "\" " + *why);
    auto [it, inserted] = present.try_emplace(q.db_id, false);
    if (inserted) {
      fs::path p = layout->db_root / q.db_id / (q.db_id + ".sqlite");
      it->second = fs::is_regular_file(p, ec);
      // A symlink inside the root may still point outside it: resolve and check.
      if (it->second) {
        const fs::path root = fs::weakly_canonical(layout->db_root, ec);
        const fs::path real = fs::weakly_canonical(p, ec);
        auto rel = real.lexically_relative(root);
        if (!ec && (rel.empty() || *rel.begin() == ".."))
          return invalid_input("database of db_id \"" + q.db_id + "\" resolves to " + real.string() +
                               ", outside the database root " + root.string() +
                               " (copy the file into the root, or point --db-root at where it lives)");
      }
      if (it->second) ds.db_paths[q.db_id] = p;
    }
    if (!it->second) {
      bool known = tables.empty() || tables.count(q.db_id);
      ds.skipped.push_back({q.question_id, q.db_id, q.index,
                            known ? "database file missing: " +
                                        (layout->db_root / q.db_id / (q.db_id + ".sqlite")).string()
                                  : "unknown db_id (not in tables file, no database file)"});
      continue;
    }
    ds.questions.push_back(std::move(q));
  }

  for (const auto& [db_id, path] : ds.db_paths) {
    Schema schema;
    if (auto t = tables.find(db_id); t != tables.end()) {
      schema = t->second;
    } else {
      auto s = read_schema_from_database(path, db_id);
      if (!s) return s.status();
      schema = std::move(*s);
    }
    if (spec.load_descriptions)
      attach_bird_descriptions(path.parent_path() / "database_description", schema, ds.warnings);
    ds.schemas[db_id] = std::move(schema);
  }
  return ds;
}

}  // namespace nl2sql::data
