#include "nl2sql/llm/response_cache.h"

#include <sqlite3.h>

#include <algorithm>
#include <chrono>
#include <fstream>

#include "nl2sql/core/hash.h"
#include "nl2sql/core/log.h"
#include "nl2sql/db/sqlite_setup.h"

namespace nl2sql::llm {
namespace {

using json = nlohmann::json;

sqlite3* as_db(void* p) { return static_cast<sqlite3*>(p); }
sqlite3_stmt* as_stmt(void* p) { return static_cast<sqlite3_stmt*>(p); }

int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string column_text(sqlite3_stmt* st, int i) {
  const auto* p = sqlite3_column_text(st, i);
  return p ? std::string(reinterpret_cast<const char*>(p), sqlite3_column_bytes(st, i)) : "";
}

// RAII statement for one-off queries.
class Statement {
 public:
  Statement(sqlite3* db, const char* sql) { rc_ = sqlite3_prepare_v2(db, sql, -1, &st_, nullptr); }
  ~Statement() { sqlite3_finalize(st_); }
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;
  bool ok() const { return rc_ == SQLITE_OK; }
  sqlite3_stmt* get() { return st_; }

 private:
  sqlite3_stmt* st_ = nullptr;
  int rc_;
};

// RAII reset of a cached prepared statement.
struct ResetOnExit {
  sqlite3_stmt* st;
  ~ResetOnExit() {
    sqlite3_reset(st);
    sqlite3_clear_bindings(st);
  }
};

constexpr const char* kSchema =
    "CREATE TABLE IF NOT EXISTS responses ("
    "  key TEXT PRIMARY KEY,"
    "  profile TEXT NOT NULL,"
    "  model TEXT NOT NULL,"
    "  request TEXT NOT NULL,"
    "  response TEXT NOT NULL,"
    "  prompt_tokens INTEGER NOT NULL DEFAULT 0,"
    "  completion_tokens INTEGER NOT NULL DEFAULT 0,"
    "  created_at INTEGER NOT NULL);"
    "CREATE INDEX IF NOT EXISTS responses_created ON responses(created_at);";

}  // namespace

json response_to_json(const ChatResponse& r) {
  json j = {{"choices", r.choices},
            {"finish_reasons", r.finish_reasons},
            {"usage", {{"prompt_tokens", r.usage.prompt_tokens},
                       {"completion_tokens", r.usage.completion_tokens}}}};
  // Written only when present, so entries of plain answers keep their old form.
  if (r.usage.cached_tokens) j["usage"]["cached_tokens"] = *r.usage.cached_tokens;
  if (r.usage.reasoning_tokens) j["usage"]["reasoning_tokens"] = *r.usage.reasoning_tokens;
  bool any_reasoning = false;
  for (const auto& x : r.reasoning) any_reasoning = any_reasoning || !x.empty();
  if (any_reasoning) j["reasoning"] = r.reasoning;
  bool any_fallback = false;
  for (bool b : r.answer_from_reasoning) any_fallback = any_fallback || b;
  if (any_fallback) j["answer_from_reasoning"] = r.answer_from_reasoning;
  return j;
}

Result<ChatResponse> response_from_json(const json& j) {
  if (!j.is_object() || !j.contains("choices") || !j["choices"].is_array() || j["choices"].empty())
    return invalid_input("cached response has no choices");
  ChatResponse r;
  for (const auto& c : j["choices"]) {
    if (!c.is_string()) return invalid_input("cached response: a choice is not a string");
    r.choices.push_back(c.get<std::string>());
  }
  if (j.contains("finish_reasons") && j["finish_reasons"].is_array())
    for (const auto& f : j["finish_reasons"])
      r.finish_reasons.push_back(f.is_string() ? f.get<std::string>() : "");
  if (j.contains("usage") && j["usage"].is_object()) {
    // A damaged entry must not throw (a string count) or convert out of range (1e300).
    auto tokens = [&](const char* k) -> int64_t {
      const json& u = j["usage"];
      if (!u.contains(k) || !u[k].is_number_integer()) return 0;
      return std::max<int64_t>(0, u[k].get<int64_t>());
    };
    r.usage.prompt_tokens = tokens("prompt_tokens");
    r.usage.completion_tokens = tokens("completion_tokens");
    // Known only where the server reported them (absent in older entries).
    for (auto [k, field] : {std::pair{"cached_tokens", &r.usage.cached_tokens},
                            std::pair{"reasoning_tokens", &r.usage.reasoning_tokens}})
      if (j["usage"].contains(k) && j["usage"][k].is_number_integer()) *field = tokens(k);
  }
  r.reasoning.assign(r.choices.size(), "");
  r.answer_from_reasoning.assign(r.choices.size(), false);
  if (j.contains("reasoning") && j["reasoning"].is_array())
    for (size_t i = 0; i < j["reasoning"].size() && i < r.choices.size(); ++i)
      if (j["reasoning"][i].is_string()) r.reasoning[i] = j["reasoning"][i].get<std::string>();
  if (j.contains("answer_from_reasoning") && j["answer_from_reasoning"].is_array())
    for (size_t i = 0; i < j["answer_from_reasoning"].size() && i < r.choices.size(); ++i)
      r.answer_from_reasoning[i] = j["answer_from_reasoning"][i].is_boolean() &&
                                   j["answer_from_reasoning"][i].get<bool>();
  return r;
}

std::string ResponseCache::canonical_request(const ModelProfile& profile,
                                             const ChatRequest& request) {
  json messages = json::array();
  for (const auto& m : request.messages) messages.push_back({m.role, m.content});
  json j = {{"base_url", core::mask_url(profile.base_url)},
            {"model", profile.model},
            {"messages", messages},
            {"temperature", request.temperature.value_or(profile.temperature)},
            {"top_p", request.top_p.value_or(profile.top_p)},
            {"max_tokens", request.max_tokens.value_or(kDefaultOutputBudget)},
            {"n", request.n},
            {"seed", request.seed ? json(*request.seed) : json(nullptr)},
            {"stop", request.stop},
            {"sample_index", request.sample_index},
            {"template_hash", request.template_hash},
            {"accept_truncated", request.accept_truncated}};
  // What else shapes the server's answer; absent for a plain profile so the keys of entries
  // written before these settings existed still match.
  if (!profile.omit.empty()) j["omit"] = profile.omit;
  if (profile.extra_body != "{}") j["extra_body"] = json::parse(profile.extra_body, nullptr, false);
  if (profile.max_tokens_field != "max_tokens") j["max_tokens_field"] = profile.max_tokens_field;
  return j.dump(-1, ' ', false, json::error_handler_t::replace);  // keys sorted: canonical
}

std::string ResponseCache::key_for(const ModelProfile& profile, const ChatRequest& request) {
  core::KeyHasher h;
  h.add("nl2sql.llm.cache.v1").add(canonical_request(profile, request));
  return h.hex();
}

Result<std::unique_ptr<ResponseCache>> ResponseCache::open(const std::filesystem::path& path,
                                                           bool read_only) {
  std::unique_ptr<ResponseCache> c(new ResponseCache());
  c->path_ = path;
  c->read_only_ = read_only;
  std::error_code ec;
  if (read_only) {
    if (!std::filesystem::exists(path, ec))
      return make_call_error(CallErrorKind::kCache,
                             "response cache " + path.string() +
                                 " does not exist (needed by cache modes read-only and replay)");
  } else if (path.has_parent_path()) {
    std::filesystem::create_directories(path.parent_path(), ec);
  }
  sqlite3* db = nullptr;
  int flags = (read_only ? SQLITE_OPEN_READONLY : (SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE)) |
              SQLITE_OPEN_FULLMUTEX;
  if (sqlite3_open_v2(path.string().c_str(), &db, flags, nullptr) != SQLITE_OK) {
    std::string msg = db ? sqlite3_errmsg(db) : "out of memory";
    sqlite3_close(db);
    return make_call_error(CallErrorKind::kCache, "cannot open response cache " + path.string() + ": " + msg);
  }
  c->db_ = db;
  sqlite3_busy_timeout(db, kCacheBusyTimeoutMs);
  if (!read_only) {
    NL2SQL_RETURN_IF_ERROR(c->exec("PRAGMA journal_mode=WAL"));
    NL2SQL_RETURN_IF_ERROR(c->exec("PRAGMA synchronous=NORMAL"));
    NL2SQL_RETURN_IF_ERROR(c->exec(kSchema));
  }
  sqlite3_stmt* st = nullptr;
  if (sqlite3_prepare_v3(db, "SELECT response FROM responses WHERE key = ?1", -1,
                         SQLITE_PREPARE_PERSISTENT, &st, nullptr) != SQLITE_OK)
    return make_call_error(CallErrorKind::kCache, "response cache " + path.string() +
                                                      " is not a cache file: " + sqlite3_errmsg(db));
  c->lookup_stmt_ = st;
  if (!read_only) {
    st = nullptr;
    if (sqlite3_prepare_v3(db,
                           "INSERT OR IGNORE INTO responses(key, profile, model, request, response,"
                           " prompt_tokens, completion_tokens, created_at)"
                           " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
                           -1, SQLITE_PREPARE_PERSISTENT, &st, nullptr) != SQLITE_OK)
      return make_call_error(CallErrorKind::kCache, std::string("response cache: ") + sqlite3_errmsg(db));
    c->insert_stmt_ = st;
  }
  return c;
}

ResponseCache::~ResponseCache() {
  sqlite3_finalize(as_stmt(lookup_stmt_));
  sqlite3_finalize(as_stmt(insert_stmt_));
  sqlite3_close(as_db(db_));
}

Status ResponseCache::exec(const char* sql) {
  std::string msg;
  if (db::exec_setup(as_db(db_), sql, msg, kCacheBusyTimeoutMs) != SQLITE_OK)
    return make_call_error(CallErrorKind::kCache, "response cache " + path_.string() + ": " + msg);
  return Status::ok();
}

Result<std::optional<ChatResponse>> ResponseCache::lookup(const std::string& key) {
  std::lock_guard lock(mu_);
  sqlite3_stmt* st = as_stmt(lookup_stmt_);
  ResetOnExit reset{st};
  sqlite3_bind_text(st, 1, key.data(), static_cast<int>(key.size()), SQLITE_STATIC);
  int rc = sqlite3_step(st);
  if (rc == SQLITE_DONE) return std::optional<ChatResponse>();
  if (rc != SQLITE_ROW)
    return make_call_error(CallErrorKind::kCache, "response cache lookup: " +
                                                      std::string(sqlite3_errmsg(as_db(db_))));
  auto j = json::parse(column_text(st, 0), nullptr, false);
  auto r = response_from_json(j);
  if (!r) return make_call_error(CallErrorKind::kCache, "response cache entry " + key + ": " + r.status().message());
  return std::optional<ChatResponse>(std::move(r).value());
}

Status ResponseCache::store(const std::string& key, const std::string& profile,
                            const std::string& model, const std::string& request_json,
                            const ChatResponse& response) {
  if (read_only_) return Status::ok();
  std::string body = response_to_json(response).dump(-1, ' ', false, json::error_handler_t::replace);
  std::lock_guard lock(mu_);
  sqlite3_stmt* st = as_stmt(insert_stmt_);
  ResetOnExit reset{st};
  sqlite3_bind_text(st, 1, key.data(), static_cast<int>(key.size()), SQLITE_STATIC);
  sqlite3_bind_text(st, 2, profile.data(), static_cast<int>(profile.size()), SQLITE_STATIC);
  sqlite3_bind_text(st, 3, model.data(), static_cast<int>(model.size()), SQLITE_STATIC);
  sqlite3_bind_text(st, 4, request_json.data(), static_cast<int>(request_json.size()), SQLITE_STATIC);
  sqlite3_bind_text(st, 5, body.data(), static_cast<int>(body.size()), SQLITE_STATIC);
  sqlite3_bind_int64(st, 6, response.usage.prompt_tokens);
  sqlite3_bind_int64(st, 7, response.usage.completion_tokens);
  sqlite3_bind_int64(st, 8, unix_now());
  if (sqlite3_step(st) != SQLITE_DONE)
    return make_call_error(CallErrorKind::kCache, "response cache store: " +
                                                      std::string(sqlite3_errmsg(as_db(db_))));
  return Status::ok();
}

Result<CacheStats> ResponseCache::stats() {
  std::lock_guard lock(mu_);
  CacheStats s;
  {
    Statement st(as_db(db_),
                 "SELECT COUNT(*), COALESCE(MIN(created_at),0), COALESCE(MAX(created_at),0),"
                 " COALESCE(SUM(prompt_tokens),0), COALESCE(SUM(completion_tokens),0) FROM responses");
    if (!st.ok() || sqlite3_step(st.get()) != SQLITE_ROW)
      return make_call_error(CallErrorKind::kCache, "cache stats: " + std::string(sqlite3_errmsg(as_db(db_))));
    s.entries = sqlite3_column_int64(st.get(), 0);
    s.oldest = sqlite3_column_int64(st.get(), 1);
    s.newest = sqlite3_column_int64(st.get(), 2);
    s.prompt_tokens = sqlite3_column_int64(st.get(), 3);
    s.completion_tokens = sqlite3_column_int64(st.get(), 4);
  }
  {
    Statement st(as_db(db_), "SELECT model, COUNT(*) FROM responses GROUP BY model ORDER BY model");
    while (st.ok() && sqlite3_step(st.get()) == SQLITE_ROW)
      s.entries_by_model[column_text(st.get(), 0)] = sqlite3_column_int64(st.get(), 1);
  }
  std::error_code ec;
  for (const char* suffix : {"", "-wal"}) {
    auto size = std::filesystem::file_size(path_.string() + suffix, ec);
    if (!ec) s.file_bytes += static_cast<int64_t>(size);
  }
  return s;
}

Result<int64_t> ResponseCache::export_jsonl(const std::filesystem::path& out) {
  std::ofstream f(out, std::ios::binary | std::ios::trunc);
  if (!f) return io_error("cannot write " + out.string());
  std::lock_guard lock(mu_);
  Statement st(as_db(db_),
               "SELECT key, profile, model, request, response, created_at FROM responses ORDER BY key");
  if (!st.ok()) return make_call_error(CallErrorKind::kCache, std::string("cache export: ") + sqlite3_errmsg(as_db(db_)));
  int64_t n = 0;
  while (sqlite3_step(st.get()) == SQLITE_ROW) {
    json line = {{"key", column_text(st.get(), 0)},
                 {"profile", column_text(st.get(), 1)},
                 {"model", column_text(st.get(), 2)},
                 {"request", json::parse(column_text(st.get(), 3), nullptr, false)},
                 {"response", json::parse(column_text(st.get(), 4), nullptr, false)},
                 {"created_at", sqlite3_column_int64(st.get(), 5)}};
    f << line.dump(-1, ' ', false, json::error_handler_t::replace) << '\n';
    ++n;
  }
  f.flush();
  if (!f) return io_error("error writing " + out.string());
  return n;
}

Result<int64_t> ResponseCache::import_jsonl(const std::filesystem::path& in) {
  if (read_only_) return make_call_error(CallErrorKind::kCache, "cache opened read-only: cannot import");
  std::ifstream f(in, std::ios::binary);
  if (!f) return not_found("cannot read " + in.string());
  std::lock_guard lock(mu_);
  NL2SQL_RETURN_IF_ERROR(exec("BEGIN IMMEDIATE"));
  int64_t added = 0, line_no = 0;
  std::string line;
  sqlite3_stmt* st = as_stmt(insert_stmt_);
  while (std::getline(f, line)) {
    ++line_no;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    auto j = json::parse(line, nullptr, false);
    auto where = in.string() + ":" + std::to_string(line_no);
    bool valid = !j.is_discarded() && j.is_object() && j.contains("key") && j["key"].is_string() &&
                 j.contains("response") && j.contains("request");
    std::optional<ChatResponse> parsed;
    if (valid) {
      auto r = response_from_json(j["response"]);
      valid = r.is_ok();
      if (valid) parsed = std::move(r).value();
    }
    if (!valid) {
      (void)exec("ROLLBACK");
      return invalid_input(where + ": not a cache export line (need key, request, response)");
    }
    std::string key = j["key"].get<std::string>();
    std::string profile = j.value("profile", "");
    std::string model = j.value("model", "");
    std::string request = j["request"].dump(-1, ' ', false, json::error_handler_t::replace);
    std::string response = j["response"].dump(-1, ' ', false, json::error_handler_t::replace);
    ResetOnExit reset{st};
    sqlite3_bind_text(st, 1, key.data(), static_cast<int>(key.size()), SQLITE_STATIC);
    sqlite3_bind_text(st, 2, profile.data(), static_cast<int>(profile.size()), SQLITE_STATIC);
    sqlite3_bind_text(st, 3, model.data(), static_cast<int>(model.size()), SQLITE_STATIC);
    sqlite3_bind_text(st, 4, request.data(), static_cast<int>(request.size()), SQLITE_STATIC);
    sqlite3_bind_text(st, 5, response.data(), static_cast<int>(response.size()), SQLITE_STATIC);
    sqlite3_bind_int64(st, 6, parsed->usage.prompt_tokens);
    sqlite3_bind_int64(st, 7, parsed->usage.completion_tokens);
    sqlite3_bind_int64(st, 8, j.value("created_at", unix_now()));
    if (sqlite3_step(st) != SQLITE_DONE) {
      std::string msg = sqlite3_errmsg(as_db(db_));
      (void)exec("ROLLBACK");
      return make_call_error(CallErrorKind::kCache, where + ": " + msg);
    }
    added += sqlite3_changes(as_db(db_));
  }
  NL2SQL_RETURN_IF_ERROR(exec("COMMIT"));
  return added;
}

Result<int64_t> ResponseCache::prune(int64_t older_than, const std::string& model,
                                     const std::string& profile) {
  if (read_only_) return make_call_error(CallErrorKind::kCache, "cache opened read-only: cannot prune");
  std::lock_guard lock(mu_);
  int64_t n = 0;
  {
    Statement st(as_db(db_),
                 "DELETE FROM responses WHERE (?1 = 0 OR created_at < ?1)"
                 " AND (?2 = '' OR model = ?2) AND (?3 = '' OR profile = ?3)");
    if (!st.ok()) return make_call_error(CallErrorKind::kCache, std::string("cache prune: ") + sqlite3_errmsg(as_db(db_)));
    sqlite3_bind_int64(st.get(), 1, older_than);
    sqlite3_bind_text(st.get(), 2, model.c_str(), -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(st.get(), 3, profile.c_str(), -1, SQLITE_TRANSIENT);
    if (sqlite3_step(st.get()) != SQLITE_DONE)
      return make_call_error(CallErrorKind::kCache, std::string("cache prune: ") + sqlite3_errmsg(as_db(db_)));
    n = sqlite3_changes(as_db(db_));
  }
  if (n > 0) {
    Status v = exec("VACUUM");
    if (!v) spdlog::warn("cache prune: vacuum skipped: {}", v.message());
  }
  return n;
}

}  // namespace nl2sql::llm
