#include "nl2sql/llm/client.h"

#include "nl2sql/core/hash.h"

#include <curl/curl.h>

#include <algorithm>
#include <cmath>
#include <condition_variable>
#include <ctime>
#include <set>
#include <thread>

#include <fmt/format.h>

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

// The server's own explanation, from {"error":{"message":…}} or the body's start; redacted
// before it is cut (a key echoed across the cut would no longer be recognised after it).
std::string server_message(const std::string& body) {
  auto j = json::parse(body, nullptr, false);
  if (!j.is_discarded() && j.is_object() && j.contains("error")) {
    const auto& e = j["error"];
    if (e.is_object() && e.contains("message") && e["message"].is_string())
      return core::redact_and_cut(e["message"].get<std::string>(), 2000);
    if (e.is_string()) return core::redact_and_cut(e.get<std::string>(), 2000);
  }
  std::string s = core::redact_and_cut(body, 300);
  std::replace(s.begin(), s.end(), '\n', ' ');
  return s.empty() ? "(empty body)" : s;
}

bool retryable_status(int status) { return status == 408 || status == 429 || status >= 500; }

// The "type" of an {"error": {...}} body, "" when none.
std::string error_type(const std::string& body) {
  auto j = json::parse(body, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("error") || !j["error"].is_object()) return "";
  const auto& t = j["error"].value("type", json());
  return t.is_string() ? t.get<std::string>() : "";
}

