// Accounting: tokens, cost, latency, cache hits and errors per call, aggregated per stage, per
// question and per run. Thread-safe (one mutex; record() is cheap). to_json() gives the numbers
// reports print (failed calls by reason and retries included, so a run against a flaky
// endpoint can say what it survived); simulated calls are counted under their own flag so a report can say so.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>

#include <nlohmann/json.hpp>

namespace nl2sql::llm {

struct UsageTotals {
  int64_t calls = 0;
  int64_t cache_hits = 0;
  int64_t simulated = 0;
  int64_t errors = 0;
  int64_t attempts = 0;
  int64_t retries = 0;  // HTTP attempts beyond the first, over successful and failed calls
  std::map<std::string, int64_t> errors_by_kind;  // failed calls by call_error_kind_name
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;
  double cost_usd = 0.0;
  double latency_s = 0.0;  // summed over calls
  void add(const UsageTotals& other);
  nlohmann::json to_json() const;
};

class Accounting {
 public:
  void record(const std::string& stage, const std::string& question_id, const UsageTotals& call);
  UsageTotals total();
  std::map<std::string, UsageTotals> by_stage();
  std::map<std::string, UsageTotals> by_question();
  UsageTotals question(const std::string& question_id);  // zeros when it made no call
  nlohmann::json to_json();  // {"total":…, "by_stage":{…}} (per-question left out: large)

 private:
  std::mutex mu_;
  UsageTotals total_;                                // guarded by mu_
  std::map<std::string, UsageTotals> by_stage_;      // guarded by mu_
  std::map<std::string, UsageTotals> by_question_;   // guarded by mu_
};

}  // namespace nl2sql::llm
