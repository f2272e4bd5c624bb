// LineageTerm, the compact (table, rowid) term of separating-instance lineage: rows kept sorted
// and unique, inline up to three rows and on the heap beyond, compared exactly as the sequences
// of pairs they hold (the order the search's sorting and random draws depend on).
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <utility>
#include <vector>

#include "nl2sql/select/separating_instance.h"

namespace nl2sql::select {
namespace {

using Rows = std::vector<std::pair<uint32_t, int64_t>>;

Rows rows_of(const LineageTerm& t) {
  Rows out;
  for (const auto& [table, id] : t) out.emplace_back(table, id);
  return out;
}

TEST(LineageTerm, HoldsSortedUniqueRowsInlineAndOnTheHeap) {
  LineageTerm empty;
  EXPECT_TRUE(empty.empty());
  EXPECT_EQ(empty.begin(), empty.end());

  LineageTerm three{{2, 7}, {1, -5}, {2, 7}, {1, 9}};
  EXPECT_EQ(rows_of(three), (Rows{{1, -5}, {1, 9}, {2, 7}}));
  EXPECT_EQ(three.front(), (std::pair<uint32_t, int64_t>{1, -5}));

  // Past three rows the rows move to a block; extreme rowids and the largest table survive.
  LineageTerm big;
  const Rows added = {{5, INT64_MAX}, {0, INT64_MIN}, {65534, 0}, {5, 3}, {0, 1}, {5, 3}, {7, 42},
                      {1, 1}, {1, 2}, {1, 3}, {1, 4}};
  for (const auto& [table, id] : added) big.add(table, id);
  EXPECT_EQ(big.size(), added.size());  // unsorted, repeats kept, until normalize()
  big.normalize();
  Rows expected = added;
  std::sort(expected.begin(), expected.end());
  expected.erase(std::unique(expected.begin(), expected.end()), expected.end());
  EXPECT_EQ(rows_of(big), expected);

  // Copies and moves keep the rows and leave the source usable.
  LineageTerm copy = big;
  EXPECT_EQ(copy, big);
  LineageTerm moved = std::move(copy);
  EXPECT_EQ(rows_of(moved), expected);
  EXPECT_TRUE(copy.empty());  // NOLINT(bugprone-use-after-move): moved-from is empty by contract
  copy = three;
  EXPECT_EQ(rows_of(copy), rows_of(three));
  copy = big;
  EXPECT_EQ(copy, big);
  copy = std::move(moved);
  EXPECT_EQ(rows_of(copy), expected);
  const LineageTerm& same = copy;
  copy = same;  // self-assignment
  EXPECT_EQ(rows_of(copy), expected);

  // A block whose rows shrink to three or fewer on normalize still compares by its rows.
  LineageTerm shrunk;
  for (int k = 0; k < 6; ++k) shrunk.add(3, k % 2);
  shrunk.normalize();
  EXPECT_EQ(rows_of(shrunk), (Rows{{3, 0}, {3, 1}}));
  EXPECT_EQ(shrunk, (LineageTerm{{3, 1}, {3, 0}}));
}

// Equality and order agree with the vectors of pairs on random terms of 0-9 rows.
TEST(LineageTerm, ComparesAsTheSequenceOfItsPairs) {
  std::mt19937_64 rng(7);
  std::vector<Rows> reference;
  std::vector<LineageTerm> terms;
  for (int n = 0; n < 400; ++n) {
    Rows r;
    const size_t size = rng() % 10;
    LineageTerm t;
    for (size_t k = 0; k < size; ++k) {
      const auto table = static_cast<uint32_t>(rng() % 3);
      const auto id = static_cast<int64_t>(rng() % 5) - 2;
      r.emplace_back(table, id);
      t.add(table, id);
    }
    std::sort(r.begin(), r.end());
    r.erase(std::unique(r.begin(), r.end()), r.end());
    t.normalize();
    ASSERT_EQ(rows_of(t), r);
    reference.push_back(r);
    terms.push_back(t);
  }
  for (size_t i = 0; i < terms.size(); ++i)
    for (size_t j = 0; j < terms.size(); ++j) {
      ASSERT_EQ(terms[i] == terms[j], reference[i] == reference[j]) << i << " " << j;
      ASSERT_EQ(terms[i] < terms[j], reference[i] < reference[j]) << i << " " << j;
    }
  // Sorting terms orders them as sorting the vectors does.
  std::vector<size_t> by_term(terms.size()), by_reference(terms.size());
  for (size_t k = 0; k < terms.size(); ++k) by_term[k] = by_reference[k] = k;
  std::stable_sort(by_term.begin(), by_term.end(), [&](size_t x, size_t y) { return terms[x] < terms[y]; });
  std::stable_sort(by_reference.begin(), by_reference.end(),
                   [&](size_t x, size_t y) { return reference[x] < reference[y]; });
  EXPECT_EQ(by_term, by_reference);
}

}  // namespace
}  // namespace nl2sql::select
