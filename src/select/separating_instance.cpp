// Separating instances: lineage terms, the sampling search, the in-memory D′ and the answer
// format shown to (and parsed from) the model.
#include "nl2sql/select/separating_instance.h"

#include <sqlite3.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <optional>
#include <cctype>
#include <cmath>
#include <random>
#include <sstream>

#include "nl2sql/db/result_compare.h"
#include "nl2sql/llm/answer.h"
#include "nl2sql/sql/parser.h"
#include "nl2sql/core/text.h"

namespace nl2sql::select {
namespace {

using json = nlohmann::json;
using ordered_json = nlohmann::ordered_json;

using core::lower;
using core::trim;


template <typename J>
J value_json(const db::Value& v) {
  switch (v.type) {
    case db::ValueType::kNull: return nullptr;
    case db::ValueType::kInteger: return v.i;
    case db::ValueType::kReal: return std::isfinite(v.r) ? J(v.r) : J(v.to_display());
    case db::ValueType::kText: return db::drop_invalid_utf8(v.s);
    case db::ValueType::kBlob: return v.to_display();
  }
  return nullptr;
}

db::Value json_value(const json& j) {
  if (j.is_null()) return db::Value::null();
  if (j.is_boolean()) return db::Value::integer(j.get<bool>() ? 1 : 0);
  if (j.is_number_integer() || j.is_number_unsigned()) return db::Value::integer(j.get<int64_t>());
  if (j.is_number_float()) return db::Value::real(j.get<double>());
  if (j.is_string()) return db::Value::text(j.get<std::string>());
  return db::Value::text(j.dump());
}

// Deadline for queries on D′: a progress handler interrupts past it.
struct Deadline {
  std::chrono::steady_clock::time_point end;
};
int progress(void* p) {
  auto* d = static_cast<Deadline*>(p);
  return std::chrono::steady_clock::now() > d->end ? 1 : 0;
}

uint64_t below(std::mt19937_64& rng, uint64_t n) { return n == 0 ? 0 : rng() % n; }

// k distinct elements of `pool` (all when k ≥ size), in a seeded order.
std::vector<const LineageTerm*> draw(const std::vector<const LineageTerm*>& pool, size_t k,
                                     std::mt19937_64& rng) {
  std::vector<const LineageTerm*> out;
  if (pool.empty() || k == 0) return out;
  if (k >= pool.size()) return pool;
  std::set<size_t> taken;
  while (taken.size() < k) taken.insert(static_cast<size_t>(below(rng, pool.size())));
  for (size_t i : taken) out.push_back(pool[i]);
  return out;
}

}  // namespace

// ---- InstanceTables ----

size_t InstanceTables::rows() const {
  size_t n = 0;
  for (const auto& [t, r] : tables) n += r.rows.size();
  return n;
}

json InstanceTables::to_json() const {
  json out = json::object();
  for (const auto& [name, rs] : tables) {
    json rows = json::array();
    for (const auto& row : rs.rows) {
      json o = json::object();
      for (size_t c = 0; c < row.size() && c < rs.columns.size(); ++c)
        o[rs.columns[c]] = value_json<json>(row[c]);
      rows.push_back(std::move(o));
    }
    out[name] = std::move(rows);
  }
  return out;
}

std::string InstanceTables::to_prompt_text() const {
  ordered_json out = ordered_json::object();
  for (const auto& [name, rs] : tables) {
    ordered_json rows = ordered_json::array();
    for (const auto& row : rs.rows) {
      ordered_json o = ordered_json::object();
      for (size_t c = 0; c < row.size() && c < rs.columns.size(); ++c)
        o[rs.columns[c]] = value_json<ordered_json>(row[c]);
      rows.push_back(std::move(o));
    }
    out[name] = std::move(rows);
  }
  return out.dump(2, ' ', false, json::error_handler_t::replace);
}

json SeparatingInstance::to_json() const {
  json j = {{"found", found}, {"attempts", attempts}};
  if (found) {
    j["rows"] = instance.rows();
    j["instance"] = instance.to_json();
    j["answer_a"] = render_answer_rows(answer_a);
    j["answer_b"] = render_answer_rows(answer_b);
  } else {
    j["failure"] = failure;
  }
  return j;
}

// ---- MemoryDatabase ----

Result<std::unique_ptr<MemoryDatabase>> MemoryDatabase::create(const sql::Schema& schema,
                                                               const InstanceTables& rows) {
  std::unique_ptr<MemoryDatabase> mem(new MemoryDatabase());
  if (sqlite3_open_v2(":memory:", &mem->db_, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nullptr) !=
      SQLITE_OK)
    return io_error("cannot open an in-memory database");
  sqlite3_db_config(mem->db_, SQLITE_DBCONFIG_ENABLE_LOAD_EXTENSION, 0, nullptr);
  auto exec = [&](const std::string& sql) -> Status {
    char* err = nullptr;
    if (sqlite3_exec(mem->db_, sql.c_str(), nullptr, nullptr, &err) != SQLITE_OK) {
      std::string msg = err ? err : "error";
      sqlite3_free(err);
      return Status(ErrorCode::kSql, "in-memory instance: " + msg + " in: " + sql.substr(0, 160));
    }
    return Status::ok();
  };
  NL2SQL_RETURN_IF_ERROR(exec("BEGIN"));
  for (const auto& t : schema.tables) {
    if (t.is_view || t.create_sql.empty()) continue;
    NL2SQL_RETURN_IF_ERROR(exec(t.create_sql));
  }
  for (const auto& [name, rs] : rows.tables) {
    if (rs.rows.empty()) continue;
    std::string sql = "INSERT INTO " + core::quote_sql_identifier(name) + " (";
    for (size_t c = 0; c < rs.columns.size(); ++c) sql += (c ? ", " : "") + core::quote_sql_identifier(rs.columns[c]);
    sql += ") VALUES (";
    for (size_t c = 0; c < rs.columns.size(); ++c) sql += c ? ", ?" : "?";
    sql += ")";
    sqlite3_stmt* st = nullptr;
    if (sqlite3_prepare_v2(mem->db_, sql.c_str(), -1, &st, nullptr) != SQLITE_OK)
      return Status(ErrorCode::kSql, std::string("in-memory instance: ") + sqlite3_errmsg(mem->db_));
    for (const auto& row : rs.rows) {
      for (size_t c = 0; c < row.size(); ++c) {
        const auto& v = row[c];
        int k = static_cast<int>(c) + 1;
        switch (v.type) {
          case db::ValueType::kNull: sqlite3_bind_null(st, k); break;
          case db::ValueType::kInteger: sqlite3_bind_int64(st, k, v.i); break;
          case db::ValueType::kReal: sqlite3_bind_double(st, k, v.r); break;
          case db::ValueType::kText:
            sqlite3_bind_text(st, k, v.s.data(), static_cast<int>(v.s.size()), SQLITE_TRANSIENT);
            break;
          case db::ValueType::kBlob:
            sqlite3_bind_blob(st, k, v.s.data(), static_cast<int>(v.s.size()), SQLITE_TRANSIENT);
            break;
        }
      }
      int rc = sqlite3_step(st);
      sqlite3_reset(st);
      if (rc != SQLITE_DONE) {
        std::string msg = sqlite3_errmsg(mem->db_);
        sqlite3_finalize(st);
        return Status(ErrorCode::kSql, "in-memory instance: inserting into " + name + ": " + msg);
      }
    }
    sqlite3_finalize(st);
  }
  for (const auto& t : schema.tables)  // views last: they may read any table
    if (t.is_view && !t.create_sql.empty()) (void)exec(t.create_sql);
  NL2SQL_RETURN_IF_ERROR(exec("COMMIT"));
  // From here on the copy is read-only, like every database a candidate sees.
  NL2SQL_RETURN_IF_ERROR(exec("PRAGMA query_only = 1"));
  // Candidates run on D′ get the executor's rights and no more: PRAGMA query_only stops
  // writes to D′ itself, but ATTACH, VACUUM INTO (which writes a new file) and transactions
  // are "read-only" to sqlite3_stmt_readonly, so the executor's authorizer guards it too.
  db::lock_down_read_only(mem->db_);
  return mem;
}

MemoryDatabase::~MemoryDatabase() {
  if (db_) sqlite3_close_v2(db_);
}

Result<db::ResultSet> MemoryDatabase::run(const std::string& sql, double timeout_s) const {
  sqlite3_stmt* st = nullptr;
  const char* tail = nullptr;
  if (sqlite3_prepare_v2(db_, sql.c_str(), static_cast<int>(sql.size()), &st, &tail) != SQLITE_OK) {
    sqlite3_finalize(st);
    return Status(ErrorCode::kSql, sqlite3_errmsg(db_));
  }
  if (!st) return Status(ErrorCode::kSql, "empty statement");
  std::string rest = tail ? trim(tail) : "";
  while (!rest.empty() && rest.front() == ';') rest = trim(rest.substr(1));
  if (!rest.empty() || !sqlite3_stmt_readonly(st) || sqlite3_column_count(st) == 0) {
    sqlite3_finalize(st);
    return Status(ErrorCode::kRejected, "not a single read-only query");
  }
  Deadline deadline{std::chrono::steady_clock::now() +
                    std::chrono::microseconds(static_cast<int64_t>(timeout_s * 1e6))};
  sqlite3_progress_handler(db_, 1000, progress, &deadline);
  db::ResultSet out;
  int ncol = sqlite3_column_count(st);
  for (int c = 0; c < ncol; ++c) out.columns.push_back(sqlite3_column_name(st, c));
  int rc;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    db::Row row;
    for (int c = 0; c < ncol; ++c) {
      switch (sqlite3_column_type(st, c)) {
        case SQLITE_INTEGER: row.push_back(db::Value::integer(sqlite3_column_int64(st, c))); break;
        case SQLITE_FLOAT: row.push_back(db::Value::real(sqlite3_column_double(st, c))); break;
        case SQLITE_TEXT:
          row.push_back(db::Value::text(std::string(reinterpret_cast<const char*>(sqlite3_column_text(st, c)),
                                                    static_cast<size_t>(sqlite3_column_bytes(st, c)))));
          break;
        case SQLITE_BLOB: {
          const auto* p = static_cast<const char*>(sqlite3_column_blob(st, c));
          row.push_back(db::Value::blob(p ? std::string(p, static_cast<size_t>(sqlite3_column_bytes(st, c))) : ""));
          break;
        }
        default: row.push_back(db::Value::null()); break;
      }
    }
    out.rows.push_back(std::move(row));
  }
  sqlite3_progress_handler(db_, 0, nullptr, nullptr);
  std::string err = rc == SQLITE_DONE ? "" : sqlite3_errmsg(db_);
  sqlite3_finalize(st);
  if (rc == SQLITE_INTERRUPT) return Status(ErrorCode::kTimeout, "query on the instance timed out");
  if (rc != SQLITE_DONE) return Status(ErrorCode::kSql, err);
  return out;
}

