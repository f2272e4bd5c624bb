// Building a value index: every text column's distinct values streamed from the database
// (columns in parallel), skip rules, normalization; then MinHash signatures in chunks of values
// whose band keys are written straight into the index file, each band table sorted on its own
// (its key filter and block directory taken on the way), the short values' deletion table and
// the lookup section; the file is then opened without reading the tables back
// (ValueIndex::open_file).
#include "nl2sql/context/value_index.h"

#include <algorithm>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <mutex>
#include <thread>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "nl2sql/context/text_match.h"
#include "nl2sql/core/text.h"
#include "band_keys.h"
#include "index_file.h"
#include "nl2sql/core/hash.h"
#include "short_keys.h"
#include "nl2sql/core/thread_pool.h"
#include "nl2sql/db/executor.h"
#include "nl2sql/db/result_cache.h"
#include "nl2sql/db/schema_info.h"

namespace nl2sql::context {
namespace fs = std::filesystem;

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

bool looks_like_url(std::string_view s) {
  auto starts = [&](std::string_view p) { return core::iequals(s.substr(0, p.size()), p); };
  return starts("http://") || starts("https://") || starts("www.") || starts("ftp://");
}

// One column's share of a build: its values as stored and normalized (both UTF-8, concatenated,
// with each value's length in bytes, and in code points for the normalized form), nothing else:
// signatures are computed later, in chunks.
struct ColumnWork {
  const data::Table* table = nullptr;
  const data::Column* column = nullptr;
  // The table's declaration names no collation (db::TableInfo::create_sql); false when unknown.
  bool table_without_collation = false;
  bool skipped = false;
  std::string reason;
  std::string raw, norm;
  std::vector<uint32_t> raw_len, norm_len, norm_points;
  size_t dropped_long = 0;
  double scan_s = 0, index_s = 0;
};

// True when SQLite answers `distinct_sql` by scanning `table` itself and dropping repeats through
// a temporary B-tree (EXPLAIN QUERY PLAN: exactly "SCAN <table>", "USE TEMP B-TREE FOR DISTINCT"),
// for a table whose declaration names no collation: its rows are then the first occurrence of
// each value in the table's stored order, repeats being byte-equal values, which is what a plain
// scan of the table in that order (NOT INDEXED) deduplicated by exact bytes gives, in the same order.
bool distinct_is_a_table_scan(const db::Executor& ex, const fs::path& db_path, const std::string& distinct_sql,
                              const ColumnWork& w) {
  if (!w.table_without_collation) return false;
  auto plan = ex.explain_query_plan(db_path, distinct_sql);
  if (!plan.ok() || plan.result.rows.size() != 2) return false;
  auto detail = [&](size_t i) {
    const auto& r = plan.result.rows[i];
    return r.empty() || r.back().type != db::ValueType::kText ? std::string() : r.back().s;
  };
  return detail(0) == "SCAN " + w.table->name && detail(1) == "USE TEMP B-TREE FOR DISTINCT";
}

// The distinct values of a scan, kept in first-occurrence order in `arena` (concatenated, with
// their lengths): an open-addressing table of value numbers over the arena, by XXH3.
class DistinctValues {
 public:
  DistinctValues(std::string& arena, std::vector<uint32_t>& lens) : arena_(arena), lens_(lens) {}
  // Adds v unless an equal value is already there; true when added.
  bool insert(std::string_view v) {
    if ((lens_.size() + 1) * 2 > slots_.size()) grow();
    const uint64_t h = core::xxh64(v);
    for (size_t i = h & (slots_.size() - 1);; i = (i + 1) & (slots_.size() - 1)) {
      const uint32_t s = slots_[i];
      if (s == 0) {
        slots_[i] = static_cast<uint32_t>(lens_.size() + 1);
        offsets_.push_back(arena_.size());
        arena_ += v;
        lens_.push_back(static_cast<uint32_t>(v.size()));
        return true;
      }
      if (lens_[s - 1] == v.size() && std::string_view(arena_).substr(offsets_[s - 1], v.size()) == v) return false;
    }
  }
  size_t size() const { return lens_.size(); }
  // The table's memory back (the values stay in the arena).
  void release() {
    std::vector<uint32_t>().swap(slots_);
    std::vector<uint64_t>().swap(offsets_);
  }

