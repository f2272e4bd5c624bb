// The OpenAI Chat Completions wire format (see openai_chat.h).
#include "nl2sql/llm/openai_chat.h"

#include <algorithm>
#include <map>
#include <optional>

#include "nl2sql/core/log.h"

namespace nl2sql::llm {
namespace {

using json = nlohmann::json;

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

// The "type" of an {"error": {...}} body, "" when none.
std::string error_type(const std::string& body) {
  auto j = json::parse(body, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("error") || !j["error"].is_object()) return "";
  const auto& t = j["error"].value("type", json());
  return t.is_string() ? t.get<std::string>() : "";
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

// A non-negative integer field of `j`, or nothing (absent, null, another type).
std::optional<int64_t> count_at(const json& j, const char* key) {
  if (!j.is_object()) return std::nullopt;
  const auto it = j.find(key);
  if (it == j.end() || !it->is_number_integer() || it->get<int64_t>() < 0) return std::nullopt;
  return it->get<int64_t>();
}

}  // namespace

json chat_body_json(const ModelProfile& profile, const ChatRequest& request) {
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
  return body;
}

std::string build_chat_body(const ModelProfile& profile, const ChatRequest& request) {
  return chat_body_json(profile, request).dump(-1, ' ', false, json::error_handler_t::replace);
}

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

namespace {

std::string choice_at(size_t i) { return "choices[" + std::to_string(i) + "]"; }

// One choice of a completion appended to `r`; an error when it holds no usable answer.
Status read_choice(const json& c, size_t i, bool accept_truncated, ChatResponse& r) {
  if (!c.is_object() || !c.contains("message") || !c["message"].is_object() || !c["message"].contains("content"))
    return make_call_error(CallErrorKind::kMissingField, choice_at(i) + " has no message.content");
  const auto& message = c["message"];
  const auto& content = message["content"];
  if (!content.is_null() && !content.is_string() && !content.is_array())
    return make_call_error(CallErrorKind::kMissingField,
                           choice_at(i) + ".message.content is neither a string nor an array of parts");
  std::string text, reasoning;
  read_content(content, text, reasoning);
  if (reasoning.empty()) reasoning = read_reasoning(message);
  std::string finish =
      c.contains("finish_reason") && c["finish_reason"].is_string() ? c["finish_reason"].get<std::string>() : "";
  const bool blank = text.find_first_not_of(" \t\r\n") == std::string::npos;
  const bool has_reasoning = reasoning.find_first_not_of(" \t\r\n") != std::string::npos;
  if (finish == "length" && !accept_truncated)
    return make_call_error(CallErrorKind::kTruncated,
                           choice_at(i) + " stopped at max_tokens (finish_reason \"length\")" +
                               (blank && has_reasoning ? " while still reasoning: no answer yet" : ""));
  bool from_reasoning = false;
  if (blank && has_reasoning) {
    // Everything went into the reasoning field (a reasoning parser that missed the end of
    // thinking, or a model that answered inside it): its tail is the best answer there is;
    // the trace says so.
    text = reasoning_tail(reasoning);
    from_reasoning = true;
  } else if (blank && finish != "length") {
    // OpenAI's structured refusal: content null, the reason in message.refusal.
    const auto refusal = message.find("refusal");
    if (refusal != message.end() && refusal->is_string() && !refusal->get<std::string>().empty())
      return make_call_error(CallErrorKind::kEmptyContent,
                             choice_at(i) + ".message.content is empty: the model refused (\"" +
                                 core::redact_and_cut(refusal->get<std::string>(), 200) + "\")");
    return make_call_error(CallErrorKind::kEmptyContent, choice_at(i) + ".message.content is empty");
  }
  // Blank with "length" (read only when the caller accepts cut answers): the budget was spent
  // before any answer — OpenAI's reasoning models return no reasoning text to fall back on.
  r.choices.push_back(std::move(text));
  r.finish_reasons.push_back(std::move(finish));
  r.reasoning.push_back(std::move(reasoning));
  r.answer_from_reasoning.push_back(from_reasoning);
  return Status::ok();
}

}  // namespace

Result<ChatResponse> read_chat_completion(const json& j, bool accept_truncated) {
  if (!j.is_object() || !j.contains("choices") || !j["choices"].is_array())
    return make_call_error(CallErrorKind::kMissingField, "the answer has no \"choices\" array");
  const auto& choices = j["choices"];
  if (choices.empty()) return make_call_error(CallErrorKind::kEmptyChoices, "\"choices\" is empty");
  ChatResponse r;
  for (size_t i = 0; i < choices.size(); ++i)
    if (Status st = read_choice(choices[i], i, accept_truncated, r); !st) return st;
  // llama.cpp-server: the answer stopped at the slot's context window, not at max_tokens.
  const json* flags[] = {j.contains("truncated") ? &j["truncated"] : nullptr,
                         choices[0].is_object() && choices[0].contains("truncated") ? &choices[0]["truncated"] : nullptr};
  for (const json* t : flags)
    if (t && t->is_boolean() && t->get<bool>()) r.window_truncated = true;
  if (j.contains("usage") && j["usage"].is_object()) r.usage = read_usage(j["usage"]);
  return r;
}

Result<ChatResponse> parse_chat_completion(const std::string& body, bool accept_truncated) {
  auto j = json::parse(body, nullptr, false);
  if (j.is_discarded()) {
    std::string start = core::redact_and_cut(body, 80);
    return make_call_error(CallErrorKind::kNotJson,
                           "the answer is not JSON (or is truncated JSON), " +
                               std::to_string(body.size()) + " bytes starting \"" + start + "\"");
  }
  return read_chat_completion(j, accept_truncated);
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
        if (d.contains("refusal") && d["refusal"].is_string())
          m["refusal"] = (m.contains("refusal") ? m["refusal"].get<std::string>() : "") + d["refusal"].get<std::string>();
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

std::string OpenAiChat::chat_body(const ModelProfile& profile, const ChatRequest& request) const {
  return build_chat_body(profile, request);
}

std::string OpenAiChat::embeddings_body(const std::string& model, const std::vector<std::string>& inputs) const {
  return json{{"model", model}, {"input", inputs}}.dump(-1, ' ', false, json::error_handler_t::replace);
}

Result<ChatResponse> OpenAiChat::read_chat(const std::string& body, bool streamed, bool accept_truncated) const {
  return streamed ? parse_chat_stream(body, accept_truncated) : parse_chat_completion(body, accept_truncated);
}

Result<EmbeddingResponse> OpenAiChat::read_embeddings(const std::string& body, size_t inputs,
                                                      const std::string& label) const {
  return parse_embeddings(body, inputs, label);
}

std::optional<HttpResponse> OpenAiChat::error_in_stream(const HttpResponse& response) const {
  return stream_error(response);
}

ServerError OpenAiChat::read_error(const std::string& body) const { return {server_message(body), error_type(body)}; }

}  // namespace nl2sql::llm
