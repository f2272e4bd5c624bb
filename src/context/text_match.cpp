#include "nl2sql/context/text_match.h"

#include <algorithm>
#include <cstring>

#include "nl2sql/core/hash.h"

namespace nl2sql::context {
namespace {

// Base letters for U+00C0..U+00FF and U+0100..U+017F; '.' means "no folding" (the letter is
// only lowered). Æ, Ð, Þ, ß, Œ, Ŋ, Ĳ stay themselves: they are letters, not accented ones.
constexpr char kLatin1Base[] =
    "aaaaaa.ceeeeiiii.nooooo.ouuuuy.."
    "aaaaaa.ceeeeiiii.nooooo.ouuuuy.y";
constexpr char kLatinExtABase[] =
    "aaaaaaccccccccdd"
    "ddeeeeeeeeeegggg"
    "gggghhhhiiiiiiii"
    "ii..jjkkklllllll"
    "lllnnnnnnn..oooo"
    "oo..rrrrrrssssss"
    "ssttttttuuuuuuuu"
    "uuuuwwyyyzzzzzzs";
static_assert(sizeof(kLatin1Base) == 65 && sizeof(kLatinExtABase) == 129);

bool is_space(char32_t c) {
  switch (c) {
    case U' ': case U'\t': case U'\n': case U'\r': case U'\v': case U'\f':
    case 0x00A0: case 0x1680: case 0x2028: case 0x2029: case 0x202F: case 0x205F: case 0x3000:
      return true;
    default:
      return c >= 0x2000 && c <= 0x200A;
  }
}

uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

}  // namespace

std::u32string decode_utf8(std::string_view s) {
  std::u32string out;
  decode_utf8_into(s, out);
  return out;
}

void decode_utf8_into(std::string_view s, std::u32string& out) {
  out.clear();
  out.reserve(s.size());
  size_t i = 0;
  auto cont = [&](size_t k) { return i + k < s.size() && (static_cast<unsigned char>(s[i + k]) & 0xC0) == 0x80; };
  while (i < s.size()) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      out.push_back(c);
      ++i;
    } else if ((c & 0xE0) == 0xC0 && c >= 0xC2 && cont(1)) {
      out.push_back(((c & 0x1Fu) << 6) | (static_cast<unsigned char>(s[i + 1]) & 0x3Fu));
      i += 2;
    } else if ((c & 0xF0) == 0xE0 && cont(1) && cont(2)) {
      out.push_back(((c & 0x0Fu) << 12) | ((static_cast<unsigned char>(s[i + 1]) & 0x3Fu) << 6) |
                    (static_cast<unsigned char>(s[i + 2]) & 0x3Fu));
      i += 3;
    } else if ((c & 0xF8) == 0xF0 && c <= 0xF4 && cont(1) && cont(2) && cont(3)) {
      out.push_back(((c & 0x07u) << 18) | ((static_cast<unsigned char>(s[i + 1]) & 0x3Fu) << 12) |
                    ((static_cast<unsigned char>(s[i + 2]) & 0x3Fu) << 6) |
                    (static_cast<unsigned char>(s[i + 3]) & 0x3Fu));
      i += 4;
    } else {
      out.push_back(c);  // invalid sequence: the byte as Latin-1
      ++i;
    }
  }
}

