// The value index file: a JSON header (db_id, fingerprint, parameters, counts) and binary
// sections (layout in index_file.h), with a checksum over all of them. IndexFileWriter writes
// them (the build streams into it; save() copies an index); opening reads the values and the
// lookup section (the tables' key filters and block directories) into memory, streams the
// tables through a small buffer for the checksum (not when opening the file a build has just
// written), checks it, and keeps the file open for the lookups' preads. A file that does not check out
// exactly is refused, never half-used.
#include "nl2sql/context/value_index.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <span>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "index_file.h"
#include "nl2sql/context/text_match.h"
#include "nl2sql/core/files.h"
#include "nl2sql/core/hash.h"

namespace nl2sql::context {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// Reads exactly n bytes at `offset` (pread, retried on short reads).
bool read_at(int fd, void* p, size_t n, uint64_t offset) {
  auto* out = static_cast<char*>(p);
  while (n > 0) {
    ssize_t got = ::pread(fd, out, n, static_cast<off_t>(offset));
    if (got <= 0) {
      if (got < 0 && errno == EINTR) continue;
      return false;
    }
    out += got;
    n -= static_cast<size_t>(got);
    offset += static_cast<uint64_t>(got);
  }
  return true;
}

bool write_all_at(int fd, const void* p, size_t n, uint64_t offset) {
  const auto* in = static_cast<const char*>(p);
  while (n > 0) {
    ssize_t put = ::pwrite(fd, in, n, static_cast<off_t>(offset));
    if (put <= 0) {
      if (put < 0 && errno == EINTR) continue;
      return false;
    }
    in += put;
    n -= static_cast<size_t>(put);
    offset += static_cast<uint64_t>(put);
  }
  return true;
}

json params_json(const IndexParams& p) {
  return json{{"ngram", p.ngram},
              {"num_perm", p.num_perm},
              {"bands", p.bands},
              {"rows", p.rows},
              {"short_length", p.short_length},
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
  p.short_length = j.at("short_length").get<int>();
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

}  // namespace

namespace detail {

std::string index_header(const std::string& db_id, const std::string& fingerprint, const IndexParams& params,
                         size_t values, const std::vector<IndexedColumn>& columns,
                         const std::vector<SkippedColumn>& skipped) {
  json header;
  header["db_id"] = db_id;
  header["fingerprint"] = fingerprint;
  header["params"] = params_json(params);
  header["values"] = values;
  header["columns"] = json::array();
  for (const auto& c : columns)
    header["columns"].push_back({{"table", c.table}, {"column", c.column}, {"first", c.first},
                                 {"count", c.count}, {"dropped_long", c.dropped_long}});
  header["skipped"] = json::array();
  for (const auto& s : skipped)
    header["skipped"].push_back({{"table", s.table}, {"column", s.column}, {"reason", s.reason}});
  return header.dump();
}

IndexFileWriter::~IndexFileWriter() {
  if (fd_ >= 0) ::close(fd_);
  if (state_) XXH3_freeState(state_);
}

Status IndexFileWriter::open(const fs::path& file) {
  file_ = file;
  fd_ = ::open(file.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) return io_error("cannot write " + file.string() + ": " + std::strerror(errno));
  buf_.reserve(size_t{1} << 20);
  state_ = XXH3_createState();
  const uint32_t zero = 0;
  raw(kIndexMagic, sizeof(kIndexMagic));
  raw(&kIndexFormatVersion, 4);
  raw(&zero, 4);
  return Status::ok();
}

void IndexFileWriter::raw(const void* p, size_t n) {
  const char* c = static_cast<const char*>(p);
  while (n > 0) {
    const size_t room = buf_.capacity() - buf_.size();
    const size_t take = std::min(room, n);
    buf_.insert(buf_.end(), c, c + take);
    c += take;
    n -= take;
    if (buf_.size() == buf_.capacity()) flush();
  }
}

void IndexFileWriter::flush() {
  if (buf_.empty()) return;
  if (!write_all_at(fd_, buf_.data(), buf_.size(), pos_)) ok_ = false;
  pos_ += buf_.size();
  buf_.clear();
}

void IndexFileWriter::begin_section(uint64_t length) {
  raw(&length, 8);
  XXH3_64bits_reset(state_);
  section_left_ = length;
  sums_.push_back(0);
}

void IndexFileWriter::append(const void* p, size_t n) {
  if (n > section_left_) {
    ok_ = false;  // more bytes than the section announced
    return;
  }
  section_left_ -= n;
  XXH3_64bits_update(state_, p, n);
  raw(p, n);
}

void IndexFileWriter::end_section() {
  static constexpr char kZeros[8] = {};
  if (section_left_ != 0) ok_ = false;
  sums_.back() = XXH3_64bits_digest(state_);
  // Padding: the section's length is what was announced, so the file position tells how much.
  const uint64_t at = pos_ + buf_.size();
  raw(kZeros, padded8(at) - at);
}

uint64_t IndexFileWriter::reserve_section(uint64_t length, size_t* index) {
  raw(&length, 8);
  flush();
  const uint64_t offset = pos_;
  pos_ += padded8(length);
  *index = sums_.size();
  sums_.push_back(0);
  return offset;
}

bool IndexFileWriter::write_at(const void* p, size_t n, uint64_t offset) const {
  if (write_all_at(fd_, p, n, offset)) return true;
  io_failed_ = true;
  return false;
}

bool IndexFileWriter::read_at(void* p, size_t n, uint64_t offset) const {
  return context::read_at(fd_, p, n, offset);
}

Status IndexFileWriter::finish() {
  const uint64_t sum = core::xxh64({reinterpret_cast<const char*>(sums_.data()), sums_.size() * 8});
  raw(&sum, 8);
  flush();
  // A reserved section's padding may end in a hole the last write_at did not reach.
  if (::ftruncate(fd_, static_cast<off_t>(pos_)) != 0) ok_ = false;
  const bool closed = ::close(fd_) == 0;
  fd_ = -1;
  if (!ok_ || io_failed_ || !closed) return io_error("write failed for " + file_.string());
  return Status::ok();
}

}  // namespace detail

// The parameters as the file records them: two builds with the same key build the same index.
std::string IndexParams::key() const { return params_json(*this).dump(); }

namespace detail {

fs::path temporary_index_path(const fs::path& file) {
  fs::path tmp = file;
  tmp += fmt::format(".tmp{}", core::xxh64(file.string() + std::to_string(
                                   std::chrono::steady_clock::now().time_since_epoch().count())));
  return tmp;
}

}  // namespace detail

std::string ValueIndex::lookup_section(const std::vector<const FileTable*>& tables) {
  std::string out;
  for (const FileTable* t : tables)
    out.append(reinterpret_cast<const char*>(t->filter.words().data()), t->filter.words().size() * 8);
  for (const FileTable* t : tables)
    out.append(reinterpret_cast<const char*>(t->first_keys.data()), t->first_keys.size() * 4);
  return out;
}

Status ValueIndex::save(const fs::path& file) const {
  const std::string h = detail::index_header(db_id_, fingerprint_, params_, size(), columns_, skipped_);
  std::error_code ec;
  fs::create_directories(file.parent_path(), ec);
  const fs::path tmp = detail::temporary_index_path(file);
  Status written = [&]() -> Status {
    detail::IndexFileWriter w;
    NL2SQL_RETURN_IF_ERROR(w.open(tmp));
    auto section = [&](const void* p, size_t n) {
      w.begin_section(n);
      w.append(p, n);
      w.end_section();
    };
    section(h.data(), h.size());
    section(raw_.data(), raw_.size());
    section(raw_offsets_.data(), raw_offsets_.size_bytes());
    // The normalized values' offsets in code points, then the values back to UTF-8 (the file's form).
    section(norm_offsets_.data(), norm_offsets_.size_bytes());
    const std::string norm = encode_utf8(norm_);
    section(norm.data(), norm.size());
    // The tables are copied from this index's file through a buffer.
    std::vector<char> buf(size_t{1} << 20);
    auto table = [&](const FileTable& t) {
      w.begin_section(t.entries * 8);
      for (uint64_t done = 0; done < t.entries * 8;) {
        const size_t chunk = static_cast<size_t>(std::min<uint64_t>(t.entries * 8 - done, buf.size()));
        if (!read_at(storage_->fd, buf.data(), chunk, t.offset + done)) return false;
        w.append(buf.data(), chunk);
        done += chunk;
      }
      w.end_section();
      return true;
    };
    std::vector<const FileTable*> all;
    for (const auto& t : band_tables_) all.push_back(&t);
    all.push_back(&short_table_);
    for (const FileTable* t : all)
      if (!table(*t)) return io_error("cannot read the tables of the index being saved");
    const std::string lookup = lookup_section(all);
    section(lookup.data(), lookup.size());
    return w.finish();
  }();
  if (!written) {
    fs::remove(tmp, ec);
    return written;
  }
  fs::rename(tmp, file, ec);
  if (ec) {
    fs::remove(tmp, ec);
    return io_error("cannot rename into " + file.string() + ": " + ec.message());
  }
  return Status::ok();
}

ValueIndex::Storage::~Storage() {
  if (fd >= 0) ::close(fd);
}

namespace detail {
bool read_block(int fd, void* p, size_t n, uint64_t offset) { return context::read_at(fd, p, n, offset); }
}  // namespace detail

Result<ValueIndex> ValueIndex::load(const fs::path& file) { return open_file(file, true); }

// Opening an index file: the sections walked in file order: 0 header, 1 values, 2 their
// offsets, 3 the normalized values' offsets, 4 the normalized values (decoded to code points as
// they are read, in 64 KB pieces cut before a byte that starts a UTF-8 sequence, which decodes
// as the values one by one would: every value is whole UTF-8), then the tables (read only when
// verifying, through a 1 MB buffer, for their XXH3; lookups read them in place later) and, last,
// the lookup section (read straight into the tables' filters and directories). No section is
// held twice. Every section's XXH3 is taken on the way; the checksum is compared before any
// inconsistency found on the way is reported.
class ValueIndex::FileReader {
 public:
  FileReader(const fs::path& file, int fd, uint64_t size, bool verify, Storage& storage)
      : file_(file), fd_(fd), size_(size), verify_(verify), storage_(storage), st_(XXH3_createState()) {}
  ~FileReader() { XXH3_freeState(st_); }
  FileReader(const FileReader&) = delete;
  FileReader& operator=(const FileReader&) = delete;

  Status corrupt(const std::string& what) const {
    return Status(ErrorCode::kInvalidInput, file_.string() + ": not a usable value index (" + what + ")");
  }

  Status check_prologue() const {
    char prologue[detail::kIndexPrologue];
    if (size_ < detail::kIndexPrologue + 8 || !read_at(fd_, prologue, detail::kIndexPrologue, 0))
      return corrupt("truncated");
    if (std::memcmp(prologue, detail::kIndexMagic, sizeof(detail::kIndexMagic)) != 0) return corrupt("bad magic");
    uint32_t version = 0;
    std::memcpy(&version, prologue + 8, 4);
    if (version != detail::kIndexFormatVersion)
      return corrupt(fmt::format("format version {}, this binary reads version {}", version, detail::kIndexFormatVersion));
    return Status::ok();
  }

  // Every section, then the stored checksum.
  Status read_sections() {
    uint64_t pos = detail::kIndexPrologue;
    const uint64_t end = size_ - 8;
    while (pos < end) {
      uint64_t len = 0;
      if (pos + 8 > end || !read_at(fd_, &len, 8, pos)) return corrupt("truncated");
      if (len > end - pos - 8 || detail::padded8(len) > end - pos - 8) return corrupt("truncated");
      const uint64_t at = pos + 8;
      const size_t i = sections_.size();
      const bool last = at + detail::padded8(len) == end;
      sections_.push_back({at, len});
      XXH3_64bits_reset(st_);
      NL2SQL_RETURN_IF_ERROR(read_section(i, at, len, last));
      sums_.push_back(XXH3_64bits_digest(st_));
      pos = at + detail::padded8(len);
    }
    std::vector<char>().swap(buf_);
    uint64_t stored = 0;
    if (pos != end || !read_at(fd_, &stored, 8, end)) return corrupt("truncated");
    if (verify_ && stored != core::xxh64({reinterpret_cast<const char*>(sums_.data()), sums_.size() * 8}))
      return corrupt("checksum mismatch");
    if (sections_.size() < 8) return corrupt("truncated");
    if (!problem_.empty()) return corrupt(problem_);
    return Status::ok();
  }

  // The header's names, parameters, columns and skipped columns into `idx`.
  Status read_header(ValueIndex& idx) const {
    try {
      json hj = json::parse(header_);
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
    return Status::ok();
  }

  // The tables into `idx`, once the header gave the number of bands.
  Status take_tables(ValueIndex& idx) {
    const size_t bands = static_cast<size_t>(idx.params_.bands);
    if (sections_.size() != 7 + bands || tables_.size() != bands + 1) return corrupt("section count");
    for (size_t t = 0; t < bands; ++t) idx.band_tables_.push_back(std::move(tables_[t]));
    idx.short_table_ = std::move(tables_[bands]);
    return Status::ok();
  }

 private:
  struct Section {
    uint64_t offset, size;
  };

  // Reads n bytes at `from` into p, hashed.
  bool take(void* p, size_t n, uint64_t from) {
    if (!read_at(fd_, p, n, from)) return false;
    XXH3_64bits_update(st_, p, n);
    return true;
  }

  Status read_section(size_t i, uint64_t at, uint64_t len, bool last) {
    bool ok = true;
    if (i == 0) {
      header_.resize(len);
      ok = take(header_.data(), len, at);
    } else if (i == 1) {
      storage_.raw.resize(len);
      ok = take(storage_.raw.data(), len, at);
    } else if (i == 2 || i == 3) {
      if (len % 8) return corrupt("section sizes");
      auto& v = i == 2 ? storage_.raw_offsets : storage_.norm_offsets;
      v.resize(len / 8);
      ok = take(v.data(), len, at);
    } else if (i == 4) {
      return read_normalized(at, len);
    } else if (last) {
      return read_lookup(at, len);
    } else {
      if (len % 8) return corrupt("section sizes");
      if (verify_) {
        if (buf_.size() < (size_t{1} << 20)) buf_.resize(size_t{1} << 20);
        for (uint64_t done = 0; ok && done < len;) {
          const size_t chunk = static_cast<size_t>(std::min<uint64_t>(len - done, buf_.size()));
          ok = take(buf_.data(), chunk, at + done);
          done += chunk;
        }
      }
    }
    return ok ? Status::ok() : corrupt("truncated");
  }

  // Section 4, decoded piece by piece into the storage's code points.
  Status read_normalized(uint64_t at, uint64_t len) {
    const uint64_t points = storage_.norm_offsets.empty() ? 0 : storage_.norm_offsets.back();
    if (points > len) return corrupt("inconsistent sizes");  // a byte at least per code point
    storage_.norm.reserve(points);
    std::u32string part;
    for (uint64_t done = 0; done < len;) {
      const size_t chunk = static_cast<size_t>(std::min<uint64_t>(len - done, buf_.size()));
      if (!read_at(fd_, buf_.data(), chunk, at + done)) return corrupt("truncated");
      size_t cut = chunk;
      if (done + chunk < len) {
        size_t start = chunk - 1;
        while (start > 0 && (static_cast<unsigned char>(buf_[start]) & 0xC0) == 0x80) --start;
        if (start > 0) cut = start;  // the sequence starting there goes with the next piece
      }
      XXH3_64bits_update(st_, buf_.data(), cut);
      decode_utf8_into(std::string_view(buf_.data(), cut), part);
      if (storage_.norm.size() + part.size() > points) {
        if (problem_.empty()) problem_ = "inconsistent sizes";
      } else {
        storage_.norm += part;
      }
      done += cut;
    }
    if (storage_.norm.size() != points && problem_.empty()) problem_ = "inconsistent sizes";
    return Status::ok();
  }

  // The lookup section: every table's filter words, then every table's directory.
  Status read_lookup(uint64_t at, uint64_t len) {
    tables_.resize(sections_.size() - 6);
    uint64_t need = 0;
    for (size_t t = 0; t < tables_.size(); ++t) {
      FileTable& ft = tables_[t];
      ft.offset = sections_[5 + t].offset;
      ft.entries = sections_[5 + t].size / 8;
      ft.filter = KeyFilter(ft.entries);
      ft.first_keys.resize((ft.entries + kBlock - 1) / kBlock);
      need += ft.filter.words().size() * 8 + ft.first_keys.size() * 4;
    }
    if (len != need) return corrupt("section sizes");
    uint64_t from = at;
    for (auto& ft : tables_) {
      auto& words = ft.filter.words();
      if (!take(words.data(), words.size() * 8, from)) return corrupt("truncated");
      from += words.size() * 8;
    }
    for (auto& ft : tables_) {
      if (!take(ft.first_keys.data(), ft.first_keys.size() * 4, from)) return corrupt("truncated");
      from += ft.first_keys.size() * 4;
    }
    return Status::ok();
  }

  const fs::path& file_;
  const int fd_;
  const uint64_t size_;
  const bool verify_;
  Storage& storage_;
  XXH3_state_t* st_;
  std::vector<Section> sections_;
  std::vector<uint64_t> sums_;
  std::string header_, problem_;
  std::vector<char> buf_ = std::vector<char>(size_t{1} << 16);
  std::vector<FileTable> tables_;
};

Result<ValueIndex> ValueIndex::open_file(const fs::path& file, bool verify) {
  auto storage = std::make_shared<Storage>();
  storage->fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
  const int fd = storage->fd;
  if (fd < 0) {
    if (errno == ENOENT) return not_found(file.string() + ": no such file");
    return io_error("cannot read " + file.string() + ": " + std::strerror(errno));
  }
  struct stat sb {};
  if (::fstat(fd, &sb) != 0) return io_error("cannot stat " + file.string() + ": " + std::strerror(errno));
  FileReader reader(file, fd, static_cast<uint64_t>(sb.st_size), verify, *storage);
  NL2SQL_RETURN_IF_ERROR(reader.check_prologue());
  NL2SQL_RETURN_IF_ERROR(reader.read_sections());
  ValueIndex idx;
  NL2SQL_RETURN_IF_ERROR(reader.read_header(idx));
  NL2SQL_RETURN_IF_ERROR(reader.take_tables(idx));
  idx.raw_ = storage->raw;
  idx.raw_offsets_ = storage->raw_offsets;
  idx.norm_ = storage->norm;
  idx.norm_offsets_ = storage->norm_offsets;
  idx.storage_ = std::move(storage);

  const size_t n = idx.raw_offsets_.empty() ? 0 : idx.raw_offsets_.size() - 1;
  if (idx.norm_offsets_.size() != n + 1 ||
      (n > 0 && (idx.raw_offsets_.back() != idx.raw_.size() || idx.norm_offsets_.back() != idx.norm_.size())))
    return reader.corrupt("inconsistent sizes");
  for (size_t id = 0; id < n; ++id)
    if (idx.raw_offsets_[id] > idx.raw_offsets_[id + 1] || idx.norm_offsets_[id] > idx.norm_offsets_[id + 1])
      return reader.corrupt("inconsistent sizes");
  for (const auto& t : idx.band_tables_)
    if (t.entries != n) return reader.corrupt("band tables");
  // Columns must tile the ids in order (column_of searches them).
  uint64_t next = 0;
  for (const auto& col : idx.columns_) {
    if (col.first != next || col.count == 0) return reader.corrupt("column ranges");
    next += col.count;
  }
  if (next != n) return reader.corrupt("column ranges");
  return idx;
}

}  // namespace nl2sql::context
