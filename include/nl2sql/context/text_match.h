// Text matching primitives for value retrieval: Unicode-aware normalization, character n-grams,
// MinHash signatures and normalized edit distance over code points.
//
// Normalization (`normalize_text`) is what makes "East  Bohemia", "east bohemia" and
// "EAST BOHEMIA" one value, and "Kubišová" meet "Kubisova": UTF-8 is decoded to code points,
// ASCII, Latin-1 Supplement, Latin Extended-A and basic Greek/Cyrillic capitals are lowered, the
// common Latin accented letters are folded to their base letter (a small table, not full Unicode
// decomposition), every run of Unicode whitespace becomes one space and the ends are trimmed.
// Invalid UTF-8 bytes are taken as Latin-1. Everything here is pure and thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>
#include <utility>

namespace nl2sql::context {

// Bumped whenever normalize_text, the n-gram definition or the MinHash family changes, so persisted indexes built
// with the old rules are seen as stale.
inline constexpr int kNormalizationVersion = 4;

std::u32string decode_utf8(std::string_view s);
// The same into `out` (cleared first; no allocation once it has grown).
void decode_utf8_into(std::string_view s, std::u32string& out);
std::string encode_utf8(std::u32string_view s);

// Lowers and accent-folds one code point (identity for code points outside the table).
char32_t fold_code_point(char32_t c);
// The normalized form, as code points and as UTF-8.
std::u32string normalize_code_points(std::string_view s);
std::string normalize_text(std::string_view s);

// MurmurHash3's 64-bit finalizer: a cheap bijective mixer (inline: it runs per n-gram).
inline uint64_t mix64(uint64_t x) {
  x ^= x >> 33;
  x *= 0xFF51AFD7ED558CCDull;
  x ^= x >> 33;
  x *= 0xC4CEB9FE1A85EC53ull;
  x ^= x >> 33;
  return x;
}

// Hashes of the character n-grams of an already-normalized string, padded with one space on
// each side so word edges and strings shorter than n still give grams ("m" -> " m "). For n <= 3
// the gram's code points are packed into one word and mixed (mix64), else hashed with XXH3.
// Duplicates are removed; the order is unspecified.
std::vector<uint64_t> char_ngram_hashes(std::u32string_view normalized, int n);
// The same hashes into `out` (cleared first), duplicates kept, unsorted: for MinHash, whose
// minima do not change with repeats. No allocation once `out` has grown (the index build runs
// it per value).
void char_ngram_hashes_unsorted(std::u32string_view normalized, int n, std::vector<uint64_t>& out);

// MinHash over 64-bit element hashes (folded to 32 bits) with `num_perm` hash functions
// h_i(x) = mix(a_i * x + b_i) mod 2^32 (a_i odd; mix = xor-shift-multiply-xor-shift), a_i, b_i
// drawn from `seed`.
class MinHasher {
 public:
  MinHasher(int num_perm, uint64_t seed);
  int num_perm() const { return static_cast<int>(a_.size()); }
  // All-0xFFFFFFFF signature for an empty set.
  std::vector<uint32_t> signature(const std::vector<uint64_t>& elements) const;
  void signature_into(const std::vector<uint64_t>& elements, uint32_t* out) const;

 private:
  std::vector<uint32_t> a_, b_;
};

// Share of equal positions: the MinHash estimate of the Jaccard similarity.
double estimate_jaccard(const std::vector<uint32_t>& a, const std::vector<uint32_t>& b);

// Levenshtein distance over code points (insert, delete, substitute, all cost 1).
size_t edit_distance(std::u32string_view a, std::u32string_view b);
// 1 - distance / max(length): 1 for equal strings, 0 for nothing in common; 1 for two empties.
double edit_similarity(std::u32string_view a, std::u32string_view b);
// Same, but returns 0 early when the length difference alone puts the similarity below
// `min_similarity` (the distance is at least the length difference).
double edit_similarity_at_least(std::u32string_view a, std::u32string_view b,
                                double min_similarity);

// One string's edit distance to many others: the pattern is compiled once (a bit mask per code
// point) and each distance takes one pass over the other string with Hyyrö's bit-parallel form
// of Myers' algorithm, O(length) word operations, no allocation. Patterns longer than 64 code
// points fall back to the dynamic programme. Equal to edit_distance on every pair (tested
// against it on random strings). Thread-safe once built.
class EditMatcher {
 public:
  explicit EditMatcher(std::u32string_view pattern);
  size_t distance(std::u32string_view text) const;
  // edit_similarity_at_least(pattern, text, min_similarity), faster.
  double similarity_at_least(std::u32string_view text, double min_similarity) const;

 private:
  uint64_t mask_of(char32_t c) const;
  std::u32string pattern_;
  uint64_t ascii_[128] = {};
  std::vector<std::pair<char32_t, uint64_t>> other_;  // sorted by code point
};

}  // namespace nl2sql::context
