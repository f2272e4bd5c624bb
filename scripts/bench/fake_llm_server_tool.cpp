// A fake OpenAI-compatible server for whole-pipeline benchmarks: every answer waits a fixed
// latency and then returns one text that every stage can read — a pairwise verdict line, a JSON
// list (keywords; the column filter's relevant names) and a final ```sql block.
//
// With --gold FILE (a dataset's question file: a JSON array of objects with "question" and
// "SQL" or "query", as BIRD's dev.json and Spider's dev.json) the answers are about the data:
// the server finds the question in the prompt (its "Question: …" line) and answers
//   - SQL: the question's gold query or a near-gold mutation of it, drawn from the request's
//     hash — gold (45%), gold laid out differently (15%: same query, other blanks), DISTINCT
//     toggled (15%: may differ), a string literal changed (15%: usually no rows, so the fixer
//     works), an unknown column (10%: an error for the fixer); a fix request gets gold or its
//     relaid copy, so fixing converges as with a capable model;
//   - the JSON list: the gold query's string literals and identifiers (keywords that the value
//     index really looks up; column names the filter keeps);
// so candidates execute real queries on the database and repeat each other as a model's do.
// Without --gold, or for a prompt naming no known question, the SQL varies over a few queries
// that do not read the data (the earlier behaviour).
//   fake_llm_server_tool [LATENCY_MS [PORT]] [--latency-ms N] [--port P] [--gold FILE]… [--timeline FILE]
//                        [--fault-rate R] [--fault-seed S] [--fail-401-after N]
//                        [--fault-at SEQ:KIND[,SEQ:KIND…]] [--slow-body-ms N]
//                        [--prefix-cache BLOCK_TOKENS] [--usage-shape openai|deepseek|none]
//                        [--reasoning-tokens N] [--price-in X] [--price-cached X] [--price-out X]
//                        [--bill FILE] [--batch-latency-ms N]
// Fault mode: --fault-rate is the probability per request of a random fault (429, 429 with
// Retry-After, 500, 503, reset, slow body, truncated JSON, non-JSON, empty choices,
// finish_reason length; drawn from --fault-seed and the request's sequence number);
// --fail-401-after N answers 401 to every request after the first N; --fault-at puts a chosen
// kind at chosen 0-based request numbers.
// --timeline FILE writes, at exit, each request's arrival time (ms since the server started), one
// per line: how many requests were in flight over a run (the client's idle slots) can be read
// from it.
// Usage as a provider with a prefix cache reports it (--prefix-cache BLOCK_TOKENS): each
// request's prompt is counted in the server's own tokens (one per 4 bytes of the chat messages,
// tests/support/prefix_cache_meter.h), and the longest prefix, in whole blocks of BLOCK_TOKENS,
// that an earlier request already sent is reported as cached — as vLLM's automatic prefix
// caching serves it — in OpenAI's shape (prompt_tokens_details.cached_tokens,
// completion_tokens_details.reasoning_tokens), DeepSeek's (prompt_cache_hit_tokens /
// prompt_cache_miss_tokens) or none (details null: the client cannot know) by --usage-shape;
// --reasoning-tokens N adds N reasoning tokens to every answer's completion tokens. The server
// bills every answer at --price-in / --price-cached / --price-out (USD per million tokens),
// prints the bill on stderr at exit ("bill: … cost_usd=…") and writes it as JSON to --bill FILE.
// It also serves the Batch API (/v1/files, /v1/batches, tests/support/fake_batch_server.h): each
// line of a job is answered by the same script as a synchronous request, the job completing
// --batch-latency-ms (default 2000) after it was created; at exit it prints
// "batch: jobs=N lines=M" on stderr.
// Prints its base URL on stdout, serves until SIGTERM or SIGINT, then prints the request count
// and the faults injected on stderr ("fake_llm_server_tool: N requests", "faults: kind=n …"),
// and with --gold how many requests named a known question ("known questions: N requests").
#include <algorithm>
#include <atomic>
#include <cctype>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <chrono>
#include <fstream>
#include <mutex>
#include <iostream>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "nl2sql/core/hash.h"
#include "support/fake_batch_server.h"
#include "support/fake_openai_server.h"
#include "support/gold_answers.h"
#include "support/prefix_cache_meter.h"

namespace fake = nl2sql::llm::testing;

