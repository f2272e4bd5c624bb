// Golden verdicts of the digest equalities (result_digest.h) against the exact ones
// (result_compare.h) and hand-computed expectations, on the pairs where the official rules are
// subtle; then random pairs drawn from a small pool of values, where every function must agree
// with its exact counterpart; then a result hashed by the executor as it streams.
#include "nl2sql/db/result_digest.h"

#include <gtest/gtest.h>

#include <random>

#include "nl2sql/db/executor.h"
#include "nl2sql/db/result_compare.h"
#include "support/test_env.h"

namespace nl2sql::db {
namespace {

Value I(int64_t v) { return Value::integer(v); }
Value R(double v) { return Value::real(v); }
Value T(std::string v) { return Value::text(std::move(v)); }
Value B(std::string v) { return Value::blob(std::move(v)); }
Value N() { return Value::null(); }

ResultSet rs(std::vector<Row> rows) {
  ResultSet r;
  if (!rows.empty())
    for (size_t c = 0; c < rows[0].size(); ++c) r.columns.push_back("c" + std::to_string(c));
  r.rows = std::move(rows);
  return r;
}

struct Golden {
  const char* what;
  ResultSet pred, gold;
  bool bird, ts_unordered, ts_ordered, relaxed;
};

std::vector<Golden> goldens() {
  return {
      {"identical", rs({{I(1), T("a")}, {I(2), T("b")}}), rs({{I(1), T("a")}, {I(2), T("b")}}), true, true, true, true},
      {"row order differs", rs({{I(2), T("b")}, {I(1), T("a")}}), rs({{I(1), T("a")}, {I(2), T("b")}}), true, true, false, true},
      // BIRD compares sets: duplicates vanish; Spider compares multisets and row counts.
      {"duplicates", rs({{I(1)}, {I(1)}, {I(2)}}), rs({{I(1)}, {I(2)}}), true, false, false, true},
      {"duplicates, same count", rs({{I(1)}, {I(1)}, {I(2)}}), rs({{I(1)}, {I(2)}, {I(2)}}), true, false, false, true},
      // Python: 1 == 1.0, so BIRD's set and relaxed equate them; Spider's quick reject sorts by
      // str(value)+str(type), where 3 and 3.0 differ, but a one-column row sorts alone.
      {"int vs integral real", rs({{I(1)}, {I(3)}}), rs({{R(1.0)}, {R(3.0)}}), true, true, true, true},
      // "3<class 'int'>" sorts after "30<class 'int'>", "3.0<class 'float'>" before it.
      {"int vs real in a two-column row", rs({{I(3), I(30)}}), rs({{R(3.0), I(30)}}), true, false, false, true},
      {"real 1.5 vs int 1", rs({{R(1.5)}}), rs({{I(1)}}), false, false, false, false},
      {"text '1' vs int 1", rs({{T("1")}}), rs({{I(1)}}), false, false, false, false},
      {"text vs blob", rs({{T("x")}}), rs({{B("x")}}), false, false, false, false},
      {"NULLs equal", rs({{N(), I(1)}}), rs({{N(), I(1)}}), true, true, true, true},
      {"NULL vs 0", rs({{N()}}), rs({{I(0)}}), false, false, false, false},
      // Column order: BIRD keeps it, Spider searches permutations, relaxed ignores it.
      {"columns swapped", rs({{T("a"), I(1)}, {T("b"), I(2)}}), rs({{I(1), T("a")}, {I(2), T("b")}}), false, true, true, true},
      {"columns swapped, ordered rows differ", rs({{T("b"), I(2)}, {T("a"), I(1)}}), rs({{I(1), T("a")}, {I(2), T("b")}}), false, true, false, true},
      // Relaxed drops all-NULL rows and ignores repeated cells within a row.
      {"all-NULL row", rs({{I(1), I(2)}, {N(), N()}}), rs({{I(1), I(2)}}), false, false, false, true},
      {"both empty", rs({}), rs({}), true, true, true, true},
      {"pred empty", rs({}), rs({{I(1)}}), false, false, false, false},
      {"extra column", rs({{I(1), I(2)}}), rs({{I(1)}}), false, false, false, false},
      // A permutation must hold for every row at once.
      {"per-row swaps are not one permutation", rs({{I(1), I(2)}, {I(4), I(3)}}), rs({{I(1), I(2)}, {I(3), I(4)}}), false, false, false, true},
      // Invalid UTF-8: BIRD scores 0 (Python's sqlite3 raises); Spider decodes with errors=ignore.
      {"invalid utf-8", rs({{T("a\xff" "b")}}), rs({{T("ab")}}), false, true, true, false},
      {"-0.0 vs 0", rs({{R(-0.0)}}), rs({{I(0)}}), true, true, true, true},
  };
}

TEST(ResultDigest, GoldenPairsMatchTheExactRulesAndTheOfficialVerdicts) {
  for (const auto& g : goldens()) {
    SCOPED_TRACE(g.what);
    const ResultDigest p = digest_of(g.pred), gd = digest_of(g.gold);
    EXPECT_EQ(bird_equal(g.pred, g.gold), g.bird);
    EXPECT_EQ(bird_equal(p, gd), g.bird);
    EXPECT_EQ(spider_ts_equal(g.gold, g.pred, false), g.ts_unordered);
    EXPECT_EQ(spider_ts_equal(gd, p, false), g.ts_unordered);
    EXPECT_EQ(spider_ts_equal(g.gold, g.pred, true), g.ts_ordered);
    EXPECT_EQ(spider_ts_equal(gd, p, true), g.ts_ordered);
    EXPECT_EQ(relaxed_equal(g.pred, g.gold), g.relaxed);
    EXPECT_EQ(relaxed_equal(p, gd), g.relaxed);
    EXPECT_DOUBLE_EQ(soft_f1(p, gd), soft_f1(g.pred, g.gold));
    EXPECT_EQ(contains_gold(p, gd), contains_gold(g.pred, g.gold));
  }
}

TEST(ResultDigest, ContainsGoldAndSoftF1OnHandComputedPairs) {
  const auto gold = rs({{T("a")}, {T("b")}});
  const auto wider = rs({{I(1), T("a")}, {I(2), T("b")}, {I(3), T("c")}});
  EXPECT_TRUE(contains_gold(digest_of(wider), digest_of(gold)));
  EXPECT_FALSE(contains_gold(digest_of(rs({{I(1), T("a")}})), digest_of(gold)));
  // Soft-F1 row by row: (a,1) vs (a,2): 1 of 2 cells match → tp .5, fp .5, fn .5 → F1 0.5.
  EXPECT_DOUBLE_EQ(soft_f1(digest_of(rs({{T("a"), I(1)}})), digest_of(rs({{T("a"), I(2)}}))), 0.5);
}

// Random pairs from a pool that makes collisions of the rules likely (1 / 1.0 / '1' / NULL,
// duplicated rows, permuted columns): every digest verdict equals the exact one.
TEST(ResultDigest, RandomPairsAgreeWithTheExactFunctions) {
  std::mt19937_64 rng(7);
  const std::vector<Value> pool = {I(1), R(1.0), T("1"), I(2), R(2.5), N(), T("a"), B("a"), T("b\xfe")};
  auto pick = [&](size_t n) { return std::uniform_int_distribution<size_t>(0, n - 1)(rng); };
  auto random_rows = [&](size_t rows, size_t cols) {
    std::vector<Row> out(rows);
    for (auto& r : out)
      for (size_t c = 0; c < cols; ++c) r.push_back(pool[pick(pool.size())]);
    return out;
  };
  size_t equal_seen = 0;
  for (int i = 0; i < 3000; ++i) {
    const size_t cols = 1 + pick(3), rows = pick(5);
    ResultSet gold = rs(random_rows(rows, cols));
    ResultSet pred;
    switch (pick(4)) {
      case 0: pred = rs(random_rows(pick(5), cols)); break;
      case 1: {  // gold shuffled, maybe with a duplicate row
        pred = gold;
        std::shuffle(pred.rows.begin(), pred.rows.end(), rng);
        if (!pred.rows.empty() && pick(2)) pred.rows.push_back(pred.rows[0]);
        break;
      }
      case 2: {  // gold's columns permuted
        pred = gold;
        std::vector<size_t> perm(cols);
        for (size_t c = 0; c < cols; ++c) perm[c] = c;
        std::shuffle(perm.begin(), perm.end(), rng);
        for (auto& r : pred.rows) {
          Row nr;
          for (size_t c : perm) nr.push_back(r[c]);
          r = nr;
        }
        break;
      }
      default: {  // gold with integers turned into reals
        pred = gold;
        for (auto& r : pred.rows)
          for (auto& v : r)
            if (v.type == ValueType::kInteger && pick(2)) v = R(static_cast<double>(v.i));
      }
    }
    const ResultDigest p = digest_of(pred), g = digest_of(gold);
    SCOPED_TRACE("pair " + std::to_string(i));
    const bool exact = bird_equal(pred, gold);
    equal_seen += exact;
    ASSERT_EQ(bird_equal(p, g), exact);
    ASSERT_EQ(spider_ts_equal(g, p, false), spider_ts_equal(gold, pred, false));
    ASSERT_EQ(spider_ts_equal(g, p, true), spider_ts_equal(gold, pred, true));
    ASSERT_EQ(relaxed_equal(p, g), relaxed_equal(pred, gold));
    ASSERT_DOUBLE_EQ(soft_f1(p, g), soft_f1(pred, gold));
    ASSERT_EQ(contains_gold(p, g), contains_gold(pred, gold));
  }
  EXPECT_GT(equal_seen, 300u) << "the pool should yield many equal pairs";
}

TEST(ResultDigest, ExecutorHashesRowsPastTheBoundAndKeepsTheFirstOnes) {
  testing::TempDir dir;
  const auto db = dir / "t.sqlite";
  testing::build_database(db, R"(
    CREATE TABLE big(x INTEGER, y TEXT);
    WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 2500)
    INSERT INTO big SELECT i, 'v' || (i % 7) FROM n;)");
  Executor ex;
  QueryLimits whole;
  whole.row_cap = 0;
  const auto full = ex.run(db, "SELECT x, y FROM big", whole);
  ASSERT_TRUE(full.ok()) << full.error;
  ASSERT_EQ(full.result.rows.size(), 2500u);
  EXPECT_EQ(full.digest, nullptr);