// ---- InstanceBuilder ----

Result<InstanceBuilder> InstanceBuilder::open(const std::filesystem::path& db_path,
                                              const db::Executor& executor,
                                              InstanceOptions options) {
  auto schema = db::inspect_schema(db_path);
  if (!schema.is_ok()) return schema.status();
  InstanceBuilder b;
  b.db_path_ = db_path;
  b.executor_ = &executor;
  b.options_ = options;
  b.schema_ = std::make_shared<const sql::Schema>(std::move(*schema));
  b.row_cache_ = std::make_shared<std::map<std::pair<std::string, int64_t>, db::Row>>();
  b.table_rows_ = std::make_shared<std::map<std::string, int64_t>>();
  return b;
}

Result<QueryLineage> InstanceBuilder::lineage(const std::string& sql,
                                              const db::ResultSet* result_on_d) const {
  QueryLineage out;
  out.sql = sql;
  if (result_on_d == nullptr) {
    auto r = executor_->run(db_path_, sql);
    if (!r.ok()) return Status(ErrorCode::kSql, "candidate does not run on D: " + r.error);
    out.result = std::move(r.result);
  }
  auto stmt = sql::parse_query(sql);
  if (!stmt.is_ok()) return stmt.status();
  sql::LineageOptions lo;
  lo.group_budget = options_.lineage_group_budget;
  if (lo.group_budget > 0) {
    // A table that cannot be counted leaves the lineage exact.
    auto counts = sql::count_table_rows(*stmt->select, *schema_, db_path_, *executor_, table_rows_.get());
    if (counts.is_ok()) lo.table_rows = std::move(*counts);
  }
  auto lin = sql::rewrite_lineage(*stmt->select, *schema_, lo);
  if (!lin.is_ok()) return lin.status();
  out.fallbacks = lin->fallbacks;
  out.sampled = lin->sampled;
  db::QueryLimits limits = executor_->options().limits;
  limits.row_cap = 0;
  auto index_of = [&](const std::string& name) -> std::optional<uint32_t> {
    const sql::TableInfo* info = schema_->find(name);
    if (!info) return std::nullopt;
    return static_cast<uint32_t>(info - schema_->tables.data());
  };
  // Every row of `table` as one-row terms (the rewrite's over-approximation).
  auto all_rows = [&](const std::string& table, std::vector<LineageTerm>& terms) -> Status {
    auto t = index_of(table);
    if (!t) return not_found("lineage: table " + table + " is not in the schema");
    const std::string& name = schema_->tables[*t].name;
    auto w = executor_->run(db_path_, "SELECT rowid FROM " + core::quote_sql_identifier(name), limits);
    if (!w.ok()) return Status(ErrorCode::kSql, "lineage of " + name + ": " + w.error);
    terms.reserve(terms.size() + w.result.rows.size());
    for (const auto& row : w.result.rows)
      if (!row.empty() && row[0].type == db::ValueType::kInteger) terms.push_back({{*t, row[0].i}});
    return Status::ok();
  };
  // Sorts a witness's terms, drops repeats (keeping the first group) and stores both.
  auto store = [&](std::vector<LineageTerm>& terms, std::vector<uint32_t>& groups) {
    groups.resize(terms.size(), QueryLineage::kNoGroup);
    std::vector<uint32_t> order(terms.size());
    for (uint32_t k = 0; k < order.size(); ++k) order[k] = k;
    std::stable_sort(order.begin(), order.end(), [&](uint32_t x, uint32_t y) { return terms[x] < terms[y]; });
    std::vector<LineageTerm> sorted;
    std::vector<uint32_t> sorted_groups;
    sorted.reserve(terms.size());
    sorted_groups.reserve(terms.size());
    for (uint32_t k : order) {
      if (!sorted.empty() && sorted.back() == terms[k]) continue;
      sorted.push_back(std::move(terms[k]));
      sorted_groups.push_back(groups[k]);
    }
    out.by_witness.push_back(std::move(sorted));
    out.group_of.push_back(std::move(sorted_groups));
  };
  for (const auto& q : lin->queries) {
    std::vector<LineageTerm> terms;
    std::vector<uint32_t> groups;  // parallel to terms while grouped rows are split
    if (!q.all_rows_of.empty()) {
      NL2SQL_RETURN_IF_ERROR(all_rows(q.all_rows_of, terms));
    } else {
      auto w = sql::run_witness(q, db_path_, *executor_, limits);
      if (!w.ok() && !q.all_rows_on_error.empty()) {
        // A decorrelated subquery witness SQLite would not run (e.g. an unqualified column
        // that became ambiguous): the rewrite's whole-table over-approximation instead.
        out.fallbacks.push_back("decorrelated witness failed (" + w.error + "): every row of its tables");
        for (const auto& t : q.all_rows_on_error) NL2SQL_RETURN_IF_ERROR(all_rows(t, terms));
        store(terms, groups);
        continue;
      }
      if (!w.ok()) return Status(ErrorCode::kSql, "lineage query failed: " + w.error);
      const size_t n = q.tables.size();
      std::vector<uint32_t> table_index(n);
      for (size_t k = 0; k < n; ++k) {
        auto t = index_of(q.tables[k]);
        if (!t) return not_found("lineage: table " + q.tables[k] + " is not in the schema");
        table_index[k] = *t;
      }
      std::vector<std::vector<int64_t>> lists(n);
      if (q.grouped) groups.reserve(w.result.rows.size());
      for (const auto& row : w.result.rows) {
        const uint32_t group = q.grouped ? static_cast<uint32_t>(&row - w.result.rows.data())
                                         : QueryLineage::kNoGroup;
        if (row.size() < n) return internal_error("lineage query returned too few columns");
        for (size_t k = 0; k < n; ++k) {
          lists[k].clear();
          const db::Value& v = row[row.size() - n + k];
          if (v.type == db::ValueType::kInteger) {
            lists[k].push_back(v.i);
          } else if (v.type == db::ValueType::kText) {
            const char* p = v.s.data();
            const char* e = p + v.s.size();
            while (p < e) {
              int64_t id = 0;
              auto [next, ec] = std::from_chars(p, e, id);
              if (ec != std::errc()) return internal_error("lineage query returned a malformed rowid list");
              lists[k].push_back(id);
              p = next;
              while (p < e && *p == ',') ++p;
            }
          }
        }
        bool aligned = n > 0 && std::all_of(lists.begin(), lists.end(),
                                            [&](const auto& l) { return l.size() == lists[0].size(); });
        if (aligned) {
          for (size_t pos = 0; pos < lists[0].size(); ++pos) {
            LineageTerm t;
            t.reserve(n);
            for (size_t k = 0; k < n; ++k) t.emplace_back(table_index[k], lists[k][pos]);
            std::sort(t.begin(), t.end());
            t.erase(std::unique(t.begin(), t.end()), t.end());
            terms.push_back(std::move(t));
            groups.push_back(group);
          }
        } else {
          // Outer joins leave NULL rowids that group_concat skips: positions no longer line up,
          // so the whole group is one term.
          LineageTerm t;
          for (size_t k = 0; k < n; ++k)
            for (int64_t id : lists[k]) t.emplace_back(table_index[k], id);
          std::sort(t.begin(), t.end());
          t.erase(std::unique(t.begin(), t.end()), t.end());
          if (!t.empty()) {
            terms.push_back(std::move(t));
            groups.push_back(group);
          }
        }
      }
    }
    store(terms, groups);
  }
  return out;
}