 private:
  void grow() {
    std::vector<uint32_t> slots(std::max<size_t>(64, slots_.size() * 2), 0);
    for (uint32_t k = 0; k < lens_.size(); ++k) {
      const uint64_t h = core::xxh64(std::string_view(arena_).substr(offsets_[k], lens_[k]));
      size_t i = h & (slots.size() - 1);
      while (slots[i] != 0) i = (i + 1) & (slots.size() - 1);
      slots[i] = k + 1;
    }
    slots_.swap(slots);
  }
  std::string& arena_;
  std::vector<uint32_t>& lens_;
  std::vector<uint64_t> offsets_;
  std::vector<uint32_t> slots_;
};

// Why a column is not worth indexing, judged on a sample of its non-null values (identifier
// names, too little text, URLs, long free text); "" when it is.
std::string skip_reason(const fs::path& db_path, const IndexParams& p, const db::Executor& ex, const std::string& col,
                        const std::string& tab, ColumnWork& w) {
  const auto& rules = p.skip;
  if (rules.skip_id_columns && is_identifier_name(w.column->name)) return "identifier name";
  auto t0 = std::chrono::steady_clock::now();
  db::QueryLimits sample_limits;
  sample_limits.timeout_s = p.scan_timeout_s;
  sample_limits.row_cap = 0;
  auto sample = ex.run(db_path,
                       fmt::format("SELECT {} FROM {} WHERE {} IS NOT NULL LIMIT {}", col, tab, col,
                                   rules.sample_rows),
                       sample_limits);
  w.scan_s += seconds_since(t0);
  if (!sample.ok()) return "sample query failed: " + sample.error;
  const auto& rows = sample.result.rows;
  if (rows.empty()) return "empty";
  size_t text = 0, urls = 0, chars = 0;
  for (const auto& r : rows) {
    if (r[0].type != db::ValueType::kText) continue;
    ++text;
    urls += looks_like_url(r[0].s);
    chars += decode_utf8(r[0].s).size();
  }
  double text_share = static_cast<double>(text) / static_cast<double>(rows.size());
  if (text_share < rules.min_text_share)
    return fmt::format("not text ({:.0f}% of sampled values are text)", 100 * text_share);
  double url_share = static_cast<double>(urls) / static_cast<double>(text);
  if (url_share > rules.max_url_share) return fmt::format("URLs ({:.0f}% of sampled values)", 100 * url_share);
  double avg_len = static_cast<double>(chars) / static_cast<double>(text);
  if (avg_len > rules.max_avg_length) return fmt::format("long free text (average {:.0f} characters)", avg_len);
  return "";
}

// The distinct values by a plain scan of the table in its stored order (see
// distinct_is_a_table_scan): the same rows without SQLite's temporary B-tree (its seeks and
// compares were most of a BIRD-scale scan), repeats dropped here by exact bytes, the distinct
// values normalized afterwards and compacted in place. A skip reason, or "".
std::string scan_in_stored_order(const fs::path& db_path, const IndexParams& p, const db::Executor& ex,
                                 const std::string& col, const std::string& tab,
                                 std::chrono::steady_clock::time_point t0, ColumnWork& w) {
  const auto& rules = p.skip;
  db::QueryLimits plain_limits;
  plain_limits.timeout_s = p.scan_timeout_s;
  plain_limits.row_cap = 0;
  DistinctValues distinct(w.raw, w.raw_len);
  bool over = false;
  auto scan = ex.run(db_path, fmt::format("SELECT {} FROM {} NOT INDEXED WHERE typeof({}) = 'text'", col, tab, col),
                     plain_limits, [&](const db::Row& r) {
                       if (over || r[0].type != db::ValueType::kText) return;
                       if (distinct.insert(r[0].s) && distinct.size() > rules.max_distinct) over = true;
                     });
  distinct.release();
  w.scan_s += seconds_since(t0);
  if (!scan.ok() || over) {
    w.raw = std::string();
    w.raw_len = std::vector<uint32_t>();
    if (over) return fmt::format("more than {} distinct values", rules.max_distinct);
    return "scan failed: " + scan.error;
  }
  t0 = std::chrono::steady_clock::now();
  std::vector<uint32_t> all_len;
  all_len.swap(w.raw_len);
  size_t read = 0, write = 0;
  for (uint32_t len : all_len) {
    const std::string_view v = std::string_view(w.raw).substr(read, len);
    read += len;
    const std::u32string n = normalize_code_points(v);
    if (n.empty()) continue;
    if (n.size() > rules.max_value_length) {
      ++w.dropped_long;
      continue;
    }
    if (write != read - len) std::memmove(w.raw.data() + write, v.data(), len);
    write += len;
    w.raw_len.push_back(len);
    const size_t before = w.norm.size();
    w.norm += encode_utf8(n);
    w.norm_len.push_back(static_cast<uint32_t>(w.norm.size() - before));
    w.norm_points.push_back(static_cast<uint32_t>(n.size()));
  }
  w.raw.resize(write);
  w.index_s += seconds_since(t0);
  return "";
}

// The DISTINCT scan itself, streamed: values are normalized in batches as they arrive (no
// result set is kept), its temporary B-tree in memory (a temporary file made the scan wait on
// the file system about as long as it computed). A skip reason, or "".
std::string scan_distinct(const fs::path& db_path, const IndexParams& p, const db::Executor& ex,
                          const std::string& distinct_sql, std::chrono::steady_clock::time_point t0, ColumnWork& w) {
  const auto& rules = p.skip;
  db::QueryLimits scan_limits;
  scan_limits.timeout_s = p.scan_timeout_s;
  scan_limits.row_cap = rules.max_distinct;
  scan_limits.temp_store_memory = true;
  constexpr size_t kBatch = 256;
  std::vector<std::string> batch(kBatch);
  size_t batched = 0;
  double normalize_s = 0;
  auto normalize_batch = [&] {
    const auto tn = std::chrono::steady_clock::now();
    for (size_t i = 0; i < batched; ++i) {
      const std::string& v = batch[i];
      const std::u32string n = normalize_code_points(v);
      if (n.empty()) continue;
      if (n.size() > rules.max_value_length) {
        ++w.dropped_long;
        continue;
      }
      w.raw += v;
      w.raw_len.push_back(static_cast<uint32_t>(v.size()));
      const size_t before = w.norm.size();
      w.norm += encode_utf8(n);
      w.norm_len.push_back(static_cast<uint32_t>(w.norm.size() - before));
      w.norm_points.push_back(static_cast<uint32_t>(n.size()));
    }
    batched = 0;
    normalize_s += seconds_since(tn);
  };
  auto scan = ex.run(db_path, distinct_sql, scan_limits, [&](const db::Row& r) {
                       if (r[0].type != db::ValueType::kText) return;
                       batch[batched++].assign(r[0].s);
                       if (batched == kBatch) normalize_batch();
                     });
  normalize_batch();
  w.scan_s += seconds_since(t0) - normalize_s;
  w.index_s += normalize_s;
  if (!scan.ok()) {
    w.raw = w.norm = std::string();
    w.raw_len = w.norm_len = w.norm_points = std::vector<uint32_t>();
    w.dropped_long = 0;
    if (scan.status == db::ExecStatus::kRowCap) return fmt::format("more than {} distinct values", rules.max_distinct);
    return "scan failed: " + scan.error;
  }
  return "";
}

void process_column(const fs::path& db_path, const IndexParams& p, const db::Executor& ex, ColumnWork& w) {
  const std::string col = core::quote_sql_identifier(w.column->name), tab = core::quote_sql_identifier(w.table->name);
  std::string why = skip_reason(db_path, p, ex, col, tab, w);
  if (why.empty()) {
    const std::string distinct_sql =
        fmt::format("SELECT DISTINCT {} FROM {} WHERE typeof({}) = 'text'", col, tab, col);
    const auto t0 = std::chrono::steady_clock::now();  // the plan's question counts as scanning
    why = distinct_is_a_table_scan(ex, db_path, distinct_sql, w) ? scan_in_stored_order(db_path, p, ex, col, tab, t0, w)
                                                                  : scan_distinct(db_path, p, ex, distinct_sql, t0, w);
  }
  if (!why.empty()) {
    w.skipped = true;
    w.reason = std::move(why);
  }
}

// The second step of both counting sorts below: `out` holds the entries grouped by bucket
// (`end[i]` is where bucket i ends); each bucket is sorted in place, by insertion when it is small
// (about one to four entries with bits ~ log2(n)), by std::sort when many values share a key
// (no quadratic insertion sort).
void sort_buckets(uint64_t* out, const std::vector<uint32_t>& end, size_t buckets) {
  size_t from = 0;
  for (size_t i = 0; i < buckets; ++i) {
    const size_t to = end[i];
    if (to - from > 64) {
      std::sort(out + from, out + to);
    } else {
      for (size_t j = from + 1; j < to; ++j) {
        const uint64_t e = out[j];
        size_t k = j;
        for (; k > from && out[k - 1] > e; --k) out[k] = out[k - 1];
        out[k] = e;
      }
    }
    from = to;
  }
}

// Sorts entries (key << 32 | id) of one table: a counting sort on the key's top `bits` bits (one
// histogram pass, one scatter pass from `keys`, the band's key per value id), then each bucket
// sorted (sort_buckets). Entries are distinct (ids differ), so the table ends sorted by (key, id). This replaced a 4-pass LSD radix sort
// that took a quarter of a BIRD-scale build.
void sort_band(const uint32_t* keys, size_t n, uint64_t* out) {
  int bits = 8;
  while (bits < 18 && (size_t{1} << bits) < n) ++bits;
  const size_t buckets = size_t{1} << bits;
  const int shift = 32 - bits;
  std::vector<uint32_t> start(buckets + 1);
  for (size_t id = 0; id < n; ++id) ++start[(keys[id] >> shift) + 1];
  for (size_t i = 1; i <= buckets; ++i) start[i] += start[i - 1];
  for (size_t id = 0; id < n; ++id) out[start[keys[id] >> shift]++] = (static_cast<uint64_t>(keys[id]) << 32) | id;
  sort_buckets(out, start, buckets);
}

// Sorts (key << 32 | id) entries that come in ascending id order (the short-value table: a
// value's few deletion keys, values in id order): the same counting sort on the key's top bits
// from `in` into `out`, then each bucket sorted (sort_buckets). A third of std::sort's time on
// the 232k entries of superhero x300.
void sort_entries(const std::vector<uint64_t>& in, std::vector<uint64_t>& out) {
  const size_t n = in.size();
  out.resize(n);
  int bits = 8;
  while (bits < 18 && (size_t{1} << bits) < n) ++bits;
  const size_t buckets = size_t{1} << bits;
  const int shift = 64 - bits;
  std::vector<uint32_t> start(buckets + 1);
  for (uint64_t e : in) ++start[(e >> shift) + 1];
  for (size_t i = 1; i <= buckets; ++i) start[i] += start[i - 1];
  for (uint64_t e : in) out[start[e >> shift]++] = e;
  sort_buckets(out.data(), start, buckets);
}

// Moves an index into place at `file`. An existing file there is first renamed aside and
// removed on another thread while `then` runs (opening the new index): renaming over it made
// ext4 start writing the new file back (its replace-by-rename safeguard, not needed for a file
// that is checked at every opening and rebuilt when damaged) and free the old file's pages on
// this thread, 50-60 ms of a 0.4 s build at superhero x300. A reader between the two renames
// finds no index and builds one itself.
template <class Then>
auto move_into_place(const fs::path& tmp, const fs::path& file, Then&& then) -> decltype(then()) {
  std::error_code ec;
  fs::path aside;
  if (fs::exists(file, ec)) {
    aside = tmp;
    aside += ".old";
    fs::rename(file, aside, ec);
    if (ec) aside.clear();
  }
  fs::rename(tmp, file, ec);
  if (ec) {
    std::error_code back;
    if (!aside.empty()) fs::rename(aside, file, back);
    return io_error("cannot rename into " + file.string() + ": " + ec.message());
  }
  std::thread remover;
  if (!aside.empty()) {
    try {
      remover = std::thread([aside] {
        std::error_code e;
        fs::remove(aside, e);
      });
    } catch (const std::system_error&) {
      fs::remove(aside, ec);
    }
  }
  auto result = then();
  if (remover.joinable()) remover.join();
  return result;
}

// 1. Scan: every column's distinct values, columns in parallel.
std::vector<ColumnWork> scan_columns(const fs::path& db_path, const data::Schema& schema, const IndexParams& params,
                                     const db::Executor& executor, size_t threads) {
  auto declared = db::inspect_schema(db_path);  // for the tables' declarations (collations)
  std::vector<ColumnWork> work;
  for (const auto& t : schema.tables) {
    const db::TableInfo* info = declared ? declared->find(t.name) : nullptr;
    const bool without_collation = info && !info->declares_collation();
    for (const auto& c : t.columns) {
      ColumnWork w;
      w.table = &t;
      w.column = &c;
      w.table_without_collation = without_collation;
      work.push_back(std::move(w));
    }
  }
  core::parallel_for(work.size(), threads, [&](size_t i) { process_column(db_path, params, executor, work[i]); });
  return work;
}

// The columns a scan kept (and how many values and bytes they bring) and those it skipped.
struct ScannedColumns {
  std::vector<IndexedColumn> columns;
  std::vector<SkippedColumn> skipped;
  size_t total = 0, raw_bytes = 0, norm_bytes = 0;
};

// Sorts the scanned columns into kept and skipped (a column without text values is skipped);
// only the kept ones stay in `work`. Adds the columns' scan and normalization times.
ScannedColumns sort_out_columns(std::vector<ColumnWork>& work, BuildTimings& timings) {
  ScannedColumns s;
  for (auto& w : work) {
    timings.scan_s += w.scan_s;
    timings.index_s += w.index_s;
    if (w.skipped) {
      s.skipped.push_back({w.table->name, w.column->name, w.reason});
    } else if (w.raw_len.empty()) {
      s.skipped.push_back({w.table->name, w.column->name, "no text values"});
    } else {
      s.columns.push_back({w.table->name, w.column->name, static_cast<uint32_t>(s.total),
                           static_cast<uint32_t>(w.raw_len.size()), w.dropped_long});
      s.total += w.raw_len.size();
      s.raw_bytes += w.raw.size();
      s.norm_bytes += w.norm.size();
      continue;
    }
    w = ColumnWork{};
  }
  std::erase_if(work, [](const ColumnWork& w) { return w.raw_len.empty(); });
  return s;
}

// The temporary index file, removed unless the build keeps it.
struct TemporaryFile {
  const fs::path& p;
  bool keep = false;
  ~TemporaryFile() {
    std::error_code e;
    if (!keep) fs::remove(p, e);
  }
};

}  // namespace

