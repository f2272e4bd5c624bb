// Client's HTTP chat call: one request through the wire format and the retry loop, usage and
// the token bucket charged for every answered attempt, and the cut-answer rule — an answer
// stopped at its output budget (finish_reason "length") is kept when it already holds a complete
// final answer, else asked once more with the budget doubled, and fails kContextLength when the
// model's window (not the budget) stopped it.
#include <algorithm>

#include "client_state.h"
#include "nl2sql/core/hash.h"
#include "nl2sql/core/log.h"
#include "nl2sql/core/text.h"

namespace nl2sql::llm {
namespace {

using json = nlohmann::json;

// Text outside reasoning: drops what precedes a lone closing think tag and any closed
// <think>/<thinking>/<reasoning> block (enough to judge completeness; stages read answers
// through the answer reader).
std::string outside_reasoning(const std::string& text) {
  std::string t = text;
  const std::string low = core::lower(t);
  for (const char* close : {"</think>", "</thinking>", "</reasoning>"}) {
    size_t p = low.rfind(close);
    if (p != std::string::npos) {
      t = t.substr(p + std::char_traits<char>::length(close));
      break;
    }
  }
  return t;
}

// Some servers omit usage; estimate so cost and tpm stay meaningful (reasoning included: it was
// generated and billed).
void estimate_missing_usage(ChatResponse& r, double estimated_prompt) {
  if (r.usage.prompt_tokens != 0 || r.usage.completion_tokens != 0) return;
  r.usage.prompt_tokens = static_cast<int64_t>(estimated_prompt);
  for (size_t i = 0; i < r.choices.size(); ++i)
    r.usage.completion_tokens +=
        estimate_tokens(r.choices[i].size() + (r.answer_from_reasoning[i] ? 0 : r.reasoning[i].size()));
}

// How the choices of an answer ended.
struct Ending {
  bool cut = false;          // a choice stopped at the output budget
  bool salvageable = true;   // every cut choice holds a complete final answer anyway
  bool empty = false;        // a choice is blank
};

Ending ending_of(const ChatResponse& r) {
  Ending e;
  for (size_t i = 0; i < r.choices.size(); ++i) {
    const bool blank = r.choices[i].find_first_not_of(" \t\r\n") == std::string::npos;
    e.empty = e.empty || blank;
    if (r.finish_reasons[i] != "length") continue;
    e.cut = true;
    const bool complete = !blank && !r.answer_from_reasoning[i] && has_complete_answer(r.choices[i]);
    e.salvageable = e.salvageable && complete;
  }
  return e;
}

// Why a cut answer fails for good: the window stopped it (a larger budget cannot help and would
// be paid for again; the context-length path shortens the prompt instead, or says what to
// change), or the budget could not (or no longer) be doubled. OK: double it and ask again.
Status cut_answer_error(const ModelProfile& profile, const ChatRequest& request,
                                       const ChatResponse& r, bool budget_doubled, bool empty) {
  const int64_t used = r.usage.prompt_tokens + r.usage.completion_tokens;
  if (r.window_truncated || (profile.context_tokens > 0 && used >= profile.context_tokens - 16)) {
    const int64_t window = profile.context_tokens > 0 ? profile.context_tokens : used;
    return make_call_error(
        CallErrorKind::kContextLength,
        "model profile \"" + profile.name + "\": the context window of " + std::to_string(window) +
            " tokens was reached (prompt " + std::to_string(r.usage.prompt_tokens) + " + answer " +
            std::to_string(r.usage.completion_tokens) + " tokens" +
            (r.window_truncated ? ", the server reports the answer truncated" : "") +
            ") before the output budget of " + std::to_string(request.max_tokens.value_or(0)) +
            "; raise the server's context (llama.cpp -c, divided among its -np slots; vLLM --max-model-len; "
            "Ollama OLLAMA_CONTEXT_LENGTH) with llm.models." + profile.name +
            ".context_tokens, or lower the prompt (" + describe_call(profile, request) + ")");
  }
  if (budget_doubled || profile.omit.count("max_tokens") || !request.max_tokens) {
    const bool reasoning_only =
        std::any_of(r.answer_from_reasoning.begin(), r.answer_from_reasoning.end(), [](bool b) { return b; });
    return make_call_error(
        CallErrorKind::kTruncated,
        "model profile \"" + profile.name + "\": the answer stopped at the output budget of " +
            std::to_string(request.max_tokens.value_or(0)) + " tokens (finish_reason \"length\")" +
            (reasoning_only ? " while still reasoning" : empty ? " before any answer (spent reasoning)" : "") +
            (budget_doubled ? " even after doubling it" : "") + "; raise llm.models." + profile.name +
            ".max_tokens (or role_max_tokens) (" + describe_call(profile, request) + ")");
  }
  return Status::ok();
}

}  // namespace

bool has_complete_answer(const std::string& text) {
  const std::string t = outside_reasoning(text);
  const std::string low = core::lower(t);
  if (low.find("</final_answer>") != std::string::npos || low.find("</answer>") != std::string::npos)
    return true;
  // Fences: complete when at least one closed and the text does not end inside an open one.
  size_t markers = 0;
  for (size_t p = t.find("```"); p != std::string::npos; p = t.find("```", p + 3)) ++markers;
  if (markers >= 2 && markers % 2 == 0) return true;
  // A bare JSON value that parses whole.
  size_t b = t.find_first_of("{[");
  size_t e = t.find_last_of("}]");
  if (b != std::string::npos && e != std::string::npos && e > b &&
      !json::parse(t.substr(b, e - b + 1), nullptr, false).is_discarded())
    return true;
  return false;
}

Result<ChatResponse> Client::chat_uncached(const ModelProfile& profile, ProfileState& state,
                                           const ChatRequest& request_in, int* attempts_out, CallSpend* spent) {
  ChatRequest request = request_in;
  if (auto held = held_back()) return *held;
  HttpRequest http = http_request(profile, wire_->chat_path());
  const auto start = options_.clock->now();
  const double estimated = static_cast<double>(estimate_tokens(prompt_chars(request)));
  int& attempts = *attempts_out;
  attempts = 0;
  bool budget_doubled = false;
  Result<ChatResponse> parsed = internal_error("not sent");
  // What the server processed, apart for answers of a batch job (billed at batch_discount).
  Usage direct, batched_usage;
  bool any_batched = false;
  auto settle = [&] {
    spent->usage = direct;
    spent->usage += batched_usage;
    spent->cost_usd = cost_usd(profile, direct) + (any_batched ? cost_usd(profile, batched_usage, true) : 0.0);
  };
  for (;;) {  // at most twice: the second time with a doubled budget after finish_reason "length"
    http.body = wire_->chat_body(profile, request);
    int these = 0;
    bool batched = false;
    auto posted = state.batch
                      ? post_batched(profile, state, http, estimated, request, &these, &batched)
                      : post_with_retries(profile, state, http, estimated, describe_call(profile, request), &these, 0,
                                          priority_ ? priority_(request) : SlotPriority{}, request.question_id);
    attempts += these;
    if (!posted) {
      settle();
      return posted.status();
    }
    Usage& usage = batched ? batched_usage : direct;
    any_batched = any_batched || batched;
    // Read cut answers too: a complete final answer before the cut is salvaged below.
    parsed = wire_->read_chat(posted->body, profile.stream, /*accept_truncated=*/true);
    if (!parsed) {
      // The server processed the prompt at least (what it generated is not known).
      usage.prompt_tokens += static_cast<int64_t>(estimated);
      settle();
      return Status(parsed.status().code(),
                    core::redact(parsed.status().message() + " (" + describe_call(profile, request) + ")"));
    }
    estimate_missing_usage(*parsed, estimated);
    // Every answered attempt was processed (and billed), the cut one retried with a larger
    // budget included.
    usage += parsed->usage;
    if (!batched)
      state.tokens.charge(static_cast<double>(parsed->usage.completion_tokens) +
                          (static_cast<double>(parsed->usage.prompt_tokens) - estimated));
    const Ending ending = ending_of(*parsed);
    if (!ending.cut || (request.accept_truncated && !ending.empty)) break;
    if (ending.salvageable) {
      spdlog::debug("llm profile {}: answer cut at {} tokens after a complete final answer: kept ({})",
                    profile.name, request.max_tokens.value_or(0), describe_call(profile, request));
      break;
    }
    if (Status failed = cut_answer_error(profile, request, *parsed, budget_doubled, ending.empty); !failed) {
      settle();
      return failed;
    }
    spdlog::info("llm profile {}: answer cut at {} tokens without a final answer; retrying once with {} ({})",
                 profile.name, *request.max_tokens, *request.max_tokens * 2, describe_call(profile, request));
    request.max_tokens = *request.max_tokens * 2;
    budget_doubled = true;
  }
  settle();
  ChatResponse r = std::move(parsed).value();
  r.usage = spent->usage;  // every attempt the answer took
  r.cost_usd = spent->cost_usd;
  r.latency_s = seconds_between(start, options_.clock->now());
  r.attempts = attempts;
  r.provider = "openai";
  r.profile = profile.name;
  r.model = profile.model;
  r.temperature = request.temperature;
  r.seed = request.seed;
  r.request_hash = request_hash_of(profile, http.body);
  return r;
}

std::string request_hash_of(const ModelProfile& profile, const std::string& body) {
  // What the server received, byte for byte (the endpoint included: the same body sent to two
  // servers is two requests). Retries of a failed attempt repost the same body and are counted
  // as retries, not here.
  core::KeyHasher h;
  h.add(profile.base_url).add(body);
  return h.hex();
}

Result<HttpResponse> Client::post_batched(const ModelProfile& profile, ProfileState& state, const HttpRequest& http,
                                          double estimated, const ChatRequest& request, int* attempts,
                                          bool* batched) {
  auto line = state.batch->answer(request_hash_of(profile, http.body), http.body);
  *attempts = 1;
  if (line && line->answered()) {
    *batched = true;
    HttpResponse r;
    r.status = line->status_code;
    r.body = std::move(line->body);
    return r;
  }
  if (!line && call_error_kind(line.status()) == CallErrorKind::kCancelled) return line.status();
  const std::string why = !line ? line.status().message()
                          : !line->error.empty()
                              ? "its line failed: " + line->error
                              : "its line has status " + std::to_string(line->status_code) + ": " +
                                    core::redact_and_cut(line->body, 200);
  spdlog::warn("llm profile {}: no answer from the batch job ({}); asking once synchronously ({})", profile.name,
               core::redact(why), describe_call(profile, request));
  int sync_attempts = 0;
  auto posted = post_with_retries(profile, state, http, estimated, describe_call(profile, request), &sync_attempts, 0,
                                  priority_ ? priority_(request) : SlotPriority{}, request.question_id);
  *attempts += sync_attempts;
  return posted;
}

}  // namespace nl2sql::llm
