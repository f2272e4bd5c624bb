#include "nl2sql/llm/accounting.h"

namespace nl2sql::llm {

void UsageTotals::add_usage(const Usage& u) {
  prompt_tokens += u.prompt_tokens;
  completion_tokens += u.completion_tokens;
  if (u.cached_tokens) {
    cached_tokens += *u.cached_tokens;
    ++calls_reporting_cached;
  }
  if (u.reasoning_tokens) {
    reasoning_tokens += *u.reasoning_tokens;
    ++calls_reporting_reasoning;
  }
}

void UsageTotals::add(const UsageTotals& o) {
  calls += o.calls;
  cache_hits += o.cache_hits;
  simulated += o.simulated;
  errors += o.errors;
  attempts += o.attempts;
  retries += o.retries;
  for (const auto& [k, v] : o.errors_by_kind) errors_by_kind[k] += v;
  parse_failures += o.parse_failures;
  for (const auto& [k, v] : o.parse_failures_by_stage) parse_failures_by_stage[k] += v;
  prompt_tokens += o.prompt_tokens;
  completion_tokens += o.completion_tokens;
  cached_tokens += o.cached_tokens;
  calls_reporting_cached += o.calls_reporting_cached;
  reasoning_tokens += o.reasoning_tokens;
  calls_reporting_reasoning += o.calls_reporting_reasoning;
  cost_usd += o.cost_usd;
  latency_s += o.latency_s;
  cache_prompt_tokens += o.cache_prompt_tokens;
  cache_completion_tokens += o.cache_completion_tokens;
}

nlohmann::json UsageTotals::to_json() const {
  return {{"calls", calls},
          {"cache_hits", cache_hits},
          {"simulated", simulated},
          {"errors", errors},
          {"attempts", attempts},
          {"retries", retries},
          {"errors_by_kind", errors_by_kind},
          {"parse_failures", parse_failures},
          {"parse_failures_by_stage", parse_failures_by_stage},
          {"prompt_tokens", prompt_tokens},
          {"completion_tokens", completion_tokens},
          {"cached_tokens", cached_tokens},
          {"calls_reporting_cached", calls_reporting_cached},
          {"reasoning_tokens", reasoning_tokens},
          {"calls_reporting_reasoning", calls_reporting_reasoning},
          {"cost_usd", cost_usd},
          {"latency_s", latency_s},
          {"mean_latency_s", calls > 0 ? latency_s / static_cast<double>(calls) : 0.0}};
}

void Accounting::record(const std::string& stage, const std::string& question_id,
                        const UsageTotals& call) {
  std::lock_guard lock(mu_);
  total_.add(call);
  by_stage_[stage.empty() ? "(none)" : stage].add(call);
  if (!question_id.empty()) by_question_[question_id].add(call);
}

void Accounting::record_parse_failure(const std::string& stage, const std::string& question_id,
                                      const std::string& reader) {
  UsageTotals t;
  t.parse_failures = 1;
  t.parse_failures_by_stage[(stage.empty() ? "(none)" : stage) + (reader.empty() ? "" : ":" + reader)] = 1;
  record(stage, question_id, t);
}

UsageTotals Accounting::total() {
  std::lock_guard lock(mu_);
  return total_;
}

std::map<std::string, UsageTotals> Accounting::by_stage() {
  std::lock_guard lock(mu_);
  return by_stage_;
}

std::map<std::string, UsageTotals> Accounting::by_question() {
  std::lock_guard lock(mu_);
  return by_question_;
}

UsageTotals Accounting::question(const std::string& question_id) {
  std::lock_guard lock(mu_);
  auto it = by_question_.find(question_id);
  return it == by_question_.end() ? UsageTotals{} : it->second;
}

nlohmann::json Accounting::to_json() {
  std::lock_guard lock(mu_);
  nlohmann::json stages = nlohmann::json::object();
  for (const auto& [k, v] : by_stage_) stages[k] = v.to_json();
  return {{"total", total_.to_json()}, {"by_stage", stages}};
}

}  // namespace nl2sql::llm