// Steps 2 to 5 of a build: the index file written section by section, with what the steps hand
// on (the normalized values for the signatures, the bands' reserved sections, the short values'
// deletion keys, each table's lookup).
class ValueIndex::Build {
 public:
  Build(const IndexParams& params, size_t n, size_t threads)
      : params_(params), n_(n), bands_(static_cast<size_t>(params.bands)), workers_(std::max<size_t>(1, threads)),
        tables_(bands_ + 1) {}

  Status open(const fs::path& tmp) { return out_.open(tmp); }

  // 2. Header and values written in order (each column's stored values straight from its
  // buffer), the normalized values concatenated for the signatures, the tables reserved.
  void write_values(const std::string& header, std::vector<ColumnWork>& work, size_t raw_bytes, size_t norm_bytes) {
    section(header.data(), header.size());
    out_.begin_section(raw_bytes);
    for (auto& w : work) {
      out_.append(w.raw.data(), w.raw.size());
      std::string().swap(w.raw);
    }
    out_.end_section();
    offsets(work, &ColumnWork::raw_len);
    // The normalized values: their offsets in code points (the file's), then their bytes (kept,
    // with byte offsets, for the signatures).
    offsets(work, &ColumnWork::norm_points);
    norm_.reserve(norm_bytes);
    norm_off_.reserve(n_ + 1);
    norm_off_.push_back(0);
    for (auto& w : work) {
      norm_ += w.norm;
      for (uint32_t len : w.norm_len) norm_off_.push_back(norm_off_.back() + len);
      w = ColumnWork{};
    }
    section(norm_.data(), norm_.size());
    band_at_.resize(bands_);
    band_section_.resize(bands_);
    for (size_t b = 0; b < bands_; ++b) band_at_[b] = out_.reserve_section(n_ * 8, &band_section_[b]);
  }

