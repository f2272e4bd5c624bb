#include "nl2sql/context/metadata.h"

#include <algorithm>
#include <chrono>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "llm_calls.h"
#include "nl2sql/context/text_match.h"
#include "nl2sql/context/value_index.h"
#include "nl2sql/core/files.h"
#include "nl2sql/db/executor.h"
#include "nl2sql/llm/client.h"
#include "nl2sql/core/text.h"
#include "nl2sql/llm/model_call.h"

namespace nl2sql::context {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr int kMetadataVersion = 1;
constexpr size_t kColumnsPerStatsQuery = 40;  // 12 aggregates each: well under SQLite's 2000 columns


using core::lower;

// Letters and digits only, lowered: "District_ID" -> "districtid".
std::string squash(const std::string& s) {
  std::string out;
  for (char c : s)
    if (std::isalnum(static_cast<unsigned char>(c)) || (c & 0x80)) out.push_back(c);
  return lower(out);
}

std::string display(const db::Value& v) {
  std::string s = v.is_null() ? "" : v.to_display();
  auto cps = decode_utf8(s);
  if (cps.size() > 60) s = encode_utf8(cps.substr(0, 60)) + "…";
  return s;
}

int64_t as_int(const db::Value& v) {
  if (v.type == db::ValueType::kInteger) return v.i;
  if (v.type == db::ValueType::kReal) return static_cast<int64_t>(v.r);
  return 0;
}

double as_double(const db::Value& v) {
  if (v.type == db::ValueType::kInteger) return static_cast<double>(v.i);
  if (v.type == db::ValueType::kReal) return v.r;
  return 0;
}

json fk_json(const data::ForeignKey& f) {
  return {{"from_table", f.from_table}, {"from_column", f.from_column}, {"to_table", f.to_table},
          {"to_column", f.to_column}};
}

}  // namespace

std::string MetadataOptions::key() const {
  return json{{"version", kMetadataVersion}, {"top_values", top_values}, {"infer_fks", infer_fks},
              {"min_coverage", min_coverage}, {"min_name_score", min_name_score},
              {"min_distinct", min_distinct}}
      .dump();
}

Status MetadataOptions::validate() const {
  if (infer_fks != "auto" && infer_fks != "always" && infer_fks != "never")
    return invalid_input("context.metadata.infer_fks must be auto, always or never (got \"" + infer_fks + "\")");
  if (min_coverage < 0 || min_coverage > 1)
    return invalid_input(fmt::format("context.metadata.min_coverage must be in 0..1 (got {})", min_coverage));
  if (min_name_score < 0 || min_name_score > 1)
    return invalid_input(fmt::format("context.metadata.min_name_score must be in 0..1 (got {})", min_name_score));
  return Status::ok();
}

std::string ColumnStats::storage_class() const {
  const int64_t non_null = rows - nulls;
  if (non_null == 0) return "null";
  if (integer_values == non_null) return "integer";
  if (text_values == non_null) return "text";
  if (real_values + integer_values == non_null) return "real";
  if (blob_values == non_null) return "blob";
  return "mixed";
}

std::string InferredForeignKey::evidence() const {
  return fmt::format("coverage {:.1f}% ({}/{} distinct values found), key has {} distinct, name score {:.2f}",
                     100 * coverage, matched, from_distinct, to_distinct, name_score);
}

const ColumnStats* DatabaseMetadata::find(const std::string& table, const std::string& column) const {
  for (const auto& c : columns)
    if (lower(c.table) == lower(table) && lower(c.column) == lower(column)) return &c;
  return nullptr;
}

double fk_name_score(const std::string& from_column, const std::string& to_table, const std::string& to_column) {
  const std::string f = squash(from_column), tc = squash(to_column), tt = squash(to_table);
  if (f.empty()) return 0;
  std::string single = tt.size() > 3 && tt.back() == 's' ? tt.substr(0, tt.size() - 1) : tt;
  std::vector<std::string> expected = {tt + tc, single + tc, tt + "id", single + "id", tt, single};
  // A bare generic key name ("id", "code") says nothing about which table it points to.
  if (tc != "id" && tc.size() > 2) expected.push_back(tc);
  double best = 0;
  const auto fu = decode_utf8(f);
  for (const auto& e : expected)
    if (!e.empty()) best = std::max(best, edit_similarity(fu, decode_utf8(e)));
  return best;
}

