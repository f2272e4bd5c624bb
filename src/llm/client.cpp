// llm::Client: construction, the role → profile map, cancellation and the fatal stop, the held
// calls' gate, HTTP request set-up, accounting, embeddings. The other jobs are in files of their
// own (client.h lists them).
#include "nl2sql/llm/client.h"

#include <algorithm>
#include <set>

#include "client_state.h"
#include "nl2sql/core/log.h"
#include "nl2sql/core/percent_encoding.h"
#include "nl2sql/core/text.h"

namespace nl2sql::llm {

std::string describe_call(const ModelProfile& p, const ChatRequest& r) {
  std::string s = "profile \"" + p.name + "\" (model " + p.model + ")";
  if (!r.stage.empty()) s += ", stage " + r.stage;
  if (!r.question_id.empty()) s += ", question " + r.question_id;
  s += ", sample " + std::to_string(r.sample_index);
  return s;
}

Client::Client(LlmSettings settings, ClientOptions options)
    : settings_(std::move(settings)),
      options_(std::move(options)),
      wire_(std::make_unique<OpenAiChat>()),
      global_limit_(settings_.max_in_flight),
      jitter_state_(options_.jitter_seed) {
  for (const auto& [name, p] : settings_.profiles) {
    states_[name] = std::make_unique<ProfileState>(p, settings_.max_in_flight, options_.clock);
    if (p.batch.enabled && p.provider != "sim") {
      const ModelProfile* profile = &p;  // settings_ is fixed from here on
      auto api = std::make_unique<BatchApi>(
          options_.transport,
          [this, profile](const std::string& path) {
            HttpRequest http = http_request(*profile, path);
            http.idle_timeout = std::chrono::milliseconds(0);
            return http;
          },
          settings_.retry, options_.clock, [this] { return cancelled(); });
      states_[name]->batch = std::make_unique<BatchQueue>(name, p.batch, url_path_of(p.base_url) + wire_->chat_path(),
                                                          std::move(api), options_.clock,
                                                          [this] { return cancelled(); });
    }
  }
}

void Client::set_batch_journal(std::shared_ptr<BatchJournal> journal) {
  for (auto& [name, st] : states_)
    if (st->batch) st->batch->set_journal(journal);
}

int64_t Client::batch_jobs() {
  int64_t n = 0;
  for (auto& [name, st] : states_)
    if (st->batch) n += st->batch->jobs_submitted();
  return n;
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

std::vector<std::string> Client::profiles_for(const std::vector<std::string>& roles,
                                              const std::vector<std::string>& named_profiles) const {
  std::set<std::string> out;
  for (const auto& role : roles)
    if (auto p = settings_.resolve(role, ""); p) out.insert((*p)->name);
  for (const auto& name : named_profiles)
    if (auto p = settings_.resolve("", name); p) out.insert((*p)->name);
  return {out.begin(), out.end()};
}

std::optional<int64_t> Client::prompt_budget(const std::string& role, const std::string& profile,
                                             std::optional<int64_t> max_tokens) const {
  auto p = settings_.resolve(role, profile);
  if (!p || (*p)->context_tokens <= 0 || (*p)->provider == "sim") return std::nullopt;
  const int64_t out = max_tokens.value_or(settings_.output_budget(**p, role));
  // The chat template and role markers take a few dozen tokens; token counts are estimated
  // from characters, so keep a tenth in reserve as well.
  const int64_t margin = 64 + (*p)->context_tokens / 10;
  return std::max<int64_t>(256, (*p)->context_tokens - out - margin);
}

bool Client::any_simulated(const std::vector<std::string>& used_profiles) const {
  for (const auto& name : used_profiles) {
    auto it = settings_.profiles.find(name);
    if (it != settings_.profiles.end() && it->second.provider == "sim") return true;
  }
  return false;
}

bool Client::any_simulated() const {
  std::vector<std::string> roles;
  for (const auto& [role, budget] : default_role_budgets()) roles.push_back(role);
  return any_simulated(profiles_for(roles));
}

std::optional<Status> Client::held_back() {
  if (!gate_.valid()) return std::nullopt;
  const std::shared_future<Status> gate = gate_;  // each thread reads through its own copy
  const Status& open = gate.get();
  if (open.is_ok()) return std::nullopt;
  stop_with(open);
  return make_call_error(CallErrorKind::kCancelled, "not sent: " + open.message());
}

void Client::stop_with(const Status& fatal) {
  bool first = false;
  {
    std::lock_guard lock(fatal_mu_);
    if (!fatal_) {
      fatal_ = fatal;
      first = true;
    }
  }
  // Stopped before any caller returns: a second refused call must not return (and let its
  // question store a stage) while the first is still logging, before the client reads as
  // cancelled. cancel() is idempotent.
  cancel();
  if (first)
    spdlog::error("{}: stopping every model call (rerun the same command to resume once it is fixed)",
                  fatal.message());
}

HttpRequest Client::http_request(const ModelProfile& profile, const std::string& path) const {
  HttpRequest http;
  http.url = profile.base_url + path;
  if (!profile.query.empty()) {
    std::string q;
    for (const auto& [k, v] : profile.query)
      q += (q.empty() ? "" : "&") + core::percent_encode(k) + "=" + core::percent_encode(v);
    http.url += (http.url.find('?') == std::string::npos ? "?" : "&") + q;
  }
  http.headers.push_back({"Content-Type", "application/json"});
  bool own_auth = false;
  for (const auto& [k, v] : profile.headers) {
    own_auth = own_auth || core::lower(k) == "authorization";
    http.headers.push_back({k, v});
  }
  if (!profile.api_key.empty() && !own_auth)
    http.headers.push_back({"Authorization", "Bearer " + profile.api_key});
  http.timeout = std::chrono::milliseconds(static_cast<int64_t>(profile.timeout_s * 1000));
  http.max_response_bytes = settings_.max_response_bytes;
  if (profile.stream)
    http.idle_timeout = std::chrono::milliseconds(static_cast<int64_t>(profile.idle_timeout_s * 1000));
  return http;
}

void Client::record(const ChatRequest& request, const Result<ChatResponse>& result, int attempts,
                    const CallSpend& spent) {
  UsageTotals t;
  t.calls = 1;
  if (!result) {
    t.errors = 1;
    t.attempts = attempts;
    t.retries = std::max(0, attempts - 1);
    t.errors_by_kind[call_error_kind_name(call_error_kind(result.status()))] = 1;
    // A call that failed after the server answered (cut, at the window, unreadable) was still
    // processed and billed.
    t.add_usage(spent.usage);
    t.cost_usd = spent.cost_usd;
  } else {
    const auto& r = *result;
    t.cache_hits = r.from_cache ? 1 : 0;
    t.simulated = r.simulated() ? 1 : 0;
    t.attempts = r.attempts;
    t.retries = std::max(0, r.attempts - 1);
    t.add_usage(r.usage);
    if (r.from_cache) {
      t.cache_prompt_tokens = r.usage.prompt_tokens;
      t.cache_completion_tokens = r.usage.completion_tokens;
    }
    t.cost_usd = r.cost_usd;
    t.latency_s = r.latency_s;
  }
  accounting_.record(request.stage, request.question_id, t);
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
  HttpRequest http = http_request(profile, wire_->embeddings_path());
  http.idle_timeout = std::chrono::milliseconds(0);
  http.body = wire_->embeddings_body(model, request.inputs);
  size_t chars = 0;
  for (const auto& s : request.inputs) chars += s.size();
  const auto start = options_.clock->now();
  int attempts = 0;
  std::string label = "profile \"" + profile.name + "\" (embeddings, model " + model + ")";
  const std::optional<Status> held = held_back();
  auto posted = held ? Result<HttpResponse>(*held)
                     : post_with_retries(profile, *states_.at(profile.name), http,
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
  auto parsed = wire_->read_embeddings(posted->body, request.inputs.size(), label);
  if (!parsed) {
    t.errors = 1;
    t.errors_by_kind[call_error_kind_name(call_error_kind(parsed.status()))] = 1;
    accounting_.record(request.stage, request.question_id, t);
    return parsed.status();
  }
  EmbeddingResponse r = std::move(parsed).value();
  if (r.usage.prompt_tokens == 0) r.usage.prompt_tokens = estimate_tokens(chars);
  r.cost_usd = cost_usd(profile, r.usage);  // prompt tokens only: an embedding has no completion
  r.latency_s = seconds_between(start, options_.clock->now());
  t.prompt_tokens = r.usage.prompt_tokens;
  t.cost_usd = r.cost_usd;
  t.latency_s = r.latency_s;
  accounting_.record(request.stage, request.question_id, t);
  return r;
}

}  // namespace nl2sql::llm