Result<InstanceTables> InstanceBuilder::fetch(
    const std::map<std::string, std::set<int64_t>>& rows) const {
  InstanceTables out;
  for (const auto& [table, ids] : rows) {
    const sql::TableInfo* info = schema_->find(table);
    if (!info) return not_found("table " + table + " is not in the schema");
    std::vector<int64_t> missing;
    for (int64_t id : ids)
      if (!row_cache_->count({info->name, id})) missing.push_back(id);
    for (size_t start = 0; start < missing.size(); start += 500) {
      std::string list;
      for (size_t k = start; k < std::min(missing.size(), start + 500); ++k)
        list += (list.empty() ? "" : ",") + std::to_string(missing[k]);
      auto r = executor_->run(db_path_, "SELECT rowid, * FROM " + core::quote_sql_identifier(info->name) +
                                            " WHERE rowid IN (" + list + ")");
      if (!r.ok()) return Status(ErrorCode::kSql, "reading rows of " + info->name + ": " + r.error);
      for (auto& row : r.result.rows) {
        if (row.empty() || row[0].type != db::ValueType::kInteger) continue;
        int64_t id = row[0].i;
        row.erase(row.begin());
        (*row_cache_)[{info->name, id}] = std::move(row);
      }
    }
    db::ResultSet rs;
    for (const auto& c : info->columns) rs.columns.push_back(c.name);
    for (int64_t id : ids) {
      auto it = row_cache_->find({info->name, id});
      if (it != row_cache_->end()) rs.rows.push_back(it->second);
    }
    if (!rs.rows.empty()) out.tables[info->name] = std::move(rs);
  }
  return out;
}