std::string lower_text(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// A refusal because the prompt (plus the output budget) exceeds the model's context: OpenAI's
// code context_length_exceeded, vLLM's "maximum context length is N tokens", llama.cpp-server's
// "exceeds the available context size", Anthropic-style "prompt is too long", 413s.
bool is_context_overflow(int status, const std::string& body) {
  // llama.cpp-server names it whatever the status (older builds answer it with a 500).
  if (error_type(body) == "exceed_context_size_error") return true;
  if (status != 400 && status != 413 && status != 422) return false;
  const std::string b = lower_text(body.substr(0, 4096));
  for (const char* marker : {"context_length_exceeded", "maximum context length", "context length",
                             "context size", "context window", "prompt is too long",
                             "too many tokens", "exceeds the context", "reduce the length"})
    if (b.find(marker) != std::string::npos) return true;
  return status == 413;
}

// A server too busy for the call just now, which will take it later: 429 and 503 (OpenAI, Azure,
// vLLM, Ollama's "server busy" past OLLAMA_MAX_QUEUE), 529 (overloaded), and llama.cpp-server's
// 500 "Context size has been exceeded." when its parallel slots share one KV cache (-np with
// -c) and the requests in flight fill it: a prompt that fits alone fails only under load. The
// answer to all of them is fewer requests at once, not a failed call.
bool is_overload(int status, const std::string& body) {
  if (status == 429 || status == 503 || status == 529) return true;
  if (status < 500) return false;
  const std::string b = lower_text(body.substr(0, 4096));
  return b.find("context size has been exceeded") != std::string::npos || b.find("server busy") != std::string::npos;
}

// An error event inside a stream: llama.cpp-server and vLLM send {"error": {...}} as a data
// event after their 200 headers when the request fails once streaming began. Returned as the
// same error answered plainly — its "code" as the status (500 when it names none) and
// {"error": …} as the body — so it is classified and retried as that status would be.
std::optional<HttpResponse> stream_error(const HttpResponse& response) {
  const std::string& body = response.body;
  for (size_t p = 0; p < body.size();) {
    size_t nl = body.find('\n', p);
    std::string line = body.substr(p, nl == std::string::npos ? std::string::npos : nl - p);
    p = nl == std::string::npos ? body.size() : nl + 1;
    if (line.rfind("data:", 0) != 0 || line.find("\"error\"") == std::string::npos) continue;
    json chunk = json::parse(line.substr(5), nullptr, false);
    if (chunk.is_discarded() || !chunk.is_object() || !chunk.contains("error")) continue;
    const json& e = chunk["error"];
    int status = 500;
    const json* codes[] = {e.is_object() && e.contains("code") ? &e["code"] : nullptr,
                           chunk.contains("code") ? &chunk["code"] : nullptr};
    for (const json* code : codes)
      if (code && code->is_number_integer() && code->get<int>() >= 400 && code->get<int>() <= 599) {
        status = code->get<int>();
        break;
      }
    HttpResponse out;
    out.status = status;
    out.headers = response.headers;
    out.body = json{{"error", e.is_object() ? e : json{{"message", e.is_string() ? e.get<std::string>() : e.dump()}}}}
                   .dump(-1, ' ', false, json::error_handler_t::replace);
    return out;
  }
  return std::nullopt;
}

// The same refusal repeated: status and message with numbers blanked (a context error quotes
// each prompt's length; an unknown-model error is identical every time).
std::string refusal_signature(int status, const std::string& message) {
  std::string sig = std::to_string(status) + ":";
  for (char c : message.substr(0, 200)) sig.push_back(std::isdigit(static_cast<unsigned char>(c)) ? '#' : c);
  return sig;
}

// What to change in the config, for the refusals a misconfigured profile meets first.
std::string refusal_hint(const ModelProfile& p, int status, const std::string& message) {
  const std::string m = lower_text(message);
  const std::string key = "llm.models." + p.name;
  if (m.find("max_completion_tokens") != std::string::npos && !p.omit.count("max_tokens"))
    return " — set " + key + ".max_tokens_field to \"max_completion_tokens\"";
  for (const char* field : {"temperature", "top_p", "seed", "stop"})
    if (m.find(std::string("'") + field + "'") != std::string::npos ||
        m.find(std::string("\"") + field + "\"") != std::string::npos ||
        m.find(std::string("param: ") + field) != std::string::npos)
      if (m.find("unsupported") != std::string::npos || m.find("not supported") != std::string::npos ||
          m.find("does not support") != std::string::npos || m.find("extra") != std::string::npos)
        return std::string(" — add \"") + field + "\" to " + key + ".omit";
  if (m.find("extra inputs are not permitted") != std::string::npos || m.find("unrecognized request argument") != std::string::npos)
    return " — the server refuses a field: compare " + key + ".extra_body and .omit with what it accepts";
  if (status == 404 && (m.find("model") != std::string::npos || m.find("not found") != std::string::npos))
    return " — check " + key + ".model (\"" + p.model + "\") against the server's model list, and the base URL (" +
           core::mask_url(p.base_url) + ", which should end in /v1 or the deployment path)";
  if (m.find("model") != std::string::npos && (m.find("does not exist") != std::string::npos || m.find("not found") != std::string::npos))
    return " — check " + key + ".model (\"" + p.model + "\")";
  if (m.find("api-version") != std::string::npos || m.find("api version") != std::string::npos)
    return " — set " + key + ".query.api-version";
  return "";
}

// Seconds to wait from a Retry-After header: delta-seconds or an HTTP-date (RFC 9110).
std::optional<double> retry_after_seconds(const std::string& value) {
  char* end = nullptr;
  double secs = std::strtod(value.c_str(), &end);
  if (end != value.c_str() && secs >= 0) return secs;
  std::tm tm{};
  const char* rest = strptime(value.c_str(), "%a, %d %b %Y %H:%M:%S", &tm);
  if (!rest) return std::nullopt;
  const std::time_t when = timegm(&tm);
  const std::time_t now = std::time(nullptr);
  return std::max(0.0, static_cast<double>(when - now));
}

// The last `max_chars` of a reasoning text, starting at a line boundary when one is near.
std::string reasoning_tail(const std::string& reasoning, size_t max_chars = 6000) {
  if (reasoning.size() <= max_chars) return reasoning;
  size_t start = reasoning.size() - max_chars;
  size_t nl = reasoning.find('\n', start);
  if (nl != std::string::npos && nl - start < 400) start = nl + 1;
  return reasoning.substr(start);
}

// Message content as servers send it: a string, null, or an array of parts ({"type":"text",
// "text":…}; Mistral-style {"type":"thinking", "thinking":[…]} parts are reasoning).
void read_content(const json& content, std::string& text, std::string& reasoning) {
  if (content.is_string()) {
    text = content.get<std::string>();
    return;
  }
  if (!content.is_array()) return;
  for (const auto& part : content) {
    if (part.is_string()) {
      text += part.get<std::string>();
      continue;
    }
    if (!part.is_object()) continue;
    const std::string type = part.contains("type") && part["type"].is_string() ? part["type"].get<std::string>() : "text";
    if (type == "thinking" || type == "reasoning") {
      std::string inner, ignored;
      for (const char* k : {"thinking", "reasoning", "text"})
        if (part.contains(k)) read_content(part[k], inner, ignored);
      reasoning += inner;
    } else if (part.contains("text") && part["text"].is_string()) {
      text += part["text"].get<std::string>();
    }
  }
}

// reasoning_content (DeepSeek, older vLLM, llama.cpp-server), reasoning (vLLM, Ollama,
// OpenRouter, LM Studio), or OpenRouter's reasoning_details parts.
std::string read_reasoning(const json& message) {
  std::string out;
  for (const char* k : {"reasoning_content", "reasoning"})
    if (message.contains(k) && message[k].is_string() && out.empty()) out = message[k].get<std::string>();
  if (out.empty() && message.contains("reasoning_details") && message["reasoning_details"].is_array())
    for (const auto& d : message["reasoning_details"])
      if (d.is_object() && d.contains("text") && d["text"].is_string()) out += d["text"].get<std::string>();
  return out;
}

// Text outside reasoning: drops what precedes a lone closing think tag and any closed
// <think>/<thinking>/<reasoning> block (enough to judge completeness; stages read answers
// through the answer reader).
std::string outside_reasoning(const std::string& text) {
  std::string t = text;
  const std::string low = lower_text(t);
  for (const char* close : {"</think>", "</thinking>", "</reasoning>"}) {
    size_t p = low.rfind(close);
    if (p != std::string::npos) {
      t = t.substr(p + std::char_traits<char>::length(close));
      break;
    }
  }
  return t;
}

std::string describe_call(const ModelProfile& p, const ChatRequest& r) {
  std::string s = "profile \"" + p.name + "\" (model " + p.model + ")";
  if (!r.stage.empty()) s += ", stage " + r.stage;
  if (!r.question_id.empty()) s += ", question " + r.question_id;
  s += ", sample " + std::to_string(r.sample_index);
  return s;
}

// Applies the profile's sampling defaults and the role's output budget so the cache key and
// the body agree.
ChatRequest with_defaults(const LlmSettings& settings, const ModelProfile& p, ChatRequest r) {
  if (!r.temperature) r.temperature = p.temperature;
  if (!r.top_p) r.top_p = p.top_p;
  if (!r.max_tokens) r.max_tokens = settings.output_budget(p, r.role);
  if (r.n < 1) r.n = 1;
  return r;
}

}  // namespace

// Overload answers one call may meet before it fails (each lowers the profile's in-flight
// limit and waits with backoff; none spends the retry budget meant for real errors).
constexpr int kMaxOverloadRetries = 20;

struct Client::ProfileState {
  ProfileState(const ModelProfile& p, int64_t global_max, const std::shared_ptr<Clock>& clock)
      : limit(p.max_in_flight > 0 ? p.max_in_flight : global_max),
        requests(p.rpm, clock),
        tokens(p.tpm, clock),
        ceiling(p.max_in_flight > 0 ? p.max_in_flight : global_max),
        level(static_cast<double>(ceiling)),
        lowest(ceiling) {}
  InFlightLimit limit;
  TokenBucket requests;
  TokenBucket tokens;
  // Overload back-pressure (note_overload / note_answered): `limit` follows `level`.
  std::mutex load_mu;
  const int64_t ceiling;              // the configured limit
  double level;                       // guarded by load_mu
  int64_t lowest;                     // guarded by load_mu
  int64_t overloads = 0;              // guarded by load_mu
  bool decreased_once = false;        // guarded by load_mu
  Clock::TimePoint last_decrease{};   // guarded by load_mu
  // Endpoint health (note_endpoint_failure / note_endpoint_answer / await_endpoint).
  std::mutex health_mu;
  std::condition_variable health_cv;  // signalled when the endpoint answers again
  int64_t failed_in_a_row = 0;        // guarded by health_mu
  bool down = false;                  // guarded by health_mu
  bool probing = false;               // guarded by health_mu: a call is probing it
  Clock::TimePoint down_since{};      // guarded by health_mu
  std::set<std::string> streak_questions;  // guarded by health_mu: questions of the failed streak
  // The same non-retryable refusal on consecutive calls (reset by any answered call).
  std::mutex refusals_mu;
  std::string last_refusal;  // guarded by refusals_mu
  int64_t repeated = 0;      // guarded by refusals_mu
};

