// The value index file: a JSON header (db_id, fingerprint, parameters, counts) and binary
// sections written from and read into the index's own buffers, with a checksum over all of
// them; a file that does not read back exactly is refused, never half-used.
#include "nl2sql/context/value_index.h"

#include <cstring>
#include <fstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "nl2sql/context/text_match.h"
#include "nl2sql/core/files.h"
#include "nl2sql/core/hash.h"

namespace nl2sql::context {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr char kMagic[8] = {'N', 'L', '2', 'V', 'I', 'D', 'X', '\0'};
constexpr uint32_t kFormatVersion = 1;

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

}  // namespace

// The parameters as the file records them: two builds with the same key build the same index.
std::string IndexParams::key() const { return params_json(*this).dump(); }

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

}  // namespace nl2sql::context
