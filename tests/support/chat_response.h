// A model answer as the LLM layer returns it, for tests that store or replay answers without a
// server: one choice, finish reason "stop", 3 prompt + 4 completion tokens.
#pragma once

#include <string>

#include "nl2sql/llm/client.h"

namespace nl2sql::testing {

inline llm::ChatResponse canned_response(const std::string& text) {
  llm::ChatResponse r;
  r.choices = {text};
  r.finish_reasons = {"stop"};
  r.usage.prompt_tokens = 3;
  r.usage.completion_tokens = 4;
  return r;
}

}  // namespace nl2sql::testing
