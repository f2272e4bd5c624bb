#include "nl2sql/context/value_index.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <fstream>
#include <mutex>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "nl2sql/context/text_match.h"
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

constexpr char kMagic[8] = {'N', 'L', '2', 'V', 'I', 'D', 'X', '\0'};
constexpr uint32_t kFormatVersion = 1;

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

bool looks_like_url(std::string_view s) {
  auto starts = [&](std::string_view p) {
    if (s.size() < p.size()) return false;
    for (size_t i = 0; i < p.size(); ++i)
      if (std::tolower(static_cast<unsigned char>(s[i])) != p[i]) return false;
    return true;
  };
  return starts("http://") || starts("https://") || starts("www.") || starts("ftp://");
}

// Band keys of one signature: the band's rows folded into one word (multiply-xor per row, seeded
// by the band number), mixed, truncated to 32 bits. Cheaper than XXH3 per band for the few rows
// a band has.
void band_keys(const uint32_t* sig, int bands, int rows, uint32_t* out) {
  for (int b = 0; b < bands; ++b) {
    uint64_t h = 0x9E3779B97F4A7C15ull * static_cast<uint64_t>(b + 1);
    const uint32_t* r = sig + static_cast<ptrdiff_t>(b) * rows;
    for (int i = 0; i < rows; ++i) h = (h ^ r[i]) * 0xD6E8FEB86659FD93ull;
    out[b] = static_cast<uint32_t>(mix64(h) >> 32);
  }
}

// One column's share of a build.
struct ColumnWork {
  const data::Table* table = nullptr;
  const data::Column* column = nullptr;
  bool skipped = false;
  std::string reason;
  std::string raw;
  std::vector<uint64_t> raw_len;
  std::u32string norm;
  std::vector<uint64_t> norm_len;
  std::vector<uint32_t> keys;  // bands per value
  size_t dropped_long = 0;
  double scan_s = 0, index_s = 0;
};

void process_column(const fs::path& db_path, const IndexParams& p, const db::Executor& ex,
                    const MinHasher& hasher, ColumnWork& w) {
  const auto& rules = p.skip;
  const std::string& name = w.column->name;
  auto skip = [&](std::string why) {
    w.skipped = true;
    w.reason = std::move(why);
  };
  if (rules.skip_id_columns && is_identifier_name(name)) return skip("identifier name");
  const std::string col = core::quote_sql_identifier(name), tab = core::quote_sql_identifier(w.table->name);

  auto t0 = std::chrono::steady_clock::now();
  db::QueryLimits sample_limits;
  sample_limits.timeout_s = p.scan_timeout_s;
  sample_limits.row_cap = 0;
  auto sample = ex.run(db_path,
                       fmt::format("SELECT {} FROM {} WHERE {} IS NOT NULL LIMIT {}", col, tab, col,
                                   rules.sample_rows),
                       sample_limits);
  w.scan_s += seconds_since(t0);
  if (!sample.ok()) return skip("sample query failed: " + sample.error);
  const auto& rows = sample.result.rows;
  if (rows.empty()) return skip("empty");
  size_t text = 0, urls = 0, chars = 0;
  for (const auto& r : rows) {
    if (r[0].type != db::ValueType::kText) continue;
    ++text;
    urls += looks_like_url(r[0].s);
    chars += decode_utf8(r[0].s).size();
  }
  double text_share = static_cast<double>(text) / static_cast<double>(rows.size());
  if (text_share < rules.min_text_share)
    return skip(fmt::format("not text ({:.0f}% of sampled values are text)", 100 * text_share));
  double url_share = static_cast<double>(urls) / static_cast<double>(text);
  if (url_share > rules.max_url_share)
    return skip(fmt::format("URLs ({:.0f}% of sampled values)", 100 * url_share));
  double avg_len = static_cast<double>(chars) / static_cast<double>(text);
  if (avg_len > rules.max_avg_length)
    return skip(fmt::format("long free text (average {:.0f} characters)", avg_len));

  t0 = std::chrono::steady_clock::now();
  db::QueryLimits scan_limits;
  scan_limits.timeout_s = p.scan_timeout_s;
  scan_limits.row_cap = rules.max_distinct;
  auto scan = ex.run(db_path,
                     fmt::format("SELECT DISTINCT {} FROM {} WHERE typeof({}) = 'text'", col, tab, col),
                     scan_limits);
  w.scan_s += seconds_since(t0);
  if (scan.status == db::ExecStatus::kRowCap)
    return skip(fmt::format("more than {} distinct values", rules.max_distinct));
  if (!scan.ok()) return skip("scan failed: " + scan.error);

  t0 = std::chrono::steady_clock::now();
  const int bands = p.bands, nrows = p.rows;
  std::vector<uint32_t> sig(static_cast<size_t>(p.num_perm));
  for (auto& r : scan.result.rows) {
    std::u32string n = normalize_code_points(r[0].s);
    if (n.empty()) continue;
    if (n.size() > rules.max_value_length) {
      ++w.dropped_long;
      continue;
    }
    hasher.signature_into(char_ngram_hashes(n, p.ngram), sig.data());
    size_t at = w.keys.size();
    w.keys.resize(at + static_cast<size_t>(bands));
    band_keys(sig.data(), bands, nrows, w.keys.data() + at);
    w.raw += r[0].s;
    w.raw_len.push_back(r[0].s.size());
    w.norm += n;
    w.norm_len.push_back(n.size());
  }
  w.index_s += seconds_since(t0);
}

