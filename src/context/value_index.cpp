// The value index: LSH candidates and exact lookups over the indexed values, the band tables
// (set_contents), and opening an index (fresh from the file or rebuilt). Building is in
// value_index_build.cpp, the file format in value_index_file.cpp.
#include "nl2sql/context/value_index.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "nl2sql/context/text_match.h"
#include "band_keys.h"
#include "nl2sql/core/files.h"
#include "nl2sql/core/text.h"
#include "nl2sql/core/hash.h"
#include "nl2sql/core/thread_pool.h"
#include "nl2sql/db/executor.h"
#include "nl2sql/db/result_cache.h"

namespace nl2sql::context {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
         });
}


}  // namespace

bool is_identifier_name(std::string_view name) {
  if (iequals(name, "id")) return true;
  if (name.size() < 3) return false;
  std::string_view tail = name.substr(name.size() - 2);
  if (tail == "ID" || tail == "Id") return true;  // CustomerID, districtId
  if (name.size() >= 3) {
    std::string_view t3 = name.substr(name.size() - 3);
    if (iequals(t3, "_id") || iequals(t3, " id")) return true;
  }
  return false;
}

Status IndexParams::validate() const {
  if (ngram < 1 || ngram > 8) return invalid_input(fmt::format("index.ngram must be 1..8 (got {})", ngram));
  if (num_perm < 1 || num_perm > 1024)
    return invalid_input(fmt::format("index.num_perm must be 1..1024 (got {})", num_perm));
  if (bands < 1 || rows < 1 || bands * rows > num_perm)
    return invalid_input(fmt::format("index.bands x index.rows ({} x {}) must be at most num_perm ({})",
                                     bands, rows, num_perm));
  return Status::ok();
}

std::string_view ValueIndex::value(uint32_t id) const {
  return std::string_view(raw_).substr(raw_offsets_[id], raw_offsets_[id + 1] - raw_offsets_[id]);
}

std::u32string_view ValueIndex::normalized(uint32_t id) const {
  return std::u32string_view(norm_).substr(norm_offsets_[id], norm_offsets_[id + 1] - norm_offsets_[id]);
}

int64_t ValueIndex::find_exact(std::string_view table, std::string_view column,
                               std::string_view value) const {
  for (const auto& c : columns_) {
    if (!iequals(c.table, table) || !iequals(c.column, column)) continue;
    for (uint32_t id = c.first; id < c.first + c.count; ++id)
      if (this->value(id) == value) return id;
  }
  return -1;
}

std::vector<uint32_t> ValueIndex::band_keys_of(std::u32string_view normalized) const {
  MinHasher hasher(params_.num_perm, params_.seed);
  auto sig = hasher.signature(char_ngram_hashes(normalized, params_.ngram));
  std::vector<uint32_t> keys(static_cast<size_t>(params_.bands));
  detail::band_keys(sig.data(), params_.bands, params_.rows, keys.data());
  return keys;
}

