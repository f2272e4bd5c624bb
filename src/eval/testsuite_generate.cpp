// Value pools from the original database and candidate databases generated from them.
#include "testsuite_generate.h"

#include <sqlite3.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>
#include <memory>
#include <set>

#include "nl2sql/core/hash.h"
#include "nl2sql/core/text.h"
#include "nl2sql/sql/analysis.h"
#include "nl2sql/sql/lineage.h"
#include "nl2sql/sql/neighbours.h"
#include "nl2sql/sql/parser.h"

namespace nl2sql::eval {
namespace {

namespace fs = std::filesystem;
using core::lower;
using core::quote_sql_identifier;

std::string column_list(const db::TableInfo& t) {
  std::string s;
  for (const auto& c : t.columns) {
    if (!s.empty()) s += ", ";
    s += quote_sql_identifier(c.name);
  }
  return s;
}

std::string id_list(const std::vector<int64_t>& ids, size_t from, size_t to) {
  std::string s;
  for (size_t i = from; i < to; ++i) {
    if (i > from) s += ',';
    s += std::to_string(ids[i]);
  }
  return s;
}

// Rows of `t` by rowid, in chunks the statement length allows.
Status fetch_rows(const fs::path& db, const db::TableInfo& t, const std::vector<int64_t>& ids,
                  const db::Executor& executor, const db::QueryLimits& limits, std::vector<db::Row>& out) {
  const std::string head = "SELECT " + column_list(t) + " FROM " + quote_sql_identifier(t.name) + " WHERE rowid IN (";
  for (size_t from = 0; from < ids.size(); from += 500) {
    size_t to = std::min(ids.size(), from + 500);
    auto r = executor.run(db, head + id_list(ids, from, to) + ")", limits);
    if (!r.ok()) return Status(ErrorCode::kSql, "sampling " + t.name + ": " + r.error);
    for (auto& row : r.result.rows) out.push_back(std::move(row));
  }
  return Status::ok();
}

// A literal as a value of the column's class: numbers stay numbers in numeric columns.
db::Value literal_value(const std::string& text, const std::string& cls) {
  if (cls == "numeric") {
    char* end = nullptr;
    long long i = std::strtoll(text.c_str(), &end, 10);
    if (!text.empty() && end && *end == 0) return db::Value::integer(i);
    double d = std::strtod(text.c_str(), &end);
    if (!text.empty() && end && *end == 0 && std::isfinite(d)) return db::Value::real(d);
  }
  return db::Value::text(text);
}

void add_literal(ColumnPool& pool, const std::string& op, const std::string& literal, const std::string& cls) {
  std::string text = literal;
  std::string upper_op = core::lower(op);
  if (upper_op == "like" || upper_op == "glob") {
    // The pattern's fixed part: a value holding it matches '%part%'-style patterns.
    std::string fixed;
    for (char c : text)
      if (c != '%' && c != '_' && c != '*' && c != '?') fixed += c;
    text = fixed;
  }
  db::Value v = literal_value(text, cls);
  pool.literals.push_back(v);
  if (v.type == db::ValueType::kInteger) {
    pool.literals.push_back(db::Value::integer(v.i + 1));
    pool.literals.push_back(db::Value::integer(v.i - 1));
  } else if (v.type == db::ValueType::kReal) {
    pool.literals.push_back(db::Value::real(v.r + 1));
    pool.literals.push_back(db::Value::real(v.r - 1));
  } else {
    pool.literals.push_back(db::Value::text(sql::perturb_text(v.s)));
  }
}

// Parents before children (self-references and cycles broken in schema order).
std::vector<const db::TableInfo*> generation_order(const db::SchemaInfo& schema) {
  std::vector<const db::TableInfo*> tables;
  for (const auto& t : schema.tables)
    if (!t.is_view) tables.push_back(&t);
  std::vector<const db::TableInfo*> order;
  std::set<std::string> placed;
  while (order.size() < tables.size()) {
    bool progress = false;
    for (const auto* t : tables) {
      if (placed.count(lower(t->name))) continue;
      bool ready = true;
      for (const auto& fk : t->foreign_keys) {
        std::string parent = lower(fk.to_table);
        if (parent != lower(t->name) && !placed.count(parent) && schema.find(fk.to_table)) ready = false;
      }
      if (!ready) continue;
      order.push_back(t);
      placed.insert(lower(t->name));
      progress = true;
    }
    if (!progress) {  // a cycle: the first unplaced table goes next
      for (const auto* t : tables)
        if (!placed.count(lower(t->name))) {
          order.push_back(t);
          placed.insert(lower(t->name));
          break;
        }
    }
  }
  return order;
}

db::Value perturb(const db::Value& v, core::SplitMix64& rng) {
  switch (v.type) {
    case db::ValueType::kInteger: return db::Value::integer(v.i + (rng.below(2) ? 1 : -1));
    case db::ValueType::kReal: return db::Value::real(v.r + (rng.below(2) ? 1.0 : -1.0));
    case db::ValueType::kText: return db::Value::text(sql::perturb_text(v.s));
    default: return v;
  }
}

db::Value draw(const ColumnPool& pool, const std::string& cls, core::SplitMix64& rng) {
  if (!pool.literals.empty() && rng.uniform() < 0.3) return pool.literals[rng.below(pool.literals.size())];
  if (pool.null_share > 0 && rng.uniform() < pool.null_share) return db::Value::null();
  if (!pool.sampled.empty()) {
    const db::Value& v = pool.sampled[rng.below(pool.sampled.size())];
    return rng.uniform() < 0.2 ? perturb(v, rng) : v;
  }
  if (cls == "numeric") return db::Value::integer(static_cast<int64_t>(rng.below(100)));
  return db::Value::text("v" + std::to_string(rng.below(100)));
}

void bind(sqlite3_stmt* st, int i, const db::Value& v) {
  switch (v.type) {
    case db::ValueType::kNull: sqlite3_bind_null(st, i); break;
    case db::ValueType::kInteger: sqlite3_bind_int64(st, i, v.i); break;
    case db::ValueType::kReal: sqlite3_bind_double(st, i, v.r); break;
    case db::ValueType::kText:
      sqlite3_bind_text(st, i, v.s.data(), static_cast<int>(v.s.size()), SQLITE_TRANSIENT);
      break;
    case db::ValueType::kBlob:
      sqlite3_bind_blob(st, i, v.s.data(), static_cast<int>(v.s.size()), SQLITE_TRANSIENT);
      break;
  }
}

struct Closer {
  void operator()(sqlite3* db) const { sqlite3_close_v2(db); }
};
struct Finalizer {
  void operator()(sqlite3_stmt* st) const { sqlite3_finalize(st); }
};

// Adds the rows `lineage` reads to `out` when they are few: a query that reads a large share of
// a table (a count over it, a scan) adds nothing a random sample does not, and at BIRD scale its
// witness rows would cost more than the whole build. Whole-table over-approximations are skipped
// for the same reason. False (with the reason) when a witness query was cut or failed.
bool selective_lineage(const sql::Lineage& lineage, const fs::path& db, const db::Executor& executor,
                       db::QueryLimits limits, size_t rows_per_table, std::map<std::string, std::set<int64_t>>& out,
                       std::string* why) {
  limits.row_cap = std::max<size_t>(1000, rows_per_table * 20);
  limits.max_result_bytes = 16u << 20;
  std::map<std::string, std::set<int64_t>> found;
  for (const auto& q : lineage.queries) {
    if (!q.all_rows_of.empty()) continue;
    auto r = sql::run_witness(q, db, executor, limits);
    if (r.status == db::ExecStatus::kRowCap) {
      *why = "reads too many rows to be worth sampling (more than " + std::to_string(limits.row_cap) + " witnesses)";
      return false;
    }
    if (!r.ok()) {
      *why = r.error.substr(0, 200);
      return false;
    }
    const size_t n = q.tables.size();
    for (const auto& row : r.result.rows) {
      if (row.size() < n) continue;
      for (size_t k = 0; k < n; ++k) {
        const db::Value& v = row[row.size() - n + k];
        auto& ids = found[lower(q.tables[k])];
        if (v.type == db::ValueType::kInteger) {
          ids.insert(v.i);
        } else if (v.type == db::ValueType::kText) {  // a group's rowids, comma-separated
          const char* p = v.s.c_str();
          while (*p) {
            char* end = nullptr;
            long long id = std::strtoll(p, &end, 10);
            if (end == p) break;
            ids.insert(id);
            p = *end == ',' ? end + 1 : end;
          }
        }
      }
    }
    for (const auto& [t, ids] : found)
      if (ids.size() > limits.row_cap) {
        *why = "reads too many rows of " + t + " to be worth sampling";
        return false;
      }
  }
  for (auto& [t, ids] : found) out[t].insert(ids.begin(), ids.end());
  return true;
}

}  // namespace

namespace {

// What the gold queries say about the original: the rows their lineage reads (by lower-cased
// table name) and the literals they compare columns with.
struct GoldFootprint {
  std::map<std::string, std::set<int64_t>> lineage;
  std::vector<std::pair<std::string, sql::LiteralComparison>> literals;
};

GoldFootprint gold_footprint(const fs::path& db, const db::SchemaInfo& schema, const std::vector<std::string>& golds,
                             const SuiteOptions& options, const db::Executor& executor,
                             const db::QueryLimits& limits, std::vector<std::string>& notes) {
  GoldFootprint f;
  std::map<std::string, int64_t> counts;
  for (const auto& g : golds) {
    auto stmt = sql::parse_query(g);
    if (!stmt.is_ok()) continue;
    auto refs = sql::analyze_references(*stmt->select, schema);
    for (const auto& l : refs.literals) f.literals.emplace_back(g, l);
    if (options.lineage_rows == 0) continue;
    sql::LineageOptions lo;
    lo.group_budget = 10000;
    auto rows = sql::count_table_rows(*stmt->select, schema, db, executor, &counts);
    if (rows.is_ok()) lo.table_rows = std::move(*rows);
    auto lin = sql::rewrite_lineage(*stmt->select, schema, lo);
    if (!lin.is_ok()) {
      notes.push_back("lineage of " + g + ": " + lin.status().message());
      continue;
    }
    std::string why;
    if (!selective_lineage(*lin, db, executor, limits, options.lineage_rows, f.lineage, &why))
      notes.push_back("lineage of " + g + ": " + why);
  }
  return f;
}

// A sample of a rowid table's rows: all of them when there are at most pool_rows, else rows at
// random rowids.
Status sample_table_rows(const fs::path& db, const db::TableInfo& t, const SuiteOptions& options,
                         const db::Executor& executor, const db::QueryLimits& limits, core::SplitMix64& rng,
                         std::vector<db::Row>& out) {
  const std::string name = quote_sql_identifier(t.name);
  auto span = executor.run(db, "SELECT min(rowid), max(rowid), count(*) FROM " + name, limits);
  if (!span.ok() || span.result.rows.empty()) return Status(ErrorCode::kSql, "sampling " + t.name + ": " + span.error);
  const auto& row = span.result.rows[0];
  int64_t lo = row[0].type == db::ValueType::kInteger ? row[0].i : 0;
  int64_t hi = row[1].type == db::ValueType::kInteger ? row[1].i : -1;
  int64_t n = row[2].type == db::ValueType::kInteger ? row[2].i : 0;
  if (n > 0 && static_cast<size_t>(n) <= options.pool_rows) {
    auto all = executor.run(db, "SELECT " + column_list(t) + " FROM " + name, limits);
    if (!all.ok()) return Status(ErrorCode::kSql, "sampling " + t.name + ": " + all.error);
    out = std::move(all.result.rows);
  } else if (n > 0) {
    std::set<int64_t> ids;
    uint64_t width = static_cast<uint64_t>(hi - lo) + 1;
    for (size_t k = 0; k < options.pool_rows * 2 && ids.size() < options.pool_rows; ++k)
      ids.insert(lo + static_cast<int64_t>(rng.below(width)));
    NL2SQL_RETURN_IF_ERROR(fetch_rows(db, t, {ids.begin(), ids.end()}, executor, limits, out));
  }
  return Status::ok();
}

// The lineage rows of a table, the same ones for every seed: the smallest by hash.
Status add_lineage_rows(const fs::path& db, const std::set<int64_t>& lineage, const SuiteOptions& options,
                        const db::Executor& executor, const db::QueryLimits& limits, TablePool& tp) {
  std::vector<std::pair<uint64_t, int64_t>> keyed;
  for (int64_t id : lineage) keyed.emplace_back(core::xxh64(std::to_string(id), options.seed), id);
  std::sort(keyed.begin(), keyed.end());
  if (keyed.size() > options.lineage_rows) keyed.resize(options.lineage_rows);
  std::vector<int64_t> ids;
  for (const auto& [h, id] : keyed) ids.push_back(id);
  std::sort(ids.begin(), ids.end());
  size_t before = tp.rows.size();
  NL2SQL_RETURN_IF_ERROR(fetch_rows(db, *tp.table, ids, executor, limits, tp.rows));
  tp.lineage_rows = tp.rows.size() - before;
  return Status::ok();
}

// Each column's sampled values, share of NULL and the gold literals compared with it.
void fill_column_pools(const std::vector<std::pair<std::string, sql::LiteralComparison>>& literals, TablePool& tp) {
  const db::TableInfo* t = tp.table;
  for (size_t c = 0; c < t->columns.size(); ++c) {
    ColumnPool& pool = tp.columns[c];
    size_t nulls = 0;
    for (const auto& r : tp.rows) {
      if (c >= r.size()) continue;
      if (r[c].is_null()) ++nulls;
      else pool.sampled.push_back(r[c]);
    }
    pool.null_share = tp.rows.empty() ? 0 : static_cast<double>(nulls) / static_cast<double>(tp.rows.size());
  }
  for (const auto& [g, l] : literals) {
    if (lower(l.column.first) != lower(t->name)) continue;
    for (size_t c = 0; c < t->columns.size(); ++c)
      if (lower(t->columns[c].name) == lower(l.column.second))
        add_literal(tp.columns[c], l.op, l.literal, sql::type_class(t->columns[c].type));
  }
}

}  // namespace

Result<ValuePools> sample_value_pools(const fs::path& db, const db::SchemaInfo& schema,
                                      const std::vector<std::string>& golds, const SuiteOptions& options,
                                      const db::Executor& executor) {
  ValuePools pools;
  db::QueryLimits limits = executor.options().limits;
  limits.timeout_s = options.original_timeout_s;
  limits.row_cap = 0;
  core::SplitMix64 rng(core::xxh64("pools", options.seed));
  // Rows the gold queries touch on the original.
  const GoldFootprint gold = gold_footprint(db, schema, golds, options, executor, limits, pools.notes);
  for (const db::TableInfo* t : generation_order(schema)) {
    TablePool tp;
    tp.table = t;
    tp.columns.resize(t->columns.size());
    if (t->without_rowid) {
      auto r = executor.run(db, "SELECT " + column_list(*t) + " FROM " + quote_sql_identifier(t->name) + " LIMIT " +
                                    std::to_string(options.pool_rows), limits);
      if (!r.ok()) return Status(ErrorCode::kSql, "sampling " + t->name + ": " + r.error);
      tp.rows = std::move(r.result.rows);
    } else {
      NL2SQL_RETURN_IF_ERROR(sample_table_rows(db, *t, options, executor, limits, rng, tp.rows));
      auto it = gold.lineage.find(lower(t->name));
      if (it != gold.lineage.end() && options.lineage_rows > 0)
        NL2SQL_RETURN_IF_ERROR(add_lineage_rows(db, it->second, options, executor, limits, tp));
    }
    fill_column_pools(gold.literals, tp);
    pools.tables.push_back(std::move(tp));
  }
  auto extra = executor.run(db, "SELECT type, sql FROM sqlite_master WHERE type IN ('index', 'view') AND sql IS NOT NULL ORDER BY rowid", limits);
  if (!extra.ok()) return Status(ErrorCode::kSql, "reading the schema of " + db.string() + ": " + extra.error);
  for (const auto& r : extra.result.rows) {
    if (r.size() < 2 || r[1].type != db::ValueType::kText) continue;
    (r[0].s == "index" ? pools.index_sql : pools.view_sql).push_back(r[1].s);
  }
  return pools;
}

namespace {

// A column's foreign key: the parent's generated rows and the parent column's position.
struct ParentColumn {
  const std::vector<db::Row>* rows = nullptr;
  size_t column = 0;
};

// A candidate database being written: its connection, the generator and the rows generated so
// far, table by table in generation order (parents first).
class CandidateWriter {
 public:
  CandidateWriter(const fs::path& file, sqlite3* db, const ValuePools& pools, uint64_t seed, size_t max_rows)
      : file_(file), db_(db), pools_(pools), rng_(seed), max_rows_(max_rows), rows_of_(pools.tables.size()) {}