  // 3. Signatures in chunks of values, in parallel: each chunk's band keys (u32) go into the
  // first half of each band's reserved section (the page cache holds them, not the process);
  // short values' deletion keys are kept (they are few).
  void write_band_keys() {
    const size_t chunks = (n_ + kChunk - 1) / kChunk;
    short_parts_.resize(chunks);
    MinHasher hasher(params_.num_perm, params_.seed);
    std::atomic<size_t> next_chunk{0};
    core::parallel_for(workers_, workers_, [&](size_t) {
      std::vector<uint32_t> keys(bands_ * kChunk);
      std::vector<uint32_t> sig(static_cast<size_t>(params_.num_perm)), band(bands_), deletions;
      std::vector<uint64_t> grams;
      std::u32string v;
      for (size_t c; (c = next_chunk++) < chunks;) {
        const size_t first = c * kChunk, count = std::min(kChunk, n_ - first);
        auto& shorts = short_parts_[c];
        for (size_t j = 0; j < count; ++j) {
          const uint32_t id = static_cast<uint32_t>(first + j);
          decode_utf8_into(std::string_view(norm_).substr(norm_off_[id], norm_off_[id + 1] - norm_off_[id]), v);
          char_ngram_hashes_unsorted(v, params_.ngram, grams);
          hasher.signature_into(grams, sig.data());
          detail::band_keys(sig.data(), params_.bands, params_.rows, band.data());
          for (size_t b = 0; b < bands_; ++b) keys[b * count + j] = band[b];
          if (v.size() <= static_cast<size_t>(params_.short_length)) {
            detail::short_keys(v, deletions);
            for (uint32_t k : deletions) shorts.push_back((static_cast<uint64_t>(k) << 32) | id);
          }
        }
        for (size_t b = 0; b < bands_; ++b)
          if (!out_.write_at(keys.data() + b * count, count * 4, band_at_[b] + first * 4)) write_failed_ = true;
      }
    });
    std::string().swap(norm_);
    std::vector<uint64_t>().swap(norm_off_);
  }