namespace {

[[noreturn]] void usage(const std::string& why) {
  std::cerr << "fake_llm_server_tool: " << why
            << "\nusage: fake_llm_server_tool [LATENCY_MS [PORT]] [--latency-ms N] [--port P] [--gold FILE] "
               "[--fault-rate R] [--fault-seed S] [--fail-401-after N] [--fault-at SEQ:KIND,...] "
               "[--slow-body-ms N] [--prefix-cache BLOCK_TOKENS] [--usage-shape openai|deepseek|none] "
               "[--reasoning-tokens N] [--price-in X] [--price-cached X] [--price-out X] [--bill FILE] "
               "[--batch-latency-ms N]\n";
  std::exit(2);
}



// The server's own bill (--prefix-cache): what it reported, priced at the --price-* flags.
struct Bill {
  std::mutex mu;
  int64_t requests = 0;             // guarded by mu
  fake::FakeCharge tokens;          // guarded by mu: summed over requests
  double cost_usd = 0;              // guarded by mu
  double price_in = 0, price_cached = 0, price_out = 0;

  void charge(const fake::FakeCharge& c) {
    std::lock_guard lock(mu);
    ++requests;
    tokens.prompt_tokens += c.prompt_tokens;
    tokens.cached_tokens += c.cached_tokens;
    tokens.completion_tokens += c.completion_tokens;
    tokens.reasoning_tokens += c.reasoning_tokens;
    cost_usd += c.cost_usd(price_in, price_cached, price_out);
  }
  nlohmann::json to_json() {
    std::lock_guard lock(mu);
    return {{"requests", requests},
            {"prompt_tokens", tokens.prompt_tokens},
            {"cached_tokens", tokens.cached_tokens},
            {"completion_tokens", tokens.completion_tokens},
            {"reasoning_tokens", tokens.reasoning_tokens},
            {"price_in_per_mtok", price_in},
            {"price_cached_in_per_mtok", price_cached},
            {"price_out_per_mtok", price_out},
            {"cost_usd", cost_usd}};
  }
};

fake::UsageShape usage_shape(const std::string& name) {
  if (name == "openai") return fake::UsageShape::kOpenAi;
  if (name == "deepseek") return fake::UsageShape::kDeepSeek;
  if (name == "none") return fake::UsageShape::kNone;
  usage("--usage-shape must be openai, deepseek or none, not '" + name + "'");
}

}  // namespace