std::vector<uint32_t> ValueIndex::candidates(std::u32string_view normalized_query) const {
  std::vector<uint32_t> out;
  if (normalized_query.empty() || band_tables_.empty()) return out;
  auto keys = band_keys_of(normalized_query);
  for (size_t b = 0; b < band_tables_.size(); ++b) {
    const auto& t = band_tables_[b];
    uint64_t lo = static_cast<uint64_t>(keys[b]) << 32;
    for (auto it = std::lower_bound(t.begin(), t.end(), lo); it != t.end() && (*it >> 32) == keys[b]; ++it)
      out.push_back(static_cast<uint32_t>(*it));
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

void ValueIndex::set_contents(std::vector<IndexedColumn> columns, std::vector<SkippedColumn> skipped,
                              std::string raw, std::vector<uint64_t> raw_offsets, std::u32string norm,
                              std::vector<uint64_t> norm_offsets, const std::vector<uint32_t>& keys,
                              size_t threads) {
  columns_ = std::move(columns);
  skipped_ = std::move(skipped);
  raw_ = std::move(raw);
  raw_offsets_ = std::move(raw_offsets);
  norm_ = std::move(norm);
  norm_offsets_ = std::move(norm_offsets);
  const size_t n = raw_offsets_.empty() ? 0 : raw_offsets_.size() - 1;
  value_column_.assign(n, 0);
  for (uint32_t c = 0; c < columns_.size(); ++c)
    for (uint32_t id = columns_[c].first; id < columns_[c].first + columns_[c].count; ++id) value_column_[id] = c;
  const size_t bands = static_cast<size_t>(params_.bands);
  band_tables_.assign(bands, {});
  // Counting sort on the key's top `bits` bits (one histogram pass, one scatter pass), then
  // insertion sort inside each bucket (about one to four entries with bits ~ log2(n)). Ids go in
  // ascending and both steps are stable, so each table ends sorted by (key, id). This replaced a
  // 4-pass LSD radix sort that took a quarter of a BIRD-scale build.
  int bits = 8;
  while (bits < 18 && (size_t{1} << bits) < n) ++bits;
  const size_t buckets = size_t{1} << bits;
  const int shift = 32 - bits;
  // Bands are independent: sorted in parallel, each worker with its own bucket array.
  core::parallel_for(bands, std::max<size_t>(1, threads), [&](size_t b) {
    std::vector<uint32_t> start(buckets + 1);
    auto& t = band_tables_[b];
    t.resize(n);
    const uint32_t* band_keys = keys.data() + b * n;
    for (size_t id = 0; id < n; ++id) ++start[(band_keys[id] >> shift) + 1];
    for (size_t i = 1; i <= buckets; ++i) start[i] += start[i - 1];
    for (size_t id = 0; id < n; ++id) {
      const uint32_t k = band_keys[id];
      t[start[k >> shift]++] = (static_cast<uint64_t>(k) << 32) | id;
    }
    // start[i] is now the end of bucket i; sort each bucket (equal top bits) by the full entry.
    size_t from = 0;
    for (size_t i = 0; i < buckets; ++i) {
      const size_t to = start[i];
      for (size_t j = from + 1; j < to; ++j) {
        const uint64_t e = t[j];
        size_t k = j;
        for (; k > from && t[k - 1] > e; --k) t[k] = t[k - 1];
        t[k] = e;
      }
      from = to;
    }
  });
}

fs::path default_index_dir() { return db::default_cache_dir() / "index"; }

fs::path index_file(const fs::path& index_dir, const std::string& db_id) {
  return (index_dir.empty() ? default_index_dir() : index_dir) / (db_id + ".vidx");
}

Result<ValueIndex> open_index(const std::string& db_id, const fs::path& db_path,
                              const data::Schema& schema, const IndexOptions& options,
                              const db::Executor& executor, IndexStatus* status) {
  NL2SQL_RETURN_IF_ERROR(options.params.validate());
  const fs::path file = index_file(options.index_dir, db_id);
  IndexStatus st;
  st.db_id = db_id;
  st.file = file;
  std::string why = "forced";
  if (!options.force) {
    auto fp = db::database_fingerprint(db_path);
    if (!fp) return fp.status().with_context(db_id);
    if (!fs::exists(file)) {
      why = "missing";
    } else if (auto loaded = ValueIndex::load(file); !loaded) {
      why = loaded.status().message();
    } else if (loaded->fingerprint() != *fp) {
      why = "stale: the database changed";
    } else if (loaded->params_key() != options.params.key()) {
      why = "stale: other parameters";
    } else if (loaded->db_id() != db_id) {
      why = "stale: built for database " + loaded->db_id();
    } else {
      st.action = "fresh";
      st.values = loaded->size();
      st.columns = loaded->columns().size();
      st.skipped = loaded->skipped();
      if (status) *status = std::move(st);
      return loaded;
    }
  }
  if (why != "missing" && why != "forced") spdlog::info("{}: rebuilding value index ({})", db_id, why);
  auto built = ValueIndex::build(db_id, db_path, schema, options.params, executor, options.threads);
  if (!built) return built.status();
  NL2SQL_RETURN_IF_ERROR(built->save(file).with_context(db_id));
  st.action = "built: " + why;
  st.values = built->size();
  st.columns = built->columns().size();
  st.skipped = built->skipped();
  st.timings = built->timings();
  if (status) *status = std::move(st);
  return built;
}

Result<std::vector<IndexStatus>> ensure_indexes(const std::vector<DatabaseRef>& databases,
                                                const IndexOptions& options,
                                                const db::Executor& executor) {
  NL2SQL_RETURN_IF_ERROR(options.params.validate());
  const size_t threads = options.threads == 0 ? core::default_threads() : options.threads;
  std::vector<IndexStatus> out(databases.size());
  std::vector<Status> errors(databases.size());
  // Databases in parallel, each database's columns on one thread, so the total parallelism
  // stays at `threads`; a single database gets all threads for its columns.
  IndexOptions per_db = options;
  per_db.threads = databases.size() == 1 ? threads : 1;
  core::parallel_for(databases.size(), threads, [&](size_t i) {
    const auto& d = databases[i];
    // One executor per database, so its connections (and their page caches) are closed when the
    // database is done: peak memory stays at a few databases, not all of them.
    db::Executor local(executor.options());
    auto r = open_index(d.db_id, d.db_path, *d.schema, per_db, local, &out[i]);
    if (!r) errors[i] = r.status();
  });
  for (const auto& e : errors)
    if (!e) return e;
  return out;
}

}  // namespace nl2sql::context
