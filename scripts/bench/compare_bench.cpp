// Kernels of the evaluator's comparators on synthetic results: the per-question cost that is
// not SQLite. Run: build/scripts/bench/bench_compare_bench
#include <benchmark/benchmark.h>

#include <random>

#include "nl2sql/db/result_compare.h"

namespace {
using nl2sql::db::ResultSet;
using nl2sql::db::Value;

ResultSet make(size_t rows, size_t cols, uint64_t seed) {
  std::mt19937_64 rng(seed);
  ResultSet r;
  for (size_t c = 0; c < cols; ++c) r.columns.push_back("c" + std::to_string(c));
  for (size_t i = 0; i < rows; ++i) {
    nl2sql::db::Row row;
    for (size_t c = 0; c < cols; ++c) {
      switch (c % 3) {
        case 0: row.push_back(Value::integer(static_cast<int64_t>(rng() % 1000))); break;
        case 1: row.push_back(Value::real(static_cast<double>(rng() % 10000) / 7.0)); break;
        default: row.push_back(Value::text("value-" + std::to_string(rng() % 500)));
      }
    }
    r.rows.push_back(std::move(row));
  }
  return r;
}

void BM_Bird(benchmark::State& s) {
  auto a = make(static_cast<size_t>(s.range(0)), 3, 1), b = make(static_cast<size_t>(s.range(0)), 3, 1);
  for (auto _ : s) benchmark::DoNotOptimize(nl2sql::db::bird_equal(a, b));
  s.SetItemsProcessed(s.iterations() * s.range(0));
}
void BM_SpiderTs(benchmark::State& s) {
  auto a = make(static_cast<size_t>(s.range(0)), 4, 1), b = make(static_cast<size_t>(s.range(0)), 4, 1);
  for (auto& row : b.rows) std::swap(row[0], row[3]);  // forces the permutation search
  for (auto _ : s) benchmark::DoNotOptimize(nl2sql::db::spider_ts_equal(a, b, false));
  s.SetItemsProcessed(s.iterations() * s.range(0));
}
void BM_Relaxed(benchmark::State& s) {
  auto a = make(static_cast<size_t>(s.range(0)), 3, 1), b = make(static_cast<size_t>(s.range(0)), 3, 2);
  for (auto _ : s) benchmark::DoNotOptimize(nl2sql::db::relaxed_equal(a, b));
  s.SetItemsProcessed(s.iterations() * s.range(0));
}
void BM_SoftF1(benchmark::State& s) {
  auto a = make(static_cast<size_t>(s.range(0)), 3, 1), b = make(static_cast<size_t>(s.range(0)), 3, 2);
  for (auto _ : s) benchmark::DoNotOptimize(nl2sql::db::soft_f1(a, b));
  s.SetItemsProcessed(s.iterations() * s.range(0));
}
BENCHMARK(BM_Bird)->Arg(10)->Arg(1000)->Arg(100000);
BENCHMARK(BM_SpiderTs)->Arg(10)->Arg(1000)->Arg(100000);
BENCHMARK(BM_Relaxed)->Arg(10)->Arg(1000);
BENCHMARK(BM_SoftF1)->Arg(10)->Arg(1000);
}  // namespace

BENCHMARK_MAIN();
