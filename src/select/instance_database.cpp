// D′ itself: the chosen rows as tables (InstanceTables), the in-memory SQLite database that
// holds them and runs read-only queries with a deadline (MemoryDatabase), and the answer format
// shown to (and parsed from) the model. The search for D′ is in separating_instance.cpp.
#include <sqlite3.h>

#include <algorithm>
#include <chrono>
#include <cmath>

#include "nl2sql/core/text.h"
#include "nl2sql/db/result_compare.h"
#include "nl2sql/db/writable_lock_down.h"
#include "nl2sql/llm/answer.h"
#include "nl2sql/select/separating_instance.h"

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
    if (rows_before_shrink > instance.rows()) j["rows_before_shrink"] = rows_before_shrink;
    if (on_sample) j["on_sample"] = true;
    j["instance"] = instance.to_json();
    j["answer_a"] = render_answer_rows(answer_a);
    j["answer_b"] = render_answer_rows(answer_b);
  } else {
    j["failure"] = failure;
    if (too_large) j["too_large_rows"] = too_large_rows;
    if (timed_out) j["timed_out"] = true;
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
  // Candidates run on D′ get the executor's rights and no more: its authorizer refuses every
  // write, PRAGMA, ATTACH and transaction (VACUUM INTO and ATTACH are "read-only" to
  // sqlite3_stmt_readonly, so that check alone would not do) — lifted only while reload writes
  // the rows.
  mem->writes_open_ = true;
  db::lock_down_read_only(mem->db_, &mem->writes_open_);
  NL2SQL_RETURN_IF_ERROR(mem->exec("BEGIN"));
  for (const auto& t : schema.tables) {
    if (t.is_view || t.create_sql.empty()) continue;
    NL2SQL_RETURN_IF_ERROR(mem->exec(t.create_sql));
  }
  for (const auto& t : schema.tables)  // views last: they may read any table
    if (t.is_view && !t.create_sql.empty()) (void)mem->exec(t.create_sql);
  NL2SQL_RETURN_IF_ERROR(mem->exec("COMMIT"));
  mem->has_sequence_ = mem->exec("SELECT 1 FROM sqlite_sequence").is_ok();
  mem->writes_open_ = false;
  NL2SQL_RETURN_IF_ERROR(mem->reload(rows));
  return mem;
}

MemoryDatabase::~MemoryDatabase() {
  for (auto& [sql, st] : prepared_) sqlite3_finalize(st);
  if (db_) sqlite3_close_v2(db_);
}

Status MemoryDatabase::exec(const std::string& sql) {
  char* err = nullptr;
  if (sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &err) != SQLITE_OK) {
    std::string msg = err ? err : "error";
    sqlite3_free(err);
    return Status(ErrorCode::kSql, "in-memory instance: " + msg + " in: " + sql.substr(0, 160));
  }
  return Status::ok();
}

Status MemoryDatabase::reload(const InstanceTables& rows) {
  // From the end of reload on, the copy is read-only, like every database a candidate sees: the
  // authorizer refuses every write, PRAGMA and ATTACH in a statement prepared while the flag is
  // down, and run() takes only statements sqlite3_stmt_readonly calls read-only. PRAGMA
  // query_only is not toggled around the refill: setting it expires every prepared statement,
  // and the search runs the same two queries after every refill.
  writes_open_ = true;
  struct Close {
    MemoryDatabase* m;
    ~Close() { m->writes_open_ = false; }
  } close{this};
  NL2SQL_RETURN_IF_ERROR(exec("BEGIN"));
  // Emptied whole (SQLite's truncation): the next rowids start again at 1, as in a new database.
  // filled_ stays a superset of the tables holding rows until the new rows are committed.
  for (const auto& name : filled_) NL2SQL_RETURN_IF_ERROR(exec("DELETE FROM " + core::quote_sql_identifier(name)));
  std::set<std::string> filled;
  if (has_sequence_) NL2SQL_RETURN_IF_ERROR(exec("DELETE FROM sqlite_sequence"));
  for (const auto& [name, rs] : rows.tables) {
    if (rs.rows.empty()) continue;
    std::string sql = "INSERT INTO " + core::quote_sql_identifier(name) + " (";
    for (size_t c = 0; c < rs.columns.size(); ++c) sql += (c ? ", " : "") + core::quote_sql_identifier(rs.columns[c]);
    sql += ") VALUES (";
    for (size_t c = 0; c < rs.columns.size(); ++c) sql += c ? ", ?" : "?";
    sql += ")";
    sqlite3_stmt* st = nullptr;
    if (sqlite3_prepare_v2(db_, sql.c_str(), -1, &st, nullptr) != SQLITE_OK) {
      std::string msg = sqlite3_errmsg(db_);
      (void)exec("ROLLBACK");
      return Status(ErrorCode::kSql, "in-memory instance: " + msg);
    }
    filled_.insert(name);
    filled.insert(name);
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
        std::string msg = sqlite3_errmsg(db_);
        sqlite3_finalize(st);
        (void)exec("ROLLBACK");
        return Status(ErrorCode::kSql, "in-memory instance: inserting into " + name + ": " + msg);
      }
    }
    sqlite3_finalize(st);
  }
  NL2SQL_RETURN_IF_ERROR(exec("COMMIT"));
  filled_ = std::move(filled);
  return Status::ok();
}

Result<db::ResultSet> MemoryDatabase::run(const std::string& sql, double timeout_s) const {
  // The statement prepared for the same text before, if any (the schema never changes, so it
  // stays valid); reset, it runs as a new one would.
  sqlite3_stmt* st = nullptr;
  for (auto it = prepared_.begin(); it != prepared_.end(); ++it)
    if (it->first == sql) {
      st = it->second;
      prepared_.erase(it);
      break;
    }
  if (!st) {
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
  sqlite3_reset(st);
  // Kept for the next run of the same text; the oldest goes past a few (a search runs two).
  constexpr size_t kKept = 4;
  prepared_.emplace_back(sql, st);
  if (prepared_.size() > kKept) {
    sqlite3_finalize(prepared_.front().second);
    prepared_.erase(prepared_.begin());
  }
  if (rc == SQLITE_INTERRUPT) return Status(ErrorCode::kTimeout, "query on the instance timed out");
  if (rc != SQLITE_DONE) return Status(ErrorCode::kSql, err);
  return out;
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
