// Client's retry loop: post_with_retries applies the retry policy (retry_policy.h) to one call —
// rate buckets and in-flight slots before each attempt, then per failure: overload back-pressure,
// refusals (and the repeated refusal that stops a run), endpoint health with one prober while the
// endpoint is down, backoff honouring Retry-After.
#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "client_state.h"
#include "nl2sql/core/hash.h"
#include "nl2sql/core/log.h"
#include "retry_policy.h"

namespace nl2sql::llm {

Clock::Duration Client::backoff(int attempt, const HttpResponse* response) {
  const std::optional<double> requested = response ? requested_wait_s(response->headers) : std::nullopt;
  double u = 0;
  if (!requested) {
    std::lock_guard lock(jitter_mu_);
    core::SplitMix64 rng(jitter_state_);
    jitter_state_ = rng.next_u64();
    u = rng.uniform();
  }
  return std::chrono::duration_cast<Clock::Duration>(
      std::chrono::duration<double>(backoff_s(settings_.retry, attempt, requested, u)));
}

bool Client::sleep_unless_cancelled(Clock::Duration wait) {
  const Clock::Duration slice = std::chrono::milliseconds(250);
  while (wait.count() > 0) {
    if (cancelled()) return false;
    Clock::Duration d = std::min(wait, slice);
    options_.clock->sleep_for(d);
    wait -= d;
  }
  return true;
}

// Overload back-pressure: the profile's in-flight limit is halved on an overload answer (at most
// once per second: the answers of one burst are one signal) and grows back by one slot per
// limit's worth of answered calls (additive increase, multiplicative decrease).
void Client::note_overload(const ModelProfile& profile, ProfileState& state) {
  int64_t lowered = 0;
  {
    std::lock_guard lock(state.load_mu);
    ++state.overloads;
    const auto now = options_.clock->now();
    if (state.decreased_once && now - state.last_decrease < std::chrono::seconds(1)) return;
    state.decreased_once = true;
    state.last_decrease = now;
    const int64_t next = std::max<int64_t>(1, static_cast<int64_t>(state.level) / 2);
    if (next >= static_cast<int64_t>(state.level)) return;
    state.level = static_cast<double>(next);
    state.lowest = std::min(state.lowest, next);
    lowered = next;
  }
  state.limit.set_max(lowered);
  spdlog::warn("llm profile {}: the server is overloaded; requests in flight lowered to {} (of {})", profile.name,
               lowered, state.ceiling);
}

void Client::note_answered(ProfileState& state) {
  int64_t raised = 0;
  {
    std::lock_guard lock(state.load_mu);
    if (state.level >= static_cast<double>(state.ceiling)) return;
    const auto before = static_cast<int64_t>(state.level);
    state.level = std::min(static_cast<double>(state.ceiling), state.level + 1.0 / state.level);
    if (static_cast<int64_t>(state.level) > before) raised = static_cast<int64_t>(state.level);
  }
  if (raised) state.limit.set_max(raised);
}

// Endpoint health (see kDownAfterFailures in client_state.h).
bool Client::note_endpoint_failure(const ModelProfile& profile, ProfileState& state, const std::string& what,
                                   const std::string& question, bool no_answer) {
  std::lock_guard lock(state.health_mu);
  ++state.failed_in_a_row;
  state.streak_questions.insert(question);
  // A server that answers 5xx to one question's requests only (a prompt that trips a bug) is not
  // down: a server error counts when it spans questions; no answer at all counts anyway.
  const bool spread = no_answer || state.streak_questions.size() >= 2;
  if (!state.down && state.failed_in_a_row >= kDownAfterFailures && spread) {
    state.down = true;
    state.down_since = options_.clock->now();
    spdlog::warn("llm profile {} at {} stopped answering ({} failed attempts in a row, last: {}): its calls wait "
                 "while it is probed for up to {:g} s (llm.endpoint_down_wait_s)",
                 profile.name, core::mask_url(profile.base_url), state.failed_in_a_row, what,
                 settings_.endpoint_down_wait_s);
  }
  return state.down;
}

void Client::note_endpoint_answer(const ModelProfile& profile, ProfileState& state) {
  std::lock_guard lock(state.health_mu);
  state.failed_in_a_row = 0;
  state.streak_questions.clear();
  if (!state.down) return;
  state.down = false;
  state.probing = false;
  spdlog::info("llm profile {} answers again after {:.1f} s; its calls go on", profile.name,
               seconds_between(state.down_since, options_.clock->now()));
  state.health_cv.notify_all();
}

Status Client::await_endpoint(ProfileState& state, bool& prober) {
  std::unique_lock lock(state.health_mu);
  while (state.down && !prober) {
    if (cancelled()) return Status(ErrorCode::kCancelled, "shutdown requested");
    if (!state.probing) {
      state.probing = prober = true;
      break;
    }
    state.health_cv.wait_for(lock, std::chrono::milliseconds(250));
  }
  return Status::ok();
}

void Client::give_up_probing(ProfileState& state, bool& prober) {
  if (!prober) return;
  std::lock_guard lock(state.health_mu);
  state.probing = prober = false;
  state.health_cv.notify_all();
}

std::vector<ProfileLoad> Client::profile_loads() {
  std::vector<ProfileLoad> out;
  for (auto& [name, st] : states_) {
    std::lock_guard lock(st->load_mu);
    ProfileLoad l;
    l.profile = name;
    l.max_in_flight = st->ceiling;
    l.lowest_in_flight = st->lowest;
    l.overloads = st->overloads;
    out.push_back(l);
  }
  return out;
}

Result<HttpResponse> Client::post_with_retries(const ModelProfile& profile, ProfileState& state,
                                               const HttpRequest& http, double estimated_tokens,
                                               const std::string& call_label, int* attempts,
                                               int max_attempts_override, SlotPriority priority,
                                               const std::string& question) {
  PostCall c(profile, state, http, estimated_tokens, call_label, attempts,
             max_attempts_override > 0 ? max_attempts_override : settings_.retry.max_attempts, priority, question);
  struct ProbeRole {  // a call that ends (answered, failed, cancelled) hands the probe on
    Client* c;
    ProfileState& st;
    bool& role;
    ~ProbeRole() { c->give_up_probing(st, role); }
  } probe_role{this, state, c.prober};
  for (;;) {  // bounded: by max_attempts, kMaxOverloadRetries, and endpoint_down_wait_s
    if (Status turn = wait_for_turn(c); !turn) return turn;
    Result<HttpResponse> posted = send_in_slots(c);
    if (!posted && call_error_kind(posted.status()) == CallErrorKind::kCancelled) return posted.status();
    // A stream that carried an error event is that error, answered plainly.
    if (posted && posted->status >= 200 && posted->status < 300 && profile.stream)
      if (auto e = wire_->error_in_stream(*posted)) *posted = std::move(*e);
    if (posted && posted->status >= 200 && posted->status < 300) {
      note_success(c);
      return posted;
    }
    FailedAttempt failed;
    std::string what;
    if (!posted) {
      what = core::redact(posted.status().message());
      failed = classify_transport_failure(posted.status().code());
      if (Status end = end_of_transport_failure(c, posted.status().code(), failed.kind, what); !end) return end;
    } else {
      const ServerError error = wire_->read_error(posted->body);
      what = "HTTP " + std::to_string(posted->status) + ": " + core::redact(error.message);
      failed = classify_http_failure(posted->status, posted->body, error.type, state.limit.max());
      if (failed.reaction == Reaction::kWaitOverload) {
        if (Status end = wait_out_overload(c, failed.kind, what, *posted); !end) return end;
        continue;
      }
      if (failed.reaction == Reaction::kRefuse) {
        note_endpoint_answer(profile, state);
        return refusal(c, failed.kind, what, posted->status, error.message);
      }
      if (!failed.endpoint_failed) note_endpoint_answer(profile, state);  // a 408: the server answered
    }
    if (failed.endpoint_failed && note_endpoint_failure(profile, state, what, question, !posted)) {
      // The endpoint is down: this attempt spends no retry budget. The prober waits and probes
      // again until the endpoint answers or the wait is over; the others wait in await_endpoint.
      if (Status end = probe_down_endpoint(c, failed.kind, what); !end) return end;
      continue;
    }
    if (Status end = back_off(c, failed.kind, what, posted ? &*posted : nullptr); !end) return end;
  }
}

Status Client::wait_for_turn(PostCall& c) {
  if (cancelled()) return make_call_error(CallErrorKind::kCancelled, "shutdown requested (" + c.label + ")");
  if (Status h = await_endpoint(c.state, c.prober); !h)
    return make_call_error(CallErrorKind::kCancelled, h.message() + " (" + c.label + ")");
  auto is_cancelled = [this] { return cancelled(); };
  Status st = c.state.requests.acquire(1, is_cancelled);
  if (st) st = c.state.tokens.acquire(c.estimated_tokens, is_cancelled);
  if (!st) return make_call_error(CallErrorKind::kCancelled, st.message() + " (" + c.label + ")");
  return Status::ok();
}

Result<HttpResponse> Client::send_in_slots(PostCall& c) {
  // Profile slot first, then global: the global count is then exactly what is on the wire.
  if (Status p = c.state.limit.acquire(c.priority); !p)
    return make_call_error(CallErrorKind::kCancelled, p.message() + " (" + c.label + ")");
  InFlightSlot profile_slot(&c.state.limit);
  if (Status g = global_limit_.acquire(c.priority); !g)
    return make_call_error(CallErrorKind::kCancelled, g.message() + " (" + c.label + ")");
  InFlightSlot global_slot(&global_limit_);
  ++*c.attempts;
  spdlog::debug("llm POST {} ({}, attempt {}/{}{})", core::mask_url(c.http.url), c.label, c.counted + 1,
                c.max_attempts, c.prober ? ", probe" : "");
  return options_.transport->post(c.http);
}

void Client::note_success(PostCall& c) {
  note_endpoint_answer(c.profile, c.state);
  note_answered(c.state);
  std::lock_guard lock(c.state.refusals_mu);
  c.state.repeated = 0;
  c.state.last_refusal.clear();
}

Status Client::end_of_transport_failure(PostCall& c, ErrorCode code, CallErrorKind kind, const std::string& what) {
  if (code == ErrorCode::kCancelled) return make_call_error(CallErrorKind::kCancelled, what);
  // The answer outgrew llm.max_response_bytes: the same request would bring the same flood,
  // so it is not retried.
  if (code == ErrorCode::kRejected)
    return make_call_error(kind, c.where + ": " + what + " (" + c.label + "); not retried");
  // A timed-out attempt may have cost the server minutes of generation: one more try at
  // most, whatever llm.retry.max_attempts says.
  if (kind == CallErrorKind::kTimeout && ++c.timeouts >= 2)
    return make_call_error(kind, c.where + ": " + what + " twice (timeout_s " +
                                     fmt::format("{:g}", c.profile.timeout_s) + "; " + c.label + ")");
  if (code != ErrorCode::kTimeout && code != ErrorCode::kUnavailable)
    return make_call_error(kind, what + " (" + c.label + ")");
  return Status::ok();
}

Status Client::wait_out_overload(PostCall& c, CallErrorKind kind, const std::string& what,
                                 const HttpResponse& response) {
  note_endpoint_answer(c.profile, c.state);
  note_overload(c.profile, c.state);
  if (++c.overloads > kMaxOverloadRetries)
    return make_call_error(kind, c.where + ": " + what + " — still overloaded after " +
                                     std::to_string(kMaxOverloadRetries) + " retries at " +
                                     std::to_string(c.state.limit.max()) + " requests in flight (" + c.label + ")");
  Clock::Duration wait = backoff(std::min(c.overloads, 8), &response);
  spdlog::debug("llm profile {}: {} (overload {}); retrying in {:.2f} s", c.profile.name, what, c.overloads,
                std::chrono::duration<double>(wait).count());
  if (!sleep_unless_cancelled(wait))
    return make_call_error(CallErrorKind::kCancelled, "shutdown requested during backoff (" + c.label + ")");
  return Status::ok();
}

Status Client::refusal(PostCall& c, CallErrorKind kind, const std::string& what, int status,
                       const std::string& server_message) {
  const ModelProfile& profile = c.profile;
  std::string hint = kind == CallErrorKind::kAuth
                         ? " (check the API key in env " +
                               (profile.api_key_env.empty() ? std::string("(none configured)") : profile.api_key_env) +
                               ")"
                         : "";
  if (hint.empty()) hint = refusal_hint(profile, status, server_message);
  Status refused =
      make_call_error(kind, c.where + " refused the call: " + what + hint + " (" + c.label + "); not retried");
  if (!options_.stop_on_fatal_error) return refused;
  if (kind == CallErrorKind::kAuth) {
    stop_with(refused);
    return refused;
  }
  if (settings_.stop_after_repeated_errors <= 0) return refused;
  int64_t repeated = 0;
  {
    std::lock_guard lock(c.state.refusals_mu);
    const std::string sig = refusal_signature(status, server_message);
    c.state.repeated = sig == c.state.last_refusal ? c.state.repeated + 1 : 1;
    c.state.last_refusal = sig;
    repeated = c.state.repeated;
  }
  if (repeated >= settings_.stop_after_repeated_errors)
    stop_with(make_call_error(kind, c.where + " refused " + std::to_string(repeated) +
                                        " calls in a row the same way: " + what + " (model " + profile.model +
                                        "; llm.stop_after_repeated_errors = " +
                                        std::to_string(settings_.stop_after_repeated_errors) + ")"));
  return refused;
}

Status Client::probe_down_endpoint(PostCall& c, CallErrorKind kind, const std::string& what) {
  if (!c.prober) return Status::ok();
  ++c.probes;
  double down_for = 0;
  {
    std::lock_guard lock(c.state.health_mu);
    down_for = seconds_between(c.state.down_since, options_.clock->now());
  }
  if (down_for >= settings_.endpoint_down_wait_s) {
    Status dead = make_call_error(
        kind, c.where + " stopped answering: " + what + "; probed " + std::to_string(c.probes) + " times over " +
                  fmt::format("{:.0f}", down_for) + " s (llm.endpoint_down_wait_s = " +
                  fmt::format("{:g}", settings_.endpoint_down_wait_s) +
                  ") — the run stops here; rerun the same command once the server answers (every answered "
                  "call is reused)");
    if (options_.stop_on_fatal_error) stop_with(dead);
    return dead;
  }
  const double next = probe_delay_s(c.probes, down_for, settings_.endpoint_down_wait_s);
  if (!sleep_unless_cancelled(std::chrono::duration_cast<Clock::Duration>(std::chrono::duration<double>(next))))
    return make_call_error(CallErrorKind::kCancelled, "shutdown requested while probing (" + c.label + ")");
  return Status::ok();
}

Status Client::back_off(PostCall& c, CallErrorKind kind, const std::string& what, const HttpResponse* response) {
  if (++c.counted >= c.max_attempts)
    return make_call_error(kind, c.where + ": " + what + " after " + std::to_string(*c.attempts) + " attempts (" +
                                     c.label + ")");
  Clock::Duration wait = backoff(c.counted, response);
  spdlog::warn("llm profile {}: {} (attempt {}/{}); retrying in {:.2f} s", c.profile.name, what, c.counted,
               c.max_attempts, std::chrono::duration<double>(wait).count());
  if (!sleep_unless_cancelled(wait))
    return make_call_error(CallErrorKind::kCancelled, "shutdown requested during backoff (" + c.label + ")");
  return Status::ok();
}

}  // namespace nl2sql::llm