json DatabaseMetadata::to_json() const {
  json j;
  j["version"] = kMetadataVersion;
  j["db_id"] = db_id;
  j["fingerprint"] = fingerprint;
  j["options"] = json::parse(options_key);
  j["build_seconds"] = build_seconds;
  j["table_rows"] = table_rows;
  j["primary_keys"] = primary_keys;
  j["key_candidates"] = key_candidates;
  j["columns"] = json::array();
  for (const auto& c : columns) {
    json top = json::array();
    for (const auto& [v, n] : c.top_values) top.push_back({v, n});
    j["columns"].push_back({{"table", c.table}, {"column", c.column}, {"rows", c.rows}, {"nulls", c.nulls},
                            {"distinct", c.distinct}, {"text_values", c.text_values},
                            {"integer_values", c.integer_values}, {"real_values", c.real_values},
                            {"blob_values", c.blob_values}, {"min", c.min}, {"max", c.max},
                            {"min_length", c.min_length}, {"max_length", c.max_length},
                            {"avg_length", c.avg_length}, {"top_values", top}});
  }
  j["declared_fks"] = json::array();
  for (const auto& f : declared_fks) j["declared_fks"].push_back(fk_json(f));
  j["inferred_fks"] = json::array();
  for (const auto& f : inferred_fks) {
    json x = fk_json({f.from_table, f.from_column, f.to_table, f.to_column});
    x["coverage"] = f.coverage;
    x["from_distinct"] = f.from_distinct;
    x["matched"] = f.matched;
    x["to_distinct"] = f.to_distinct;
    x["name_score"] = f.name_score;
    x["evidence"] = f.evidence();
    j["inferred_fks"].push_back(x);
  }
  j["descriptions"] = json::object();
  for (const auto& [k, d] : descriptions)
    j["descriptions"][k] = {{"text", d.text}, {"template_hash", d.template_hash}, {"profile", d.profile},
                            {"simulated", d.simulated}};
  return j;
}

Result<DatabaseMetadata> DatabaseMetadata::from_json(const json& j, const std::string& label) {
  try {
    if (j.at("version").get<int>() != kMetadataVersion) return invalid_input(label + ": other metadata version");
    DatabaseMetadata m;
    m.db_id = j.at("db_id").get<std::string>();
    m.fingerprint = j.at("fingerprint").get<std::string>();
    m.options_key = j.at("options").dump();
    m.build_seconds = j.value("build_seconds", 0.0);
    m.table_rows = j.at("table_rows").get<std::map<std::string, int64_t>>();
    m.primary_keys = j.at("primary_keys").get<std::map<std::string, std::vector<std::string>>>();
    m.key_candidates = j.at("key_candidates").get<std::map<std::string, std::string>>();
    for (const auto& c : j.at("columns")) {
      ColumnStats s;
      s.table = c.at("table").get<std::string>();
      s.column = c.at("column").get<std::string>();
      s.rows = c.at("rows").get<int64_t>();
      s.nulls = c.at("nulls").get<int64_t>();
      s.distinct = c.at("distinct").get<int64_t>();
      s.text_values = c.at("text_values").get<int64_t>();
      s.integer_values = c.at("integer_values").get<int64_t>();
      s.real_values = c.at("real_values").get<int64_t>();
      s.blob_values = c.at("blob_values").get<int64_t>();
      s.min = c.at("min").get<std::string>();
      s.max = c.at("max").get<std::string>();
      s.min_length = c.at("min_length").get<int64_t>();
      s.max_length = c.at("max_length").get<int64_t>();
      s.avg_length = c.at("avg_length").get<double>();
      for (const auto& t : c.at("top_values")) s.top_values.emplace_back(t.at(0).get<std::string>(), t.at(1).get<int64_t>());
      m.columns.push_back(std::move(s));
    }
    auto fk = [](const json& x) {
      return data::ForeignKey{x.at("from_table").get<std::string>(), x.at("from_column").get<std::string>(),
                              x.at("to_table").get<std::string>(), x.at("to_column").get<std::string>()};
    };
    for (const auto& f : j.at("declared_fks")) m.declared_fks.push_back(fk(f));
    for (const auto& f : j.at("inferred_fks")) {
      auto base = fk(f);
      InferredForeignKey x{base.from_table, base.from_column, base.to_table, base.to_column};
      x.coverage = f.at("coverage").get<double>();
      x.from_distinct = f.at("from_distinct").get<int64_t>();
      x.matched = f.at("matched").get<int64_t>();
      x.to_distinct = f.at("to_distinct").get<int64_t>();
      x.name_score = f.at("name_score").get<double>();
      m.inferred_fks.push_back(std::move(x));
    }
    for (const auto& [k, d] : j.at("descriptions").items())
      m.descriptions[k] = {d.at("text").get<std::string>(), d.at("template_hash").get<std::string>(),
                           d.value("profile", ""), d.value("simulated", false)};
    return m;
  } catch (const std::exception& e) {
    return invalid_input(label + ": malformed metadata (" + e.what() + ")");
  }
}

