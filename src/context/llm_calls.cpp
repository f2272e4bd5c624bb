#include "llm_calls.h"

#include <unordered_set>

#include "nl2sql/context/retrieve.h"
#include "nl2sql/context/text_match.h"
#include "nl2sql/llm/answer.h"
#include "nl2sql/llm/client.h"
#include "nl2sql/llm/model_call.h"

namespace nl2sql::context {
using nlohmann::json;

Result<std::vector<std::string>> parse_keyword_answer(const std::string& answer,
                                                      const std::string& where) {
  // {"keywords": [...]} first; else the last value must itself be a list (not a list inside
  // some other object).
  auto j = llm::read_json(answer, {llm::JsonShape::kObject, "keywords"});
  if (!j) j = llm::read_json(answer);
  if (!j) return invalid_input(where + ": keyword answer is not JSON: " + j.status().message());
  const json* list = j->is_array() ? &*j : j->contains("keywords") ? &(*j)["keywords"] : nullptr;
  if (!list || !list->is_array()) return invalid_input(where + ": keyword answer has no \"keywords\" list");
  std::vector<std::string> out;
  std::unordered_set<std::string> seen;
  for (const auto& k : *list) {
    if (!k.is_string()) continue;
    std::string s = k.get<std::string>();
    std::string n = normalize_text(s);
    if (n.empty() || only_stop_words(s) || !seen.insert(n).second) continue;
    out.push_back(std::move(s));
  }
  return out;
}

Result<std::vector<std::string>> llm_keywords(llm::Client& client, const llm::PromptTemplate& prompt,
                                              const std::string& question,
                                              const std::string& evidence,
                                              const std::string& question_id,
                                              llm::LlmCallTrace* trace) {
  auto text = prompt.render({{"question", question}, {"evidence", evidence}});
  if (!text) return text.status();
  llm::ChatRequest req;
  req.role = "keywords";
  req.stage = "keywords";
  req.question_id = question_id;
  req.template_hash = prompt.hash();
  req.messages = {{"user", *text}};
  req.tag.task = llm::CallTask::kKeywords;
  req.tag.question_id = question_id;
  req.tag.question = question;
  req.tag.evidence = evidence;
  llm::CallSpend spent;
  auto resp = client.chat(req, &spent);
  llm::LlmCallTrace t = llm::trace_of("keywords", prompt, req, resp, spent);
  Result<std::vector<std::string>> out = resp ? parse_keyword_answer(resp->text(), "question " + question_id)
                                              : Result<std::vector<std::string>>(resp.status());
  if (resp && !out) {
    t.error = out.status().message();
    client.accounting().record_parse_failure(req.stage, question_id);
  }
  if (trace) *trace = std::move(t);
  return out;
}

}  // namespace nl2sql::context
