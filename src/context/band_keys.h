// LSH band keys of a MinHash signature (private to the context layer): shared by the index
// build (every value) and the query side (ValueIndex::band_keys_of), which must agree bit for bit.
#pragma once

#include <cstddef>
#include <cstdint>

#include "nl2sql/context/text_match.h"

namespace nl2sql::context::detail {


// Band keys of one signature: the band's rows folded into one word (multiply-xor per row, seeded
// by the band number), mixed, truncated to 32 bits. Cheaper than XXH3 per band for the few rows
// a band has.
inline void band_keys(const uint32_t* sig, int bands, int rows, uint32_t* out) {
  for (int b = 0; b < bands; ++b) {
    uint64_t h = 0x9E3779B97F4A7C15ull * static_cast<uint64_t>(b + 1);
    const uint32_t* r = sig + static_cast<ptrdiff_t>(b) * rows;
    for (int i = 0; i < rows; ++i) h = (h ^ r[i]) * 0xD6E8FEB86659FD93ull;
    out[b] = static_cast<uint32_t>(mix64(h) >> 32);
  }
}


}  // namespace nl2sql::context::detail
