#include "nl2sql/context/llm_calls.h"

#include <unordered_set>

#include "nl2sql/context/text_match.h"
#include "nl2sql/llm/answer.h"
#include "nl2sql/llm/client.h"

namespace nl2sql::context {
using nlohmann::json;

llm::LlmCallTrace make_trace(const std::string& stage, const llm::PromptTemplate& prompt,
                                  const llm::ChatRequest& request,
                                  const Result<llm::ChatResponse>& response) {
  llm::LlmCallTrace t;
  t.stage = stage;
  t.template_name = prompt.name();
  t.template_hash = prompt.hash();
  for (const auto& m : request.messages) {
    if (m.role == "system") t.system = m.content;
    if (m.role == "user") t.prompt = m.content;
  }
  if (response) {
    t.response = response->text();
    t.reasoning = llm::answer_reasoning(response->reasoning.empty() ? "" : response->reasoning.front(), t.response);
    t.answer_from_reasoning = !response->answer_from_reasoning.empty() && response->answer_from_reasoning.front();
    t.profile = response->profile;
    t.model = response->model;
    t.provider = response->provider;
    t.prompt_tokens = response->usage.prompt_tokens;
    t.completion_tokens = response->usage.completion_tokens;
    t.cost_usd = response->cost_usd;
    t.latency_s = response->latency_s;
    t.from_cache = response->from_cache;
  } else {
    t.error = response.status().message();
  }
  return t;
}

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
    if (n.empty() || !seen.insert(n).second) continue;
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
  auto resp = client.chat(req);
  llm::LlmCallTrace t = make_trace("keywords", prompt, req, resp);
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