std::string build_chat_body(const ModelProfile& profile, const ChatRequest& request) {
  json messages = json::array();
  for (const auto& m : request.messages) messages.push_back({{"role", m.role}, {"content", m.content}});
  json body = {{"model", profile.model}, {"messages", messages}};
  auto sent = [&](const char* field) { return !profile.omit.count(field); };
  if (sent("temperature")) body["temperature"] = request.temperature.value_or(profile.temperature);
  if (sent("top_p")) body["top_p"] = request.top_p.value_or(profile.top_p);
  if (sent("max_tokens"))
    body[profile.max_tokens_field] =
        request.max_tokens.value_or(profile.max_tokens.value_or(kDefaultOutputBudget));
  if (request.n > 1 && sent("n")) body["n"] = request.n;
  if (request.seed && sent("seed")) {
    body["seed"] = *request.seed;
  } else if (request.sample_index > 0 && sent("seed") && body.contains("temperature") &&
             body["temperature"].get<double>() > 0) {
    // Samples of one prompt would otherwise go out byte for byte the same: the sample's own
    // seed tells them apart at the server (and makes each sample reproducible where the server
    // honours seeds). Sample 0 is sent as it always was.
    body["seed"] = request.sample_index;
  }
  if (!request.stop.empty() && sent("stop")) body["stop"] = request.stop;
  if (profile.stream) {
    body["stream"] = true;
    body["stream_options"] = {{"include_usage", true}};
  }
  // extra_body last, merged deeply: chat_template_kwargs, reasoning_effort, top_k, …
  json extra = json::parse(profile.extra_body, nullptr, false);
  if (extra.is_object()) body.merge_patch(extra);
  return body.dump(-1, ' ', false, json::error_handler_t::replace);
}