namespace {

// One metadata build: the database's queries (with the build's limits and error messages) and
// the metadata they fill, a step per member.
class MetadataBuild {
 public:
  MetadataBuild(const std::string& db_id, const fs::path& db_path, const MetadataOptions& options,
                const db::Executor& executor, DatabaseMetadata& m)
      : db_id_(db_id), db_path_(db_path), options_(options), executor_(executor), m_(m) {
    limits_.timeout_s = options.query_timeout_s;
    limits_.row_cap = 0;
  }

  // A table's row count and column statistics, its columns' top values and, without a declared
  // primary key, a key candidate.
  Status describe_table(const data::Table& t) {
    if (!t.primary_key.empty()) m_.primary_keys[t.name] = t.primary_key;
    // One scan per chunk of columns: COUNT(*) plus 11 aggregates per column.
    for (size_t from = 0; from < t.columns.size(); from += kColumnsPerStatsQuery)
      NL2SQL_RETURN_IF_ERROR(column_statistics(t, from, std::min(t.columns.size(), from + kColumnsPerStatsQuery)));
    NL2SQL_RETURN_IF_ERROR(top_values(t));
    if (t.primary_key.empty()) {
      // A key candidate: a unique non-null column, identifier-named ones first.
      const ColumnStats* best = nullptr;
      for (const auto& s : m_.columns)
        if (s.table == t.name && s.unique() && (s.storage_class() == "integer" || s.storage_class() == "text"))
          if (!best || (is_identifier_name(s.column) && !is_identifier_name(best->column))) best = &s;
      if (best) m_.key_candidates[t.name] = best->column;
    }
    return Status::ok();
  }

  // Foreign keys by inclusion of a column's distinct values in a key of another table, with a
  // name that says so; one referenced key per referencing column, the best.
  Status infer_foreign_keys(const data::Schema& schema) {
    std::vector<const ColumnStats*> keys;
    for (const auto& s : m_.columns) {
      auto pk = m_.primary_keys.find(s.table);
      bool declared = pk != m_.primary_keys.end() && pk->second.size() == 1 && lower(pk->second[0]) == lower(s.column);
      if ((declared || s.unique()) && s.distinct > 0 &&
          (s.storage_class() == "integer" || s.storage_class() == "text"))
        keys.push_back(&s);
    }
    for (const auto& from : m_.columns) {
      if (from.distinct < static_cast<int64_t>(options_.min_distinct)) continue;
      const std::string cls = from.storage_class();
      if (cls != "integer" && cls != "text") continue;
      bool declared_source = std::any_of(schema.foreign_keys.begin(), schema.foreign_keys.end(), [&](const data::ForeignKey& f) {
        return lower(f.from_table) == lower(from.table) && lower(f.from_column) == lower(from.column);
      });
      if (declared_source) continue;
      for (const ColumnStats* k : keys) NL2SQL_RETURN_IF_ERROR(try_reference(from, *k));
    }
    keep_best_references();
    return Status::ok();
  }

