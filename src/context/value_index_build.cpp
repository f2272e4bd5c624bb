// Building a value index: every text column's distinct values read from the database (columns
// in parallel), skip rules, normalization, MinHash signatures; ValueIndex::set_contents then
// sorts the band tables.
#include "nl2sql/context/value_index.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <mutex>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "nl2sql/context/text_match.h"
#include "nl2sql/core/text.h"
#include "band_keys.h"
#include "nl2sql/core/thread_pool.h"
#include "nl2sql/db/executor.h"
#include "nl2sql/db/result_cache.h"

namespace nl2sql::context {
namespace fs = std::filesystem;

namespace {

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
    detail::band_keys(sig.data(), bands, nrows, w.keys.data() + at);
    w.raw += r[0].s;
    w.raw_len.push_back(r[0].s.size());
    w.norm += n;
    w.norm_len.push_back(n.size());
  }
  w.index_s += seconds_since(t0);
}

}  // namespace

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


}  // namespace nl2sql::context