Result<db::ResultSet> InstanceBuilder::run_on(const InstanceTables& instance,
                                              const std::string& sql) const {
  auto mem = MemoryDatabase::create(*schema_, instance);
  if (!mem.is_ok()) return mem.status();
  return (*mem)->run(sql, options_.query_timeout_s);
}

Result<SeparatingInstance> InstanceBuilder::separate(const QueryLineage& a, const QueryLineage& b,
                                                     uint64_t seed) const {
  SeparatingInstance out;
  // P1, P2: every term of each query, sorted and unique; the differences by one merge pass.
  auto all_terms = [](const QueryLineage& q) {
    std::vector<const LineageTerm*> v;
    for (const auto& w : q.by_witness)
      for (const auto& t : w) v.push_back(&t);
    std::sort(v.begin(), v.end(), [](const LineageTerm* x, const LineageTerm* y) { return *x < *y; });
    v.erase(std::unique(v.begin(), v.end(), [](const LineageTerm* x, const LineageTerm* y) { return *x == *y; }),
            v.end());
    return v;
  };
  const auto p1 = all_terms(a), p2 = all_terms(b);
  std::vector<const LineageTerm*> only1, only2, common;
  for (size_t i = 0, j = 0; i < p1.size() || j < p2.size();) {
    if (j == p2.size() || (i < p1.size() && *p1[i] < *p2[j])) only1.push_back(p1[i++]);
    else if (i == p1.size() || *p2[j] < *p1[i]) only2.push_back(p2[j++]);
    else common.push_back(p1[i++]), ++j;
  }
  if (p1.empty() && p2.empty()) {
    out.failure = "neither query reads any row";
    return out;
  }
  // Witness queries (per query) for the support rows of subqueries; each is sorted.
  std::vector<const std::vector<LineageTerm>*> witnesses;
  for (const auto& w : a.by_witness) witnesses.push_back(&w);
  for (const auto& w : b.by_witness) witnesses.push_back(&w);
  auto table_name = [&](uint32_t t) -> const std::string& { return schema_->tables[t].name; };

  // The group mates of a term (see QueryLineage::group_of): the witness holding it, by address.
  std::vector<std::pair<const std::vector<LineageTerm>*, const std::vector<uint32_t>*>> grouped;
  for (const QueryLineage* q : {&a, &b})
    for (size_t w = 0; w < q->by_witness.size() && w < q->group_of.size(); ++w)
      grouped.emplace_back(&q->by_witness[w], &q->group_of[w]);
  auto group_mates = [&](const LineageTerm* t) {
    std::vector<const LineageTerm*> mates;
    for (const auto& [terms, groups] : grouped) {
      if (terms->empty() || t < terms->data() || t >= terms->data() + terms->size()) continue;
      const uint32_t g = (*groups)[static_cast<size_t>(t - terms->data())];
      if (g == QueryLineage::kNoGroup) break;
      for (size_t k = 0; k < terms->size() && mates.size() < options_.max_group_terms; ++k)
        if ((*groups)[k] == g && &(*terms)[k] != t) mates.push_back(&(*terms)[k]);
      break;
    }
    return mates;
  };

  const auto [m0, n0] = sample_sizes(a.sql, b.sql);
  // A partial group still yields its output row unless a HAVING condition drops it.
  const bool having = core::mentions_identifier(a.sql, "having") || core::mentions_identifier(b.sql, "having");
  std::mt19937_64 rng(seed ^ 0x5eb4a7a1c0ffee11ULL);
  std::string last_error;
  for (int attempt = 0; attempt < options_.max_attempts; ++attempt) {
    ++out.attempts;
    const size_t grow = 1 + static_cast<size_t>(attempt) / 14;
    const bool support = attempt % 2 == 1 && witnesses.size() > 2;
    const bool swapped = (attempt / 2) % 2 == 1;
    const bool whole_groups = having && attempt >= 5 && attempt % 3 == 2;
    const int m = swapped ? n0 : m0, n = swapped ? m0 : n0;
    std::vector<const LineageTerm*> picks;
    if (only1.empty() && only2.empty()) {
      picks = draw(common, 2 * grow, rng);
    } else {
      auto x = draw(only1, static_cast<size_t>(m) * grow, rng);
      auto y = draw(only2, static_cast<size_t>(n) * grow, rng);
      picks.insert(picks.end(), x.begin(), x.end());
      picks.insert(picks.end(), y.begin(), y.end());
      // One side contributes nothing of its own (e.g. its answer is a subset of the other's):
      // now and then add a shared term so non-monotone queries get rows to work on.
      if ((only1.empty() || only2.empty()) && attempt % 4 == 3) {
        auto z = draw(common, 1, rng);
        picks.insert(picks.end(), z.begin(), z.end());
      }
    }
    if (whole_groups) {
      const size_t drawn = picks.size();
      for (size_t k = 0; k < drawn; ++k) {
        auto mates = group_mates(picks[k]);
        picks.insert(picks.end(), mates.begin(), mates.end());
      }
    }
    std::map<std::string, std::set<int64_t>> rows;
    for (const auto* t : picks)
      for (const auto& [table, id] : *t) rows[table_name(table)].insert(id);
    if (support) {
      // Values of the rows picked so far: a support term that shares one is likely to join.
      auto picked = fetch(rows);
      if (!picked.is_ok()) return picked.status();
      std::set<std::string> values;          // python keys, for scoring
      std::set<std::string> literal_values;  // SQL literals, for lookups by value
      auto add_value = [&](const db::Value& v) {
        if (v.is_null()) return;
        values.insert(db::python_key(v));
        if (v.type == db::ValueType::kInteger) literal_values.insert(std::to_string(v.i));
        else if (v.type == db::ValueType::kText && v.s.size() <= 64) {
          std::string q = "'";
          for (char c : v.s) q += c == '\'' ? std::string("''") : std::string(1, c);
          literal_values.insert(q + "'");
        }
      };
      for (const auto& [t, rs] : picked->tables)
        for (const auto& row : rs.rows)
          for (const auto& v : row) add_value(v);
      std::set<LineageTerm> chosen;
      for (const auto* p : picks) chosen.insert(*p);
      for (size_t w = 0; w < witnesses.size(); ++w) {
        const auto& terms = *witnesses[w];
        if (terms.empty()) continue;
        bool represented = std::any_of(chosen.begin(), chosen.end(), [&](const LineageTerm& t) {
          return std::binary_search(terms.begin(), terms.end(), t);
        });
        if (represented) continue;
        std::vector<const LineageTerm*> pool;
        std::vector<LineageTerm> looked_up;  // owns terms found by value (single-row witnesses)
        if (terms.size() > options_.affinity_sample && terms.front().size() == 1) {
          // Too many rows to score them all: ask D for the rows of this table sharing a value
          // with the rows picked so far (join keys), and keep those that are witnesses.
          const uint32_t table = terms.front().front().first;
          const sql::TableInfo* info = &schema_->tables[table];
          std::string list;
          size_t k = 0;
          for (const auto& v : literal_values) {
            if (k++ >= 64) break;
            list += (list.empty() ? "" : ", ") + v;
          }
          if (info && !list.empty()) {
            std::string where;
            for (const auto& c : info->columns)
              where += (where.empty() ? "" : " OR ") + core::quote_sql_identifier(c.name) + " IN (" + list + ")";
            auto r = executor_->run(db_path_, "SELECT rowid FROM " + core::quote_sql_identifier(info->name) +
                                                  " WHERE " + where + " LIMIT 512");
            if (r.ok())
              for (const auto& row : r.result.rows)
                if (!row.empty() && row[0].type == db::ValueType::kInteger) {
                  LineageTerm t{{table, row[0].i}};
                  if (std::binary_search(terms.begin(), terms.end(), t)) looked_up.push_back(std::move(t));
                }
          }
          for (const auto& t : looked_up) pool.push_back(&t);
        }
        if (pool.empty())
          for (const auto& t : terms) pool.push_back(&t);
        auto sample = draw(pool, options_.affinity_sample, rng);
        std::shuffle(sample.begin(), sample.end(), rng);
        std::map<std::string, std::set<int64_t>> sample_rows;
        for (const auto* t : sample)
          for (const auto& [table, id] : *t) sample_rows[table_name(table)].insert(id);
        auto fetched = fetch(sample_rows);
        if (!fetched.is_ok()) return fetched.status();
        const LineageTerm* best = sample.front();
        size_t best_score = 0;
        for (const auto* t : sample) {
          size_t score = 0;
          for (const auto& [table, id] : *t) {
            auto it = row_cache_->find({table_name(table), id});
            if (it == row_cache_->end()) continue;
            for (const auto& v : it->second)
              if (!v.is_null() && values.count(db::python_key(v))) ++score;
          }
          if (score > best_score) best_score = score, best = t;
        }
        // The new rows' values count for the witnesses still to come (a chain of joins).
        for (const auto& [table, id] : *best) {
          auto it = row_cache_->find({table_name(table), id});
          if (it == row_cache_->end()) continue;
          for (const auto& v : it->second) add_value(v);
        }
        chosen.insert(*best);
        for (const auto& [table, id] : *best) rows[table_name(table)].insert(id);
      }
    }
    auto instance = fetch(rows);
    if (!instance.is_ok()) return instance.status();
    auto mem = MemoryDatabase::create(*schema_, *instance);
    if (!mem.is_ok()) return mem.status();
    auto ra = (*mem)->run(a.sql, options_.query_timeout_s);
    auto rb = (*mem)->run(b.sql, options_.query_timeout_s);
    if (!ra.is_ok() || !rb.is_ok()) {
      last_error = (!ra.is_ok() ? ra.status() : rb.status()).message();
      continue;
    }
    if (db::relaxed_equal(*ra, *rb)) continue;
    out.found = true;
    out.instance = std::move(*instance);
    out.answer_a = std::move(*ra);
    out.answer_b = std::move(*rb);
    return out;
  }
  out.failure = "no separating instance in " + std::to_string(out.attempts) + " attempts" +
                (last_error.empty() ? "" : " (last error on D′: " + last_error + ")");
  return out;
}