  Status exec(const std::string& sql) {
    char* err = nullptr;
    if (sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &err) != SQLITE_OK) {
      std::string msg = err ? err : "unknown error";
      sqlite3_free(err);
      return Status(ErrorCode::kSql, file_.filename().string() + ": " + msg + " (" + sql.substr(0, 200) + ")");
    }
    return Status::ok();
  }

  // Draws table ti's rows; each row gets four attempts past the schema's constraints.
  Status fill_table(size_t ti) {
    const TablePool& tp = pools_.tables[ti];
    const db::TableInfo& t = *tp.table;
    std::vector<std::string> cls;
    for (const auto& c : t.columns) cls.push_back(sql::type_class(c.type));
    const std::vector<ParentColumn> refs = parent_columns(ti);
    std::string sql = "INSERT OR IGNORE INTO " + quote_sql_identifier(t.name) + " (" + column_list(t) + ") VALUES (";
    for (size_t c = 0; c < t.columns.size(); ++c) sql += c ? ",?" : "?";
    sql += ")";
    sqlite3_stmt* st_raw = nullptr;
    if (sqlite3_prepare_v2(db_, sql.c_str(), -1, &st_raw, nullptr) != SQLITE_OK)
      return Status(ErrorCode::kSql, file_.filename().string() + ": " + sqlite3_errmsg(db_));
    std::unique_ptr<sqlite3_stmt, Finalizer> st(st_raw);
    const size_t want = 1 + rng_.below(max_rows_);
    for (size_t r = 0; r < want; ++r) {
      for (int attempt = 0; attempt < 4; ++attempt) {
        db::Row row = draw_row(tp, refs, cls);
        if (insert(st.get(), t, row)) {
          rows_of_[ti].push_back(std::move(row));
          ++out_.rows;
          break;
        }
        ++out_.refused;
      }
    }
    generated_[lower(t.name)] = &rows_of_[ti];
    return Status::ok();
  }

