// ValueIndex: the distinct text values of one database, indexed for approximate lookup by
// MinHash LSH over character n-grams of their normalized form (context/text_match.h).
//
// Which columns are indexed is a deliberate rule (ColumnSkipRules), applied per column from a
// small sample and then from the DISTINCT scan itself, and every skipped column is reported with
// its reason:
//   - identifier-named columns (id, *_id, *Id, *ID): keys, never asked about by value;
//   - columns whose sampled non-null values are mostly not text (numbers, dates stored as
//     numbers, blobs) — this decides by stored values, not by declared type, because Spider and
//     BIRD declare types loosely;
//   - URL columns (most sampled values start with http://, https:// or www.);
//   - long free text (average sampled length above max_avg_length characters);
//   - huge cardinality (more than max_distinct distinct text values);
//   - empty columns.
// Single values longer than max_value_length characters are dropped and counted.
//
// LSH: a value's MinHash signature (num_perm permutations) is cut into `bands` bands of `rows`
// rows; two strings become candidates when any band agrees. The default 42 bands x 3 rows (126
// of 128 permutations) puts the S-curve's threshold at (1/42)^(1/3) ~= 0.29 Jaccard: a pair at
// Jaccard 0.3 is found with probability 0.68, at 0.4 with 0.94, at 0.5 with 0.996.
//
// Short values: LSH over 3-grams cannot see one-letter typos of short values (a substitution
// inside "blue" leaves one of its four padded 3-grams: Jaccard 1/7). Values of at most
// `short_length` code points (normalized) are therefore also indexed by their deletion
// neighbourhood: the value itself and every string one deletion away, hashed. A query of at most
// short_length + 1 code points looks up itself and its own one-deletion strings; any value one
// substitution, insertion, deletion or adjacent transposition away shares at least one of them,
// so it becomes a candidate exactly as the exhaustive scan would score it.
//
// Persistence: one file per database, `<index_dir>/<db_id>.vidx`, little-endian binary with a
// JSON header recording the database fingerprint (XXH3-128 of the file) and every parameter
// (IndexParams::key()); every section is length-prefixed and padded to 8 bytes, and the file
// ends with a 64-bit XXH3 over the XXH3 of each section (checked, reading the file through a
// small buffer, before anything is used). An opened index holds the values (stored and
// normalized) in memory and leaves the band and short-value tables, nine tenths of the file, in
// the file: a lookup reads the 1 KB blocks that can hold its key (one block, or a run of them for
// a key many values share) with one pread per table, found through a directory of each block's
// first key (a 256th of a table), and skipped when the table's key filter (a bit per slot of the
// keys' top bits) says the key is absent. Directories and filters are computed by the build from
// the sorted tables and stored in the file's lookup section, so opening reads them instead of
// the tables. The blocks come from the page cache, shared by
// every process using the file; no process's memory carries the tables. (Mapping the file was
// tried first: on Linux 6 kernels with large page-cache folios a touch maps a whole folio, and a
// few hundred lookups brought the whole tables into the process's resident memory.) Written to a
// temporary file and renamed, so concurrent builders never expose half a file. open_index()
// rebuilds when the file is missing, corrupt, of another format version, built from other bytes
// or with other parameters: a stale index is never used.
//
// Thread-safety: a built or loaded ValueIndex is immutable; every const member may be called
// from any number of threads (pread on a shared descriptor). Copies share the same storage.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "nl2sql/core/status.h"
#include "nl2sql/data/dataset.h"

namespace nl2sql::db {
class Executor;
}

namespace nl2sql::context {

struct ColumnSkipRules {
  bool skip_id_columns = true;     // id, *_id, *Id, *ID
  double min_text_share = 0.5;     // share of sampled non-null values stored as TEXT
  double max_url_share = 0.5;      // share of sampled text values that look like URLs
  double max_avg_length = 150;     // average characters of sampled text values
  size_t max_distinct = 500000;    // distinct text values in the column
  size_t sample_rows = 1000;       // rows sampled for the rules above
  size_t max_value_length = 300;   // longer single values are dropped (counted per column)
};

struct IndexParams {
  int ngram = 3;
  int num_perm = 128;
  int bands = 42;
  int rows = 3;
  int short_length = 8;  // values up to this many code points get the deletion index; 0: none
  uint64_t seed = 0x6e6c3273716c0001ull;
  ColumnSkipRules skip;
  double scan_timeout_s = 600;  // per DISTINCT scan