std::pair<int, int> sample_sizes(const std::string& sql_a, const std::string& sql_b) {
  const std::string both = sql_a + "\n" + sql_b;
  auto has = [&](const char* word) { return core::mentions_identifier(both, word); };
  if (has("sum") && has("case") && has("when")) return {3, 4};
  if (has("count")) return {1, 2};
  return {1, 1};
}

// ---- answers ----

std::string render_answer_rows(const db::ResultSet& result) {
  if (result.rows.empty()) return "(no rows)";
  std::string out;
  for (const auto& row : result.rows) {
    json r = json::array();
    for (const auto& v : row) r.push_back(value_json<json>(v));
    if (!out.empty()) out += "\n";
    out += r.dump(-1, ' ', false, json::error_handler_t::replace);
  }
  return out;
}

Result<db::ResultSet> parse_answer_rows(const std::string& answer) {
  // Rows written while thinking are drafts: only the answer part is read.
  const std::string text = llm::split_reasoning(answer).answer;
  std::string body = text;
  size_t close = text.rfind("```");
  if (close != std::string::npos && close > 0) {
    size_t open = text.rfind("```", close - 1);
    if (open != std::string::npos) {
      size_t nl = text.find('\n', open);
      if (nl != std::string::npos && nl < close) body = text.substr(nl + 1, close - nl - 1);
    }
  }
  body = trim(body);
  db::ResultSet out;
  std::string low = lower(body);
  if (body.empty() || low == "(no rows)" || low == "[]" || low == "no rows") return out;
  auto add_row = [&](const json& j) {
    db::Row row;
    if (j.is_array()) {
      for (const auto& v : j) row.push_back(json_value(v));
    } else {
      row.push_back(json_value(j));
    }
    out.rows.push_back(std::move(row));
  };
  json whole = json::parse(body, nullptr, false);
  if (!whole.is_discarded()) {
    if (whole.is_array() && !whole.empty() &&
        std::all_of(whole.begin(), whole.end(), [](const json& x) { return x.is_array(); })) {
      for (const auto& r : whole) add_row(r);
    } else {
      add_row(whole);
    }
    return out;
  }
  std::stringstream ss(body);
  std::string line;
  while (std::getline(ss, line)) {
    line = trim(line);
    while (!line.empty() && line.back() == ',') line.pop_back();
    if (line.empty() || line == "[" || line == "]") continue;
    json j = json::parse(line, nullptr, false);
    if (j.is_discarded()) return invalid_input("answer line is not JSON: " + line.substr(0, 80));
    add_row(j);
  }
  return out;
}

namespace {
db::ResultSet normalize_answer(const db::ResultSet& in) {
  db::ResultSet out;
  out.columns = in.columns;
  for (const auto& row : in.rows) {
    db::Row r;
    for (db::Value v : row) {
      if (v.type == db::ValueType::kText) {
        std::string t = trim(v.s);
        char* end = nullptr;
        double d = t.empty() ? 0 : std::strtod(t.c_str(), &end);
        if (!t.empty() && end && *end == '\0' && std::isfinite(d)) v = db::Value::real(d);
        else v = db::Value::text(t);
      }
      if (v.type == db::ValueType::kReal) {
        double d = std::round(v.r * 1e4) / 1e4;
        v = (std::fabs(d) < 9e15 && d == std::floor(d)) ? db::Value::integer(static_cast<int64_t>(d))
                                                          : db::Value::real(d);
      }
      r.push_back(std::move(v));
    }
    out.rows.push_back(std::move(r));
  }
  return out;
}
}  // namespace

bool answers_match(const db::ResultSet& model_answer, const db::ResultSet& query_answer) {
  return db::relaxed_equal(normalize_answer(model_answer), normalize_answer(query_answer));
}

}  // namespace nl2sql::select