bool has_complete_answer(const std::string& text) {
  const std::string t = outside_reasoning(text);
  const std::string low = lower_text(t);
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

namespace {

// A non-negative integer field of `j`, or nothing (absent, null, another type).
std::optional<int64_t> count_at(const json& j, const char* key) {
  if (!j.is_object()) return std::nullopt;
  const auto it = j.find(key);
  if (it == j.end() || !it->is_number_integer() || it->get<int64_t>() < 0) return std::nullopt;
  return it->get<int64_t>();
}

}  // namespace

Usage read_usage(const json& u) {
  Usage out;
  out.prompt_tokens = count_at(u, "prompt_tokens").value_or(0);
  out.completion_tokens = count_at(u, "completion_tokens").value_or(0);
  // OpenAI, Azure, xAI, OpenRouter, vLLM with prompt-token details on; vLLM sends the details
  // object as null when they are off, which leaves the count unknown.
  if (auto it = u.find("prompt_tokens_details"); it != u.end())
    out.cached_tokens = count_at(*it, "cached_tokens");
  // DeepSeek: prompt_tokens = prompt_cache_hit_tokens + prompt_cache_miss_tokens.
  if (!out.cached_tokens) out.cached_tokens = count_at(u, "prompt_cache_hit_tokens");
  if (out.cached_tokens && !count_at(u, "prompt_tokens")) {
    if (auto miss = count_at(u, "prompt_cache_miss_tokens")) out.prompt_tokens = *out.cached_tokens + *miss;
  }
  if (auto it = u.find("completion_tokens_details"); it != u.end())
    out.reasoning_tokens = count_at(*it, "reasoning_tokens");
  return out;
}

Result<ChatResponse> parse_chat_completion(const std::string& body, bool accept_truncated) {
  auto j = json::parse(body, nullptr, false);
  if (j.is_discarded()) {
    std::string start = core::redact_and_cut(body, 80);
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
    const auto& message = c["message"];
    const auto& content = message["content"];
    if (!content.is_null() && !content.is_string() && !content.is_array())
      return make_call_error(CallErrorKind::kMissingField,
                             "choices[" + std::to_string(i) +
                                 "].message.content is neither a string nor an array of parts");
    std::string text, reasoning;
    read_content(content, text, reasoning);
    if (reasoning.empty()) reasoning = read_reasoning(message);
    std::string finish = c.contains("finish_reason") && c["finish_reason"].is_string()
                             ? c["finish_reason"].get<std::string>()
                             : "";
    const bool blank = text.find_first_not_of(" \t\r\n") == std::string::npos;
    const bool has_reasoning = reasoning.find_first_not_of(" \t\r\n") != std::string::npos;
    if (finish == "length" && !accept_truncated)
      return make_call_error(CallErrorKind::kTruncated,
                             "choices[" + std::to_string(i) +
                                 "] stopped at max_tokens (finish_reason \"length\")" +
                                 (blank && has_reasoning ? " while still reasoning: no answer yet" : ""));
    bool from_reasoning = false;
    if (blank && has_reasoning) {
      // Everything went into the reasoning field (a reasoning parser that missed the end of
      // thinking, or a model that answered inside it): its tail is the best answer there is;
      // the trace says so.
      text = reasoning_tail(reasoning);
      from_reasoning = true;
    } else if (blank && finish != "length") {
      return make_call_error(CallErrorKind::kEmptyContent,
                             "choices[" + std::to_string(i) + "].message.content is empty");
    }
    // Blank with "length" (read only when the caller accepts cut answers): the budget was spent
    // before any answer — OpenAI's reasoning models return no reasoning text to fall back on.
    r.choices.push_back(std::move(text));
    r.finish_reasons.push_back(std::move(finish));
    r.reasoning.push_back(std::move(reasoning));
    r.answer_from_reasoning.push_back(from_reasoning);
  }
  // llama.cpp-server: the answer stopped at the slot's context window, not at max_tokens.
  const json* flags[] = {j.contains("truncated") ? &j["truncated"] : nullptr,
                         choices[0].is_object() && choices[0].contains("truncated") ? &choices[0]["truncated"] : nullptr};
  for (const json* t : flags)
    if (t && t->is_boolean() && t->get<bool>()) r.window_truncated = true;
  if (j.contains("usage") && j["usage"].is_object()) r.usage = read_usage(j["usage"]);
  return r;
}

Result<ChatResponse> parse_chat_stream(const std::string& body, bool accept_truncated) {
  // Rebuilds the non-streamed answer shape from the events, then reads it like one.
  std::map<int64_t, json> messages;
  std::map<int64_t, std::string> finish;
  json usage;
  bool done = false;
  bool truncated = false;
  size_t events = 0;
  for (size_t p = 0; p < body.size();) {
    size_t nl = body.find('\n', p);
    std::string line = body.substr(p, nl == std::string::npos ? std::string::npos : nl - p);
    p = nl == std::string::npos ? body.size() : nl + 1;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.rfind("data:", 0) != 0) continue;  // comments (": keep-alive"), event:, id:
    std::string data = line.substr(5);
    if (!data.empty() && data.front() == ' ') data.erase(0, 1);
    if (data == "[DONE]") {
      done = true;
      break;
    }
    json chunk = json::parse(data, nullptr, false);
    if (chunk.is_discarded())
      return make_call_error(CallErrorKind::kNotJson, "a streamed event is not JSON: \"" + core::redact_and_cut(data, 80) + "\"");
    ++events;
    if (chunk.is_object() && chunk.contains("error"))
      return make_call_error(CallErrorKind::kServer, "the stream carried an error: " + core::redact_and_cut(chunk["error"].dump(), 300));
    if (chunk.contains("usage") && chunk["usage"].is_object()) usage = chunk["usage"];
    if (chunk.contains("truncated") && chunk["truncated"].is_boolean() && chunk["truncated"].get<bool>())
      truncated = true;
    if (!chunk.contains("choices") || !chunk["choices"].is_array()) continue;
    for (const auto& c : chunk["choices"]) {
      const int64_t index = c.contains("index") && c["index"].is_number_integer() ? c["index"].get<int64_t>() : 0;
      json& m = messages[index];
      if (m.is_null()) m = {{"content", ""}, {"reasoning_content", ""}};
      if (c.contains("delta") && c["delta"].is_object()) {
        const auto& d = c["delta"];
        std::string text, reasoning;
        if (d.contains("content")) read_content(d["content"], text, reasoning);
        if (reasoning.empty()) reasoning = read_reasoning(d);
        m["content"] = m["content"].get<std::string>() + text;
        m["reasoning_content"] = m["reasoning_content"].get<std::string>() + reasoning;
      }
      if (c.contains("finish_reason") && c["finish_reason"].is_string())
        finish[index] = c["finish_reason"].get<std::string>();
    }
  }
  if (events == 0) return make_call_error(CallErrorKind::kNotJson, "the stream held no data events");
  if (!done && finish.empty())
    return make_call_error(CallErrorKind::kNotJson, "the stream ended before [DONE] and before any finish_reason (cut off)");
  json whole = {{"choices", json::array()}};
  for (auto& [index, m] : messages) {
    json c = {{"index", index}, {"message", m}};
    if (finish.count(index)) c["finish_reason"] = finish[index];
    whole["choices"].push_back(std::move(c));
  }
  if (!usage.is_null()) whole["usage"] = usage;
  if (truncated) whole["truncated"] = true;
  return parse_chat_completion(whole.dump(-1, ' ', false, json::error_handler_t::replace), accept_truncated);
}

double cost_usd(const ModelProfile& profile, const Usage& usage) {
  // Cached tokens are part of prompt_tokens; a server that reports none bills them all uncached.
  const int64_t cached = std::clamp<int64_t>(usage.cached_tokens.value_or(0), 0, usage.prompt_tokens);
  const double cached_price = profile.price_cached_in_per_mtok.value_or(profile.price_in_per_mtok);
  return (static_cast<double>(usage.prompt_tokens - cached) * profile.price_in_per_mtok +
          static_cast<double>(cached) * cached_price +
          static_cast<double>(usage.completion_tokens) * profile.price_out_per_mtok) /
         1e6;
}

