// Traced model calls (see model_call.h).
#include "nl2sql/llm/model_call.h"

#include "nl2sql/llm/answer.h"
#include "nl2sql/llm/client.h"
#include "nl2sql/core/hash.h"

#include <algorithm>

namespace nl2sql::llm {
namespace {

// Characters / 4, as the client estimates: what decides whether a prompt fits.
int64_t approx_prompt_tokens(const std::string& user, const std::string& system) {
  return static_cast<int64_t>((user.size() + system.size() + 8 + 3) / 4);
}

void set_usage(LlmCallTrace& t, const Usage& u) {
  t.prompt_tokens = u.prompt_tokens;
  t.completion_tokens = u.completion_tokens;
  t.cached_tokens = u.cached_tokens;
  t.reasoning_tokens = u.reasoning_tokens;
}

// What the answer adds to a trace (the one place a trace is filled from a response).
void fill_answer(LlmCallTrace& t, const ChatResponse& r) {
  t.response = r.text();
  t.reasoning = answer_reasoning(r.reasoning.empty() ? "" : r.reasoning.front(), t.response);
  t.answer_from_reasoning = !r.answer_from_reasoning.empty() && r.answer_from_reasoning.front();
  if (!r.profile.empty()) t.profile = r.profile;
  if (!r.model.empty()) t.model = r.model;
  t.provider = r.provider;
  set_usage(t, r.usage);
  t.cost_usd = r.cost_usd;
  t.latency_s = r.latency_s;
  t.from_cache = r.from_cache;
  t.temperature = r.temperature;
  t.seed = r.seed;
  t.request_hash = r.request_hash;
}

// What a failed call still cost: the server's work on its answered attempts.
void fill_spend(LlmCallTrace& t, const CallSpend& spent) {
  set_usage(t, spent.usage);
  t.cost_usd = spent.cost_usd;
}

}  // namespace

LlmCallTrace trace_of(const std::string& stage, const PromptTemplate& prompt, const ChatRequest& request,
                      const Result<ChatResponse>& response, const CallSpend& spent) {
  LlmCallTrace t;
  t.stage = stage;
  t.template_name = prompt.name();
  t.template_hash = prompt.hash();
  for (const auto& m : request.messages) {
    if (m.role == "system") t.system = m.content;
    if (m.role == "user") t.prompt = m.content;
  }
  if (response) {
    fill_answer(t, *response);
  } else {
    t.error = response.status().message();
    fill_spend(t, spent);
  }
  return t;
}

namespace {

// The prompt at a rung of the prompt-budget ladder (see ModelCall::schema_at): its values, the
// rung reached and the tokens left for the schema.
struct PromptLadder {
  // `budget`: tokens the prompt may take; 0 when the profile's window is unknown.
  PromptLadder(const ModelCall& c, int64_t b) : call(c), values(c.values), budget(b) {}
  const ModelCall& call;
  std::map<std::string, std::string> values;
  int64_t budget = 0;
  int rung = 0;
  int64_t schema_tokens = 0;

  Result<std::string> render_at(int k) {
    values["schema"] = call.schema_at(k, schema_tokens);
    return call.prompt->render(values);
  }

  // The prompt as light as the model's context requires: climbs until it fits.
  Result<std::string> render_to_fit() {
    if (!call.schema_at) return call.prompt->render(values);
    if (budget > 0) {
      values["schema"] = "";
      auto bare = call.prompt->render(values);
      if (!bare) return bare.status();
      schema_tokens = std::max<int64_t>(64, budget - approx_prompt_tokens(*bare, call.system));
    }
    Result<std::string> rendered = internal_error("not rendered");
    for (rung = 0;; ++rung) {  // at most kLastPromptRung + 1 renderings
      rendered = render_at(rung);
      if (!rendered) return rendered.status();
      if (budget <= 0 || approx_prompt_tokens(*rendered, call.system) <= budget || rung == kLastPromptRung) break;
    }
    return rendered;
  }

