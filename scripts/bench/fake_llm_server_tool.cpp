// A fake OpenAI-compatible server for whole-pipeline benchmarks: every answer waits a fixed
// latency and then returns one text that every stage can read — a pairwise verdict line, a JSON
// keyword list and a final ```sql block — whose SQL varies with the request (so candidates
// differ, some fail and go to the fixer, and the tournament has real duels to ask about).
//   fake_llm_server_tool LATENCY_MS [PORT]
// Prints its base URL on stdout, serves until SIGTERM or SIGINT, then prints the request count
// on stderr.
#include <csignal>
#include <iostream>
#include <string>

#include "llm_fake_server.h"
#include "nl2sql/core/hash.h"

int main(int argc, char** argv) {
  int latency = argc > 1 ? std::stoi(argv[1]) : 100;
  int port = argc > 2 ? std::stoi(argv[2]) : 0;
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
  nl2sql::bench::LatencyServer server(
      std::chrono::milliseconds(latency),
      [](const std::string& body, int64_t) {
        uint64_t h = nl2sql::core::xxh64(body);
        const char* sql = kSql[h % 5];
        return std::string("Reasoning: compared the two candidates.\nAnswer: ") + ((h >> 8) % 2 ? "A" : "B") +
               "\n```json\n[\"name\", \"count\"]\n```\n```sql\n" + sql + "\n```";
      },
      port);
  std::cout << server.base_url() << std::endl;
  int sig = 0;
  sigwait(&stop, &sig);
  std::cerr << "fake_llm_server_tool: " << server.requests() << " requests\n";
  return 0;
}
