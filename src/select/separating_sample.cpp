// The sample of a large D that the separating-instance search works on first (see "Large
// databases" in separating_instance.h): which rows it keeps, the temporary file holding them,
// and the process-wide cache that makes it once per database file.
#include <sqlite3.h>
#include <stdlib.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <list>
#include <mutex>

#include "nl2sql/core/text.h"
#include "nl2sql/select/separating_instance.h"

namespace nl2sql::select {
namespace {

constexpr std::string_view kSamplePrefix = "nl2sql-sample-";

// The temporary file; removed with its last holder.
struct SampleFile {
  std::filesystem::path path;
  SampleFile() = default;
  SampleFile(const SampleFile&) = delete;
  SampleFile& operator=(const SampleFile&) = delete;
  ~SampleFile() {
    std::error_code ec;
    std::filesystem::remove(path, ec);
  }
};

// Samples of the databases this process used lately, by (file, size, mtime, sample_rows): the
// selector opens a builder per question, and a sample costs a scan of every large table. A few
// are kept (each a few MB); the oldest goes first.
struct SampleCache {
  static constexpr size_t kKept = 4;
  std::mutex mu;
  std::list<std::pair<std::string, std::shared_ptr<const SampleFile>>> files;  // newest first
  std::set<std::string> small;  // databases with no table over sample_rows: no sample
};
SampleCache& sample_cache() {
  static SampleCache cache;
  return cache;
}

std::string cache_key(const std::filesystem::path& db, int64_t sample_rows) {
  struct stat st {};
  const std::string path = std::filesystem::absolute(db).string();
  if (::stat(path.c_str(), &st) != 0) return {};
  return path + '\n' + std::to_string(st.st_size) + '\n' + std::to_string(st.st_mtim.tv_sec) + '.' +
         std::to_string(st.st_mtim.tv_nsec) + '\n' + std::to_string(sample_rows);
}

// The column whose hash decides which rows of a large table are kept: its foreign key to another
// large table, else the column a large table's foreign key refers to, else its rowid. Rows
// joined along such a key then hash alike and are kept (or dropped) together.
std::string sample_key(const sql::TableInfo& t, const sql::Schema& schema, const std::set<std::string>& large) {
  for (const auto& fk : t.foreign_keys)
    if (large.count(core::lower(fk.to_table)) && !core::iequals(fk.to_table, t.name))
      return core::quote_sql_identifier(fk.from_column);
  for (const auto& other : schema.tables) {
    if (!large.count(core::lower(other.name)) || core::iequals(other.name, t.name)) continue;
    for (const auto& fk : other.foreign_keys) {
      if (!core::iequals(fk.to_table, t.name)) continue;
      if (!fk.to_column.empty()) return core::quote_sql_identifier(fk.to_column);
      const auto pk = t.primary_key();
      if (pk.size() == 1) return core::quote_sql_identifier(pk[0]);
    }
  }
  return "rowid";
}

// Runs `sql` on the sample's own (writing) connection.
Status exec(sqlite3* db, const std::string& sql) {
  char* err = nullptr;
  if (sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err) != SQLITE_OK) {
    std::string msg = err ? err : "error";
    sqlite3_free(err);
    return Status(ErrorCode::kSql, "sample of D: " + msg + " in: " + sql.substr(0, 160));
  }
  return Status::ok();
}

void bind(sqlite3_stmt* st, int k, const db::Value& v) {
  switch (v.type) {
    case db::ValueType::kNull: sqlite3_bind_null(st, k); break;
    case db::ValueType::kInteger: sqlite3_bind_int64(st, k, v.i); break;
    case db::ValueType::kReal: sqlite3_bind_double(st, k, v.r); break;
    case db::ValueType::kText: sqlite3_bind_text(st, k, v.s.data(), static_cast<int>(v.s.size()), SQLITE_TRANSIENT); break;
    case db::ValueType::kBlob: sqlite3_bind_blob(st, k, v.s.data(), static_cast<int>(v.s.size()), SQLITE_TRANSIENT); break;
  }
}

// Copies the rows of `t` that `where` keeps (all when empty) from D into the sample, rowids
// included.
Status copy_rows(sqlite3* out, const sql::TableInfo& t, const std::string& where, const std::filesystem::path& d,
                 const db::Executor& executor) {
  const std::string name = core::quote_sql_identifier(t.name);
  // An INTEGER PRIMARY KEY column is the rowid; other rowid tables get theirs explicitly.
  const bool explicit_rowid = !t.without_rowid && t.rowid_alias < 0;
  std::string cols, marks;
  if (explicit_rowid) cols = "rowid", marks = "?";
  for (const auto& c : t.columns) {
    cols += (cols.empty() ? "" : ", ") + core::quote_sql_identifier(c.name);
    marks += marks.empty() ? "?" : ", ?";
  }
  sqlite3_stmt* st = nullptr;
  const std::string insert = "INSERT INTO " + name + " (" + cols + ") VALUES (" + marks + ")";
  if (sqlite3_prepare_v2(out, insert.c_str(), -1, &st, nullptr) != SQLITE_OK)
    return Status(ErrorCode::kSql, "sample of D: " + std::string(sqlite3_errmsg(out)));
  Status failed = Status::ok();
  db::QueryLimits limits = executor.options().limits;
  limits.row_cap = 0;
  const std::string select = std::string("SELECT ") + (explicit_rowid ? "rowid, " : "") + "* FROM " + name +
                             (where.empty() ? "" : " WHERE " + where);
  auto r = executor.run(d, select, limits, [&](const db::Row& row) {
    if (!failed.is_ok()) return;
    for (size_t k = 0; k < row.size(); ++k) bind(st, static_cast<int>(k) + 1, row[k]);
    if (sqlite3_step(st) != SQLITE_DONE) failed = Status(ErrorCode::kSql, "sample of D: " + std::string(sqlite3_errmsg(out)));
    sqlite3_reset(st);
  });
  sqlite3_finalize(st);
  if (!r.ok()) return Status(ErrorCode::kSql, "sample of D, reading " + t.name + ": " + r.error);
  return failed;
}

// Writes the sample of `d` into a new temporary file; null when no table is over sample_rows.
Result<std::shared_ptr<const SampleFile>> make_sample(const std::filesystem::path& d, const db::Executor& executor,
                                                      const sql::Schema& schema, int64_t sample_rows) {
  std::map<std::string, int64_t> rows;  // lower-case name → rows
  int64_t largest = 0;
  for (const auto& t : schema.tables) {
    if (t.is_view) continue;
    auto n = executor.run(d, "SELECT count(*) FROM " + core::quote_sql_identifier(t.name));
    if (!n.ok() || n.result.rows.empty() || n.result.rows[0].empty())
      return Status(ErrorCode::kSql, "sample of D: counting " + t.name + ": " + n.error);
    rows[core::lower(t.name)] = n.result.rows[0][0].i;
    largest = std::max(largest, n.result.rows[0][0].i);
  }
  if (largest <= sample_rows) return std::shared_ptr<const SampleFile>();
  std::set<std::string> large;
  for (const auto& [name, n] : rows)
    if (n > sample_rows) large.insert(name);
  const int64_t buckets = (largest + sample_rows - 1) / sample_rows;

  static std::once_flag swept;
  std::call_once(swept, [] {
    std::error_code ec;
    const auto dir = std::filesystem::temp_directory_path(ec);
    if (!ec) remove_orphaned_samples(dir);
  });
  auto file = std::make_shared<SampleFile>();
  std::string templ = (std::filesystem::temp_directory_path() /
                       (std::string(kSamplePrefix) + std::to_string(::getpid()) + "-XXXXXX"))
                          .string();
  const int fd = ::mkstemp(templ.data());
  if (fd < 0) return io_error("sample of D: cannot create a temporary file in " + std::filesystem::temp_directory_path().string());
  ::close(fd);
  file->path = templ;
  sqlite3* out = nullptr;
  if (sqlite3_open_v2(templ.c_str(), &out, SQLITE_OPEN_READWRITE, nullptr) != SQLITE_OK) {
    sqlite3_close_v2(out);
    return io_error("sample of D: cannot open " + templ);
  }
  struct Close {
    sqlite3* db;
    ~Close() { sqlite3_close_v2(db); }
  } close{out};
  sqlite3_db_config(out, SQLITE_DBCONFIG_ENABLE_LOAD_EXTENSION, 0, nullptr);
  NL2SQL_RETURN_IF_ERROR(exec(out, "PRAGMA journal_mode = OFF"));
  NL2SQL_RETURN_IF_ERROR(exec(out, "PRAGMA synchronous = OFF"));
  NL2SQL_RETURN_IF_ERROR(exec(out, "BEGIN"));
  for (const auto& t : schema.tables)
    if (!t.is_view && !t.create_sql.empty()) NL2SQL_RETURN_IF_ERROR(exec(out, t.create_sql));
  for (const auto& t : schema.tables) {
    if (t.is_view || t.create_sql.empty()) continue;
    std::string where;
    if (large.count(core::lower(t.name)))
      where = "nl2sql_hash(" + sample_key(t, schema, large) + ") % " + std::to_string(buckets) + " = 0";
    NL2SQL_RETURN_IF_ERROR(copy_rows(out, t, where, d, executor));
  }
  for (const auto& t : schema.tables)  // views last: they may read any table
    if (t.is_view && !t.create_sql.empty()) (void)exec(out, t.create_sql);
  NL2SQL_RETURN_IF_ERROR(exec(out, "COMMIT"));
  return std::shared_ptr<const SampleFile>(std::move(file));
}

}  // namespace