  const GeneratedDatabase& result() const { return out_; }

 private:
  // Each column's foreign key resolved to a table generated before (or this one).
  std::vector<ParentColumn> parent_columns(size_t ti) const {
    const db::TableInfo& t = *pools_.tables[ti].table;
    std::vector<ParentColumn> refs(t.columns.size());
    for (const auto& fk : t.foreign_keys) {
      std::string parent = lower(fk.to_table);
      const std::vector<db::Row>* prow = nullptr;
      const db::TableInfo* pinfo = nullptr;
      if (parent == lower(t.name)) {
        prow = &rows_of_[ti];
        pinfo = &t;
      } else if (auto it = generated_.find(parent); it != generated_.end()) {
        prow = it->second;
        for (const auto& p : pools_.tables)
          if (lower(p.table->name) == parent) pinfo = p.table;
      }
      if (!prow || !pinfo) continue;
      std::string target = fk.to_column;
      if (target.empty()) {
        auto pk = pinfo->primary_key();
        if (pk.empty()) continue;
        target = pk[0];
      }
      for (size_t c = 0; c < t.columns.size(); ++c) {
        if (lower(t.columns[c].name) != lower(fk.from_column)) continue;
        for (size_t pc = 0; pc < pinfo->columns.size(); ++pc)
          if (lower(pinfo->columns[pc].name) == lower(target)) refs[c] = {prow, pc};
      }
    }
    return refs;
  }

