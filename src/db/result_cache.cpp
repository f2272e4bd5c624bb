#include "nl2sql/db/result_cache.h"

#include <sqlite3.h>

#include <cstdlib>
#include <cstring>

#include "nl2sql/core/hash.h"
#include "nl2sql/db/sqlite_setup.h"

namespace nl2sql::db {
namespace {

constexpr uint32_t kFormatVersion = 2;
constexpr size_t kMaxStoredBytes = 64u << 20;  // results larger than this are not cached

void put_u64(std::string& out, uint64_t v) { out.append(reinterpret_cast<const char*>(&v), 8); }
void put_str(std::string& out, std::string_view s) {
  put_u64(out, s.size());
  out.append(s);
}

struct Reader {
  std::string_view in;
  size_t pos = 0;
  bool ok = true;
  uint64_t u64() {
    if (pos + 8 > in.size()) { ok = false; return 0; }
    uint64_t v;
    std::memcpy(&v, in.data() + pos, 8);
    pos += 8;
    return v;
  }
  uint8_t u8() {
    if (pos + 1 > in.size()) { ok = false; return 0; }
    return static_cast<uint8_t>(in[pos++]);
  }
  std::string str() {
    uint64_t n = u64();
    if (!ok || pos + n > in.size()) { ok = false; return {}; }
    std::string s(in.substr(pos, n));
    pos += n;
    return s;
  }
};

}  // namespace

std::filesystem::path default_cache_dir() {
  if (const char* d = std::getenv("NL2SQL_CACHE_DIR"); d && *d) return d;
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x)
    return std::filesystem::path(x) / "nl2sql";
  if (const char* h = std::getenv("HOME"); h && *h)
    return std::filesystem::path(h) / ".cache" / "nl2sql";
  return std::filesystem::path(".cache") / "nl2sql";
}

std::string ResultCache::key(const std::string& db_fingerprint, std::string_view sql,
                             std::string_view variant) {
  // The row cap is not part of the key: get() applies the caller's cap to a stored result.
  core::KeyHasher h;
  h.add(db_fingerprint).add(sql).add(variant);
  return h.hex();
}

std::string ResultCache::serialize(const CachedExecution& e) {
  std::string out;
  put_u64(out, kFormatVersion);
  out.push_back(static_cast<char>(e.result.status));
  out.push_back(static_cast<char>((e.tie_dependent ? 1 : 0) | (e.tie_checked ? 2 : 0)));
  put_str(out, e.result.error);
  put_u64(out, static_cast<uint64_t>(e.result.elapsed_ms * 1000));
  put_u64(out, e.row_cap);
  put_u64(out, e.result.result.columns.size());
  for (const auto& c : e.result.result.columns) put_str(out, c);
  put_u64(out, e.result.result.rows.size());
  for (const auto& row : e.result.result.rows) {
    for (const auto& v : row) {
      out.push_back(static_cast<char>(v.type));
      switch (v.type) {
        case ValueType::kNull: break;
        case ValueType::kInteger: put_u64(out, static_cast<uint64_t>(v.i)); break;
        case ValueType::kReal: {
          uint64_t bits;
          std::memcpy(&bits, &v.r, 8);
          put_u64(out, bits);
          break;
        }
        case ValueType::kText:
        case ValueType::kBlob: put_str(out, v.s); break;
      }
    }
  }
  return out;
}

std::optional<CachedExecution> ResultCache::deserialize(std::string_view bytes) {
  Reader r{bytes};
  if (r.u64() != kFormatVersion || !r.ok) return std::nullopt;
  CachedExecution e;
  uint8_t st = r.u8();
  if (st > static_cast<uint8_t>(ExecStatus::kRejected)) return std::nullopt;
  e.result.status = static_cast<ExecStatus>(st);
  uint8_t flags = r.u8();
  e.tie_dependent = flags & 1;
  e.tie_checked = flags & 2;
  e.result.error = r.str();
  e.result.elapsed_ms = static_cast<double>(r.u64()) / 1000.0;
  e.row_cap = r.u64();
  uint64_t ncols = r.u64();
  if (!r.ok || ncols > (1u << 20)) return std::nullopt;
  for (uint64_t c = 0; c < ncols; ++c) e.result.result.columns.push_back(r.str());
  uint64_t nrows = r.u64();
  // Every row of at least one column takes a byte or more: a corrupt count cannot make the
  // loop below allocate rows that the blob does not hold (zero-column rows take none).
  if (!r.ok || nrows > bytes.size() || (ncols == 0 && nrows != 0)) return std::nullopt;
  e.result.result.rows.reserve(std::min<uint64_t>(nrows, 1u << 20));
  for (uint64_t i = 0; i < nrows && r.ok; ++i) {
    Row row;
    row.reserve(ncols);
    for (uint64_t c = 0; c < ncols && r.ok; ++c) {
      Value v;
      v.type = static_cast<ValueType>(r.u8());
      switch (v.type) {
        case ValueType::kNull: break;
        case ValueType::kInteger: v.i = static_cast<int64_t>(r.u64()); break;
        case ValueType::kReal: {
          uint64_t bits = r.u64();
          std::memcpy(&v.r, &bits, 8);
          break;
        }
        case ValueType::kText:
        case ValueType::kBlob: v.s = r.str(); break;
        default: r.ok = false;
      }
      row.push_back(std::move(v));
    }
    e.result.result.rows.push_back(std::move(row));
  }
  if (!r.ok || r.pos != bytes.size()) return std::nullopt;
  return e;
}