// Sections are written and read straight from/to the index's own buffers (no whole-file copy:
// a BIRD-scale index is hundreds of MB). Each section is (u64 byte length, bytes); the file ends
// with XXH64 over the XXH64 of every section, header included.
class SectionWriter {
 public:
  explicit SectionWriter(std::ofstream& out) : out_(out) {}
  void raw(const void* p, size_t n) { out_.write(static_cast<const char*>(p), static_cast<std::streamsize>(n)); }
  void section(const void* p, size_t n) {
    uint64_t len = n;
    raw(&len, 8);
    raw(p, n);
    sums_.push_back(core::xxh64({static_cast<const char*>(p), n}));
  }
  template <typename T>
  void section(const std::vector<T>& v) { section(v.data(), v.size() * sizeof(T)); }
  void finish() {
    uint64_t sum = core::xxh64({reinterpret_cast<const char*>(sums_.data()), sums_.size() * 8});
    raw(&sum, 8);
  }

 private:
  std::ofstream& out_;
  std::vector<uint64_t> sums_;
};

class SectionReader {
 public:
  SectionReader(std::ifstream& in, uint64_t file_size) : in_(in), left_(file_size) {}
  bool raw(void* p, size_t n) {
    if (n > left_) return false;
    in_.read(static_cast<char*>(p), static_cast<std::streamsize>(n));
    left_ -= n;
    return static_cast<bool>(in_);
  }
  template <typename Container>  // std::string, std::u32string or std::vector<T>
  bool section(Container& c) {
    using T = typename Container::value_type;
    uint64_t len = 0;
    if (!raw(&len, 8) || len > left_ || len % sizeof(T) != 0) return false;
    c.resize(len / sizeof(T));
    if (!raw(c.data(), len)) return false;
    sums_.push_back(core::xxh64({reinterpret_cast<const char*>(c.data()), len}));
    return true;
  }
  uint64_t left() const { return left_; }
  bool checksum_ok() {
    uint64_t stored = 0;
    if (!raw(&stored, 8) || left_ != 0) return false;
    return stored == core::xxh64({reinterpret_cast<const char*>(sums_.data()), sums_.size() * 8});
  }

 private:
  std::ifstream& in_;
  uint64_t left_;
  std::vector<uint64_t> sums_;
};

json params_json(const IndexParams& p) {
  return json{{"ngram", p.ngram},
              {"num_perm", p.num_perm},
              {"bands", p.bands},
              {"rows", p.rows},
              {"seed", p.seed},
              {"normalization_version", kNormalizationVersion},
              {"skip",
               {{"skip_id_columns", p.skip.skip_id_columns},
                {"min_text_share", p.skip.min_text_share},
                {"max_url_share", p.skip.max_url_share},
                {"max_avg_length", p.skip.max_avg_length},
                {"max_distinct", p.skip.max_distinct},
                {"sample_rows", p.skip.sample_rows},
                {"max_value_length", p.skip.max_value_length}}}};
}

IndexParams params_from_json(const json& j) {
  IndexParams p;
  p.ngram = j.at("ngram").get<int>();
  p.num_perm = j.at("num_perm").get<int>();
  p.bands = j.at("bands").get<int>();
  p.rows = j.at("rows").get<int>();
  p.seed = j.at("seed").get<uint64_t>();
  const auto& s = j.at("skip");
  p.skip.skip_id_columns = s.at("skip_id_columns").get<bool>();
  p.skip.min_text_share = s.at("min_text_share").get<double>();
  p.skip.max_url_share = s.at("max_url_share").get<double>();
  p.skip.max_avg_length = s.at("max_avg_length").get<double>();
  p.skip.max_distinct = s.at("max_distinct").get<size_t>();
  p.skip.sample_rows = s.at("sample_rows").get<size_t>();
  p.skip.max_value_length = s.at("max_value_length").get<size_t>();
  return p;
}

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