Client::Client(LlmSettings settings, ClientOptions options)
    : settings_(std::move(settings)),
      options_(std::move(options)),
      global_limit_(settings_.max_in_flight),
      jitter_state_(options_.jitter_seed) {
  for (const auto& [name, p] : settings_.profiles)
    states_[name] = std::make_unique<ProfileState>(p, settings_.max_in_flight, options_.clock);
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
    for (const auto& [k, v] : profile.query) {
      char* ek = curl_easy_escape(nullptr, k.c_str(), static_cast<int>(k.size()));
      char* ev = curl_easy_escape(nullptr, v.c_str(), static_cast<int>(v.size()));
      q += (q.empty() ? "" : "&") + std::string(ek ? ek : "") + "=" + std::string(ev ? ev : "");
      curl_free(ek);
      curl_free(ev);
    }
    http.url += (http.url.find('?') == std::string::npos ? "?" : "&") + q;
  }
  http.headers.push_back({"Content-Type", "application/json"});
  bool own_auth = false;
  for (const auto& [k, v] : profile.headers) {
    own_auth = own_auth || lower_text(k) == "authorization";
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
    t.cost_usd = r.cost_usd;
    t.latency_s = r.latency_s;
  }
  accounting_.record(request.stage, request.question_id, t);
}

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
    return make_call_error(CallErrorKind::kConfig,
                           describe_call(profile, request_in) + ": a request needs messages");

  if (profile.provider == "sim") {
    if (!options_.simulator)
      return make_call_error(CallErrorKind::kConfig,
                             describe_call(profile, request_in) +
                                 ": profile is simulated (provider \"sim\") but no simulator is attached here");
    auto r = options_.simulator->answer(request_in);
    if (r) {
      r->provider = "sim";
      r->temperature = request_in.temperature.value_or(profile.temperature);
      r->seed = request_in.seed;
      r->profile = profile.name;
      r->model = profile.model;
      r->usage.prompt_tokens = estimate_tokens(prompt_chars(request_in));
      int64_t out = 0;
      for (const auto& c : r->choices) out += estimate_tokens(c.size());
      r->usage.completion_tokens = out;
      // What a model at this profile's prices would have charged for these (estimated) tokens:
      // lets budgets (--max-cost-usd) and cost reports be exercised offline.
      r->cost_usd = cost_usd(profile, r->usage);
      if (spent_out) *spent_out = CallSpend{r->usage, r->cost_usd};
    }
    record(request_in, r);
    return r;
  }

  const ChatRequest request = with_defaults(settings_, profile, request_in);
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
      r.temperature = request.temperature;
      r.seed = request.seed;
      r.request_hash.clear();
      r.attempts = 0;
      Result<ChatResponse> out(std::move(r));
      record(request, out);
      return out;
    }
    if (settings_.cache.mode == CacheMode::kReplay) {
      std::string first_user;
      for (const auto& m : request.messages)
        if (m.role == "user") { first_user = m.content; break; }
      if (first_user.size() > 120) first_user = core::redact_and_cut(first_user, 120) + "…";
      std::replace(first_user.begin(), first_user.end(), '\n', ' ');
      Result<ChatResponse> r = make_call_error(
          CallErrorKind::kReplayMiss,
          "cache mode is replay and this call was never recorded: " +
              describe_call(profile, request) + ", key " + key + ", prompt \"" + first_user +
              "\" (cache " + cache->path().string() + ")");
      // A replayed run is only the recorded run when every call was recorded: one miss stops
      // the run loudly (exit 4) instead of scoring a question without its model's answer.
      if (options_.stop_on_fatal_error) stop_with(r.status());
      record(request, r);
      return r;
    }
  }

  int attempts = 0;
  Usage spent;
  auto result = chat_uncached(profile, *states_.at(profile.name), request, &attempts, &spent);
  if (result && cache && settings_.cache.mode == CacheMode::kReadWrite) {
    Status st = cache->store(key, profile.name, profile.model,
                             ResponseCache::canonical_request(profile, request), *result);
    if (!st) spdlog::warn("llm cache: could not store an answer: {}", st.message());
  }
  const CallSpend call_spend{spent, cost_usd(profile, spent)};
  if (spent_out) *spent_out = call_spend;
  record(request, result, attempts, call_spend);
  return result;
}

Result<ChatResponse> Client::chat_uncached(const ModelProfile& profile, ProfileState& state,
                                           const ChatRequest& request_in, int* attempts_out, Usage* spent) {
  ChatRequest request = request_in;
  if (auto held = held_back()) return *held;
  HttpRequest http = http_request(profile, "/chat/completions");
  const auto start = options_.clock->now();
  const double estimated = static_cast<double>(estimate_tokens(prompt_chars(request)));
  int& attempts = *attempts_out;
  attempts = 0;
  bool budget_doubled = false;
  Result<ChatResponse> parsed = internal_error("not sent");
  for (;;) {  // at most twice: the second time with a doubled budget after finish_reason "length"
    http.body = build_chat_body(profile, request);
    int these = 0;
    auto posted = post_with_retries(profile, state, http, estimated, describe_call(profile, request), &these,
                                    0, priority_ ? priority_(request) : SlotPriority{}, request.question_id);
    attempts += these;
    if (!posted) return posted.status();
    // Read cut answers too: a complete final answer before the cut is salvaged below.
    parsed = profile.stream ? parse_chat_stream(posted->body, /*accept_truncated=*/true)
                            : parse_chat_completion(posted->body, /*accept_truncated=*/true);
    if (!parsed) {
      // The server processed the prompt at least (what it generated is not known).
      spent->prompt_tokens += static_cast<int64_t>(estimated);
      return Status(parsed.status().code(),
                    core::redact(parsed.status().message() + " (" + describe_call(profile, request) + ")"));
    }
    if (parsed->usage.prompt_tokens == 0 && parsed->usage.completion_tokens == 0) {
      // Some servers omit usage; estimate so cost and tpm stay meaningful (reasoning included:
      // it was generated and billed).
      parsed->usage.prompt_tokens = static_cast<int64_t>(estimated);
      for (size_t i = 0; i < parsed->choices.size(); ++i)
        parsed->usage.completion_tokens +=
            estimate_tokens(parsed->choices[i].size() + (parsed->answer_from_reasoning[i] ? 0 : parsed->reasoning[i].size()));
    }
    // Every answered attempt was processed (and billed), the cut one retried with a larger
    // budget included.
    *spent += parsed->usage;
    state.tokens.charge(static_cast<double>(parsed->usage.completion_tokens) +
                        (static_cast<double>(parsed->usage.prompt_tokens) - estimated));
    bool cut = false, salvageable = true, empty = false;
    for (size_t i = 0; i < parsed->choices.size(); ++i) {
      const bool blank = parsed->choices[i].find_first_not_of(" \t\r\n") == std::string::npos;
      empty = empty || blank;
      if (parsed->finish_reasons[i] != "length") continue;
      cut = true;
      const bool complete = !blank && !parsed->answer_from_reasoning[i] && has_complete_answer(parsed->choices[i]);
      salvageable = salvageable && complete;
    }
    if (!cut || (request.accept_truncated && !empty)) break;
    if (salvageable) {
      spdlog::debug("llm profile {}: answer cut at {} tokens after a complete final answer: kept ({})",
                    profile.name, request.max_tokens.value_or(0), describe_call(profile, request));
      break;
    }
    // The window, not the budget, stopped the answer: a larger budget cannot help (and would be
    // paid for again); the context-length path shortens the prompt instead, or says what to change.
    const int64_t used = parsed->usage.prompt_tokens + parsed->usage.completion_tokens;
    if (parsed->window_truncated || (profile.context_tokens > 0 && used >= profile.context_tokens - 16)) {
      const int64_t window = profile.context_tokens > 0 ? profile.context_tokens : used;
      return make_call_error(
          CallErrorKind::kContextLength,
          "model profile \"" + profile.name + "\": the context window of " + std::to_string(window) +
              " tokens was reached (prompt " + std::to_string(parsed->usage.prompt_tokens) + " + answer " +
              std::to_string(parsed->usage.completion_tokens) + " tokens" +
              (parsed->window_truncated ? ", the server reports the answer truncated" : "") +
              ") before the output budget of " + std::to_string(request.max_tokens.value_or(0)) +
              "; raise the server's context (llama.cpp -c, divided among its -np slots; vLLM --max-model-len; "
              "Ollama OLLAMA_CONTEXT_LENGTH) with llm.models." + profile.name +
              ".context_tokens, or lower the prompt (" + describe_call(profile, request) + ")");
    }
    if (budget_doubled || profile.omit.count("max_tokens") || !request.max_tokens) {
      const bool reasoning_only = std::any_of(parsed->answer_from_reasoning.begin(),
                                              parsed->answer_from_reasoning.end(), [](bool b) { return b; });
      return make_call_error(
          CallErrorKind::kTruncated,
          "model profile \"" + profile.name + "\": the answer stopped at the output budget of " +
              std::to_string(request.max_tokens.value_or(0)) + " tokens (finish_reason \"length\")" +
              (reasoning_only ? " while still reasoning" : empty ? " before any answer (spent reasoning)" : "") +
              (budget_doubled ? " even after doubling it" : "") +
              "; raise llm.models." + profile.name + ".max_tokens (or role_max_tokens) (" +
              describe_call(profile, request) + ")");
    }
    spdlog::info("llm profile {}: answer cut at {} tokens without a final answer; retrying once with {} ({})",
                 profile.name, *request.max_tokens, *request.max_tokens * 2, describe_call(profile, request));
    request.max_tokens = *request.max_tokens * 2;
    budget_doubled = true;
  }
  ChatResponse r = std::move(parsed).value();
  r.usage = *spent;  // every attempt the answer took
  r.cost_usd = cost_usd(profile, r.usage);
  r.latency_s = seconds_between(start, options_.clock->now());
  r.attempts = attempts;
  r.provider = "openai";
  r.profile = profile.name;
  r.model = profile.model;
  r.temperature = request.temperature;
  r.seed = request.seed;
  {
    // What the server received, byte for byte (the endpoint included: the same body sent to two
    // servers is two requests). Retries of a failed attempt repost the same body and are counted
    // as retries, not here.
    core::KeyHasher h;
    h.add(profile.base_url).add(http.body);
    r.request_hash = h.hex();
  }
  return r;
}

