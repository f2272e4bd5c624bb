// Model calls the context stage makes (keyword extraction, column filtering, column
// descriptions) share two small pieces, declared here: turning a request and its outcome into a
// llm::LlmCallTrace (a plain struct; this stage only fills it, reasoning included); and the
// LLM keyword extractor itself. Answers are read with llm/answer.h (reasoning stripped first).
//
// llm_keywords renders prompts/extract_keywords.txt ({{question}}, {{evidence}}), calls the
// client with role "keywords" (the simulator answers CallTask::kKeywords) and parses the answer:
// {"keywords": [...]} or a bare JSON list of strings, fenced or not. A failed call or a malformed
// answer is an error Status (the trace records it; a malformed answer is also counted as a parse
// failure of stage "keywords"); callers then keep the heuristic keywords only. Pure apart from the client call; thread-safe when the client is (it is).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "nl2sql/core/status.h"
#include "nl2sql/llm/trace.h"
#include "nl2sql/llm/prompt_template.h"
#include "nl2sql/llm/types.h"

namespace nl2sql::llm {
class Client;
}

namespace nl2sql::context {

// Keyword strings from an answer ({"keywords": [...]} or [...]); non-strings are skipped, blanks
// dropped, duplicates removed (first kept). Error naming `where` when there is no such list.
Result<std::vector<std::string>> parse_keyword_answer(const std::string& answer,
                                                      const std::string& where);

Result<std::vector<std::string>> llm_keywords(llm::Client& client, const llm::PromptTemplate& prompt,
                                              const std::string& question,
                                              const std::string& evidence,
                                              const std::string& question_id,
                                              llm::LlmCallTrace* trace = nullptr);

}  // namespace nl2sql::context