std::string IndexParams::key() const { return params_json(*this).dump(); }

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
  band_keys(sig.data(), params_.bands, params_.rows, keys.data());
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

Result<ValueIndex> ValueIndex::build(const std::string& db_id, const fs::path& db_path,
                                     const data::Schema& schema, const IndexParams& params,
                                     const db::Executor& executor, size_t threads) {
  NL2SQL_RETURN_IF_ERROR(params.validate());
  auto fp = db::database_fingerprint(db_path);
  if (!fp) return fp.status().with_context(db_id);
  std::vector<ColumnWork> work;
  for (const auto& t : schema.tables)
    for (const auto& c : t.columns) {
      ColumnWork w;
      w.table = &t;
      w.column = &c;
      work.push_back(std::move(w));
    }
  MinHasher hasher(params.num_perm, params.seed);
  core::parallel_for(work.size(), threads == 0 ? core::default_threads() : threads,
                     [&](size_t i) { process_column(db_path, params, executor, hasher, work[i]); });

  ValueIndex idx;
  idx.db_id_ = db_id;
  idx.fingerprint_ = *fp;
  idx.params_ = params;
  idx.params_key_ = params.key();
  std::vector<IndexedColumn> columns;
  std::vector<SkippedColumn> skipped;
  std::string raw;
  std::u32string norm;
  std::vector<uint64_t> raw_off{0}, norm_off{0};
  auto t0 = std::chrono::steady_clock::now();
  size_t total = 0;
  for (const auto& w : work) total += w.raw_len.size();
  if (total >= 0xFFFFFFFFull) return invalid_input(db_id + ": more than 2^32 - 1 values");
  // Band-major (all values' keys of band 0, then band 1, …) so that each band table is filled
  // by a sequential read.
  const size_t bands = static_cast<size_t>(params.bands);
  std::vector<uint32_t> keys(total * bands);
  for (auto& w : work) {
    idx.timings_.scan_s += w.scan_s;
    idx.timings_.index_s += w.index_s;
    if (w.skipped) {
      skipped.push_back({w.table->name, w.column->name, w.reason});
      continue;
    }
    if (w.raw_len.empty()) {
      skipped.push_back({w.table->name, w.column->name, "no text values"});
      continue;
    }
    const size_t c_first = raw_off.size() - 1;
    IndexedColumn c{w.table->name, w.column->name, static_cast<uint32_t>(c_first),
                    static_cast<uint32_t>(w.raw_len.size()), w.dropped_long};
    columns.push_back(std::move(c));
    raw += w.raw;
    norm += w.norm;
    for (size_t i = 0; i < w.raw_len.size(); ++i) {
      raw_off.push_back(raw_off.back() + w.raw_len[i]);
      norm_off.push_back(norm_off.back() + w.norm_len[i]);
    }
    const size_t first = c_first;
    for (size_t j = 0; j < w.raw_len.size(); ++j)
      for (size_t b = 0; b < bands; ++b) keys[b * total + first + j] = w.keys[j * bands + b];
    w = ColumnWork{};  // release memory early
  }
  idx.set_contents(std::move(columns), std::move(skipped), std::move(raw), std::move(raw_off),
                   std::move(norm), std::move(norm_off), keys,
                   threads == 0 ? core::default_threads() : threads);
  idx.timings_.index_s += seconds_since(t0);
  return idx;
}

