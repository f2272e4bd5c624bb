// The wire format: how a ChatRequest becomes the body a server receives and how what the server
// sends back becomes a ChatResponse or a typed error. `WireFormat` is the shape the client speaks
// through; `OpenAiChat` is the OpenAI Chat Completions shape every supported server answers in
// (OpenAI, Azure, vLLM, the llama.cpp server, Ollama, OpenRouter, DeepSeek …): a profile shapes
// the body (max_tokens_field, omit, extra_body, stream), answers come as a JSON completion or as
// server-sent events, usage carries cached and reasoning tokens in several dialects, and content,
// reasoning, refusals and finish reasons are read wherever servers put them.
//
// The readers work on the JSON value as well as on the text (`chat_body_json`,
// `read_chat_completion`), so a shape that wraps the same bodies — OpenAI batch jobs, whose
// request lines hold a chat body and whose output lines hold a chat completion, one JSON value
// per line — reuses them instead of copying them.
//
// Pure functions and a stateless class: thread-safe. Messages quoting a server pass through
// core::redact.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "nl2sql/core/status.h"
#include "nl2sql/llm/profile.h"
#include "nl2sql/llm/transport.h"
#include "nl2sql/llm/types.h"

namespace nl2sql::llm {

// What a server said when it refused a request.
struct ServerError {
  std::string message;  // its own explanation (redacted, cut), or the body's start
  std::string type;     // the error's "type" ("" when none), e.g. exceed_context_size_error
};

// One API shape on the wire. The client builds requests and reads answers only through this.
class WireFormat {
 public:
  virtual ~WireFormat() = default;
  // Paths under a profile's base URL.
  virtual std::string chat_path() const = 0;
  virtual std::string embeddings_path() const = 0;
  // The body of a chat request as the profile shapes it.
  virtual std::string chat_body(const ModelProfile& profile, const ChatRequest& request) const = 0;
  virtual std::string embeddings_body(const std::string& model, const std::vector<std::string>& inputs) const = 0;
  // A successful (2xx) answer's body; `streamed` when the profile asked for server-sent events.
  // finish_reason "length" is an error (kTruncated) unless `accept_truncated`.
  virtual Result<ChatResponse> read_chat(const std::string& body, bool streamed, bool accept_truncated) const = 0;
  virtual Result<EmbeddingResponse> read_embeddings(const std::string& body, size_t inputs,
                                                    const std::string& label) const = 0;
  // An error sent inside a 2xx stream, as the plain error answer it stands for (its status and
  // an error body), so that it is classified and retried like one; nullopt when none.
  virtual std::optional<HttpResponse> error_in_stream(const HttpResponse& response) const = 0;
  // A refusal's body read (any body: a proxy's HTML page too).
  virtual ServerError read_error(const std::string& body) const = 0;
};

class OpenAiChat : public WireFormat {
 public:
  std::string chat_path() const override { return "/chat/completions"; }
  std::string embeddings_path() const override { return "/embeddings"; }
  std::string chat_body(const ModelProfile& profile, const ChatRequest& request) const override;
  std::string embeddings_body(const std::string& model, const std::vector<std::string>& inputs) const override;
  Result<ChatResponse> read_chat(const std::string& body, bool streamed, bool accept_truncated) const override;
  Result<EmbeddingResponse> read_embeddings(const std::string& body, size_t inputs,
                                            const std::string& label) const override;
  std::optional<HttpResponse> error_in_stream(const HttpResponse& response) const override;
  ServerError read_error(const std::string& body) const override;
};

// The OpenAI Chat Completions shape, function by function (OpenAiChat calls these).

// The request body as the profile shapes it: sampling fields unless omitted, the output budget
// under the profile's max_tokens_field, a per-sample seed for samples > 0 at a temperature > 0,
// stream options, extra_body merged last.
nlohmann::json chat_body_json(const ModelProfile& profile, const ChatRequest& request);
std::string build_chat_body(const ModelProfile& profile, const ChatRequest& request);
// Reads a response's "usage" object in every shape servers send: prompt and completion tokens,
// cached prompt tokens (prompt_tokens_details.cached_tokens, or DeepSeek's
// prompt_cache_hit_tokens) and reasoning tokens (completion_tokens_details.reasoning_tokens).
// Absent or null fields leave the count unknown.
Usage read_usage(const nlohmann::json& usage);
// A Chat Completions answer: per choice the content (a string, null or parts), the reasoning
// (reasoning_content, reasoning, reasoning_details, thinking parts) and the finish reason; an
// empty content falls back to the reasoning's tail (answer_from_reasoning); llama.cpp's
// "truncated" flag; usage. Typed errors (kMissingField, kEmptyChoices, kEmptyContent,
// kTruncated) say what is missing.
Result<ChatResponse> read_chat_completion(const nlohmann::json& answer, bool accept_truncated);
// The same from the body's text (kNotJson when it does not parse).
Result<ChatResponse> parse_chat_completion(const std::string& body, bool accept_truncated);
// Parses a server-sent-events body (stream: true) into the same ChatResponse: deltas of content
// and reasoning concatenated per choice, the last finish_reason, usage from the final chunk.
Result<ChatResponse> parse_chat_stream(const std::string& body, bool accept_truncated);
// Parses an OpenAI embeddings response body with `inputs` vectors.
Result<EmbeddingResponse> parse_embeddings(const std::string& body, size_t inputs,
                                           const std::string& label);

}  // namespace nl2sql::llm