  // A rung lighter after the server refused the prompt as too long (it counts tokens its own
  // way): with a known window, the last rung with a smaller cut; else the next rung (the last
  // one halves the schema). Nothing when there is no lighter rung.
  std::optional<Result<std::string>> lighter() {
    if (!call.schema_at || rung >= kLastPromptRung) return std::nullopt;
    schema_tokens = budget > 0 ? std::max<int64_t>(64, schema_tokens * 2 / 3)
                               : std::max<int64_t>(64, approx_prompt_tokens(values["schema"], "") / 2);
    rung = budget > 0 ? kLastPromptRung : rung + 1;
    return render_at(rung);
  }
};

ChatRequest request_of(const ModelCall& call, const std::string& prompt) {
  ChatRequest req;
  req.role = call.role;
  req.profile = call.profile;
  if (!call.system.empty()) req.messages.push_back({"system", call.system});
  req.messages.push_back({"user", prompt});
  req.temperature = call.temperature;
  req.sample_index = call.sample_index;
  req.template_hash = call.prompt->hash();
  req.stage = call.stage;
  req.question_id = call.question_id;
  req.tag = call.tag;
  return req;
}

// A first try stopped at the window (answered, then retried a rung lighter) is part of the
// call's cost: `spent` (both tries) then holds more than `second`, the answer's own usage.
void add_first_try(LlmCallTrace& t, const CallSpend& spent, const CallSpend& second) {
  Usage first;
  first.prompt_tokens = spent.usage.prompt_tokens - second.usage.prompt_tokens;
  first.completion_tokens = spent.usage.completion_tokens - second.usage.completion_tokens;
  if (first.prompt_tokens + first.completion_tokens <= 0) return;
  t.prompt_tokens += first.prompt_tokens;
  t.completion_tokens += first.completion_tokens;
  t.cost_usd += spent.cost_usd - second.cost_usd;
  // The first try's share of the breakdown, where its server reported one.
  auto add_first = [](std::optional<int64_t>& to, const std::optional<int64_t>& all,
                      const std::optional<int64_t>& later) {
    if (all && *all > later.value_or(0)) to = to.value_or(0) + *all - later.value_or(0);
  };
  add_first(t.cached_tokens, spent.usage.cached_tokens, second.usage.cached_tokens);
  add_first(t.reasoning_tokens, spent.usage.reasoning_tokens, second.usage.reasoning_tokens);
}

// Sends the request (once more a rung lighter when the server says the context is exceeded)
// and completes `out`. Non-OK only for a cancelled client, a configuration error or a rendering
// error.
Result<ModelAnswer> send_call(Client& client, PromptLadder& ladder, ChatRequest req, ModelAnswer out) {
  CallSpend spent, more;
  bool retried = false;
  auto r = client.chat(req, &spent);
  if (!r && call_error_kind(r.status()) == CallErrorKind::kContextLength) {
    if (auto lighter = ladder.lighter()) {
      if (!*lighter) return lighter->status();
      out.trace.prompt = **lighter;
      out.trace.prompt_rung = ladder.rung;
      req.messages.back().content = **lighter;
      retried = true;
      r = client.chat(req, &more);
      spent.usage += more.usage;
      spent.cost_usd += more.cost_usd;
    }
  }
  if (!r) {
    auto kind = call_error_kind(r.status());
    if (kind == CallErrorKind::kCancelled || kind == CallErrorKind::kConfig ||
        r.status().code() == ErrorCode::kCancelled)
      return r.status();
    out.trace.error = r.status().message();
    out.text = r.status();
    fill_spend(out.trace, spent);
    return out;
  }
  out.text = r->text();
  fill_answer(out.trace, *r);
  if (retried) add_first_try(out.trace, spent, more);
  return out;
}

}  // namespace

Result<ModelAnswer> call_model(Client& client, const ModelCall& call) {
  ModelAnswer out;
  out.trace.stage = call.stage;
  if (call.prompt == nullptr) return internal_error("call_model: no prompt template");
  out.trace.template_name = call.prompt->name();
  out.trace.template_hash = call.prompt->hash();
  PromptLadder ladder(call, call.schema_at ? client.prompt_budget(call.role, call.profile).value_or(0) : 0);
  auto rendered = ladder.render_to_fit();
  if (!rendered) return rendered.status();
  out.trace.prompt = *rendered;
  out.trace.prompt_rung = ladder.rung;
  out.trace.system = call.system;
  if (auto p = client.settings().resolve(call.role, call.profile); p) {
    out.trace.profile = (*p)->name;
    out.trace.model = (*p)->model;
    out.trace.provider = (*p)->provider;
  }
  ChatRequest req = request_of(call, *rendered);
  // Simulated answers are free and may depend on the call's tag: never shared.
  if (call.memo == nullptr || out.trace.provider == "sim") return send_call(client, ladder, std::move(req), std::move(out));
  // The request's identity as the client will send it: profile, messages, sampling.
  core::KeyHasher key;
  key.add(out.trace.profile).add(call.role).add(call.system).add(*rendered).add(call.prompt->hash());
  key.add(call.temperature ? std::to_string(*call.temperature) : std::string("default"));
  key.add(call.sample_index);
  return call.memo->once(key.hex(), call.question_id,
                         [&] { return send_call(client, ladder, req, out); });
}

Result<ModelAnswer> CallMemo::once(const std::string& key, const std::string& question_id,
                                   const std::function<Result<ModelAnswer>()>& call) {
  std::shared_ptr<Entry> entry;
  {
    std::lock_guard lock(mu_);
    auto& e = entries_[key];
    if (!e) e = std::make_shared<Entry>();
    entry = e;
  }
  // Held across the call: a second asker of the same request waits for the first answer
  // instead of sending the request again.
  std::lock_guard lock(entry->mu);
  if (entry->answer) {
    ModelAnswer shared = *entry->answer;
    shared.trace.shared_from = entry->question_id;
    shared.trace.request_hash.clear();  // this question sent nothing
    shared.trace.latency_s = 0;
    return shared;
  }
  auto answer = call();
  // Only a usable answer is shared: a failed call is tried again by the next asker.
  if (answer && answer->text) {
    entry->answer = *answer;
    entry->question_id = question_id;
  }
  return answer;
}

size_t CallMemo::size() {
  std::lock_guard lock(mu_);
  size_t n = 0;
  for (const auto& [_, e] : entries_) {
    std::lock_guard entry_lock(e->mu);
    n += e->answer ? 1 : 0;
  }
  return n;
}

}  // namespace nl2sql::llm
