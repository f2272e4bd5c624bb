// A fake OpenAI-compatible server for whole-pipeline benchmarks: every answer waits a fixed
// latency and then returns one text that every stage can read — a pairwise verdict line, a JSON
// keyword list and a final ```sql block — whose SQL varies with the request (so candidates
// differ, some fail and go to the fixer, and the tournament has real duels to ask about).
//   fake_llm_server_tool [LATENCY_MS [PORT]] [--latency-ms N] [--port P]
//                        [--fault-rate R] [--fault-seed S] [--fail-401-after N]
//                        [--fault-at SEQ:KIND[,SEQ:KIND…]] [--slow-body-ms N]
// Fault mode: --fault-rate is the probability per request of a random fault (429, 429 with
// Retry-After, 500, 503, reset, slow body, truncated JSON, non-JSON, empty choices,
// finish_reason length; drawn from --fault-seed and the request's sequence number);
// --fail-401-after N answers 401 to every request after the first N; --fault-at puts a chosen
// kind at chosen 0-based request numbers.
// Prints its base URL on stdout, serves until SIGTERM or SIGINT, then prints the request count
// and the faults injected on stderr ("fake_llm_server_tool: N requests", "faults: kind=n …").
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <string>

#include "nl2sql/core/hash.h"
#include "support/fake_openai_server.h"

namespace fake = nl2sql::llm::testing;

namespace {

[[noreturn]] void usage(const std::string& why) {
  std::cerr << "fake_llm_server_tool: " << why
            << "\nusage: fake_llm_server_tool [LATENCY_MS [PORT]] [--latency-ms N] [--port P] "
               "[--fault-rate R] [--fault-seed S] [--fail-401-after N] [--fault-at SEQ:KIND,...] "
               "[--slow-body-ms N]\n";
  std::exit(2);
}


}  // namespace

int main(int argc, char** argv) {
  int latency = 100;
  int port = 0;
  fake::FaultPlan faults;
  double fault_rate = 0;
  int positional = 0;
  try {
    for (int i = 1; i < argc; ++i) {
      std::string a = argv[i];
      auto value = [&]() -> std::string {
        if (i + 1 >= argc) usage(a + " needs a value");
        return argv[++i];
      };
      if (a == "--latency-ms") latency = std::stoi(value());
      else if (a == "--port") port = std::stoi(value());
      else if (a == "--fault-rate") fault_rate = std::stod(value());
      else if (a == "--fault-seed") faults.seed = std::stoull(value());
      else if (a == "--fail-401-after") faults.fail_401_from = std::stoll(value());
      else if (a == "--slow-body-ms") faults.slow_body_delay = std::chrono::milliseconds(std::stoi(value()));
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

  // Blocked before the server's threads start, so only sigwait() below receives them.
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGTERM);
  sigaddset(&stop, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);
  static const char* kSql[] = {
      "SELECT 1",
      "SELECT 2",
      "SELECT count(*) FROM sqlite_master",
      "SELECT name FROM sqlite_master ORDER BY name LIMIT 1",
      "SELECT no_such_column FROM no_such_table",
  };
  // One thread per connection the pipeline may keep open (threads x in-flight cap stays far below).
  fake::FakeOpenAiServer server(
      [latency](const httplib::Request& req, int64_t) {
        uint64_t h = nl2sql::core::xxh64(req.body);
        const char* sql = kSql[h % 5];
        std::string text = std::string("Reasoning: compared the two candidates.\nAnswer: ") + ((h >> 8) % 2 ? "A" : "B") +
                           "\n```json\n[\"name\", \"count\"]\n```\n```sql\n" + sql + "\n```";
        return fake::FakeReply(200, fake::completion_body(text), {}, std::chrono::milliseconds(latency));
      },
      256, port);
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
  return 0;
}