  // A row: foreign keys from a parent row, else often a sampled row's value, else a draw.
  db::Row draw_row(const TablePool& tp, const std::vector<ParentColumn>& refs, const std::vector<std::string>& cls) {
    const size_t width = tp.table->columns.size();
    db::Row row(width);
    const db::Row* base = (!tp.rows.empty() && rng_.uniform() < 0.7) ? &tp.rows[rng_.below(tp.rows.size())] : nullptr;
    for (size_t c = 0; c < width; ++c) {
      const ParentColumn& ref = refs[c];
      if (ref.rows && !ref.rows->empty()) {
        const db::Row& parent = (*ref.rows)[rng_.below(ref.rows->size())];
        row[c] = tp.columns[c].null_share > 0 && rng_.uniform() < tp.columns[c].null_share ? db::Value::null()
                                                                                           : parent[ref.column];
      } else if (base && c < base->size() && rng_.uniform() < 0.6) {
        row[c] = (*base)[c];
      } else {
        row[c] = draw(tp.columns[c], cls[c], rng_);
      }
    }
    return row;
  }

  // Whether the row went in; its rowid alias then takes the rowid SQLite gave it.
  bool insert(sqlite3_stmt* st, const db::TableInfo& t, db::Row& row) {
    sqlite3_reset(st);
    sqlite3_clear_bindings(st);
    for (size_t c = 0; c < row.size(); ++c) bind(st, static_cast<int>(c + 1), row[c]);
    int step = sqlite3_step(st);
    if (step != SQLITE_DONE || sqlite3_changes(db_) != 1) return false;
    if (t.rowid_alias >= 0 && row[t.rowid_alias].is_null())
      row[t.rowid_alias] = db::Value::integer(sqlite3_last_insert_rowid(db_));
    return true;
  }