 private:
  Status fail(const std::string& what, const db::ExecutionResult& r) const {
    return Status(ErrorCode::kSql, fmt::format("{}: {}: {}", db_id_, what, r.error));
  }

  Status column_statistics(const data::Table& t, size_t from, size_t to) {
    std::string sql = "SELECT COUNT(*)";
    for (size_t i = from; i < to; ++i) {
      const std::string c = core::quote_sql_identifier(t.columns[i].name);
      sql += fmt::format(
          ", COUNT({0}), COUNT(DISTINCT {0}), MIN({0}), MAX({0}), MIN(LENGTH({0})), MAX(LENGTH({0})), "
          "AVG(LENGTH({0})), SUM(typeof({0}) = 'text'), SUM(typeof({0}) = 'integer'), "
          "SUM(typeof({0}) = 'real'), SUM(typeof({0}) = 'blob')",
          c);
    }
    sql += " FROM " + core::quote_sql_identifier(t.name);
    auto r = executor_.run(db_path_, sql, limits_);
    if (!r.ok() || r.result.rows.size() != 1) return fail("statistics of table " + t.name, r);
    const auto& row = r.result.rows[0];
    const int64_t rows = as_int(row[0]);
    m_.table_rows[t.name] = rows;
    for (size_t i = from; i < to; ++i) {
      const size_t b = 1 + (i - from) * 11;
      ColumnStats s;
      s.table = t.name;
      s.column = t.columns[i].name;
      s.rows = rows;
      s.nulls = rows - as_int(row[b]);
      s.distinct = as_int(row[b + 1]);
      s.min = display(row[b + 2]);
      s.max = display(row[b + 3]);
      s.min_length = as_int(row[b + 4]);
      s.max_length = as_int(row[b + 5]);
      s.avg_length = as_double(row[b + 6]);
      s.text_values = as_int(row[b + 7]);
      s.integer_values = as_int(row[b + 8]);
      s.real_values = as_int(row[b + 9]);
      s.blob_values = as_int(row[b + 10]);
      m_.columns.push_back(std::move(s));
    }
    return Status::ok();
  }

  Status top_values(const data::Table& t) {
    const std::string tab = core::quote_sql_identifier(t.name);
    for (auto& s : m_.columns) {
      if (s.table != t.name || options_.top_values == 0 || s.distinct == 0) continue;
      if (s.distinct == s.rows - s.nulls || s.blob_values > 0) continue;  // every count is 1: nothing to tell
      const std::string c = core::quote_sql_identifier(s.column);
      auto r = executor_.run(db_path_,
                             fmt::format("SELECT {0}, COUNT(*) AS n FROM {1} WHERE {0} IS NOT NULL GROUP BY {0} "
                                         "ORDER BY n DESC, {0} LIMIT {2}",
                                         c, tab, options_.top_values),
                             limits_);
      if (!r.ok()) return fail("top values of " + t.name + "." + s.column, r);
      for (const auto& row : r.result.rows) s.top_values.emplace_back(display(row[0]), as_int(row[1]));
    }
    return Status::ok();
  }

  // Whether `c` is its table's own key (declared, or the key candidate).
  bool own_key(const ColumnStats& c) const {
    auto pk = m_.primary_keys.find(c.table);
    if (pk != m_.primary_keys.end()) return pk->second.size() == 1 && lower(pk->second[0]) == lower(c.column);
    auto kc = m_.key_candidates.find(c.table);
    return kc != m_.key_candidates.end() && kc->second == c.column;
  }

