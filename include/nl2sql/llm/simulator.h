// Simulator: an in-process stand-in for a model server, attached to a Client through
// ClientOptions::simulator; profiles whose provider is "sim" are answered by it, without HTTP,
// never cached, labelled simulated. The implementation (gold-derived, src/sim/) lives above the
// stages; the LLM layer knows only this interface, so no stage can reach gold through it.
#pragma once

#include "nl2sql/core/status.h"
#include "nl2sql/llm/types.h"

namespace nl2sql::llm {

class Simulator {
 public:
  virtual ~Simulator() = default;
  // The answer to `request` (read from request.tag). Thread-safe.
  virtual Result<ChatResponse> answer(const ChatRequest& request) const = 0;
};

}  // namespace nl2sql::llm
