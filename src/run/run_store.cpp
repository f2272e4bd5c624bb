#include "nl2sql/run/run_store.h"

#include <sqlite3.h>

#include <chrono>

#include "nl2sql/core/files.h"
#include "nl2sql/core/thread_pool.h"
#include "nl2sql/db/sqlite_setup.h"

namespace nl2sql::run {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr int kStoreVersion = 1;

const char* kSchema = R"sql(
CREATE TABLE IF NOT EXISTS stages(
  question_id TEXT NOT NULL,
  idx INTEGER NOT NULL,
  stage TEXT NOT NULL,
  status TEXT NOT NULL,
  payload TEXT NOT NULL,
  updated_at REAL NOT NULL,
  PRIMARY KEY(question_id, stage));
CREATE INDEX IF NOT EXISTS stages_by_stage ON stages(stage, idx);
CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
)sql";

double now_s() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// A prepared statement finalized on scope exit.
class Stmt {
 public:
  Stmt(sqlite3* db, const char* sql) : db_(db) { rc_ = sqlite3_prepare_v2(db, sql, -1, &s_, nullptr); }
  ~Stmt() { sqlite3_finalize(s_); }
  Stmt(const Stmt&) = delete;
  Stmt& operator=(const Stmt&) = delete;
  bool ok() const { return rc_ == SQLITE_OK; }
  Status error(const std::string& what) const {
    return {ErrorCode::kIo, "run store: " + what + ": " + sqlite3_errmsg(db_)};
  }
  void bind(int i, const std::string& v) { sqlite3_bind_text(s_, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT); }
  void bind(int i, int64_t v) { sqlite3_bind_int64(s_, i, v); }
  void bind(int i, double v) { sqlite3_bind_double(s_, i, v); }
  int step() { return sqlite3_step(s_); }
  void reset() {
    sqlite3_reset(s_);
    sqlite3_clear_bindings(s_);
  }
  std::string text(int col) const {
    const unsigned char* t = sqlite3_column_text(s_, col);
    return t ? std::string(reinterpret_cast<const char*>(t), sqlite3_column_bytes(s_, col)) : std::string();
  }
  int64_t int64(int col) const { return sqlite3_column_int64(s_, col); }
  double real(int col) const { return sqlite3_column_double(s_, col); }

 private:
  sqlite3* db_;
  sqlite3_stmt* s_ = nullptr;
  int rc_;
};

Result<json> parse_payload(const std::string& text, const std::string& where) {
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return Status(ErrorCode::kIo, "run store: payload of " + where + " is not JSON");
  return j;
}

constexpr const char* kRowColumns = "question_id, idx, stage, status, payload, updated_at";

Result<StageRow> read_row(const Stmt& s) {
  StageRow r;
  r.question_id = s.text(0);
  r.index = s.int64(1);
  r.stage = s.text(2);
  r.status = s.text(3);
  auto p = parse_payload(s.text(4), r.question_id + "/" + r.stage);
  if (!p) return p.status();
  r.payload = std::move(*p);
  r.updated_at = s.real(5);
  return r;
}

}  // namespace

Result<std::unique_ptr<RunStore>> RunStore::open(const fs::path& dir, bool create) {
  fs::path file = dir / kFileName;
  std::error_code ec;
  if (!create && !fs::exists(file, ec)) return not_found("no run store at " + file.string());
  if (create) {
    fs::create_directories(dir, ec);
    if (ec) return io_error("cannot create run folder " + dir.string() + ": " + ec.message());
  }
  sqlite3* db = nullptr;
  int flags = SQLITE_OPEN_READWRITE | (create ? SQLITE_OPEN_CREATE : 0) | SQLITE_OPEN_NOMUTEX;
  if (sqlite3_open_v2(file.string().c_str(), &db, flags, nullptr) != SQLITE_OK) {
    std::string msg = db ? sqlite3_errmsg(db) : "out of memory";
    sqlite3_close(db);
    return io_error("cannot open run store " + file.string() + ": " + msg);
  }
  std::unique_ptr<RunStore> store(new RunStore(dir, db));
  sqlite3_busy_timeout(db, 10000);
  // FULL: a committed row survives a power cut, not only a killed process.
  for (const char* pragma : {"PRAGMA journal_mode=WAL", "PRAGMA synchronous=FULL", kSchema})
    NL2SQL_RETURN_IF_ERROR(store->exec(pragma).with_context(file.string()));
  auto version = store->get_meta("store_version");
  if (!version) return version.status();
  if (!*version) {
    NL2SQL_RETURN_IF_ERROR(store->set_meta("store_version", kStoreVersion));
  } else if (**version != kStoreVersion) {
    return invalid_input(file.string() + ": run store version " + (*version)->dump() +
                         ", this nl2sql reads version " + std::to_string(kStoreVersion));
  }
  return store;
}