  // `from` as a reference to the key `to`, kept when its values are included well enough.
  Status try_reference(const ColumnStats& from, const ColumnStats& to) {
    if (lower(to.table) == lower(from.table) || to.storage_class() != from.storage_class()) return Status::ok();
    const double name = fk_name_score(from.column, to.table, to.column);
    if (name < options_.min_name_score) return Status::ok();
    // A table's own key referencing another table (1:1) needs the name to say so: small
    // integer keys are included in each other by accident.
    if (own_key(from) && name < 0.9) return Status::ok();
    // The referencing side cannot have more distinct values than the key and still be included.
    if (from.distinct > to.distinct) return Status::ok();
    auto r = executor_.run(
        db_path_,
        fmt::format("SELECT COUNT(*), COALESCE(SUM(EXISTS (SELECT 1 FROM {0} AS k WHERE k.{1} = d.v)), 0) "
                    "FROM (SELECT DISTINCT {2} AS v FROM {3} WHERE {2} IS NOT NULL) AS d",
                    core::quote_sql_identifier(to.table), core::quote_sql_identifier(to.column),
                    core::quote_sql_identifier(from.column), core::quote_sql_identifier(from.table)),
        limits_);
    if (!r.ok() || r.result.rows.size() != 1) return fail("inclusion check " + from.table + "." + from.column, r);
    InferredForeignKey f{from.table, from.column, to.table, to.column};
    f.from_distinct = as_int(r.result.rows[0][0]);
    f.matched = as_int(r.result.rows[0][1]);
    f.to_distinct = to.distinct;
    f.name_score = name;
    f.coverage = f.from_distinct ? static_cast<double>(f.matched) / static_cast<double>(f.from_distinct) : 0;
    if (f.coverage + 1e-12 >= options_.min_coverage) m_.inferred_fks.push_back(std::move(f));
    return Status::ok();
  }

  // One referenced key per referencing column: the best (coverage, name score).
  void keep_best_references() {
    std::stable_sort(m_.inferred_fks.begin(), m_.inferred_fks.end(), [](const auto& a, const auto& b) {
      if (a.from_table != b.from_table) return a.from_table < b.from_table;
      if (a.from_column != b.from_column) return a.from_column < b.from_column;
      if (a.coverage != b.coverage) return a.coverage > b.coverage;
      return a.name_score > b.name_score;
    });
    std::vector<InferredForeignKey> best;
    for (auto& f : m_.inferred_fks)
      if (best.empty() || best.back().from_table != f.from_table || best.back().from_column != f.from_column)
        best.push_back(std::move(f));
    m_.inferred_fks = std::move(best);
  }

  const std::string& db_id_;
  const fs::path& db_path_;
  const MetadataOptions& options_;
  const db::Executor& executor_;
  DatabaseMetadata& m_;
  db::QueryLimits limits_;
};

}  // namespace

Result<DatabaseMetadata> build_metadata(const std::string& db_id, const fs::path& db_path,
                                        const data::Schema& schema, const MetadataOptions& options,
                                        const db::Executor& executor) {
  NL2SQL_RETURN_IF_ERROR(options.validate());
  const auto t0 = std::chrono::steady_clock::now();
  auto fp = db::database_fingerprint(db_path);
  if (!fp) return fp.status().with_context(db_id);
  DatabaseMetadata m;
  m.db_id = db_id;
  m.fingerprint = *fp;
  m.options_key = options.key();
  m.declared_fks = schema.foreign_keys;
  MetadataBuild build(db_id, db_path, options, executor, m);
  for (const auto& t : schema.tables) NL2SQL_RETURN_IF_ERROR(build.describe_table(t));
  const bool infer = options.infer_fks == "always" || (options.infer_fks == "auto" && schema.foreign_keys.empty());
  if (infer) NL2SQL_RETURN_IF_ERROR(build.infer_foreign_keys(schema));
  m.build_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return m;
}

fs::path metadata_file(const fs::path& index_dir, const std::string& db_id) {
  return (index_dir.empty() ? default_index_dir() : index_dir) / (db_id + ".meta.json");
}

Status save_metadata(const DatabaseMetadata& meta, const fs::path& index_dir) {
  const fs::path file = metadata_file(index_dir, meta.db_id);
  std::error_code ec;
  fs::create_directories(file.parent_path(), ec);
  return core::write_file_atomic(file, meta.to_json().dump(1));
}