Result<std::unique_ptr<ResultCache>> ResultCache::open(const std::filesystem::path& file) {
  std::error_code ec;
  std::filesystem::create_directories(file.parent_path(), ec);
  sqlite3* db = nullptr;
  if (sqlite3_open_v2(file.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX,
                      nullptr) != SQLITE_OK) {
    std::string msg = db ? sqlite3_errmsg(db) : "cannot open";
    sqlite3_close_v2(db);
    return io_error("result cache " + file.string() + ": " + msg);
  }
  sqlite3_busy_timeout(db, 10000);
  std::string msg;
  int rc = exec_setup(db,
                      "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;"
                      "CREATE TABLE IF NOT EXISTS results(key TEXT PRIMARY KEY, value BLOB NOT NULL,"
                      " created REAL DEFAULT (julianday('now')));",
                      msg);
  if (rc != SQLITE_OK) {
    sqlite3_close_v2(db);
    // A damaged or foreign file is bad input (exit 2), not an internal failure.
    if (rc == SQLITE_NOTADB || rc == SQLITE_CORRUPT)
      return invalid_input("result cache " + file.string() + ": " + msg +
                           " (delete the file to start an empty cache)");
    return io_error("result cache " + file.string() + ": " + msg);
  }
  return std::unique_ptr<ResultCache>(new ResultCache(db));
}

ResultCache::~ResultCache() {
  flush();
  sqlite3_finalize(get_stmt_);
  sqlite3_close_v2(db_);
}

std::optional<CachedExecution> ResultCache::get(const std::string& key, size_t row_cap) {
  std::lock_guard lock(mu_);
  std::string blob;
  if (auto it = pending_.find(key); it != pending_.end()) {
    blob = it->second;
  } else {
    if (!get_stmt_ &&
        sqlite3_prepare_v3(db_, "SELECT value FROM results WHERE key=?", -1,
                           SQLITE_PREPARE_PERSISTENT, &get_stmt_, nullptr) != SQLITE_OK) {
      ++misses_;
      return std::nullopt;
    }
    sqlite3_stmt* st = get_stmt_;
    sqlite3_bind_text(st, 1, key.data(), static_cast<int>(key.size()), SQLITE_STATIC);
    if (sqlite3_step(st) == SQLITE_ROW) {
      const void* p = sqlite3_column_blob(st, 0);
      blob.assign(static_cast<const char*>(p), static_cast<size_t>(sqlite3_column_bytes(st, 0)));
    }
    sqlite3_reset(st);
    sqlite3_clear_bindings(st);
  }
  if (blob.empty()) {
    ++misses_;
    return std::nullopt;
  }
  auto decoded = deserialize(blob);
  if (!decoded) {
    ++misses_;
    return std::nullopt;
  }
  CachedExecution e = std::move(*decoded);
  if (e.result.status == ExecStatus::kRowCap && (row_cap == 0 || row_cap > e.row_cap)) {
    ++misses_;  // ran under a lower cap: the answer under this cap is unknown
    return std::nullopt;
  }
  if (e.result.ok() && row_cap > 0 && e.result.result.rows.size() > row_cap) {
    e.result.status = ExecStatus::kRowCap;
    e.result.error = "result has more than " + std::to_string(row_cap) + " rows";
    e.result.result.rows.clear();
    e.row_cap = row_cap;
  }
  ++hits_;
  return e;
}

void ResultCache::put(const std::string& key, const CachedExecution& value) {
  if (value.result.status == ExecStatus::kTimeout) return;
  // A hashed answer keeps only its first rows: storing them would read back as the answer.
  if (value.result.digest) return;
  std::string blob = serialize(value);
  if (blob.size() > kMaxStoredBytes) return;
  std::lock_guard lock(mu_);
  pending_[key] = std::move(blob);
  if (pending_.size() >= 256) flush_locked();
}

void ResultCache::flush() {
  std::lock_guard lock(mu_);
  flush_locked();
}

void ResultCache::flush_locked() {
  if (pending_.empty()) return;
  sqlite3_exec(db_, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr);
  sqlite3_stmt* st = nullptr;
  sqlite3_prepare_v2(db_, "INSERT OR REPLACE INTO results(key, value) VALUES(?, ?)", -1, &st, nullptr);
  for (const auto& [k, v] : pending_) {
    sqlite3_bind_text(st, 1, k.data(), static_cast<int>(k.size()), SQLITE_STATIC);
    sqlite3_bind_blob(st, 2, v.data(), static_cast<int>(v.size()), SQLITE_STATIC);
    sqlite3_step(st);
    sqlite3_reset(st);
  }
  sqlite3_finalize(st);
  sqlite3_exec(db_, "COMMIT", nullptr, nullptr, nullptr);
  pending_.clear();
}

}  // namespace nl2sql::db