  QueryLimits hashed = whole;
  hashed.hash_rows_after = 1000;
  const auto h = ex.run(db, "SELECT x, y FROM big", hashed);
  ASSERT_TRUE(h.ok()) << h.error;
  ASSERT_NE(h.digest, nullptr);
  EXPECT_EQ(h.row_count(), 2500u);
  EXPECT_EQ(h.result.rows.size(), 1000u);
  EXPECT_EQ(h.result.rows[999][0].i, 1000);
  const ResultDigest expected = digest_of(full.result);
  EXPECT_TRUE(bird_equal(*h.digest, expected));
  EXPECT_TRUE(spider_ts_equal(expected, *h.digest, true));
  // One row fewer is told apart.
  ResultSet less = full.result;
  less.rows.pop_back();
  EXPECT_FALSE(bird_equal(*h.digest, digest_of(less)));

  // At or under the bound nothing is hashed.
  hashed.hash_rows_after = 2500;
  EXPECT_EQ(ex.run(db, "SELECT x, y FROM big", hashed).digest, nullptr);
  // The row cap still counts every row, hashed or not; the byte cap counts the digest.
  hashed.hash_rows_after = 100;
  hashed.row_cap = 2000;
  EXPECT_EQ(ex.run(db, "SELECT x, y FROM big", hashed).status, ExecStatus::kRowCap);
  // Kept whole, the rows take about 285 kB (114 bytes each); hashed past 100 rows, about 131 kB
  // (100 rows kept, 2,500 x 48 digest bytes).
  hashed.row_cap = 0;
  hashed.max_result_bytes = 200 * 1024;
  EXPECT_EQ(ex.run(db, "SELECT x, y FROM big", hashed).status, ExecStatus::kOk);
  whole.max_result_bytes = 200 * 1024;
  EXPECT_EQ(ex.run(db, "SELECT x, y FROM big", whole).status, ExecStatus::kRowCap);
  hashed.max_result_bytes = 100 * 1024;
  EXPECT_EQ(ex.run(db, "SELECT x, y FROM big", hashed).status, ExecStatus::kRowCap);
}

}  // namespace
}  // namespace nl2sql::db
