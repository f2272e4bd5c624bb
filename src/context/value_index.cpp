// The value index: LSH candidates and exact lookups over the indexed values, the band tables
// (set_contents), and opening an index (fresh from the file or rebuilt). Building is in
// value_index_build.cpp, the file format in value_index_file.cpp.
#include "nl2sql/context/value_index.h"

#include <algorithm>
#include <atomic>
#include <bit>
#include <chrono>
#include <mutex>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "nl2sql/context/text_match.h"
#include "band_keys.h"
#include "index_file.h"
#include "short_keys.h"
#include "nl2sql/core/files.h"
#include "nl2sql/core/text.h"
#include "nl2sql/core/hash.h"
#include "nl2sql/core/thread_pool.h"
#include "nl2sql/db/executor.h"
#include "nl2sql/db/result_cache.h"

namespace nl2sql::context {
namespace fs = std::filesystem;
using nlohmann::json;

using core::iequals;

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
  if (short_length < 0 || short_length > 32)
    return invalid_input(fmt::format("index.short_length must be 0..32 (got {})", short_length));
  return Status::ok();
}

const IndexedColumn& ValueIndex::column_of(uint32_t id) const {
  // Columns hold consecutive id ranges in order: the last column starting at or before id.
  auto it = std::upper_bound(columns_.begin(), columns_.end(), id,
                             [](uint32_t v, const IndexedColumn& c) { return v < c.first; });
  return *(it - 1);
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

namespace {

// Distinct value ids, gathered from several sorted runs (one per band or deletion key): a bit per
// value id marks what was seen, so duplicates cost a bit test, and only the distinct ids are
// sorted at the end (sorting every raw match was a seventh of a question's time at x300, where
// one value's 300 near-copies share most of a keyword's bands).
class IdSet {
 public:
  explicit IdSet(size_t universe) : bits_((universe + 63) / 64, 0) {}
  void add(uint32_t id) {
    uint64_t& word = bits_[id >> 6];
    const uint64_t bit = uint64_t{1} << (id & 63);
    if (word & bit) return;
    word |= bit;
    ids_.push_back(id);
  }
  std::vector<uint32_t> take_sorted() {
    // Many ids (a keyword that hundreds of near-copies match): read them off the bit set in order;
    // few: sort them.
    if (ids_.size() * 16 < bits_.size()) {
      std::sort(ids_.begin(), ids_.end());
    } else {
      size_t k = 0;
      for (size_t w = 0; w < bits_.size(); ++w)
        for (uint64_t word = bits_[w]; word != 0; word &= word - 1)
          ids_[k++] = static_cast<uint32_t>(w * 64 + static_cast<size_t>(std::countr_zero(word)));
    }
    return std::move(ids_);
  }

 private:
  std::vector<uint64_t> bits_;
  std::vector<uint32_t> ids_;
};

}  // namespace

template <class Sink>
void ValueIndex::for_each_match(const FileTable& t, uint32_t key, std::vector<uint64_t>& scratch,
                                Sink&& sink) const {
  if (t.entries == 0 || t.first_keys.empty() || !t.filter.may_hold(key)) return;
  const auto& fk = t.first_keys;
  // Entries with `key` start in the last block whose first key is below it (or in the first
  // block) and end in the last block whose first key is at most key: the whole run is read with
  // one pread (a key shared by hundreds of values spans several blocks).
  const auto lo = std::lower_bound(fk.begin(), fk.end(), key);
  const auto hi = std::upper_bound(lo, fk.end(), key);
  if (hi == fk.begin()) return;  // below the table's smallest key
  const size_t first = lo == fk.begin() ? 0 : static_cast<size_t>(lo - fk.begin()) - 1;
  const size_t last = static_cast<size_t>(hi - fk.begin()) - 1;
  const size_t begin = first * kBlock, end = std::min(t.entries, (last + 1) * kBlock);
  scratch.resize(end - begin);
  if (!detail::read_block(storage_->fd, scratch.data(), scratch.size() * 8, t.offset + begin * 8)) return;
  const uint64_t from = static_cast<uint64_t>(key) << 32;
  for (auto it = std::lower_bound(scratch.begin(), scratch.end(), from);
       it != scratch.end() && static_cast<uint32_t>(*it >> 32) == key; ++it)
    sink(static_cast<uint32_t>(*it));
}

size_t ValueIndex::memory_bytes() const {
  size_t n = raw_.size() + raw_offsets_.size_bytes() + norm_.size() * sizeof(char32_t) + norm_offsets_.size_bytes();
  for (const auto& t : band_tables_) n += t.first_keys.size() * 4 + t.filter.bytes();
  return n + short_table_.first_keys.size() * 4 + short_table_.filter.bytes();
}

ValueIndex::KeyFilter::KeyFilter(size_t entries) {
  if (entries == 0) return;
  // Slots: the smallest power of two (at least 64, at most 2^32) not below half the entries.
  // Half a bit to one bit per entry: at x300 (278k entries a table, 1.4 MB for all 43 tables) the
  // query time was the same as with one or two slots per entry, which cost 2.8 and 5.6 MB.
  int slot_bits = 6;
  while (slot_bits < 32 && (uint64_t{1} << slot_bits) * 2 < entries) ++slot_bits;
  shift_ = 32 - slot_bits;
  bits_.assign((uint64_t{1} << slot_bits) / 64, 0);
}

std::vector<uint32_t> ValueIndex::collect(std::u32string_view normalized_query, bool lsh, bool short_values) const {
  if (normalized_query.empty()) return {};
  IdSet ids(size());
  std::vector<uint64_t> scratch;
  auto add = [&](uint32_t id) { ids.add(id); };
  if (lsh && !band_tables_.empty()) {
    const auto keys = band_keys_of(normalized_query);
    for (size_t b = 0; b < band_tables_.size(); ++b) for_each_match(band_tables_[b], keys[b], scratch, add);
  }
  const size_t limit = static_cast<size_t>(std::max(0, params_.short_length));
  if (short_values && short_table_.entries > 0 && normalized_query.size() <= limit + 1) {
    std::vector<uint32_t> keys;
    detail::short_keys(normalized_query, keys);
    for (uint32_t k : keys) for_each_match(short_table_, k, scratch, add);
  }
  return ids.take_sorted();
}

std::vector<uint32_t> ValueIndex::lsh_candidates(std::u32string_view normalized_query) const {
  return collect(normalized_query, true, false);
}

std::vector<uint32_t> ValueIndex::short_candidates(std::u32string_view normalized_query) const {
  return collect(normalized_query, false, true);
}

std::vector<uint32_t> ValueIndex::candidates(std::u32string_view normalized_query) const {
  return collect(normalized_query, true, true);
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
  auto built = ValueIndex::build(db_id, db_path, schema, options.params, executor, options.threads, file);
  if (!built) return built.status().with_context(db_id);
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
