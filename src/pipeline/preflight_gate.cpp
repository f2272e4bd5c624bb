// PreflightGate (run_parts.h).
#include <spdlog/spdlog.h>

#include "nl2sql/run/run_data.h"

#include "run_parts.h"

namespace nl2sql::pipeline {

void PreflightGate::configure(llm::Client* client, std::vector<std::string> profiles, bool enabled) {
  client_ = client;
  profiles_ = std::move(profiles);
  enabled_ = enabled;
}

void PreflightGate::start() {
  if (!enabled_ || checks_.valid()) return;
  checks_ = std::async(std::launch::async, [client = client_, profiles = profiles_] {
    return client->preflight(profiles);
  });
}

void PreflightGate::hold_calls() {
  if (checks_.valid()) client_->hold_calls_until(passed_.get_future().share());
}

void PreflightGate::decide(run::RunStore& store) {
  if (!checks_.valid()) return;
  const auto checks = checks_.get();
  // The checks are real calls the server answered (and billed): the run's report counts them
  // under the stage "preflight", kept in the run store over every invocation.
  if (const auto by_stage = client_->accounting().by_stage(); by_stage.count("preflight")) {
    const llm::UsageTotals& t = by_stage.at("preflight");
    if (t.calls > 0) {
      run::StageUsage u;
      u.calls = t.calls;
      u.prompt_tokens = t.prompt_tokens;
      u.completion_tokens = t.completion_tokens;
      u.cached_tokens = t.cached_tokens;
      u.calls_reporting_cached = t.calls_reporting_cached;
      u.reasoning_tokens = t.reasoning_tokens;
      u.calls_reporting_reasoning = t.calls_reporting_reasoning;
      u.cost_usd = t.cost_usd;
      u.latency_s = t.latency_s;
      if (auto st = run::add_run_usage(store, "preflight", run::run_usage_delta(u)); !st.is_ok())
        spdlog::warn("run store: the preflight's usage was not recorded: {}", st.message());
    }
  }
  Status verdict = Status::ok();
  for (const auto& r : checks) {
    if (r.status) {
      if (!r.simulated)
        spdlog::info("preflight: profile {} ({} at {}) answered in {:.2f} s{}", r.profile, r.model, r.endpoint,
                     r.latency_s, r.note.empty() ? "" : " — " + r.note);
      continue;
    }
    verdict = Status(ErrorCode::kUnavailable, "preflight: model profile \"" + r.profile + "\" (model " + r.model +
                                                  " at " + r.endpoint + ") failed: " + r.status.message() +
                                                  " — check it with `nl2sql models check --config …`");
    // Stopped before the gate opens: no held call goes out, no question stores a stage.
    client_->stop_with(verdict);
    break;
  }
  passed_.set_value(verdict);
}

}  // namespace nl2sql::pipeline