RunStore::~RunStore() { sqlite3_close(db_); }

Status RunStore::exec(const char* sql) const {
  std::string msg;
  if (db::exec_setup(db_, sql, msg) != SQLITE_OK) return io_error("run store: " + msg);
  return Status::ok();
}

Status RunStore::put_stage(const std::string& question_id, int64_t index, const std::string& stage,
                           const std::string& status, const json& payload) {
  return put_rows({StageRow{question_id, index, stage, status, payload, 0}});
}

Status RunStore::put_rows(const std::vector<StageRow>& rows) {
  std::lock_guard lock(mu_);
  NL2SQL_RETURN_IF_ERROR(exec("BEGIN IMMEDIATE"));
  Stmt s(db_, "INSERT OR REPLACE INTO stages(question_id, idx, stage, status, payload, updated_at) "
              "VALUES(?, ?, ?, ?, ?, ?)");
  if (!s.ok()) {
    Status st = s.error("prepare insert");
    (void)exec("ROLLBACK");
    return st;
  }
  double now = now_s();
  for (const auto& r : rows) {
    s.bind(1, r.question_id);
    s.bind(2, r.index);
    s.bind(3, r.stage);
    s.bind(4, r.status);
    s.bind(5, r.payload.dump(-1, ' ', false, json::error_handler_t::replace));
    s.bind(6, r.updated_at > 0 ? r.updated_at : now);
    if (s.step() != SQLITE_DONE) {
      Status st = s.error("write " + r.question_id + "/" + r.stage);
      s.reset();
      (void)exec("ROLLBACK");
      return st;
    }
    s.reset();
  }
  return exec("COMMIT");
}

Result<std::optional<StageRow>> RunStore::get_row(const std::string& question_id,
                                                  const std::string& stage) const {
  std::lock_guard lock(mu_);
  Stmt s(db_, (std::string("SELECT ") + kRowColumns + " FROM stages WHERE question_id = ? AND stage = ?").c_str());
  if (!s.ok()) return s.error("prepare read");
  s.bind(1, question_id);
  s.bind(2, stage);
  int rc = s.step();
  if (rc == SQLITE_DONE) return std::optional<StageRow>();
  if (rc != SQLITE_ROW) return s.error("read " + question_id + "/" + stage);
  auto r = read_row(s);
  if (!r) return r.status();
  return std::optional<StageRow>(std::move(*r));
}

Result<std::optional<json>> RunStore::get_stage(const std::string& question_id,
                                                const std::string& stage) const {
  auto r = get_row(question_id, stage);
  if (!r) return r.status();
  if (!*r) return std::optional<json>();
  return std::optional<json>(std::move((*r)->payload));
}

Result<std::map<std::string, std::string>> RunStore::stages_done(const std::string& question_id) const {
  std::lock_guard lock(mu_);
  Stmt s(db_, "SELECT stage, status FROM stages WHERE question_id = ?");
  if (!s.ok()) return s.error("prepare read");
  s.bind(1, question_id);
  std::map<std::string, std::string> out;
  int rc;
  while ((rc = s.step()) == SQLITE_ROW) out[s.text(0)] = s.text(1);
  if (rc != SQLITE_DONE) return s.error("read stages of " + question_id);
  return out;
}

