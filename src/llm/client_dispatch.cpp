// Client::chat, the dispatch of a chat call: a simulated profile is answered by the attached
// Simulator (never cached; its tokens estimated and priced so budgets work offline); otherwise
// the response cache answers, or in replay mode fails the call it never recorded; otherwise the
// endpoint is asked (client_chat_http.cpp) and its answer stored. Every outcome is accounted.
#include <algorithm>

#include "client_state.h"
#include "nl2sql/core/log.h"

namespace nl2sql::llm {
namespace {

// Applies the profile's sampling defaults and the role's output budget so the cache key and
// the body agree.
ChatRequest with_defaults(const LlmSettings& settings, const ModelProfile& p, ChatRequest r) {
  if (!r.temperature) r.temperature = p.temperature;
  if (!r.top_p) r.top_p = p.top_p;
  if (!r.max_tokens) r.max_tokens = settings.output_budget(p, r.role);
  if (r.n < 1) r.n = 1;
  return r;
}

// The first user message, cut and on one line: what a replay miss quotes.
std::string first_user_message(const ChatRequest& request) {
  std::string first_user;
  for (const auto& m : request.messages)
    if (m.role == "user") {
      first_user = m.content;
      break;
    }
  if (first_user.size() > 120) first_user = core::redact_and_cut(first_user, 120) + "…";
  std::replace(first_user.begin(), first_user.end(), '\n', ' ');
  return first_user;
}

}  // namespace

Result<ChatResponse> Client::chat(const ChatRequest& request_in, CallSpend* spent_out) {
  if (spent_out) *spent_out = CallSpend{};
  if (cancelled()) {
    cancel();
    Result<ChatResponse> r = make_call_error(CallErrorKind::kCancelled, "shutdown requested");
    record(request_in, r);
    return r;
  }
  auto resolved = settings_.resolve(request_in.role, request_in.profile);
  if (!resolved) return resolved.status();
  const ModelProfile& profile = **resolved;
  if (request_in.messages.empty())
    return make_call_error(CallErrorKind::kConfig, describe_call(profile, request_in) + ": a request needs messages");
  if (profile.provider == "sim") return answer_simulated(profile, request_in, spent_out);

  const ChatRequest request = with_defaults(settings_, profile, request_in);
  ResponseCache* cache = settings_.cache.mode == CacheMode::kOff ? nullptr : options_.cache.get();
  std::string key;
  if (cache) {
    key = ResponseCache::key_for(profile, request);
    if (auto answered = answer_from_cache(profile, request, *cache, key)) return std::move(*answered);
  }
  int attempts = 0;
  CallSpend call_spend;
  auto result = chat_uncached(profile, *states_.at(profile.name), request, &attempts, &call_spend);
  if (result && cache && settings_.cache.mode == CacheMode::kReadWrite) {
    Status st = cache->store(key, profile.name, profile.model, ResponseCache::canonical_request(profile, request),
                             *result);
    if (!st) spdlog::warn("llm cache: could not store an answer: {}", st.message());
  }
  if (spent_out) *spent_out = call_spend;
  record(request, result, attempts, call_spend);
  return result;
}

Result<ChatResponse> Client::answer_simulated(const ModelProfile& profile, const ChatRequest& request,
                                              CallSpend* spent_out) {
  if (!options_.simulator)
    return make_call_error(CallErrorKind::kConfig,
                           describe_call(profile, request) +
                               ": profile is simulated (provider \"sim\") but no simulator is attached here");
  auto r = options_.simulator->answer(request);
  if (r) {
    r->provider = "sim";
    r->temperature = request.temperature.value_or(profile.temperature);
    r->seed = request.seed;
    r->profile = profile.name;
    r->model = profile.model;
    r->usage.prompt_tokens = estimate_tokens(prompt_chars(request));
    int64_t out = 0;
    for (const auto& c : r->choices) out += estimate_tokens(c.size());
    r->usage.completion_tokens = out;
    // What a model at this profile's prices would have charged for these (estimated) tokens:
    // lets budgets (--max-cost-usd) and cost reports be exercised offline.
    r->cost_usd = cost_usd(profile, r->usage);
    if (spent_out) *spent_out = CallSpend{r->usage, r->cost_usd};
  }
  record(request, r);
  return r;
}

std::optional<Result<ChatResponse>> Client::answer_from_cache(const ModelProfile& profile,
                                                              const ChatRequest& request, ResponseCache& cache,
                                                              const std::string& key) {
  auto hit = cache.lookup(key);
  if (!hit) {
    Result<ChatResponse> r = hit.status();  // already a kCache error
    record(request, r);
    return r;
  }
  if (hit->has_value()) {
    ChatResponse r = std::move(**hit);
    r.from_cache = true;
    r.provider = "openai";
    r.profile = profile.name;
    r.model = profile.model;
    r.cost_usd = 0.0;  // nothing was spent
    r.latency_s = 0.0;
    r.temperature = request.temperature;
    r.seed = request.seed;
    r.request_hash.clear();
    r.attempts = 0;
    Result<ChatResponse> out(std::move(r));
    record(request, out);
    return out;
  }
  if (settings_.cache.mode != CacheMode::kReplay) return std::nullopt;
  Result<ChatResponse> r = make_call_error(
      CallErrorKind::kReplayMiss, "cache mode is replay and this call was never recorded: " +
                                      describe_call(profile, request) + ", key " + key + ", prompt \"" +
                                      first_user_message(request) + "\" (cache " + cache.path().string() + ")");
  // A replayed run is only the recorded run when every call was recorded: one miss stops
  // the run loudly (exit 4) instead of scoring a question without its model's answer.
  if (options_.stop_on_fatal_error) stop_with(r.status());
  record(request, r);
  return r;
}

}  // namespace nl2sql::llm
