// Client::preflight: one small real request per profile, sent exactly as the profile shapes every
// request, cache bypassed, at most two attempts, accounted under stage "preflight"; sim profiles
// are reported without a call. The profiles are checked side by side.
#include <algorithm>
#include <future>

#include "client_state.h"
#include "nl2sql/core/log.h"

namespace nl2sql::llm {
namespace {

// The shape of a real call (the fields a generation sends), with a small budget: a reasoning
// model may spend it all thinking, and that is fine here — the server accepted the request.
ChatRequest check_request(const LlmSettings& settings, const ModelProfile& profile) {
  ChatRequest request;
  request.profile = profile.name;
  request.stage = "preflight";
  request.messages = {{"user", "Reply with the single word OK."}};
  request.temperature = profile.temperature;
  request.top_p = profile.top_p;
  request.max_tokens = std::min<int64_t>(64, settings.output_budget(profile, "generate"));
  return request;
}

// What a caller should know about an accepted check's answer ("" when nothing).
std::string answer_note(const ChatResponse& r, int64_t budget) {
  const bool blank = r.text().find_first_not_of(" \t\r\n") == std::string::npos;
  if (r.finish_reasons.front() == "length")
    return r.answer_from_reasoning.front() || blank
               ? "the check's " + std::to_string(budget) +
                     "-token budget went to reasoning before any answer (fine: the request was accepted)"
               : "answer cut at the check's " + std::to_string(budget) + "-token budget";
  if (r.answer_from_reasoning.front()) return "the content was empty: the answer came from the reasoning field";
  return "";
}

}  // namespace

PreflightResult Client::preflight_one(const std::string& name) {
  PreflightResult r;
  r.profile = name;
  auto it = settings_.profiles.find(name);
  if (it == settings_.profiles.end()) {
    r.status = not_found("no model profile \"" + name + "\"");
    return r;
  }
  const ModelProfile& profile = it->second;
  r.model = profile.model;
  r.endpoint = core::mask_url(profile.base_url + wire_->chat_path());
  if (profile.provider == "sim") {
    r.simulated = true;
    r.note = "simulated (sim provider): not called";
    return r;
  }
  const ChatRequest request = check_request(settings_, profile);
  HttpRequest http = http_request(profile, wire_->chat_path());
  http.body = wire_->chat_body(profile, request);
  if (auto body = nlohmann::json::parse(http.body, nullptr, false); body.is_object())
    for (const auto& [k, v] : body.items())
      if (k != "messages") r.fields.push_back(k);
  const auto start = options_.clock->now();
  int attempts = 0;
  auto posted = post_with_retries(profile, *states_.at(name), http, 16, "preflight of profile \"" + name + "\"",
                                  &attempts, /*max_attempts=*/std::min(2, settings_.retry.max_attempts));
  r.latency_s = seconds_between(start, options_.clock->now());
  Result<ChatResponse> parsed = posted ? wire_->read_chat(posted->body, profile.stream, true)
                                       : Result<ChatResponse>(posted.status());
  UsageTotals t;
  t.calls = 1;
  t.attempts = attempts;
  t.retries = std::max(0, attempts - 1);
  if (!parsed) {
    r.status = Status(parsed.status().code(), core::redact(parsed.status().message()));
    t.errors = 1;
    t.errors_by_kind[call_error_kind_name(call_error_kind(parsed.status()))] = 1;
  } else {
    r.answer = core::redact_and_cut(parsed->text(), 200);
    r.note = answer_note(*parsed, *request.max_tokens);
    t.add_usage(parsed->usage);
    t.cost_usd = cost_usd(profile, parsed->usage);
    t.latency_s = r.latency_s;
  }
  accounting_.record(request.stage, "", t);
  return r;
}

std::vector<PreflightResult> Client::preflight(const std::vector<std::string>& profiles) {
  // Each profile's check on its own thread: a config with several endpoints waits for the
  // slowest, not for their sum.
  std::vector<std::future<PreflightResult>> checks;
  checks.reserve(profiles.size());
  for (const auto& name : profiles)
    checks.push_back(std::async(std::launch::async, [this, &name] { return preflight_one(name); }));
  std::vector<PreflightResult> out;
  out.reserve(checks.size());
  for (auto& c : checks) out.push_back(c.get());
  return out;
}

}  // namespace nl2sql::llm