Result<DatabaseMetadata> open_metadata(const std::string& db_id, const fs::path& db_path,
                                       const data::Schema& schema, const MetadataOptions& options,
                                       const fs::path& index_dir, bool force, const db::Executor& executor,
                                       std::string* action) {
  NL2SQL_RETURN_IF_ERROR(options.validate());
  const fs::path file = metadata_file(index_dir, db_id);
  std::string why = force ? "forced" : "missing";
  if (!force && fs::exists(file)) {
    auto fp = db::database_fingerprint(db_path);
    if (!fp) return fp.status().with_context(db_id);
    auto j = core::read_json_file(file);
    auto loaded = j ? DatabaseMetadata::from_json(*j, file.string()) : Result<DatabaseMetadata>(j.status());
    if (!loaded) why = loaded.status().message();
    else if (loaded->fingerprint != *fp) why = "stale: the database changed";
    else if (loaded->options_key != json::parse(options.key()).dump()) why = "stale: other options";
    else if (loaded->db_id != db_id) why = "stale: built for database " + loaded->db_id;
    else {
      if (action) *action = "fresh";
      return loaded;
    }
    spdlog::info("{}: rebuilding metadata ({})", db_id, why);
  }
  auto built = build_metadata(db_id, db_path, schema, options, executor);
  if (!built) return built.status();
  NL2SQL_RETURN_IF_ERROR(save_metadata(*built, index_dir).with_context(db_id));
  if (action) *action = "built: " + why;
  return built;
}

size_t describe_columns(DatabaseMetadata& meta, const data::Schema& schema, llm::Client& client,
                        const llm::PromptTemplate& prompt, std::vector<std::string>& errors,
                        std::vector<llm::LlmCallTrace>* calls) {
  size_t written = 0;
  for (const auto& t : schema.tables) {
    std::string columns_list;
    for (const auto& c : t.columns) columns_list += (columns_list.empty() ? "" : ", ") + c.name;
    for (const auto& c : t.columns) {
      if (!c.description.empty()) continue;
      const std::string key = t.name + "." + c.name;
      if (auto it = meta.descriptions.find(key); it != meta.descriptions.end() && it->second.template_hash == prompt.hash())
        continue;
      const ColumnStats* s = meta.find(t.name, c.name);
      std::string stats = "no statistics";
      if (s) {
        stats = fmt::format("{} rows, {} NULL, {} distinct, stored as {}", s->rows, s->nulls, s->distinct, s->storage_class());
        if (!s->min.empty()) stats += fmt::format(", min {}, max {}", s->min, s->max);
        if (!s->top_values.empty()) {
          stats += ", most frequent:";
          for (const auto& [v, n] : s->top_values) stats += fmt::format(" '{}' ({})", v, n);
        }
      }
      auto text = prompt.render({{"database", meta.db_id}, {"table", t.name}, {"table_columns", columns_list},
                                 {"column", c.name}, {"type", c.type.empty() ? "(none declared)" : c.type},
                                 {"stats", stats}});
      if (!text) {
        errors.push_back(text.status().message());
        return written;  // the template itself is wrong: every column would fail the same way
      }
      llm::ChatRequest req;
      req.role = "describe";
      req.stage = "describe";
      req.question_id = meta.db_id;
      req.template_hash = prompt.hash();
      req.messages = {{"user", *text}};
      llm::CallSpend spent;
      auto resp = client.chat(req, &spent);
      if (calls) calls->push_back(llm::trace_of("describe", prompt, req, resp, spent));
      if (!resp) {
        errors.push_back(key + ": " + resp.status().message());
        continue;
      }
      std::string d = resp->text();
      // One line: the description goes into an inline SQL comment.
      for (auto& ch : d)
        if (ch == '\n' || ch == '\r') ch = ' ';
      while (!d.empty() && d.back() == ' ') d.pop_back();
      meta.descriptions[key] = {d, prompt.hash(), resp->profile, resp->simulated()};
      ++written;
    }
  }
  return written;
}

}  // namespace nl2sql::context