  const fs::path& file_;
  sqlite3* db_;
  const ValuePools& pools_;
  core::SplitMix64 rng_;
  const size_t max_rows_;
  GeneratedDatabase out_;
  std::map<std::string, const std::vector<db::Row>*> generated_;  // by lower-cased table name
  std::vector<std::vector<db::Row>> rows_of_;
};

}  // namespace

Result<GeneratedDatabase> write_candidate(const fs::path& file, const ValuePools& pools, uint64_t seed,
                                          size_t max_rows) {
  sqlite3* raw = nullptr;
  int rc = sqlite3_open_v2(file.c_str(), &raw, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nullptr);
  std::unique_ptr<sqlite3, Closer> db(raw);
  if (rc != SQLITE_OK) return io_error("cannot create " + file.string() + ": " + sqlite3_errstr(rc));
  CandidateWriter writer(file, db.get(), pools, seed, max_rows);
  NL2SQL_RETURN_IF_ERROR(writer.exec("PRAGMA journal_mode=OFF; PRAGMA synchronous=OFF; BEGIN"));
  for (const auto& tp : pools.tables) NL2SQL_RETURN_IF_ERROR(writer.exec(tp.table->create_sql));
  for (const auto& s : pools.index_sql) NL2SQL_RETURN_IF_ERROR(writer.exec(s));
  for (size_t ti = 0; ti < pools.tables.size(); ++ti) NL2SQL_RETURN_IF_ERROR(writer.fill_table(ti));
  for (const auto& s : pools.view_sql) NL2SQL_RETURN_IF_ERROR(writer.exec(s));
  NL2SQL_RETURN_IF_ERROR(writer.exec("COMMIT"));
  GeneratedDatabase out = writer.result();
  db.reset();
  return out;
}

}  // namespace nl2sql::eval
