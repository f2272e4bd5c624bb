// Throughput of parse + canonical print over every gold query found under NL2SQL_DATA (Spider
// dev/train, BIRD dev, BIRD mini-dev). Reports queries/s as items_per_second.
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>
#include <nlohmann/json.hpp>

#include "nl2sql/sql/normalize.h"
#include "nl2sql/sql/parser.h"
#include "nl2sql/sql/printer.h"

namespace {

const std::vector<std::string>& gold_queries() {
  static const std::vector<std::string> queries = [] {
    std::vector<std::string> out;
    const char* root = std::getenv("NL2SQL_DATA");
    if (!root) return out;
    std::filesystem::path data(root);
    const std::pair<const char*, const char*> files[] = {
        {"spider/dev.json", "query"}, {"spider/train_spider.json", "query"},
        {"bird/dev.json", "SQL"}, {"bird/mini_dev/mini_dev_sqlite.json", "SQL"}};
    for (const auto& [file, field] : files) {
      std::ifstream in(data / file);
      if (!in) continue;
      for (const auto& q : nlohmann::json::parse(in)) out.push_back(q.value(field, ""));
    }
    return out;
  }();
  return queries;
}

void BM_ParsePrint(benchmark::State& state) {
  const auto& qs = gold_queries();
  if (qs.empty()) {
    state.SkipWithError("NL2SQL_DATA is not set or holds no gold queries");
    return;
  }
  size_t bytes = 0;
  for (auto _ : state) {
    for (const auto& q : qs) {
      auto r = nl2sql::sql::parse(q);
      if (!r.is_ok()) {
        state.SkipWithError("a gold query failed to parse");
        return;
      }
      std::string out = nl2sql::sql::to_sql(*r);
      benchmark::DoNotOptimize(out);
      bytes += q.size();
    }
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * qs.size()));
  state.SetBytesProcessed(static_cast<int64_t>(bytes));
  state.counters["queries"] = static_cast<double>(qs.size());
}
BENCHMARK(BM_ParsePrint)->Unit(benchmark::kMillisecond);

void BM_Normalize(benchmark::State& state) {
  const auto& qs = gold_queries();
  if (qs.empty()) {
    state.SkipWithError("NL2SQL_DATA is not set or holds no gold queries");
    return;
  }
  for (auto _ : state)
    for (const auto& q : qs) benchmark::DoNotOptimize(nl2sql::sql::normalize_sql(q));
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * qs.size()));
}
BENCHMARK(BM_Normalize)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