Clock::Duration Client::backoff(int attempt, const HttpResponse* response) {
  const auto& rp = settings_.retry;
  if (response) {
    std::optional<double> secs;
    // retry-after-ms (OpenAI, Azure) is the precise one; Retry-After is seconds or an HTTP-date.
    if (auto ms = response->headers.find("retry-after-ms"); ms != response->headers.end()) {
      char* end = nullptr;
      double v = std::strtod(ms->second.c_str(), &end);
      if (end != ms->second.c_str() && v >= 0) secs = v / 1000.0;
    }
    if (!secs)
      if (auto it = response->headers.find("retry-after"); it != response->headers.end())
        secs = retry_after_seconds(it->second);
    if (secs) {
      return std::chrono::duration_cast<Clock::Duration>(
          std::chrono::duration<double>(std::min(*secs, rp.max_delay_s)));
    }
  }
  double exp = std::min(rp.max_delay_s, rp.base_delay_s * std::pow(2.0, attempt - 1));
  double u;
  {
    std::lock_guard lock(jitter_mu_);
    core::SplitMix64 rng(jitter_state_);
    jitter_state_ = rng.next_u64();
    u = rng.uniform();
  }
  double secs = exp * (0.5 + 0.5 * u);  // jitter over the upper half: spreads, never collapses
  return std::chrono::duration_cast<Clock::Duration>(std::chrono::duration<double>(secs));
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

// Endpoint health: kDownAfterFailures failed attempts in a row (connection errors, timeouts, or
// 5xx that are not overload), with no answer between them, across the profile's calls, mark the
// endpoint down. Its calls then wait instead of spending their retries, and one of them at a
// time probes it with backoff until it answers or llm.endpoint_down_wait_s has passed, which
// stops the run.
constexpr int64_t kDownAfterFailures = 6;

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
  const int max_attempts = max_attempts_override > 0 ? max_attempts_override : settings_.retry.max_attempts;
  const std::string where = "model profile \"" + profile.name + "\" at " + core::mask_url(profile.base_url);
  int timeouts = 0;
  int counted = 0;    // attempts that spend the retry budget
  int overloads = 0;  // overload answers: retried apart from that budget
  int probes = 0;     // attempts made as the down endpoint's probe
  bool prober = false;
  struct ProbeRole {  // a call that ends (answered, failed, cancelled) hands the probe on
    Client* c;
    ProfileState& st;
    bool& role;
    ~ProbeRole() { c->give_up_probing(st, role); }
  } probe_role{this, state, prober};
  auto is_cancelled = [this] { return cancelled(); };
  auto sleep_for = [&](Clock::Duration wait) -> bool {  // false: cancelled meanwhile
    // Sleep in slices so a shutdown is noticed within a quarter second.
    const Clock::Duration slice = std::chrono::milliseconds(250);
    while (wait.count() > 0) {
      if (cancelled()) return false;
      Clock::Duration d = std::min(wait, slice);
      options_.clock->sleep_for(d);
      wait -= d;
    }
    return true;
  };
  for (;;) {  // bounded: by max_attempts, kMaxOverloadRetries, and endpoint_down_wait_s
    if (cancelled()) return make_call_error(CallErrorKind::kCancelled, "shutdown requested (" + call_label + ")");
    if (Status h = await_endpoint(state, prober); !h)
      return make_call_error(CallErrorKind::kCancelled, h.message() + " (" + call_label + ")");
    Status st = state.requests.acquire(1, is_cancelled);
    if (st) st = state.tokens.acquire(estimated_tokens, is_cancelled);
    if (!st) return make_call_error(CallErrorKind::kCancelled, st.message() + " (" + call_label + ")");

    Result<HttpResponse> posted = internal_error("not sent");
    {
      // Profile slot first, then global: the global count is then exactly what is on the wire.
      if (Status p = state.limit.acquire(priority); !p)
        return make_call_error(CallErrorKind::kCancelled, p.message() + " (" + call_label + ")");
      InFlightSlot profile_slot(&state.limit);
      if (Status g = global_limit_.acquire(priority); !g)
        return make_call_error(CallErrorKind::kCancelled, g.message() + " (" + call_label + ")");
      InFlightSlot global_slot(&global_limit_);
      ++*attempts;
      spdlog::debug("llm POST {} ({}, attempt {}/{}{})", core::mask_url(http.url), call_label, counted + 1,
                    max_attempts, prober ? ", probe" : "");
      posted = options_.transport->post(http);
    }
    // A stream that carried an error event is that error, answered plainly.
    if (posted && posted->status >= 200 && posted->status < 300 && profile.stream)
      if (auto e = stream_error(*posted)) *posted = std::move(*e);

    CallErrorKind kind;
    std::string what;
    const HttpResponse* response = nullptr;
    bool endpoint_failed = false;  // no answer from the server at all, or a 5xx that is not overload
    if (!posted) {
      ErrorCode code = posted.status().code();
      if (code == ErrorCode::kCancelled)
        return make_call_error(CallErrorKind::kCancelled, core::redact(posted.status().message()));
      what = core::redact(posted.status().message());
      // The answer outgrew llm.max_response_bytes: the same request would bring the same
      // flood, so it is not retried.
      if (code == ErrorCode::kRejected)
        return make_call_error(CallErrorKind::kServer, where + ": " + what + " (" + call_label + "); not retried");
      kind = code == ErrorCode::kTimeout ? CallErrorKind::kTimeout : CallErrorKind::kConnection;
      // A timed-out attempt may have cost the server minutes of generation: one more try at
      // most, whatever llm.retry.max_attempts says.
      if (kind == CallErrorKind::kTimeout && ++timeouts >= 2)
        return make_call_error(kind, where + ": " + what + " twice (timeout_s " +
                                         fmt::format("{:g}", profile.timeout_s) + "; " + call_label + ")");
      if (code != ErrorCode::kTimeout && code != ErrorCode::kUnavailable)
        return make_call_error(kind, what + " (" + call_label + ")");
      endpoint_failed = true;
    } else if (posted->status >= 200 && posted->status < 300) {
      note_endpoint_answer(profile, state);
      note_answered(state);
      std::lock_guard lock(state.refusals_mu);
      state.repeated = 0;
      state.last_refusal.clear();
      return posted;
    } else {
      response = &*posted;
      const int status = posted->status;
      what = "HTTP " + std::to_string(status) + ": " + core::redact(server_message(posted->body));
      // A window too small for this request alone is the context-length path; the same words
      // under load, with requests of others in flight, are overload.
      const bool overload = !is_context_overflow(status, posted->body) && is_overload(status, posted->body) &&
                            !(status >= 500 && status != 503 && status != 529 && state.limit.max() == 1 &&
                              lower_text(posted->body).find("context size") != std::string::npos);
      if (overload) {
        note_endpoint_answer(profile, state);
        note_overload(profile, state);
        kind = status == 429 ? CallErrorKind::kRateLimited : CallErrorKind::kServer;
        if (++overloads > kMaxOverloadRetries)
          return make_call_error(kind, where + ": " + what + " — still overloaded after " +
                                           std::to_string(kMaxOverloadRetries) + " retries at " +
                                           std::to_string(state.limit.max()) + " requests in flight (" +
                                           call_label + ")");
        Clock::Duration wait = backoff(std::min(overloads, 8), response);
        spdlog::debug("llm profile {}: {} (overload {}); retrying in {:.2f} s", profile.name, what, overloads,
                      std::chrono::duration<double>(wait).count());
        if (!sleep_for(wait))
          return make_call_error(CallErrorKind::kCancelled, "shutdown requested during backoff (" + call_label + ")");
        continue;
      }
      if (!retryable_status(status) || is_context_overflow(status, posted->body)) {
        note_endpoint_answer(profile, state);
        kind = (status == 401 || status == 403) ? CallErrorKind::kAuth
               : is_context_overflow(status, posted->body) ? CallErrorKind::kContextLength
                                                           : CallErrorKind::kHttpClient;
        std::string hint = kind == CallErrorKind::kAuth
                               ? " (check the API key in env " +
                                     (profile.api_key_env.empty() ? std::string("(none configured)")
                                                                  : profile.api_key_env) + ")"
                               : "";
        if (hint.empty()) hint = refusal_hint(profile, status, server_message(posted->body));
        Status refused = make_call_error(kind, where + " refused the call: " + what + hint + " (" + call_label +
                                                   "); not retried");
        if (kind == CallErrorKind::kAuth && options_.stop_on_fatal_error) stop_with(refused);
        if (kind != CallErrorKind::kAuth && options_.stop_on_fatal_error &&
            settings_.stop_after_repeated_errors > 0) {
          int64_t repeated = 0;
          {
            std::lock_guard lock(state.refusals_mu);
            const std::string sig = refusal_signature(status, server_message(posted->body));
            state.repeated = sig == state.last_refusal ? state.repeated + 1 : 1;
            state.last_refusal = sig;
            repeated = state.repeated;
          }
          if (repeated >= settings_.stop_after_repeated_errors)
            stop_with(make_call_error(
                kind, where + " refused " + std::to_string(repeated) + " calls in a row the same way: " + what +
                          " (model " + profile.model + "; llm.stop_after_repeated_errors = " +
                          std::to_string(settings_.stop_after_repeated_errors) + ")"));
        }
        return refused;
      }
      kind = status == 408 ? CallErrorKind::kTimeout : CallErrorKind::kServer;
      endpoint_failed = status >= 500;
      if (!endpoint_failed) note_endpoint_answer(profile, state);
    }
    if (endpoint_failed && note_endpoint_failure(profile, state, what, question, !response)) {
      // The endpoint is down: this attempt spends no retry budget. The prober waits and probes
      // again until the endpoint answers or the wait is over; the others wait in await_endpoint.
      if (!prober) continue;
      ++probes;
      double down_for = 0;
      {
        std::lock_guard lock(state.health_mu);
        down_for = seconds_between(state.down_since, options_.clock->now());
      }
      if (down_for >= settings_.endpoint_down_wait_s) {
        Status dead = make_call_error(
            kind, where + " stopped answering: " + what + "; probed " + std::to_string(probes) + " times over " +
                      fmt::format("{:.0f}", down_for) + " s (llm.endpoint_down_wait_s = " +
                      fmt::format("{:g}", settings_.endpoint_down_wait_s) +
                      ") — the run stops here; rerun the same command once the server answers (every answered "
                      "call is reused)");
        if (options_.stop_on_fatal_error) stop_with(dead);
        return dead;
      }
      const double next = std::min({0.5 * std::pow(2.0, std::min(probes - 1, 4)), 4.0,
                                    std::max(0.05, settings_.endpoint_down_wait_s - down_for)});
      if (!sleep_for(std::chrono::duration_cast<Clock::Duration>(std::chrono::duration<double>(next))))
        return make_call_error(CallErrorKind::kCancelled, "shutdown requested while probing (" + call_label + ")");
      continue;
    }
    if (++counted >= max_attempts)
      return make_call_error(kind, where + ": " + what + " after " + std::to_string(*attempts) + " attempts (" +
                                       call_label + ")");
    Clock::Duration wait = backoff(counted, response);
    spdlog::warn("llm profile {}: {} (attempt {}/{}); retrying in {:.2f} s", profile.name, what, counted,
                 max_attempts, std::chrono::duration<double>(wait).count());
    if (!sleep_for(wait))
      return make_call_error(CallErrorKind::kCancelled, "shutdown requested during backoff (" + call_label + ")");
  }
}

