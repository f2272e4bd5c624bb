// The value index file's layout and its writer (private to the context layer): shared by the
// build, which streams an index straight into its file, and ValueIndex::save / load.
//
// Layout (format version 3, little-endian): "NL2VIDX\0", u32 version, u32 zero; then sections,
// each a u64 byte length, the bytes and zero padding to a multiple of 8 (so every section starts
// 8-aligned): the JSON header, the values' UTF-8 bytes, their u64 byte offsets (values + 1), the
// normalized values' u64 offsets in code points, their UTF-8 bytes, one table per LSH band and the
// short-value table (u64 entries key << 32 | value id, sorted), the lookup section (every
// table's key filter as u64 words, then every table's block directory: the u32 key of entries
// 0, kBlock, 2 kBlock, ...; tables in file order); last, the 64-bit XXH3 over the 64-bit XXH3 of
// every section's bytes in order (core::xxh64).
#pragma once

#include <xxhash.h>

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "nl2sql/context/value_index.h"
#include "nl2sql/core/status.h"

namespace nl2sql::context {

// What an opened index holds: its values in memory and the index file, open for pread.
struct ValueIndex::Storage {
  std::string raw;
  std::vector<uint64_t> raw_offsets;
  std::u32string norm;
  std::vector<uint64_t> norm_offsets;
  int fd = -1;
  Storage() = default;
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;
  ~Storage();
};

}  // namespace nl2sql::context

namespace nl2sql::context::detail {

inline constexpr char kIndexMagic[8] = {'N', 'L', '2', 'V', 'I', 'D', 'X', '\0'};
// 1: sections packed back to back, read into heap buffers, no short-value table.
// 2: sections 8-aligned, the short-value table after the bands; tables read block by block.
// 3: normalized values as UTF-8 (decoded when opened); the tables' block directories and key
//    filters stored in a lookup section (the build had them computed, every opening streamed
//    the tables to compute them again).
inline constexpr uint32_t kIndexFormatVersion = 3;
inline constexpr uint64_t kIndexPrologue = 16;

inline uint64_t padded8(uint64_t n) { return (n + 7) & ~uint64_t{7}; }

// The JSON header of an index file.
std::string index_header(const std::string& db_id, const std::string& fingerprint, const IndexParams& params,
                         size_t values, const std::vector<IndexedColumn>& columns,
                         const std::vector<SkippedColumn>& skipped);

// Reads exactly n bytes at `offset` of an open file (pread); false on a short read or an error.
bool read_block(int fd, void* p, size_t n, uint64_t offset);

// A temporary name beside `file`: written, then renamed, so a reader never sees half an index.
std::filesystem::path temporary_index_path(const std::filesystem::path& file);

// Writes one index file: sections in order through a buffer (begin_section / append /
// end_section), or reserved and filled later at their offsets (reserve_section, then write_at and
// set_sum, from any thread), then finish() adds the checksum and closes. Any failed write makes
// finish() fail.
class IndexFileWriter {
 public:
  IndexFileWriter() = default;
  ~IndexFileWriter();
  IndexFileWriter(const IndexFileWriter&) = delete;
  IndexFileWriter& operator=(const IndexFileWriter&) = delete;

  Status open(const std::filesystem::path& file);  // creates or truncates; writes the prologue
  void begin_section(uint64_t length);
  void append(const void* p, size_t n);
  void end_section();
  // A section of `length` bytes written later; returns the file offset of its first byte.
  uint64_t reserve_section(uint64_t length, size_t* index);
  void set_sum(size_t index, uint64_t sum) { sums_[index] = sum; }
  bool write_at(const void* p, size_t n, uint64_t offset) const;  // thread-safe
  bool read_at(void* p, size_t n, uint64_t offset) const;         // thread-safe
  Status finish();

 private:
  void raw(const void* p, size_t n);
  void flush();

  std::filesystem::path file_;
  int fd_ = -1;
  uint64_t pos_ = 0;  // file offset of the next buffered byte
  std::vector<char> buf_;
  XXH3_state_t* state_ = nullptr;
  uint64_t section_left_ = 0;
  std::vector<uint64_t> sums_;
  bool ok_ = true;
  mutable std::atomic<bool> io_failed_{false};
};

}  // namespace nl2sql::context::detail