std::string encode_utf8(std::u32string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char32_t c : s) {
    if (c < 0x80) {
      out.push_back(static_cast<char>(c));
    } else if (c < 0x800) {
      out.push_back(static_cast<char>(0xC0 | (c >> 6)));
      out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
    } else if (c < 0x10000) {
      out.push_back(static_cast<char>(0xE0 | (c >> 12)));
      out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
    } else {
      out.push_back(static_cast<char>(0xF0 | (c >> 18)));
      out.push_back(static_cast<char>(0x80 | ((c >> 12) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
    }
  }
  return out;
}

char32_t fold_code_point(char32_t c) {
  if (c < 0x80) return (c >= U'A' && c <= U'Z') ? c + 32 : c;
  if (c >= 0xC0 && c <= 0xFF) {
    char base = kLatin1Base[c - 0xC0];
    if (base != '.') return static_cast<char32_t>(base);
    if (c <= 0xDE && c != 0xD7) return c + 0x20;  // Æ Ð Þ
    return c;
  }
  if (c >= 0x100 && c <= 0x17F) {
    char base = kLatinExtABase[c - 0x100];
    if (base != '.') return static_cast<char32_t>(base);
    if (c == 0x132 || c == 0x14A || c == 0x152) return c + 1;  // Ĳ Ŋ Œ
    return c;
  }
  if (c >= 0x391 && c <= 0x3A9 && c != 0x3A2) return c + 0x20;  // Greek capitals
  if (c >= 0x410 && c <= 0x42F) return c + 0x20;                // Cyrillic capitals
  if (c >= 0x400 && c <= 0x40F) return c + 0x50;
  return c;
}

std::u32string normalize_code_points(std::string_view s) {
  std::u32string in = decode_utf8(s);
  std::u32string out;
  out.reserve(in.size());
  bool pending_space = false;
  for (char32_t c : in) {
    if (is_space(c)) {
      pending_space = !out.empty();
      continue;
    }
    if (pending_space) out.push_back(U' ');
    pending_space = false;
    out.push_back(fold_code_point(c));
  }
  return out;
}

std::string normalize_text(std::string_view s) { return encode_utf8(normalize_code_points(s)); }

void char_ngram_hashes_unsorted(std::u32string_view s, int n, std::vector<uint64_t>& out) {
  out.clear();
  const size_t un = static_cast<size_t>(std::max(1, n)), len = s.size() + 2;  // padded length
  if (len <= un || un > 3) {
    const auto all = char_ngram_hashes(s, n);
    out.assign(all.begin(), all.end());
    return;
  }
  // Code point i of the string padded with one space on each side.
  auto at = [&](size_t i) -> char32_t { return i == 0 || i == len - 1 ? U' ' : s[i - 1]; };
  for (size_t i = 0; i + un <= len; ++i) {
    uint64_t packed = un;
    for (size_t k = 0; k < un; ++k) packed = (packed << 21) | static_cast<uint64_t>(at(i + k) & 0x1FFFFF);
    out.push_back(mix64(packed));
  }
}

std::vector<uint64_t> char_ngram_hashes(std::u32string_view normalized, int n) {
  std::u32string padded;
  padded.reserve(normalized.size() + 2);
  padded.push_back(U' ');
  padded.append(normalized);
  padded.push_back(U' ');
  std::vector<uint64_t> out;
  const size_t un = static_cast<size_t>(std::max(1, n));
  if (padded.size() <= un) {
    out.push_back(core::xxh64({reinterpret_cast<const char*>(padded.data()), padded.size() * 4}));
    return out;
  }
  out.reserve(padded.size() - un + 1);
  if (un <= 3) {
    // Up to three code points (21 bits each) fit in one 64-bit word: pack them and finish with
    // a 64-bit mixer instead of running XXH3 over 12 bytes per gram (the n-gram loop was a
    // tenth of an index build).
    for (size_t i = 0; i + un <= padded.size(); ++i) {
      uint64_t packed = un;
      for (size_t k = 0; k < un; ++k) packed = (packed << 21) | static_cast<uint64_t>(padded[i + k] & 0x1FFFFF);
      out.push_back(mix64(packed));
    }
  } else {
    for (size_t i = 0; i + un <= padded.size(); ++i)
      out.push_back(core::xxh64({reinterpret_cast<const char*>(padded.data() + i), un * 4}));
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

MinHasher::MinHasher(int num_perm, uint64_t seed) {
  uint64_t state = seed;
  a_.resize(static_cast<size_t>(num_perm));
  b_.resize(static_cast<size_t>(num_perm));
  for (int i = 0; i < num_perm; ++i) {
    a_[static_cast<size_t>(i)] = static_cast<uint32_t>(splitmix64(state)) | 1u;
    b_[static_cast<size_t>(i)] = static_cast<uint32_t>(splitmix64(state));
  }
}

std::vector<uint32_t> MinHasher::signature(const std::vector<uint64_t>& elements) const {
  std::vector<uint32_t> sig(a_.size());
  signature_into(elements, sig.data());
  return sig;
}

namespace {

// h_i(x) = fmix(a_i * x + b_i) in 32-bit arithmetic (x: the element hash folded to 32 bits).
// Plain multiply-shift is 2-universal but its minima are visibly correlated across i (estimates
// 4 sigma off in tests); the xor-shift-multiply round removes that. 32-bit lanes let the
// compiler vectorize the permutation loop (8 lanes with AVX2, chosen at run time).
__attribute__((target_clones("avx2", "default"), optimize("O3"))) void minhash_kernel(
    const uint64_t* xs, size_t n, const uint32_t* a, const uint32_t* b, size_t k, uint32_t* out) {
  for (size_t e = 0; e < n; ++e) {
    const uint32_t x = static_cast<uint32_t>(xs[e] ^ (xs[e] >> 32));
    for (size_t i = 0; i < k; ++i) {
      uint32_t y = a[i] * x + b[i];
      y ^= y >> 16;
      y *= 0x85EBCA6Bu;
      y ^= y >> 13;
      out[i] = out[i] < y ? out[i] : y;
    }
  }
}

}  // namespace

void MinHasher::signature_into(const std::vector<uint64_t>& elements, uint32_t* out) const {
  const size_t k = a_.size();
  std::fill(out, out + k, 0xFFFFFFFFu);
  minhash_kernel(elements.data(), elements.size(), a_.data(), b_.data(), k, out);
}

double estimate_jaccard(const std::vector<uint32_t>& a, const std::vector<uint32_t>& b) {
  if (a.empty() || a.size() != b.size()) return 0.0;
  size_t eq = 0;
  for (size_t i = 0; i < a.size(); ++i) eq += a[i] == b[i];
  return static_cast<double>(eq) / static_cast<double>(a.size());
}

size_t edit_distance(std::u32string_view a, std::u32string_view b) {
  if (a.size() < b.size()) std::swap(a, b);
  if (b.empty()) return a.size();
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t up = row[j];
      size_t sub = diag + (a[i - 1] == b[j - 1] ? 0 : 1);
      row[j] = std::min({sub, up + 1, row[j - 1] + 1});
      diag = up;
    }
  }
  return row[b.size()];
}

double edit_similarity(std::u32string_view a, std::u32string_view b) {
  size_t m = std::max(a.size(), b.size());
  if (m == 0) return 1.0;
  return 1.0 - static_cast<double>(edit_distance(a, b)) / static_cast<double>(m);
}

double edit_similarity_at_least(std::u32string_view a, std::u32string_view b,
                                double min_similarity) {
  size_t m = std::max(a.size(), b.size());
  if (m == 0) return 1.0;
  size_t diff = m - std::min(a.size(), b.size());
  if (1.0 - static_cast<double>(diff) / static_cast<double>(m) < min_similarity) return 0.0;
  return edit_similarity(a, b);
}

EditMatcher::EditMatcher(std::u32string_view pattern) : pattern_(pattern) {
  if (pattern_.size() > 64) return;
  for (size_t i = 0; i < pattern_.size(); ++i) {
    const char32_t c = pattern_[i];
    const uint64_t bit = uint64_t{1} << i;
    if (c < 128) {
      ascii_[c] |= bit;
      continue;
    }
    auto it = std::lower_bound(other_.begin(), other_.end(), c,
                               [](const auto& e, char32_t v) { return e.first < v; });
    if (it != other_.end() && it->first == c) it->second |= bit;
    else other_.insert(it, {c, bit});
  }
}

uint64_t EditMatcher::mask_of(char32_t c) const {
  if (c < 128) return ascii_[c];
  auto it = std::lower_bound(other_.begin(), other_.end(), c,
                             [](const auto& e, char32_t v) { return e.first < v; });
  return it != other_.end() && it->first == c ? it->second : 0;
}

size_t EditMatcher::distance(std::u32string_view text) const {
  const size_t m = pattern_.size();
  if (m > 64) return edit_distance(pattern_, text);
  if (m == 0) return text.size();
  // Vertical deltas of the current column as bit vectors (+1 in pv, -1 in mv); the score is the
  // last row's value, moved by the horizontal delta that leaves the top bit.
  uint64_t pv = ~uint64_t{0}, mv = 0;
  const uint64_t top = uint64_t{1} << (m - 1);
  size_t score = m;
  for (char32_t c : text) {
    const uint64_t eq = c < 128 ? ascii_[c] : mask_of(c);
    const uint64_t xv = eq | mv;
    const uint64_t xh = (((eq & pv) + pv) ^ pv) | eq;
    uint64_t ph = mv | ~(xh | pv);
    uint64_t mh = pv & xh;
    if (ph & top) ++score;
    else if (mh & top) --score;
    ph = (ph << 1) | 1;  // row 0 grows by one per column: a global distance, not a search
    mh <<= 1;
    pv = mh | ~(xv | ph);
    mv = ph & xv;
  }
  return score;
}

double EditMatcher::similarity_at_least(std::u32string_view text, double min_similarity) const {
  const size_t m = std::max(pattern_.size(), text.size());
  if (m == 0) return 1.0;
  const size_t diff = m - std::min(pattern_.size(), text.size());
  if (1.0 - static_cast<double>(diff) / static_cast<double>(m) < min_similarity) return 0.0;
  return 1.0 - static_cast<double>(distance(text)) / static_cast<double>(m);
}

}  // namespace nl2sql::context
