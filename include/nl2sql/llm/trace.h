// LlmCallTrace: one model call as a run keeps it (prompt, response, reasoning, template hash,
// tokens, cost, latency, provider — "sim" marks a simulated answer). Every stage that calls a
// model (context, generate, fix, select) keeps these in its trace; they are built in one place,
// llm::call_model (model_call.h). A plain value. to_json / call_trace_from_json give the stored
// format (stable keys; absent keys read as empty, a key this build does not write is refused, so a
// renamed key is an error rather than a silently empty field).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json_fwd.hpp>

#include "nl2sql/core/status.h"

namespace nl2sql::llm {

struct LlmCallTrace {
  std::string stage;          // e.g. "generate", "fix", "os_examples"
  std::string template_name;  // prompts/<name>.txt
  std::string template_hash;
  std::string profile, model, provider;  // provider "sim" marks simulated answers
  std::string prompt;                    // the rendered user message (system message separate)
  std::string system;
  std::string response;                  // the chosen choice's text ("" when the call failed)
  // What the model thought: the server's reasoning field plus any <think>/harmony reasoning in
  // the response text. Kept for the microscope; never parsed for the answer.
  std::string reasoning;
  bool answer_from_reasoning = false;    // the content was empty; `response` is the reasoning's tail
  // How far the schema was lightened to fit the model's context (context/schema_render.h's
  // ladder; 4 = cut to the budget); 0 = the prompt as configured.
  int prompt_rung = 0;
  std::string error;                     // non-empty when the call failed
  int64_t prompt_tokens = 0, completion_tokens = 0;
  // The server's own breakdown (llm::Usage): unknown when it did not report it.
  std::optional<int64_t> cached_tokens, reasoning_tokens;
  double cost_usd = 0, latency_s = 0;
  bool from_cache = false;
  // The sampling sent (profile defaults filled in; absent when not known, e.g. older runs).
  std::optional<double> temperature;
  std::optional<int64_t> seed;
  // XXH3-128 of the endpoint and the request body posted (ChatResponse::request_hash); empty when
  // nothing reached a server (cache hit, simulated answer, failed call, older run).
  std::string request_hash;
  // Set when the answer is another question's call reused by a per-run memo (the os generator's
  // example calls per database): this question sent nothing for it. Names that question.
  std::string shared_from;
};

nlohmann::json to_json(const LlmCallTrace& call);
// `where` names the record in error messages (e.g. "candidate dc#0").
Result<LlmCallTrace> call_trace_from_json(const nlohmann::json& json, const std::string& where);

}  // namespace nl2sql::llm
