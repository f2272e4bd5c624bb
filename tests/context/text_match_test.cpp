// Normalization, n-grams, MinHash estimates and Unicode edit distance.
#include <algorithm>
#include <random>
#include <set>

#include <gtest/gtest.h>

#include "nl2sql/context/text_match.h"

namespace nl2sql::context {
namespace {

TEST(EditMatcher, EqualsTheDynamicProgrammeOnRandomStrings) {
  // Small alphabets (so strings share characters), non-ASCII code points, lengths 0..70 (past
  // the 64-bit word: the fallback), both argument orders.
  std::mt19937 rng(11);
  const std::u32string alphabet = U"abcx\u00e9\u4e2d\U0001F600";
  auto random_string = [&](size_t max_len) {
    std::u32string s(std::uniform_int_distribution<size_t>(0, max_len)(rng), U'a');
    for (auto& c : s) c = alphabet[std::uniform_int_distribution<size_t>(0, alphabet.size() - 1)(rng)];
    return s;
  };
  for (int i = 0; i < 3000; ++i) {
    const std::u32string p = random_string(i % 10 == 0 ? 70 : 12), t = random_string(i % 7 == 0 ? 70 : 14);
    const EditMatcher m(p);
    ASSERT_EQ(m.distance(t), edit_distance(p, t)) << i;
    ASSERT_DOUBLE_EQ(m.similarity_at_least(t, 0.5), edit_similarity_at_least(p, t, 0.5)) << i;
  }
  EXPECT_EQ(EditMatcher(U"kitten").distance(U"sitting"), 3u);
  EXPECT_EQ(EditMatcher(U"").distance(U"abc"), 3u);
  EXPECT_EQ(EditMatcher(U"abc").distance(U""), 3u);
  // 64 code points: the top bit of the word is the last row.
  const std::u32string full(64, U'q');
  EXPECT_EQ(EditMatcher(full).distance(full), 0u);
  EXPECT_EQ(EditMatcher(full).distance(std::u32string(63, U'q') + U"r"), 1u);
}

TEST(Normalize, FoldsCaseAccentsAndWhitespace) {
  EXPECT_EQ(normalize_text("  East\t\tBohemia \n"), "east bohemia");
  EXPECT_EQ(normalize_text("EAST BOHEMIA"), normalize_text("east Bohemia"));
  EXPECT_EQ(normalize_text("Marta Kubišová"), "marta kubisova");
  EXPECT_EQ(normalize_text("Hradec Králové"), "hradec kralove");
  EXPECT_EQ(normalize_text("ÉCOLE Ÿ Łódź Ñandú"), "ecole y lodz nandu");
  EXPECT_EQ(normalize_text("Ærø STRAßE"), "æro straße");  // letters, not accented ones: kept
  EXPECT_EQ(normalize_text("ΑΘΗΝΑ МОСКВА"), "αθηνα москва");
  EXPECT_EQ(normalize_text("a\xC2\xA0\xE2\x80\x83" "b"), "a b");  // NBSP and EM SPACE
  EXPECT_EQ(normalize_text("caf\xE9"), "cafe");  // invalid UTF-8 byte read as Latin-1 é
  EXPECT_EQ(normalize_text(""), "");
  EXPECT_EQ(normalize_text(" \t "), "");
}

TEST(Normalize, Utf8RoundTrip) {
  std::string s = "Plzeň – 東京 🎵";
  EXPECT_EQ(encode_utf8(decode_utf8(s)), s);
  EXPECT_EQ(decode_utf8(s).size(), 12u);
}

TEST(NGrams, PaddedDistinctGrams) {
  // " ab " -> " ab", "ab " ; duplicates removed: "aaaa" padded " aaaa " -> " aa","aaa","aa "
  EXPECT_EQ(char_ngram_hashes(U"ab", 3).size(), 2u);
  EXPECT_EQ(char_ngram_hashes(U"aaaa", 3).size(), 3u);
  EXPECT_EQ(char_ngram_hashes(U"m", 3).size(), 1u);
  EXPECT_EQ(char_ngram_hashes(U"", 3).size(), 1u);
  EXPECT_NE(char_ngram_hashes(U"m", 3), char_ngram_hashes(U"n", 3));
}

// The build's form: every gram of the padded string, repeats kept (" aaaa " has four 3-grams, three
// distinct), so the same set once sorted and deduplicated, and the same MinHash signature; one
// buffer reused across strings of every length and n.
TEST(NGrams, UnsortedFormHasTheSameGramsAndSignature) {
  std::vector<uint64_t> grams;
  char_ngram_hashes_unsorted(U"aaaa", 3, grams);
  EXPECT_EQ(grams.size(), 4u);
  const MinHasher hasher(128, 7);
  for (int n : {1, 2, 3, 4})
    for (std::u32string s : {U"", U"m", U"ab", U"aaaa", U"plze\u0148 east", U"\u6771\u4eac x"}) {
      char_ngram_hashes_unsorted(s, n, grams);
      EXPECT_EQ(hasher.signature(grams), hasher.signature(char_ngram_hashes(s, n)));
      std::sort(grams.begin(), grams.end());
      grams.erase(std::unique(grams.begin(), grams.end()), grams.end());
      EXPECT_EQ(grams, [&] {
        auto g = char_ngram_hashes(s, n);
        std::sort(g.begin(), g.end());
        return g;
      }()) << "n=" << n;
    }
  std::u32string out = U"left over";
  decode_utf8_into("Plze\xC5\x88", out);
  EXPECT_EQ(out, U"Plze\u0148");
}

TEST(EditDistance, CodePointsNotBytes) {
  EXPECT_EQ(edit_distance(U"kitten", U"sitting"), 3u);
  EXPECT_EQ(edit_distance(U"", U"abc"), 3u);
  EXPECT_EQ(edit_distance(U"abc", U""), 3u);
  EXPECT_EQ(edit_distance(U"flaw", U"lawn"), 2u);
  auto a = decode_utf8("Kubišová"), b = decode_utf8("Kubisova");
  EXPECT_EQ(edit_distance(a, b), 2u);  // bytes would differ by 4
  EXPECT_DOUBLE_EQ(edit_similarity(a, b), 1.0 - 2.0 / 8.0);
  EXPECT_DOUBLE_EQ(edit_similarity(U"", U""), 1.0);
  EXPECT_DOUBLE_EQ(edit_similarity(U"abc", U"xyz"), 0.0);
  // The length bound cuts off only what cannot reach the threshold.
  EXPECT_DOUBLE_EQ(edit_similarity_at_least(U"ab", U"abcdefgh", 0.5), 0.0);
  EXPECT_DOUBLE_EQ(edit_similarity_at_least(U"abcdefg", U"abcdefgh", 0.5), 1.0 - 1.0 / 8.0);
}

// Sets with a known Jaccard similarity: the MinHash estimate must be within a tolerance of it
// (128 permutations: standard error sqrt(J(1-J)/128) <= 0.045; 0.18 is 4 sigma), and unbiased on average.
TEST(MinHash, JaccardEstimateWithinTolerance) {
  std::mt19937_64 rng(42);
  MinHasher hasher(128, 7);
  double total_error = 0;
  int trials = 0;
  for (double target : {0.1, 0.3, 0.5, 0.7, 0.9}) {
    for (int t = 0; t < 100; ++t) {
      // |A ∩ B| = s, |A \ B| = |B \ A| = d  =>  J = s / (s + 2d).
      const int s = static_cast<int>(200 * target), d = static_cast<int>((200 - s) / 2.0 + 0.5);
      std::vector<uint64_t> a, b;
      for (int i = 0; i < s; ++i) {
        uint64_t x = rng();
        a.push_back(x);
        b.push_back(x);
      }
      for (int i = 0; i < d; ++i) a.push_back(rng());
      for (int i = 0; i < d; ++i) b.push_back(rng());
      double truth = static_cast<double>(s) / (s + 2 * d);
      double est = estimate_jaccard(hasher.signature(a), hasher.signature(b));
      EXPECT_NEAR(est, truth, 0.18) << "target " << target;
      total_error += est - truth;
      ++trials;
    }
  }
  EXPECT_NEAR(total_error / trials, 0.0, 0.01);
  EXPECT_DOUBLE_EQ(estimate_jaccard(hasher.signature({1, 2, 3}), hasher.signature({3, 2, 1})), 1.0);
}

TEST(MinHash, SeedChangesPermutationsDeterministically) {
  std::vector<uint64_t> x = {1, 2, 3, 4};
  EXPECT_EQ(MinHasher(16, 1).signature(x), MinHasher(16, 1).signature(x));
  EXPECT_NE(MinHasher(16, 1).signature(x), MinHasher(16, 2).signature(x));
}

}  // namespace
}  // namespace nl2sql::context