  // 4. Each band: its keys read back, sorted into (key, id) entries, its lookup (block directory
  // and key filter) taken from the sorted entries, hashed, written in place. A worker's buffers
  // serve all its bands.
  void sort_bands() {
    core::parallel_for(workers_, workers_, [&](size_t w) {
      std::vector<uint32_t> keys(n_);
      std::vector<uint64_t> table(n_);
      for (size_t b = w; b < bands_; b += workers_) {
        if (!out_.read_at(keys.data(), n_ * 4, band_at_[b])) {
          write_failed_ = true;
          return;
        }
        sort_band(keys.data(), n_, table.data());
        lookup_of(table.data(), n_, tables_[b]);
        out_.set_sum(band_section_[b], core::xxh64({reinterpret_cast<const char*>(table.data()), n_ * 8}));
        if (!out_.write_at(table.data(), n_ * 8, band_at_[b])) write_failed_ = true;
      }
    });
  }

  // 5. The short-value table, the lookup section, then the checksum.
  Status finish(const fs::path& tmp) {
    std::vector<uint64_t> short_table;
    size_t short_n = 0;
    for (const auto& p : short_parts_) short_n += p.size();
    short_table.reserve(short_n);
    for (auto& p : short_parts_) {
      short_table.insert(short_table.end(), p.begin(), p.end());
      std::vector<uint64_t>().swap(p);
    }
    {
      std::vector<uint64_t> sorted;
      sort_entries(short_table, sorted);
      short_table.swap(sorted);
    }
    lookup_of(short_table.data(), short_table.size(), tables_[bands_]);
    section(short_table.data(), short_table.size() * 8);
    std::vector<uint64_t>().swap(short_table);
    {
      std::vector<const FileTable*> all;
      for (const auto& t : tables_) all.push_back(&t);
      const std::string lookup = lookup_section(all);
      section(lookup.data(), lookup.size());
    }
    if (write_failed_) return io_error("write failed for " + tmp.string());
    return out_.finish();
  }

