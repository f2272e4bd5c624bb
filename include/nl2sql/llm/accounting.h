// Accounting: tokens, cost, latency, cache hits and errors per call, aggregated per stage, per
// question and per run. Thread-safe (one mutex; record() is cheap). to_json() gives the numbers
// reports print (failed calls by reason and retries included, so a run against a flaky
// endpoint can say what it survived); simulated calls are counted under their own flag so a report can say so.
// Parse failures — a call that succeeded but whose answer no reader could use (no SQL, no JSON
// of the asked shape, no winner) — are counted apart from failed calls, by the stage that read
// the answer: the server did its part, the model did not answer in a form we can use.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>

#include <nlohmann/json.hpp>

#include "nl2sql/llm/types.h"

namespace nl2sql::llm {

struct UsageTotals {
  int64_t calls = 0;
  int64_t cache_hits = 0;
  int64_t simulated = 0;
  int64_t errors = 0;
  int64_t attempts = 0;
  int64_t retries = 0;  // HTTP attempts beyond the first, over successful and failed calls
  std::map<std::string, int64_t> errors_by_kind;  // failed calls by call_error_kind_name
  int64_t parse_failures = 0;                              // answers no reader could use
  std::map<std::string, int64_t> parse_failures_by_stage;  // by the stage that read the answer
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;
  // Of the prompt tokens, those the provider's prefix cache served; of the completion tokens,
  // those spent reasoning — summed over the calls whose server reported them (calls_reporting_*):
  // 0 with no call reporting means "not reported", not "none".
  int64_t cached_tokens = 0;
  int64_t calls_reporting_cached = 0;
  int64_t reasoning_tokens = 0;
  int64_t calls_reporting_reasoning = 0;
  double cost_usd = 0.0;
  double latency_s = 0.0;  // summed over calls
  // Of prompt_tokens and completion_tokens, those of answers from nl2sql's response cache
  // (nothing was sent). In memory only: to_json leaves them out.
  int64_t cache_prompt_tokens = 0;
  int64_t cache_completion_tokens = 0;
  // Adds one call's usage as the server reported it (cached and reasoning counted when known).
  void add_usage(const Usage& usage);
  void add(const UsageTotals& other);
  nlohmann::json to_json() const;
};

class Accounting {
 public:
  void record(const std::string& stage, const std::string& question_id, const UsageTotals& call);
  // One answer of a successful call that could not be read (see the opening paragraph). `stage`
  // is the call's accounting stage; `reader` optionally names what was read when one stage asks
  // several things ("rank", "pairwise"): the failure is then listed as "<stage>:<reader>".
  void record_parse_failure(const std::string& stage, const std::string& question_id,
                            const std::string& reader = "");
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
