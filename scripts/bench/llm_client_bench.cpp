// LLM layer benchmark (a plain driver, not Google Benchmark kernels: the quantities are one
// wall time and one throughput). Scenario from issue 3:
//  1. 2,000 distinct calls at 32 in flight against a fake server with a fixed 100 ms latency:
//     wall time vs the lower bound 2,000 x 0.1 s / 32 = 6.25 s (target <= 1.10x);
//  2. replay of the same 2,000 calls from the response cache on one thread (target >= 20,000
//     calls/s).
// Usage: bench_llm_client_bench [calls=2000] [in_flight=32] [latency_ms=100] [replay_passes=5]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "nl2sql/core/log.h"
#include "nl2sql/core/thread_pool.h"
#include "nl2sql/llm/client.h"
#include "lean_latency_server.h"

using namespace nl2sql;

namespace {

llm::ChatRequest call(size_t i) {
  llm::ChatRequest r;
  r.role = "generate";
  r.stage = "bench";
  r.question_id = "q" + std::to_string(i);
  r.template_hash = "bench-template";
  r.messages = {{"system", "You are a careful SQLite expert. Answer with one query in a ```sql block."},
                {"user", "Database schema: CREATE TABLE schools(cds TEXT, name TEXT, county TEXT); "
                         "Question " + std::to_string(i) + ": which schools are in Alameda?"}};
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  const size_t calls = argc > 1 ? std::strtoul(argv[1], nullptr, 10) : 2000;
  const size_t in_flight = argc > 2 ? std::strtoul(argv[2], nullptr, 10) : 32;
  const int latency_ms = argc > 3 ? std::atoi(argv[3]) : 100;
  const int passes = argc > 4 ? std::atoi(argv[4]) : 5;
  core::init_logging({"warn", false, ""});

  auto dir = std::filesystem::temp_directory_path() /
             ("nl2sql_llm_bench_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const auto cache_path = (dir / "cache.sqlite").string();

  bench::LeanLatencyServer server{std::chrono::milliseconds(latency_ms)};
  llm::LlmSettings settings;
  llm::ModelProfile p;
  p.name = "bench";
  p.base_url = server.base_url();
  p.model = "fake";
  p.api_key_env = "";
  p.max_in_flight = static_cast<int64_t>(in_flight);
  settings.profiles[p.name] = p;
  settings.default_profile = p.name;
  settings.max_in_flight = static_cast<int64_t>(in_flight);
  settings.retry.max_attempts = 1;
  settings.cache.mode = llm::CacheMode::kReadWrite;
  settings.cache.path = cache_path;

  auto client = llm::Client::create(settings).value();
  std::atomic<int> errors{0};
  auto t0 = std::chrono::steady_clock::now();
  core::parallel_for(calls, in_flight, [&](size_t i) {
    auto r = client->chat(call(i));
    if (!r || r->from_cache) ++errors;
  });
  double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  double bound = static_cast<double>(calls) * latency_ms / 1000.0 / static_cast<double>(in_flight);
  std::printf("live:   %zu calls, %zu in flight, %d ms latency: wall %.3f s, lower bound %.3f s, "
              "ratio %.3f (target <= 1.10), peak in flight %lld, server requests %lld, errors %d\n",
              calls, in_flight, latency_ms, wall, bound, wall / bound,
              static_cast<long long>(client->peak_in_flight()),
              static_cast<long long>(server.requests()), errors.load());
  client.reset();

  settings.cache.mode = llm::CacheMode::kReplay;
  auto replay = llm::Client::create(settings).value();
  std::vector<llm::ChatRequest> requests;
  requests.reserve(calls);
  for (size_t i = 0; i < calls; ++i) requests.push_back(call(i));
  int misses = 0;
  auto t1 = std::chrono::steady_clock::now();
  for (int pass = 0; pass < passes; ++pass)
    for (const auto& r : requests) {
      auto got = replay->chat(r);
      if (!got || !got->from_cache) ++misses;
    }
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count();
  double rate = static_cast<double>(calls) * passes / secs;
  std::printf("replay: %zu calls x %d passes on one thread: %.3f s, %.0f calls/s (target >= 20000), "
              "misses %d\n",
              calls, passes, secs, rate, misses);
  replay.reset();
  std::filesystem::remove_all(dir);
  bool ok = errors == 0 && misses == 0;
  return ok ? 0 : 1;
}