  // Canonical text of everything that changes an index's content (normalization version
  // included): any difference makes a persisted index stale.
  std::string key() const;
  Status validate() const;
};

struct IndexedColumn {
  std::string table, column;
  uint32_t first = 0;  // first value id of this column
  uint32_t count = 0;  // values indexed
  size_t dropped_long = 0;
};

struct SkippedColumn {
  std::string table, column, reason;
};

// Where time went while building one index (seconds, summed over worker threads).
struct BuildTimings {
  double scan_s = 0;   // SQLite: the sample and DISTINCT queries
  double index_s = 0;  // normalization, n-grams, MinHash, bands, writing the file
};

class ValueIndex {
 public:
  ValueIndex() = default;

  // Scans `db_path` through `executor` (read-only) and writes its index to `file` (through a
  // temporary file renamed into place), then returns it opened. Columns are scanned on up
  // to `threads` workers, then values are hashed in chunks whose band keys go straight into the
  // file, and each band table is sorted on its own: memory holds the values and a band or two,
  // never the band tables. Fails only when the database cannot be read at all or the file cannot
  // be written; a column whose query fails is skipped with the SQLite message as reason.
  static Result<ValueIndex> build(const std::string& db_id, const std::filesystem::path& db_path,
                                  const data::Schema& schema, const IndexParams& params,
                                  const db::Executor& executor, size_t threads,
                                  const std::filesystem::path& file);
  // The same into a temporary file, removed once opened (the open descriptor keeps it readable).
  static Result<ValueIndex> build(const std::string& db_id, const std::filesystem::path& db_path,
                                  const data::Schema& schema, const IndexParams& params,
                                  const db::Executor& executor, size_t threads);

  Status save(const std::filesystem::path& file) const;
  static Result<ValueIndex> load(const std::filesystem::path& file);

  // Value ids that share at least one LSH band with the normalized query, or (for a short
  // query) a deletion-neighbourhood key, ascending.
  std::vector<uint32_t> candidates(std::u32string_view normalized_query) const;
  // The two sources apart (ascending each): the LSH bands alone, the short-value index alone
  // (empty for a query longer than short_length + 1).
  std::vector<uint32_t> lsh_candidates(std::u32string_view normalized_query) const;
  std::vector<uint32_t> short_candidates(std::u32string_view normalized_query) const;

  size_t size() const { return raw_offsets_.empty() ? 0 : raw_offsets_.size() - 1; }
  std::string_view value(uint32_t id) const {
    return raw_.substr(raw_offsets_[id], raw_offsets_[id + 1] - raw_offsets_[id]);
  }
  std::u32string_view normalized(uint32_t id) const {
    return norm_.substr(norm_offsets_[id], norm_offsets_[id + 1] - norm_offsets_[id]);
  }
  const IndexedColumn& column_of(uint32_t id) const;
  // The value id of `value` stored exactly so in table.column (case-insensitive names), or -1.
  int64_t find_exact(std::string_view table, std::string_view column, std::string_view value) const;

  const std::string& db_id() const { return db_id_; }
  const std::string& fingerprint() const { return fingerprint_; }
  const std::string& params_key() const { return params_key_; }
  const IndexParams& params() const { return params_; }
  const std::vector<IndexedColumn>& columns() const { return columns_; }
  const std::vector<SkippedColumn>& skipped() const { return skipped_; }
  const BuildTimings& timings() const { return timings_; }
  // Bytes of this index held in memory: the values, their normalized forms and offsets, and the
  // tables' block directories; the band and short-value tables themselves stay in the file.
  size_t memory_bytes() const;
  // Entries of the short-value table (value, deletion string) pairs; for reports and tests.
  size_t short_entries() const { return short_table_.entries; }

 private:
  // load(), or with verify false the same without comparing the checksum (for the file a build
  // has just written and closed).
  static Result<ValueIndex> open_file(const std::filesystem::path& file, bool verify);
  std::vector<uint32_t> band_keys_of(std::u32string_view normalized) const;

