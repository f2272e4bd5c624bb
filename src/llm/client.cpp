#include "nl2sql/llm/client.h"

#include <algorithm>
#include <cmath>
#include <thread>

#include <nlohmann/json.hpp>

#include "nl2sql/core/log.h"

namespace nl2sql::llm {
namespace {

using json = nlohmann::json;

double seconds_between(Clock::TimePoint a, Clock::TimePoint b) {
  return std::chrono::duration<double>(b - a).count();
}

int64_t estimate_tokens(size_t chars) { return static_cast<int64_t>((chars + 3) / 4); }

size_t prompt_chars(const ChatRequest& r) {
  size_t n = 0;
  for (const auto& m : r.messages) n += m.content.size() + 4;
  return n;
}

// The server's own explanation, from {"error":{"message":…}} or the body's start.
std::string server_message(const std::string& body) {
  auto j = json::parse(body, nullptr, false);
  if (!j.is_discarded() && j.is_object() && j.contains("error")) {
    const auto& e = j["error"];
    if (e.is_object() && e.contains("message") && e["message"].is_string())
      return e["message"].get<std::string>();
    if (e.is_string()) return e.get<std::string>();
  }
  std::string s = body.substr(0, 300);
  std::replace(s.begin(), s.end(), '\n', ' ');
  return s.empty() ? "(empty body)" : s;
}

bool retryable_status(int status) { return status == 408 || status == 429 || status >= 500; }

std::string describe_call(const ModelProfile& p, const ChatRequest& r) {
  std::string s = "profile \"" + p.name + "\" (model " + p.model + ")";
  if (!r.stage.empty()) s += ", stage " + r.stage;
  if (!r.question_id.empty()) s += ", question " + r.question_id;
  s += ", sample " + std::to_string(r.sample_index);
  return s;
}

// Applies the profile's sampling defaults so the cache key and the body agree.
ChatRequest with_defaults(const ModelProfile& p, ChatRequest r) {
  if (!r.temperature) r.temperature = p.temperature;
  if (!r.top_p) r.top_p = p.top_p;
  if (!r.max_tokens) r.max_tokens = p.max_tokens;
  if (r.n < 1) r.n = 1;
  return r;
}

}  // namespace

struct Client::ProfileState {
  ProfileState(const ModelProfile& p, const std::shared_ptr<Clock>& clock)
      : limit(p.max_in_flight), requests(p.rpm, clock), tokens(p.tpm, clock) {}
  InFlightLimit limit;
  TokenBucket requests;
  TokenBucket tokens;
};

std::string build_chat_body(const ModelProfile& profile, const ChatRequest& request) {
  json messages = json::array();
  for (const auto& m : request.messages) messages.push_back({{"role", m.role}, {"content", m.content}});
  json body = {{"model", profile.model}, {"messages", messages}};
  body["temperature"] = request.temperature.value_or(profile.temperature);
  body["top_p"] = request.top_p.value_or(profile.top_p);
  body["max_tokens"] = request.max_tokens.value_or(profile.max_tokens);
  if (request.n > 1) body["n"] = request.n;
  if (request.seed) body["seed"] = *request.seed;
  if (!request.stop.empty()) body["stop"] = request.stop;
  return body.dump(-1, ' ', false, json::error_handler_t::replace);
}

Result<ChatResponse> parse_chat_completion(const std::string& body, bool accept_truncated) {
  auto j = json::parse(body, nullptr, false);
  if (j.is_discarded()) {
    std::string start = body.substr(0, 80);
    return make_call_error(CallErrorKind::kNotJson,
                           "the answer is not JSON (or is truncated JSON), " +
                               std::to_string(body.size()) + " bytes starting \"" + start + "\"");
  }
  if (!j.is_object() || !j.contains("choices") || !j["choices"].is_array())
    return make_call_error(CallErrorKind::kMissingField, "the answer has no \"choices\" array");
  const auto& choices = j["choices"];
  if (choices.empty()) return make_call_error(CallErrorKind::kEmptyChoices, "\"choices\" is empty");
  ChatResponse r;
  for (size_t i = 0; i < choices.size(); ++i) {
    const auto& c = choices[i];
    if (!c.is_object() || !c.contains("message") || !c["message"].is_object() ||
        !c["message"].contains("content"))
      return make_call_error(CallErrorKind::kMissingField,
                             "choices[" + std::to_string(i) + "] has no message.content");
    const auto& content = c["message"]["content"];
    if (!content.is_null() && !content.is_string())
      return make_call_error(CallErrorKind::kMissingField,
                             "choices[" + std::to_string(i) + "].message.content is not a string");
    std::string text = content.is_string() ? content.get<std::string>() : "";
    std::string finish = c.contains("finish_reason") && c["finish_reason"].is_string()
                             ? c["finish_reason"].get<std::string>()
                             : "";
    if (finish == "length" && !accept_truncated)
      return make_call_error(CallErrorKind::kTruncated,
                             "choices[" + std::to_string(i) +
                                 "] stopped at max_tokens (finish_reason \"length\")");
    if (text.find_first_not_of(" \t\r\n") == std::string::npos)
      return make_call_error(CallErrorKind::kEmptyContent,
                             "choices[" + std::to_string(i) + "].message.content is empty");
    r.choices.push_back(std::move(text));
    r.finish_reasons.push_back(std::move(finish));
  }
  if (j.contains("usage") && j["usage"].is_object()) {
    const auto& u = j["usage"];
    if (u.contains("prompt_tokens") && u["prompt_tokens"].is_number_integer())
      r.usage.prompt_tokens = u["prompt_tokens"].get<int64_t>();
    if (u.contains("completion_tokens") && u["completion_tokens"].is_number_integer())
      r.usage.completion_tokens = u["completion_tokens"].get<int64_t>();
  }
  return r;
}

std::string extract_sql_block(const std::string& answer) {
  auto last_block = [&](const std::string& opener) -> std::optional<std::string> {
    size_t pos = std::string::npos, search = 0;
    for (;;) {  // bounded by the answer's length
      size_t p = answer.find(opener, search);
      if (p == std::string::npos) break;
      pos = p;
      size_t after = answer.find('\n', p);
      if (after == std::string::npos) break;
      size_t close = answer.find("```", after);
      if (close == std::string::npos) break;
      search = close + 3;
    }
    if (pos == std::string::npos) return std::nullopt;
    size_t start = answer.find('\n', pos);
    if (start == std::string::npos) return std::nullopt;
    size_t close = answer.find("```", start);
    std::string body = answer.substr(start + 1, close == std::string::npos ? std::string::npos
                                                                           : close - start - 1);
    return body;
  };
  std::optional<std::string> block = last_block("```sql");
  if (!block) block = last_block("```SQL");
  if (!block) block = last_block("```");
  std::string s = block ? *block : answer;
  auto b = s.find_first_not_of(" \t\r\n");
  auto e = s.find_last_not_of(" \t\r\n");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

Client::Client(LlmSettings settings, ClientOptions options)
    : settings_(std::move(settings)),
      options_(std::move(options)),
      global_limit_(settings_.max_in_flight),
      sim_(settings_.sim),
      jitter_state_(options_.jitter_seed) {
  for (const auto& [name, p] : settings_.profiles)
    states_[name] = std::make_unique<ProfileState>(p, options_.clock);
}

Client::~Client() = default;

Result<std::unique_ptr<Client>> Client::create(LlmSettings settings, ClientOptions options) {
  if (!options.clock) options.clock = std::make_shared<SystemClock>();
  if (!options.transport) options.transport = make_curl_transport();
  if (!options.cache && settings.cache.mode != CacheMode::kOff) {
    const bool read_only = settings.cache.mode != CacheMode::kReadWrite;
    auto cache = ResponseCache::open(settings.cache.path, read_only);
    if (!cache) return cache.status().with_context("config key \"llm.cache.path\"");
    options.cache = std::shared_ptr<ResponseCache>(std::move(cache).value());
  }
  return std::unique_ptr<Client>(new Client(std::move(settings), std::move(options)));
}

Result<std::unique_ptr<Client>> Client::from_config(const core::Config& config,
                                                    ClientOptions options) {
  auto settings = load_llm_settings(config);
  if (!settings) return settings.status();
  return create(std::move(settings).value(), std::move(options));
}

void Client::cancel() {
  cancelled_.store(true);
  global_limit_.cancel();
  for (auto& [name, st] : states_) st->limit.cancel();
  options_.transport->cancel();
}

bool Client::cancelled() const {
  return cancelled_.load() || (options_.cancel_flag && options_.cancel_flag->load());
}

std::optional<Status> Client::fatal_error() const {
  std::lock_guard lock(fatal_mu_);
  return fatal_;
}

bool Client::any_simulated() const {
  for (const auto& [name, p] : settings_.profiles)
    if (p.provider == "sim") return true;
  return false;
}

void Client::record(const ChatRequest& request, const Result<ChatResponse>& result, int attempts) {
  UsageTotals t;
  t.calls = 1;
  if (!result) {
    t.errors = 1;
    t.attempts = attempts;
    t.retries = std::max(0, attempts - 1);
    t.errors_by_kind[call_error_kind_name(call_error_kind(result.status()))] = 1;
  } else {
    const auto& r = *result;
    t.cache_hits = r.from_cache ? 1 : 0;
    t.simulated = r.simulated() ? 1 : 0;
    t.attempts = r.attempts;
    t.retries = std::max(0, r.attempts - 1);
    t.prompt_tokens = r.usage.prompt_tokens;
    t.completion_tokens = r.usage.completion_tokens;
    t.cost_usd = r.cost_usd;
    t.latency_s = r.latency_s;
  }
  accounting_.record(request.stage, request.question_id, t);
}

Result<ChatResponse> Client::chat(const ChatRequest& request_in) {
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
    return make_call_error(CallErrorKind::kConfig,
                           describe_call(profile, request_in) + ": a request needs messages");

  if (profile.provider == "sim") {
    auto r = sim_.answer(request_in);
    if (r) {
      r->provider = "sim";
      r->profile = profile.name;
      r->model = profile.model;
      r->usage.prompt_tokens = estimate_tokens(prompt_chars(request_in));
      int64_t out = 0;
      for (const auto& c : r->choices) out += estimate_tokens(c.size());
      r->usage.completion_tokens = out;
      // What a model at this profile's prices would have charged for these (estimated) tokens:
      // lets budgets (--max-cost-usd) and cost reports be exercised offline.
      r->cost_usd = (static_cast<double>(r->usage.prompt_tokens) * profile.price_in_per_mtok +
                     static_cast<double>(out) * profile.price_out_per_mtok) / 1e6;
    }
    record(request_in, r);
    return r;
  }

  const ChatRequest request = with_defaults(profile, request_in);
  ResponseCache* cache = settings_.cache.mode == CacheMode::kOff ? nullptr : options_.cache.get();
  std::string key;
  if (cache) {
    key = ResponseCache::key_for(profile, request);
    auto hit = cache->lookup(key);
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
      r.attempts = 0;
      Result<ChatResponse> out(std::move(r));
      record(request, out);
      return out;
    }
    if (settings_.cache.mode == CacheMode::kReplay) {
      std::string first_user;
      for (const auto& m : request.messages)
        if (m.role == "user") { first_user = m.content; break; }
      if (first_user.size() > 120) first_user = first_user.substr(0, 120) + "…";
      std::replace(first_user.begin(), first_user.end(), '\n', ' ');
      Result<ChatResponse> r = make_call_error(
          CallErrorKind::kReplayMiss,
          "cache mode is replay and this call was never recorded: " +
              describe_call(profile, request) + ", key " + key + ", prompt \"" + first_user +
              "\" (cache " + cache->path().string() + ")");
      record(request, r);
      return r;
    }
  }

  int attempts = 0;
  auto result = chat_uncached(profile, *states_.at(profile.name), request, &attempts);
  if (result && cache && settings_.cache.mode == CacheMode::kReadWrite) {
    Status st = cache->store(key, profile.name, profile.model,
                             ResponseCache::canonical_request(profile, request), *result);
    if (!st) spdlog::warn("llm cache: could not store an answer: {}", st.message());
  }
  record(request, result, attempts);
  return result;
}

Result<ChatResponse> Client::chat_uncached(const ModelProfile& profile, ProfileState& state,
                                           const ChatRequest& request, int* attempts_out) {
  HttpRequest http;
  http.url = profile.base_url + "/chat/completions";
  http.headers.push_back({"Content-Type", "application/json"});
  if (!profile.api_key.empty()) http.headers.push_back({"Authorization", "Bearer " + profile.api_key});
  http.body = build_chat_body(profile, request);
  http.timeout = std::chrono::milliseconds(static_cast<int64_t>(profile.timeout_s * 1000));

  const auto start = options_.clock->now();
  const double estimated = static_cast<double>(estimate_tokens(prompt_chars(request)));
  int& attempts = *attempts_out;
  auto posted = post_with_retries(profile, state, http, estimated, describe_call(profile, request),
                                  &attempts);
  if (!posted) return posted.status();
  auto parsed = parse_chat_completion(posted->body, request.accept_truncated);
  if (!parsed)
    return Status(parsed.status().code(),
                  core::redact(parsed.status().message() + " (" + describe_call(profile, request) + ")"));
  ChatResponse r = std::move(parsed).value();
  if (r.usage.prompt_tokens == 0 && r.usage.completion_tokens == 0) {
    // Some servers omit usage; estimate so cost and tpm stay meaningful.
    r.usage.prompt_tokens = static_cast<int64_t>(estimated);
    for (const auto& c : r.choices) r.usage.completion_tokens += estimate_tokens(c.size());
  }
  state.tokens.charge(static_cast<double>(r.usage.completion_tokens) +
                      (static_cast<double>(r.usage.prompt_tokens) - estimated));
  r.cost_usd = (static_cast<double>(r.usage.prompt_tokens) * profile.price_in_per_mtok +
                static_cast<double>(r.usage.completion_tokens) * profile.price_out_per_mtok) /
               1e6;
  r.latency_s = seconds_between(start, options_.clock->now());
  r.attempts = attempts;
  r.provider = "openai";
  r.profile = profile.name;
  r.model = profile.model;
  return r;
}

Clock::Duration Client::backoff(int attempt, const HttpResponse* response) {
  const auto& rp = settings_.retry;
  if (response) {
    auto it = response->headers.find("retry-after");
    if (it != response->headers.end()) {
      char* end = nullptr;
      double secs = std::strtod(it->second.c_str(), &end);
      if (end != it->second.c_str() && secs >= 0) {  // seconds form; HTTP-date falls through
        secs = std::min(secs, rp.max_delay_s);
        return std::chrono::duration_cast<Clock::Duration>(std::chrono::duration<double>(secs));
      }
    }
  }
  double exp = std::min(rp.max_delay_s, rp.base_delay_s * std::pow(2.0, attempt - 1));
  double u;
  {
    std::lock_guard lock(jitter_mu_);
    SimRng rng(jitter_state_);
    jitter_state_ = rng.next_u64();
    u = rng.uniform();
  }
  double secs = exp * (0.5 + 0.5 * u);  // jitter over the upper half: spreads, never collapses
  return std::chrono::duration_cast<Clock::Duration>(std::chrono::duration<double>(secs));
}

Result<HttpResponse> Client::post_with_retries(const ModelProfile& profile, ProfileState& state,
                                               const HttpRequest& http, double estimated_tokens,
                                               const std::string& call_label, int* attempts) {
  const int max_attempts = settings_.retry.max_attempts;
  auto is_cancelled = [this] { return cancelled(); };
  for (int attempt = 1;; ++attempt) {  // bounded by max_attempts
    if (cancelled()) return make_call_error(CallErrorKind::kCancelled, "shutdown requested (" + call_label + ")");
    Status st = state.requests.acquire(1, is_cancelled);
    if (st) st = state.tokens.acquire(estimated_tokens, is_cancelled);
    if (!st) return make_call_error(CallErrorKind::kCancelled, st.message() + " (" + call_label + ")");

    Result<HttpResponse> posted = internal_error("not sent");
    {
      // Profile slot first, then global: the global count is then exactly what is on the wire.
      if (Status p = state.limit.acquire(); !p)
        return make_call_error(CallErrorKind::kCancelled, p.message() + " (" + call_label + ")");
      InFlightSlot profile_slot(&state.limit);
      if (Status g = global_limit_.acquire(); !g)
        return make_call_error(CallErrorKind::kCancelled, g.message() + " (" + call_label + ")");
      InFlightSlot global_slot(&global_limit_);
      *attempts = attempt;
      spdlog::debug("llm POST {} ({}, attempt {}/{})", core::mask_url(http.url), call_label,
                    attempt, max_attempts);
      posted = options_.transport->post(http);
    }

    CallErrorKind kind;
    std::string what;
    const HttpResponse* response = nullptr;
    if (!posted) {
      ErrorCode code = posted.status().code();
      if (code == ErrorCode::kCancelled)
        return make_call_error(CallErrorKind::kCancelled, core::redact(posted.status().message()));
      kind = code == ErrorCode::kTimeout ? CallErrorKind::kTimeout : CallErrorKind::kConnection;
      what = core::redact(posted.status().message());
      if (code != ErrorCode::kTimeout && code != ErrorCode::kUnavailable)
        return make_call_error(kind, what + " (" + call_label + ")");
    } else if (posted->status >= 200 && posted->status < 300) {
      return posted;
    } else {
      response = &*posted;
      const int status = posted->status;
      what = "HTTP " + std::to_string(status) + ": " + core::redact(server_message(posted->body));
      if (!retryable_status(status)) {
        kind = (status == 401 || status == 403) ? CallErrorKind::kAuth : CallErrorKind::kHttpClient;
        std::string hint = kind == CallErrorKind::kAuth
                               ? " (check the API key in env " +
                                     (profile.api_key_env.empty() ? std::string("(none configured)")
                                                                  : profile.api_key_env) + ")"
                               : "";
        Status refused = make_call_error(kind, "model profile \"" + profile.name + "\" at " +
                                                   core::mask_url(profile.base_url) + " refused the call: " +
                                                   what + hint + " (" + call_label + "); not retried");
        if (kind == CallErrorKind::kAuth && options_.stop_on_auth_error) {
          {
            std::lock_guard lock(fatal_mu_);
            if (!fatal_) fatal_ = refused;
          }
          spdlog::error("{}: stopping every model call (rerun to resume once the key is fixed)",
                        refused.message());
          cancel();
        }
        return refused;
      }
      kind = status == 429 ? CallErrorKind::kRateLimited : CallErrorKind::kServer;
    }
    if (attempt >= max_attempts) {
      return make_call_error(kind, "model profile \"" + profile.name + "\" at " +
                                       core::mask_url(profile.base_url) + ": " + what + " after " +
                                       std::to_string(attempt) + " attempts (" + call_label + ")");
    }
    Clock::Duration wait = backoff(attempt, response);
    spdlog::warn("llm profile {}: {} (attempt {}/{}); retrying in {:.2f} s", profile.name, what,
                 attempt, max_attempts, std::chrono::duration<double>(wait).count());
    // Sleep in slices so a shutdown is noticed within a quarter second.
    const Clock::Duration slice = std::chrono::milliseconds(250);
    while (wait.count() > 0) {
      if (cancelled()) return make_call_error(CallErrorKind::kCancelled, "shutdown requested during backoff (" + call_label + ")");
      Clock::Duration d = std::min(wait, slice);
      options_.clock->sleep_for(d);
      wait -= d;
    }
  }
}

Result<EmbeddingResponse> Client::embed(const EmbeddingRequest& request) {
  if (cancelled()) return make_call_error(CallErrorKind::kCancelled, "shutdown requested");
  auto resolved = settings_.resolve(request.role, request.profile);
  if (!resolved) return resolved.status();
  const ModelProfile& profile = **resolved;
  if (profile.provider == "sim")
    return make_call_error(CallErrorKind::kConfig,
                           "profile \"" + profile.name + "\" is simulated: sim has no embeddings");
  const std::string model = profile.embedding_model.empty() ? profile.model : profile.embedding_model;
  HttpRequest http;
  http.url = profile.base_url + "/embeddings";
  http.headers.push_back({"Content-Type", "application/json"});
  if (!profile.api_key.empty()) http.headers.push_back({"Authorization", "Bearer " + profile.api_key});
  http.body = json{{"model", model}, {"input", request.inputs}}.dump(-1, ' ', false, json::error_handler_t::replace);
  http.timeout = std::chrono::milliseconds(static_cast<int64_t>(profile.timeout_s * 1000));
  size_t chars = 0;
  for (const auto& s : request.inputs) chars += s.size();
  const auto start = options_.clock->now();
  int attempts = 0;
  std::string label = "profile \"" + profile.name + "\" (embeddings, model " + model + ")";
  auto posted = post_with_retries(profile, *states_.at(profile.name), http,
                                  static_cast<double>(estimate_tokens(chars)), label, &attempts);
  UsageTotals t;
  t.calls = 1;
  t.attempts = attempts;
  t.retries = std::max(0, attempts - 1);
  if (!posted) {
    t.errors = 1;
    t.errors_by_kind[call_error_kind_name(call_error_kind(posted.status()))] = 1;
    accounting_.record(request.stage, request.question_id, t);
    return posted.status();
  }
  auto parsed = parse_embeddings(posted->body, request.inputs.size(), label);
  if (!parsed) {
    t.errors = 1;
    t.errors_by_kind[call_error_kind_name(call_error_kind(parsed.status()))] = 1;
    accounting_.record(request.stage, request.question_id, t);
    return parsed.status();
  }
  EmbeddingResponse r = std::move(parsed).value();
  if (r.usage.prompt_tokens == 0) r.usage.prompt_tokens = estimate_tokens(chars);
  r.cost_usd = static_cast<double>(r.usage.prompt_tokens) * profile.price_in_per_mtok / 1e6;
  r.latency_s = seconds_between(start, options_.clock->now());
  t.prompt_tokens = r.usage.prompt_tokens;
  t.cost_usd = r.cost_usd;
  t.latency_s = r.latency_s;
  accounting_.record(request.stage, request.question_id, t);
  return r;
}

Result<EmbeddingResponse> parse_embeddings(const std::string& body, size_t inputs,
                                           const std::string& label) {
  auto j = json::parse(body, nullptr, false);
  if (j.is_discarded())
    return make_call_error(CallErrorKind::kNotJson, "embeddings answer is not JSON (" + label + ")");
  if (!j.is_object() || !j.contains("data") || !j["data"].is_array())
    return make_call_error(CallErrorKind::kMissingField, "embeddings answer has no \"data\" array (" + label + ")");
  EmbeddingResponse r;
  r.vectors.resize(inputs);
  size_t position = 0;
  for (const auto& d : j["data"]) {
    size_t idx = d.contains("index") && d["index"].is_number_integer() ? d["index"].get<size_t>() : position;
    ++position;
    if (idx >= r.vectors.size() || !d.contains("embedding") || !d["embedding"].is_array())
      return make_call_error(CallErrorKind::kMissingField, "embeddings answer: bad item " + std::to_string(position - 1) + " (" + label + ")");
    for (const auto& x : d["embedding"]) {
      if (!x.is_number()) return make_call_error(CallErrorKind::kMissingField, "embeddings answer: a value is not a number (" + label + ")");
      r.vectors[idx].push_back(x.get<float>());
    }
  }
  for (size_t i = 0; i < r.vectors.size(); ++i)
    if (r.vectors[i].empty())
      return make_call_error(CallErrorKind::kMissingField, "embeddings answer lacks input " + std::to_string(i) + " (" + label + ")");
  if (j.contains("usage") && j["usage"].is_object() && j["usage"].contains("prompt_tokens") &&
      j["usage"]["prompt_tokens"].is_number_integer())
    r.usage.prompt_tokens = j["usage"]["prompt_tokens"].get<int64_t>();
  return r;
}

}  // namespace nl2sql::llm