Status ValueIndex::save(const fs::path& file) const {
  json header;
  header["db_id"] = db_id_;
  header["fingerprint"] = fingerprint_;
  header["params"] = params_json(params_);
  header["values"] = size();
  header["columns"] = json::array();
  for (const auto& c : columns_)
    header["columns"].push_back({{"table", c.table}, {"column", c.column}, {"first", c.first},
                                 {"count", c.count}, {"dropped_long", c.dropped_long}});
  header["skipped"] = json::array();
  for (const auto& s : skipped_)
    header["skipped"].push_back({{"table", s.table}, {"column", s.column}, {"reason", s.reason}});
  const std::string h = header.dump();

  std::error_code ec;
  fs::create_directories(file.parent_path(), ec);
  // Written to a temporary file and renamed, so a reader never sees half an index.
  fs::path tmp = file;
  tmp += fmt::format(".tmp{}", core::xxh64(file.string() + std::to_string(
                                   std::chrono::steady_clock::now().time_since_epoch().count())));
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) return io_error("cannot write " + tmp.string());
    SectionWriter w(out);
    w.raw(kMagic, sizeof(kMagic));
    w.raw(&kFormatVersion, 4);
    w.section(h.data(), h.size());
    w.section(raw_.data(), raw_.size());
    w.section(raw_offsets_);
    w.section(norm_.data(), norm_.size() * sizeof(char32_t));
    w.section(norm_offsets_);
    for (const auto& t : band_tables_) w.section(t);
    w.finish();
    out.flush();
    if (!out) {
      fs::remove(tmp, ec);
      return io_error("write failed for " + tmp.string());
    }
  }
  fs::rename(tmp, file, ec);
  if (ec) {
    fs::remove(tmp, ec);
    return io_error("cannot rename into " + file.string() + ": " + ec.message());
  }
  return Status::ok();
}

Result<ValueIndex> ValueIndex::load(const fs::path& file) {
  std::error_code ec;
  const uint64_t size = fs::file_size(file, ec);
  if (ec) return not_found(file.string() + ": " + ec.message());
  std::ifstream in(file, std::ios::binary);
  if (!in) return io_error("cannot read " + file.string());
  auto corrupt = [&](const std::string& what) {
    return Status(ErrorCode::kInvalidInput, file.string() + ": not a usable value index (" + what + ")");
  };
  SectionReader r(in, size);
  char magic[sizeof(kMagic)];
  uint32_t version = 0;
  if (!r.raw(magic, sizeof(magic)) || std::memcmp(magic, kMagic, sizeof(kMagic)) != 0) return corrupt("bad magic");
  if (!r.raw(&version, 4) || version != kFormatVersion) return corrupt("format version");
  std::string h;
  ValueIndex idx;
  if (!r.section(h) || !r.section(idx.raw_) || !r.section(idx.raw_offsets_) || !r.section(idx.norm_) ||
      !r.section(idx.norm_offsets_))
    return corrupt("truncated");
  while (r.left() > 8) {
    idx.band_tables_.emplace_back();
    if (!r.section(idx.band_tables_.back())) return corrupt("truncated");
  }
  // The checksum is checked before anything is interpreted.
  if (!r.checksum_ok()) return corrupt("checksum mismatch");
  try {
    json hj = json::parse(h);
    idx.db_id_ = hj.at("db_id").get<std::string>();
    idx.fingerprint_ = hj.at("fingerprint").get<std::string>();
    const json& pj = hj.at("params");
    if (pj.at("normalization_version").get<int>() != kNormalizationVersion) return corrupt("normalization version");
    idx.params_ = params_from_json(pj);
    idx.params_key_ = idx.params_.key();
    for (const auto& c : hj.at("columns"))
      idx.columns_.push_back({c.at("table").get<std::string>(), c.at("column").get<std::string>(),
                              c.at("first").get<uint32_t>(), c.at("count").get<uint32_t>(),
                              c.at("dropped_long").get<size_t>()});
    for (const auto& s : hj.at("skipped"))
      idx.skipped_.push_back({s.at("table").get<std::string>(), s.at("column").get<std::string>(),
                              s.at("reason").get<std::string>()});
  } catch (const std::exception& e) {
    return corrupt(std::string("header: ") + e.what());
  }
  if (idx.band_tables_.size() != static_cast<size_t>(idx.params_.bands)) return corrupt("band count");
  const size_t n = idx.raw_offsets_.empty() ? 0 : idx.raw_offsets_.size() - 1;
  if (idx.norm_offsets_.size() != n + 1 ||
      (n > 0 && (idx.raw_offsets_.back() != idx.raw_.size() || idx.norm_offsets_.back() != idx.norm_.size())))
    return corrupt("inconsistent sizes");
  for (const auto& t : idx.band_tables_)
    if (t.size() != n) return corrupt("band tables");
  idx.value_column_.assign(n, 0);
  for (uint32_t c = 0; c < idx.columns_.size(); ++c) {
    const auto& col = idx.columns_[c];
    if (static_cast<uint64_t>(col.first) + col.count > n) return corrupt("column ranges");
    for (uint32_t id = col.first; id < col.first + col.count; ++id) idx.value_column_[id] = c;
  }
  return idx;
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