  // Which keys a table holds, approximately: one bit per slot of the keys' top bits, set for every
  // key in the table, so a lookup whose bit is clear needs no read (never a false negative). Slots:
  // the smallest power of two not below half the entries (at most 1/64 of the table's bytes).
  // Built with the table and stored in the file; at x300 it spares most of a question's reads.
  class KeyFilter {
   public:
    KeyFilter() = default;
    explicit KeyFilter(size_t entries);
    bool enabled() const { return !bits_.empty(); }
    void add(uint32_t key) { bits_[key >> shift_ >> 6] |= uint64_t{1} << ((key >> shift_) & 63); }
    bool may_hold(uint32_t key) const {
      return bits_.empty() || (bits_[key >> shift_ >> 6] >> ((key >> shift_) & 63) & 1);
    }
    size_t bytes() const { return bits_.size() * 8; }
    // The slot bits as 64-bit words (stored in the index file's lookup section).
    const std::vector<uint64_t>& words() const { return bits_; }
    std::vector<uint64_t>& words() { return bits_; }

   private:
    std::vector<uint64_t> bits_;
    int shift_ = 32;
  };
  // A sorted table of (key << 32 | value id) entries left in the index file: a lookup reads the
  // one block (rarely two) that can hold the key, found through the first key of every block.
  struct FileTable {
    uint64_t offset = 0;  // file offset of the first entry
    size_t entries = 0;
    std::vector<uint32_t> first_keys;  // key of entry i * kBlock
    KeyFilter filter;
  };
  static constexpr size_t kBlock = 128;  // entries per block (1 KB)
  // The lookup section of an index file: every table's key filter words (u64), then every
  // table's block directory (u32 first keys), tables in file order.
  static std::string lookup_section(const std::vector<const FileTable*>& tables);
  // Calls sink(value id) for every entry with `key` (one pread of the blocks that can hold it,
  // through `scratch`).
  template <class Sink>
  void for_each_match(const FileTable& t, uint32_t key, std::vector<uint64_t>& scratch, Sink&& sink) const;
  // The distinct value ids of the LSH bands and/or the short-value table, ascending.
  std::vector<uint32_t> collect(std::u32string_view normalized_query, bool lsh, bool short_values) const;

  struct Storage;  // the values in memory and the open index file (value_index_file.cpp)
  class Build;     // a build's file-writing steps (value_index_build.cpp)
  class FileReader;  // an index file's sections read on opening (value_index_file.cpp)

  std::string db_id_, fingerprint_, params_key_;
  IndexParams params_;
  std::vector<IndexedColumn> columns_;
  std::vector<SkippedColumn> skipped_;
  std::shared_ptr<const Storage> storage_;  // shared by copies; closes the file with the last one
  std::string_view raw_;                    // every value's stored text, concatenated
  std::span<const uint64_t> raw_offsets_;   // size()+1
  std::u32string_view norm_;                // every value's normalized code points, concatenated
  std::span<const uint64_t> norm_offsets_;
  std::vector<FileTable> band_tables_;      // one per band
  FileTable short_table_;                   // deletion neighbourhood of the short values
  BuildTimings timings_;
};

struct IndexOptions {
  IndexParams params;
  std::filesystem::path index_dir;  // empty: default_index_dir()
  bool force = false;               // rebuild even when fresh
  size_t threads = 0;               // 0: one per core
};

// $NL2SQL_CACHE_DIR/index or ~/.cache/nl2sql/index.
std::filesystem::path default_index_dir();
std::filesystem::path index_file(const std::filesystem::path& index_dir, const std::string& db_id);

struct IndexStatus {
  std::string db_id;
  std::filesystem::path file;
  std::string action;  // "fresh" (loaded) | "built: <why>"
  size_t values = 0;
  size_t columns = 0;
  std::vector<SkippedColumn> skipped;
  BuildTimings timings;  // zero when loaded
};

// Loads the index of one database when fresh; otherwise builds and saves it.
Result<ValueIndex> open_index(const std::string& db_id, const std::filesystem::path& db_path,
                              const data::Schema& schema, const IndexOptions& options,
                              const db::Executor& executor, IndexStatus* status = nullptr);

// open_index for many databases at once: databases are processed in parallel (columns within
// one database too). Returns one status per database, in input order. Indexes are not kept.
struct DatabaseRef {
  std::string db_id;
  std::filesystem::path db_path;
  const data::Schema* schema = nullptr;
};
Result<std::vector<IndexStatus>> ensure_indexes(const std::vector<DatabaseRef>& databases,
                                                const IndexOptions& options,
                                                const db::Executor& executor);

// True when a column name reads as an identifier (id, *_id, *Id, *ID, *_Id).
bool is_identifier_name(std::string_view name);

}  // namespace nl2sql::context