int remove_orphaned_samples(const std::filesystem::path& dir) {
  int removed = 0;
  std::error_code ec;
  for (std::filesystem::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.rfind(kSamplePrefix, 0) != 0) continue;
    const size_t dash = name.find('-', kSamplePrefix.size());
    if (dash == std::string::npos || dash == kSamplePrefix.size()) continue;
    const std::string pid_text = name.substr(kSamplePrefix.size(), dash - kSamplePrefix.size());
    if (pid_text.find_first_not_of("0123456789") != std::string::npos || pid_text.size() > 9) continue;
    const pid_t pid = static_cast<pid_t>(std::stol(pid_text));
    // ESRCH: no such process. EPERM means it lives (under another user): keep its file.
    if (pid <= 0 || ::kill(pid, 0) == 0 || errno != ESRCH) continue;
    std::error_code rm;
    if (std::filesystem::remove(it->path(), rm)) ++removed;
  }
  return removed;
}

Result<std::shared_ptr<const InstanceBuilder>> InstanceBuilder::sample_builder() const {
  if (sample_->known) return sample_->builder;
  sample_->known = true;  // one try per builder: a failure means D itself
  if (options_.sample_rows <= 0) return std::shared_ptr<const InstanceBuilder>();
  std::shared_ptr<const SampleFile> file;
  const std::string key = cache_key(db_path_, options_.sample_rows);
  {
    SampleCache& cache = sample_cache();
    std::lock_guard lock(cache.mu);
    auto it = std::find_if(cache.files.begin(), cache.files.end(), [&](const auto& e) { return e.first == key; });
    if (cache.small.count(key)) {
      return std::shared_ptr<const InstanceBuilder>();
    } else if (it != cache.files.end()) {
      file = it->second;
      cache.files.splice(cache.files.begin(), cache.files, it);
    } else {
      // Made under the lock: builders of other questions on the same database wait for it.
      auto made = make_sample(db_path_, *executor_, *schema_, options_.sample_rows);
      if (!made.is_ok()) return made.status();
      file = *made;
      if (!key.empty() && !file) {
        cache.small.insert(key);
      } else if (!key.empty()) {
        cache.files.emplace_front(key, file);
        if (cache.files.size() > SampleCache::kKept) cache.files.pop_back();
      }
    }
  }
  if (!file) return std::shared_ptr<const InstanceBuilder>();  // D is small
  InstanceOptions o = options_;
  o.sample_rows = 0;
  auto b = InstanceBuilder::open(file->path, *executor_, o);
  if (!b.is_ok()) return b.status();
  sample_->file = file;
  sample_->builder = std::make_shared<const InstanceBuilder>(std::move(*b));
  return sample_->builder;
}

Status InstanceBuilder::prepare_sample() const {
  auto b = sample_builder();
  return b.is_ok() ? Status::ok() : b.status();
}

}  // namespace nl2sql::select
