// The one traced model call every stage uses (context, generate, fix, select): renders a prompt template, sends it
// through llm::Client, and returns the answer together with the LlmCallTrace that a candidate
// keeps (prompt, template hash, response, tokens, cost, latency, provider — "sim" marks a
// simulated answer). A failed call is an answer whose `text` is the error (and a trace with
// `error` set), not an error return: only a cancelled client or a configuration error (unknown
// role/profile, a template whose fields do not match) ends the caller's work. Stateless; thread-safe as llm::Client is.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "nl2sql/core/status.h"
#include "nl2sql/llm/prompt_template.h"
#include "nl2sql/llm/trace.h"
#include "nl2sql/llm/types.h"

namespace nl2sql::llm {

class Client;
class CallMemo;

// The last rung of the prompt-budget ladder: the schema cut to the tokens left for it
// (context/schema_render.h renders rungs 0 … kLastPromptRung - 1 lighter and lighter).
inline constexpr int kLastPromptRung = 4;

struct ModelCall {
  const PromptTemplate* prompt = nullptr;
  std::map<std::string, std::string> values;  // the template's placeholders
  std::string system;                         // optional system message
  std::string stage;                          // trace and accounting tag
  std::string role = "generate";
  std::string profile;                        // wins over role when set
  std::optional<double> temperature;
  int64_t sample_index = 0;
  std::string question_id;
  CallTag tag;                                // what the call is for (never gold)
  // When set, fills the "schema" placeholder: the schema at a rung of the prompt-budget ladder
  // (0 as configured … kLastPromptRung = cut to `schema_tokens`). call_model climbs
  // the ladder until the prompt fits the profile's context (llm.models.*.context_tokens), and
  // once more when the server still answers that the context is exceeded.
  std::function<std::string(int rung, int64_t schema_tokens)> schema_at;
  // When set, the call is made once per distinct request (profile, role, system message,
  // rendered prompt, template, temperature, sample index) for as long as the memo lives; later
  // askers get the first answer with trace.shared_from naming the question that sent it, and
  // no request_hash: they sent nothing. Not owned.
  CallMemo* memo = nullptr;
};

struct ModelAnswer {
  LlmCallTrace trace;
  // The first choice's text; or why the call failed, as the client said it (its CallErrorKind
  // included; trace.error records the same message).
  Result<std::string> text = internal_error("no model call made");
};

// The trace of a call a stage sent itself (a request it shaped, e.g. with its own messages):
// prompt and system message from the request, the rest from the response or its error. What
// call_model records too; the one place a trace is filled from an answer.
// `spent` (Client::chat's) gives a failed call's tokens and cost: what the server processed.
LlmCallTrace trace_of(const std::string& stage, const PromptTemplate& prompt, const ChatRequest& request,
                      const Result<ChatResponse>& response, const CallSpend& spent = {});

// One answer per distinct request, for as long as it lives (e.g. a run): a generator whose
// prompt does not depend on the question (the os generator's per-database example prompts)
// asks once per database instead of once per question. Thread-safe: concurrent askers of one
// request wait for the first one's answer (other requests are not held up). Only answers that
// succeeded are kept; a failed call is made again by the next asker.
class CallMemo {
 public:
  Result<ModelAnswer> once(const std::string& key, const std::string& question_id,
                           const std::function<Result<ModelAnswer>()>& call);
  size_t size();  // answers kept

 private:
  struct Entry {
    std::mutex mu;  // held while the first asker's call is in flight
    std::optional<ModelAnswer> answer;  // guarded by mu: set once answered
    std::string question_id;            // guarded by mu: who sent it
  };
  std::mutex mu_;
  std::map<std::string, std::shared_ptr<Entry>> entries_;  // guarded by mu_
};

// Non-OK only for kCancelled, kConfig call errors and template rendering errors.
Result<ModelAnswer> call_model(Client& client, const ModelCall& call);

}  // namespace nl2sql::llm
