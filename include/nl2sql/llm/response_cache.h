// ResponseCache: a persistent record of model answers in one SQLite file (WAL journal, busy
// timeout), keyed by a hash of everything that determines an answer: base URL (credentials
// masked), model, the canonical messages, the sampling parameters, n, the sample index and the
// prompt template's hash. Sampling k answers from one prompt uses sample indices 0..k-1, so a
// replayed run reproduces the diversity too. The first answer stored under a key wins
// (INSERT OR IGNORE), which keeps two writers — threads or processes — consistent.
//
// Thread-safe: one connection guarded by a mutex with prepared statements; SQLite's WAL mode
// and busy timeout make a second process (another run, `nl2sql cache import`) safe.
// Nothing secret is stored: the key hashes a masked URL, rows hold profile, model, messages and
// the answer.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "nl2sql/core/status.h"
#include "nl2sql/llm/profile.h"
#include "nl2sql/llm/types.h"

namespace nl2sql::llm {

inline constexpr int kCacheBusyTimeoutMs = 30000;

struct CacheEntry {
  std::string key;
  std::string profile;
  std::string model;
  std::string request_json;   // canonical request (messages + sampling), for export/debugging
  std::string response_json;  // {"choices":[…],"finish_reasons":[…],"usage":{…}}
  int64_t created_at = 0;     // unix seconds
};

struct CacheStats {
  int64_t entries = 0;
  int64_t file_bytes = 0;
  int64_t oldest = 0;
  int64_t newest = 0;
  std::map<std::string, int64_t> entries_by_model;
  int64_t prompt_tokens = 0;      // recorded usage: what a replay saves
  int64_t completion_tokens = 0;
};

class ResponseCache {
 public:
  // Opens (creating unless read_only) the cache file.
  static Result<std::unique_ptr<ResponseCache>> open(const std::filesystem::path& path,
                                                     bool read_only);
  ~ResponseCache();
  ResponseCache(const ResponseCache&) = delete;
  ResponseCache& operator=(const ResponseCache&) = delete;

  // The key of a call to `profile` (after defaults are applied to `request`).
  static std::string key_for(const ModelProfile& profile, const ChatRequest& request);
  // The canonical request text hashed into the key (also stored for export).
  static std::string canonical_request(const ModelProfile& profile, const ChatRequest& request);

  Result<std::optional<ChatResponse>> lookup(const std::string& key);
  Status store(const std::string& key, const std::string& profile, const std::string& model,
               const std::string& request_json, const ChatResponse& response);

  Result<CacheStats> stats();
  // Writes one JSON object per line; returns the number of entries.
  Result<int64_t> export_jsonl(const std::filesystem::path& out);
  // Reads lines written by export_jsonl; existing keys are kept. Returns entries added.
  Result<int64_t> import_jsonl(const std::filesystem::path& in);
  // Deletes entries created before `older_than` (unix seconds; 0 = any age) and matching the
  // model/profile filters (empty = any). Returns the number deleted; vacuums afterwards.
  Result<int64_t> prune(int64_t older_than, const std::string& model, const std::string& profile);

  const std::filesystem::path& path() const { return path_; }

 private:
  ResponseCache() = default;
  Status exec(const char* sql);
  std::filesystem::path path_;
  bool read_only_ = false;
  std::mutex mu_;
  void* db_ = nullptr;          // sqlite3*, guarded by mu_
  void* lookup_stmt_ = nullptr;  // sqlite3_stmt*, guarded by mu_
  void* insert_stmt_ = nullptr;  // sqlite3_stmt*, guarded by mu_
};

nlohmann::json response_to_json(const ChatResponse& response);
Result<ChatResponse> response_from_json(const nlohmann::json& j);

}  // namespace nl2sql::llm