int main(int argc, char** argv) {
  int latency = 100;
  int port = 0;
  fake::FaultPlan faults;
  double fault_rate = 0;
  std::string timeline_file;  // --timeline FILE: each request's arrival, ms since start, one per line
  int positional = 0;
  fake::GoldMap gold;
  int64_t prefix_block = 0;  // --prefix-cache: 0 = off (the fixed usage of completion_body)
  fake::UsageShape shape = fake::UsageShape::kOpenAi;
  int64_t reasoning_tokens = 0;
  std::string bill_file;
  Bill bill;
  fake::BatchKnobs batch;
  batch.latency = std::chrono::milliseconds(2000);
  try {
    for (int i = 1; i < argc; ++i) {
      std::string a = argv[i];
      auto value = [&]() -> std::string {
        if (i + 1 >= argc) usage(a + " needs a value");
        return argv[++i];
      };
      if (a == "--latency-ms") latency = std::stoi(value());
      else if (a == "--port") port = std::stoi(value());
      else if (a == "--gold") {
        const std::string file = value();
        if (!fake::load_gold(file, gold)) usage("--gold: cannot read " + file + " as a JSON array of questions");
      }
      else if (a == "--timeline") timeline_file = value();
      else if (a == "--fault-rate") fault_rate = std::stod(value());
      else if (a == "--fault-seed") faults.seed = std::stoull(value());
      else if (a == "--fail-401-after") faults.fail_401_from = std::stoll(value());
      else if (a == "--slow-body-ms") faults.slow_body_delay = std::chrono::milliseconds(std::stoi(value()));
      else if (a == "--prefix-cache") prefix_block = std::stoll(value());
      else if (a == "--usage-shape") shape = usage_shape(value());
      else if (a == "--reasoning-tokens") reasoning_tokens = std::stoll(value());
      else if (a == "--price-in") bill.price_in = std::stod(value());
      else if (a == "--price-cached") bill.price_cached = std::stod(value());
      else if (a == "--price-out") bill.price_out = std::stod(value());
      else if (a == "--bill") bill_file = value();
      else if (a == "--batch-latency-ms") batch.latency = std::chrono::milliseconds(std::stoi(value()));
      else if (a == "--fault-at") {
        std::string list = value();
        size_t start = 0;
        while (start <= list.size()) {
          size_t end = list.find(',', start);
          std::string item = list.substr(start, end == std::string::npos ? std::string::npos : end - start);
          size_t colon = item.find(':');
          if (colon == std::string::npos) usage("--fault-at: expected SEQ:KIND, got '" + item + "'");
          std::string kind = item.substr(colon + 1);
          auto fault = fake::fault_from_name(kind);
          if (!fault) usage("--fault-at: unknown fault kind '" + kind + "'");
          faults.at_call[std::stoll(item.substr(0, colon))] = *fault;
          if (end == std::string::npos) break;
          start = end + 1;
        }
      } else if (a == "--help" || a == "-h") {
        usage("a fake OpenAI-compatible server");
      } else if (!a.empty() && a[0] != '-' && positional < 2) {
        (positional++ == 0 ? latency : port) = std::stoi(a);
      } else {
        usage("unknown argument '" + a + "'");
      }
    }
  } catch (const std::exception&) {
    usage("a numeric flag has a non-numeric value");
  }
  if (fault_rate < 0 || fault_rate > 1) usage("--fault-rate must be within [0, 1]");
  if (fault_rate > 0) faults.rates = fake::FaultPlan::uniform(fault_rate, faults.seed).rates;
  if (prefix_block < 0 || reasoning_tokens < 0) usage("--prefix-cache and --reasoning-tokens must be >= 0");
  if (prefix_block == 0 && (!bill_file.empty() || reasoning_tokens > 0))
    usage("--bill and --reasoning-tokens need --prefix-cache BLOCK_TOKENS");
  fake::PrefixCacheMeter meter(std::max<int64_t>(1, prefix_block));

  // Blocked before the server's threads start, so only sigwait() below receives them.
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGTERM);
  sigaddset(&stop, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);
  // One thread per connection the pipeline may keep open (threads x in-flight cap stays far below).
  std::atomic<int64_t> known{0};
  const auto t0 = std::chrono::steady_clock::now();
  std::mutex timeline_mu;
  std::vector<double> arrivals;  // ms since start, one per request (--timeline)
  fake::FakeBatchServer batch_server(
      [latency, &gold, &known, &t0, &timeline_mu, &arrivals, prefix_block, &meter, shape, reasoning_tokens,
       &bill](const httplib::Request& req, int64_t) {
        {
          std::lock_guard lock(timeline_mu);
          arrivals.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
        }
        bool named = false;
        const std::string text = fake::gold_answer_text(gold, req.body, &named);
        if (named) ++known;
        if (prefix_block == 0)
          return fake::FakeReply(200, fake::completion_body(text), {}, std::chrono::milliseconds(latency));
        fake::FakeCharge c = meter.admit(fake::fake_prompt_text(req.body));
        c.reasoning_tokens = reasoning_tokens;
        c.completion_tokens = fake::fake_tokens(text) + reasoning_tokens;
        bill.charge(c);
        return fake::FakeReply(200, fake::completion_body_with_usage(text, fake::usage_json(c, shape)), {},
                               std::chrono::milliseconds(latency));
      },
      batch, 256, port);
  fake::FakeOpenAiServer& server = batch_server.chat();
  server.set_faults(faults);
  std::cout << server.base_url() << std::endl;
  int sig = 0;
  sigwait(&stop, &sig);
  std::cerr << "fake_llm_server_tool: " << server.requests() << " requests\n";
  std::cerr << "faults:";
  int64_t total = 0;
  for (const auto& [kind, n] : server.faults()) {
    std::cerr << " " << fake::fault_name(kind) << "=" << n;
    total += n;
  }
  std::cerr << " total=" << total << "\n";
  if (!timeline_file.empty()) {
    std::ofstream out(timeline_file);
    std::lock_guard lock(timeline_mu);
    for (double t : arrivals) out << t << "\n";
  }
  std::cerr << "batch: jobs=" << batch_server.batches_created() << " lines=" << batch_server.lines_answered() << "\n";
  if (!gold.empty()) std::cerr << "known questions: " << known.load() << " requests\n";
  if (prefix_block > 0) {
    const nlohmann::json b = bill.to_json();
    std::cerr << "bill: requests=" << b["requests"] << " prompt_tokens=" << b["prompt_tokens"]
              << " cached_tokens=" << b["cached_tokens"] << " completion_tokens=" << b["completion_tokens"]
              << " reasoning_tokens=" << b["reasoning_tokens"] << " cost_usd=" << b["cost_usd"] << "\n";
    if (!bill_file.empty()) std::ofstream(bill_file) << b.dump(1) << "\n";
  }
  return 0;
}
