// Deletion-neighbourhood keys of short values (private to the context layer): the build (every
// value of at most short_length code points) and the query side (ValueIndex::short_candidates)
// call the same function, so they agree bit for bit.
//
// The keys of s are the hashes of s itself and of every string one deletion away from s. Two
// strings one edit apart (substitution, insertion, deletion, adjacent transposition) share a key:
// the same deletion on both sides turns a substitution into equality, deleting the extra
// character turns an insertion or deletion into equality, and deleting either swapped character
// leaves the same string. Keys are 32-bit hashes: a collision only adds a candidate, which the
// edit-distance re-ranking then scores.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string_view>
#include <vector>

#include "nl2sql/context/text_match.h"

namespace nl2sql::context::detail {

// Hash of s with the code point at `skip` left out (skip >= s.size(): nothing left out).
inline uint32_t short_key(std::u32string_view s, size_t skip) {
  const size_t len = s.size() - (skip < s.size() ? 1 : 0);
  uint64_t h = 0x5EC0DE5EC0DEull ^ (static_cast<uint64_t>(len) * 0x9E3779B97F4A7C15ull);
  for (size_t i = 0; i < s.size(); ++i)
    if (i != skip) h = (h ^ static_cast<uint64_t>(s[i])) * 0xD6E8FEB86659FD93ull;
  return static_cast<uint32_t>(mix64(h) >> 32);
}

// The distinct keys of s (s itself and its one-deletion strings), ascending, into `out`.
inline void short_keys(std::u32string_view s, std::vector<uint32_t>& out) {
  out.clear();
  out.push_back(short_key(s, s.size()));
  for (size_t i = 0; i < s.size(); ++i)
    if (i == 0 || s[i] != s[i - 1]) out.push_back(short_key(s, i));  // a run deletes to one string
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
}

}  // namespace nl2sql::context::detail