 private:
  static constexpr size_t kChunk = 8192;

  void section(const void* p, size_t bytes) {
    out_.begin_section(bytes);
    out_.append(p, bytes);
    out_.end_section();
  }

  // A section of n + 1 running offsets from the columns' lengths (each list freed once written).
  void offsets(std::vector<ColumnWork>& work, std::vector<uint32_t> ColumnWork::*lengths) {
    out_.begin_section((n_ + 1) * 8);
    uint64_t at = 0;
    out_.append(&at, 8);
    for (auto& w : work) {
      for (uint32_t len : w.*lengths) {
        at += len;
        out_.append(&at, 8);
      }
      std::vector<uint32_t>().swap(w.*lengths);
    }
    out_.end_section();
  }

  static void lookup_of(const uint64_t* entries, size_t count, FileTable& t) {
    t.entries = count;
    t.first_keys.resize((count + kBlock - 1) / kBlock);
    for (size_t i = 0; i < t.first_keys.size(); ++i) t.first_keys[i] = static_cast<uint32_t>(entries[i * kBlock] >> 32);
    t.filter = KeyFilter(count);
    if (t.filter.enabled())
      for (size_t e = 0; e < count; ++e) t.filter.add(static_cast<uint32_t>(entries[e] >> 32));
  }

  const IndexParams& params_;
  const size_t n_, bands_, workers_;
  detail::IndexFileWriter out_;
  std::string norm_;               // the normalized values, concatenated (steps 2-3)
  std::vector<uint64_t> norm_off_;  // and their byte offsets
  std::vector<uint64_t> band_at_;   // each band's reserved section: file offset and number
  std::vector<size_t> band_section_;
  std::vector<std::vector<uint64_t>> short_parts_;  // per chunk: the short values' deletion keys
  std::vector<FileTable> tables_;                   // the bands', then the short-value table
  std::atomic<bool> write_failed_{false};
};