PreflightResult Client::preflight_one(const std::string& name) {
  PreflightResult r;
  r.profile = name;
  auto it = settings_.profiles.find(name);
  if (it == settings_.profiles.end()) {
    r.error = "no model profile \"" + name + "\"";
    return r;
  }
  const ModelProfile& profile = it->second;
  r.model = profile.model;
  r.endpoint = core::mask_url(profile.base_url + "/chat/completions");
  if (profile.provider == "sim") {
    r.simulated = r.ok = true;
    r.note = "simulated (sim provider): not called";
    return r;
  }
  // The shape of a real call (the fields a generation sends), with a small budget: a reasoning
  // model may spend it all thinking, and that is fine here — the server accepted the request.
  ChatRequest request;
  request.profile = name;
  request.stage = "preflight";
  request.messages = {{"user", "Reply with the single word OK."}};
  request.temperature = profile.temperature;
  request.top_p = profile.top_p;
  request.max_tokens = std::min<int64_t>(64, settings_.output_budget(profile, "generate"));
  HttpRequest http = http_request(profile, "/chat/completions");
  http.body = build_chat_body(profile, request);
  if (auto body = json::parse(http.body, nullptr, false); body.is_object())
    for (const auto& [k, v] : body.items())
      if (k != "messages") r.fields.push_back(k);
  const auto start = options_.clock->now();
  int attempts = 0;
  auto posted = post_with_retries(profile, *states_.at(name), http, 16, "preflight of profile \"" + name + "\"",
                                  &attempts, /*max_attempts=*/std::min(2, settings_.retry.max_attempts));
  r.latency_s = seconds_between(start, options_.clock->now());
  Result<ChatResponse> parsed = posted ? (profile.stream ? parse_chat_stream(posted->body, true)
                                                         : parse_chat_completion(posted->body, true))
                                       : Result<ChatResponse>(posted.status());
  UsageTotals t;
  t.calls = 1;
  t.attempts = attempts;
  t.retries = std::max(0, attempts - 1);
  if (!parsed) {
    r.error = core::redact(parsed.status().message());
    t.errors = 1;
    t.errors_by_kind[call_error_kind_name(call_error_kind(parsed.status()))] = 1;
  } else {
    r.ok = true;
    r.answer = core::redact_and_cut(parsed->text(), 200);
    const bool blank = parsed->text().find_first_not_of(" \t\r\n") == std::string::npos;
    if (parsed->finish_reasons.front() == "length")
      r.note = parsed->answer_from_reasoning.front() || blank
                   ? "the check's " + std::to_string(*request.max_tokens) +
                         "-token budget went to reasoning before any answer (fine: the request was accepted)"
                   : "answer cut at the check's " + std::to_string(*request.max_tokens) + "-token budget";
    else if (parsed->answer_from_reasoning.front())
      r.note = "the content was empty: the answer came from the reasoning field";
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

Result<EmbeddingResponse> Client::embed(const EmbeddingRequest& request) {
  if (cancelled()) return make_call_error(CallErrorKind::kCancelled, "shutdown requested");
  auto resolved = settings_.resolve(request.role, request.profile);
  if (!resolved) return resolved.status();
  const ModelProfile& profile = **resolved;
  if (profile.provider == "sim")
    return make_call_error(CallErrorKind::kConfig,
                           "profile \"" + profile.name + "\" is simulated: sim has no embeddings");
  const std::string model = profile.embedding_model.empty() ? profile.model : profile.embedding_model;
  HttpRequest http = http_request(profile, "/embeddings");
  http.idle_timeout = std::chrono::milliseconds(0);
  http.body = json{{"model", model}, {"input", request.inputs}}.dump(-1, ' ', false, json::error_handler_t::replace);
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