Result<std::vector<json>> RunStore::final_records() const {
  // Read under the lock; parsed after it, on every core (the end of a run waits for this).
  std::vector<std::pair<std::string, std::string>> rows;  // question id, payload
  {
    std::lock_guard lock(mu_);
    Stmt s(db_, "SELECT question_id, payload FROM stages WHERE stage = ? ORDER BY idx, question_id");
    if (!s.ok()) return s.error("prepare read");
    s.bind(1, std::string(kFinalStage));
    int rc;
    while ((rc = s.step()) == SQLITE_ROW) rows.emplace_back(s.text(0), s.text(1));
    if (rc != SQLITE_DONE) return s.error("read final records");
  }
  auto parsed = core::parallel_map<Result<json>>(rows.size(), core::default_threads(), [&](size_t i) {
    auto p = parse_payload(rows[i].second, rows[i].first + "/final");
    std::string().swap(rows[i].second);
    return p;
  });
  std::vector<json> out;
  out.reserve(parsed.size());
  for (auto& p : parsed) {
    if (!p) return p.status();
    out.push_back(std::move(*p));
  }
  return out;
}

Result<std::vector<StageRow>> RunStore::all_rows() const {
  std::lock_guard lock(mu_);
  Stmt s(db_, (std::string("SELECT ") + kRowColumns + " FROM stages ORDER BY idx, question_id, stage").c_str());
  if (!s.ok()) return s.error("prepare read");
  std::vector<StageRow> out;
  int rc;
  while ((rc = s.step()) == SQLITE_ROW) {
    auto r = read_row(s);
    if (!r) return r.status();
    out.push_back(std::move(*r));
  }
  if (rc != SQLITE_DONE) return s.error("read rows");
  return out;
}

Result<std::vector<std::string>> RunStore::question_ids() const {
  std::lock_guard lock(mu_);
  Stmt s(db_, "SELECT question_id FROM stages GROUP BY question_id ORDER BY MIN(idx), question_id");
  if (!s.ok()) return s.error("prepare read");
  std::vector<std::string> out;
  int rc;
  while ((rc = s.step()) == SQLITE_ROW) out.push_back(s.text(0));
  if (rc != SQLITE_DONE) return s.error("read question ids");
  return out;
}

Status RunStore::set_meta(const std::string& key, const json& value) {
  std::lock_guard lock(mu_);
  Stmt s(db_, "INSERT OR REPLACE INTO meta(key, value) VALUES(?, ?)");
  if (!s.ok()) return s.error("prepare meta write");
  s.bind(1, key);
  s.bind(2, value.dump(-1, ' ', false, json::error_handler_t::replace));
  if (s.step() != SQLITE_DONE) return s.error("write meta " + key);
  return Status::ok();
}

Result<std::optional<json>> RunStore::get_meta(const std::string& key) const {
  std::lock_guard lock(mu_);
  Stmt s(db_, "SELECT value FROM meta WHERE key = ?");
  if (!s.ok()) return s.error("prepare meta read");
  s.bind(1, key);
  int rc = s.step();
  if (rc == SQLITE_DONE) return std::optional<json>();
  if (rc != SQLITE_ROW) return s.error("read meta " + key);
  auto p = parse_payload(s.text(0), "meta " + key);
  if (!p) return p.status();
  return std::optional<json>(std::move(*p));
}

Status RunStore::save_manifest(const json& manifest) {
  NL2SQL_RETURN_IF_ERROR(set_meta("manifest", manifest));
  return core::write_file_atomic(dir_ / "manifest.json", manifest.dump(2) + "\n");
}

Result<json> RunStore::manifest() const {
  auto m = get_meta("manifest");
  if (!m) return m.status();
  if (!*m) return not_found((dir_ / kFileName).string() + ": the run store holds no manifest");
  return **m;
}

Status RunStore::save_resolved_config(const json& config) {
  NL2SQL_RETURN_IF_ERROR(set_meta("config", config));
  return core::write_file_atomic(dir_ / "config.resolved.json", config.dump(2) + "\n");
}

Result<std::string> RunStore::integrity_check() const {
  std::lock_guard lock(mu_);
  Stmt s(db_, "PRAGMA integrity_check");
  if (!s.ok()) return s.error("prepare integrity check");
  std::string out;
  int rc;
  while ((rc = s.step()) == SQLITE_ROW) out += (out.empty() ? "" : "\n") + s.text(0);
  if (rc != SQLITE_DONE) return s.error("integrity check");
  return out;
}

}  // namespace nl2sql::run