Result<ValueIndex> ValueIndex::build(const std::string& db_id, const fs::path& db_path,
                                     const data::Schema& schema, const IndexParams& params,
                                     const db::Executor& executor, size_t threads, const fs::path& file) {
  NL2SQL_RETURN_IF_ERROR(params.validate());
  if (threads == 0) threads = core::default_threads();
  auto fp = db::database_fingerprint(db_path);
  if (!fp) return fp.status().with_context(db_id);
  std::vector<ColumnWork> work = scan_columns(db_path, schema, params, executor, threads);
  BuildTimings timings;
  auto t0 = std::chrono::steady_clock::now();
  const ScannedColumns scanned = sort_out_columns(work, timings);
  if (scanned.total >= 0xFFFFFFFFull) return invalid_input(db_id + ": more than 2^32 - 1 values");
  const size_t n = scanned.total;

  std::error_code ec;
  fs::create_directories(file.parent_path(), ec);
  const fs::path tmp = detail::temporary_index_path(file);
  TemporaryFile remover{tmp};
  Build b(params, n, threads);
  NL2SQL_RETURN_IF_ERROR(b.open(tmp));
  b.write_values(detail::index_header(db_id, *fp, params, n, scanned.columns, scanned.skipped), work,
                 scanned.raw_bytes, scanned.norm_bytes);
  b.write_band_keys();
  b.sort_bands();
  NL2SQL_RETURN_IF_ERROR(b.finish(tmp));
  timings.index_s += seconds_since(t0);
  auto idx = move_into_place(tmp, file, [&]() -> Result<ValueIndex> {
    remover.keep = true;
    return open_file(file, false);
  });
  if (!idx) return idx.status();
  idx->timings_ = timings;
  return idx;
}

Result<ValueIndex> ValueIndex::build(const std::string& db_id, const fs::path& db_path,
                                     const data::Schema& schema, const IndexParams& params,
                                     const db::Executor& executor, size_t threads) {
  std::error_code ec;
  const fs::path dir = fs::temp_directory_path(ec);
  if (ec) return io_error("no temporary folder: " + ec.message());
  const fs::path file = dir / fmt::format("nl2sql-index-{}-{}.vidx", ::getpid(),
                                          core::xxh64(db_id + std::to_string(std::chrono::steady_clock::now()
                                                                                  .time_since_epoch()
                                                                                  .count())));
  auto idx = build(db_id, db_path, schema, params, executor, threads, file);
  fs::remove(file, ec);  // the open descriptor keeps it readable
  return idx;
}

}  // namespace nl2sql::context
