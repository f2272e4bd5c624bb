#include "nl2sql/context/llm_calls.h"

#include <unordered_set>

#include "nl2sql/context/text_match.h"
#include "nl2sql/llm/client.h"

namespace nl2sql::context {
using nlohmann::json;

namespace {

std::optional<json> try_parse(const std::string& s) {
  json j = json::parse(s, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return std::nullopt;
  return j;
}

}  // namespace

std::optional<json> json_in_answer(const std::string& answer) {
  // Fenced blocks, last first: models put the final answer last.
  std::vector<std::string> blocks;
  for (size_t p = answer.find("```"); p != std::string::npos;) {
    size_t body = answer.find('\n', p + 3);
    if (body == std::string::npos) break;
    size_t end = answer.find("```", body + 1);
    if (end == std::string::npos) break;
    blocks.push_back(answer.substr(body + 1, end - body - 1));
    p = answer.find("```", end + 3);
  }
  for (auto it = blocks.rbegin(); it != blocks.rend(); ++it)
    if (auto j = try_parse(*it)) return j;
  if (auto j = try_parse(answer)) return j;
  // Prose around a bare value: the outermost object, else the outermost list.
  for (auto [open, close] : {std::pair{'{', '}'}, std::pair{'[', ']'}}) {
    size_t a = answer.find(open), b = answer.rfind(close);
    if (a != std::string::npos && b != std::string::npos && b > a)
      if (auto j = try_parse(answer.substr(a, b - a + 1))) return j;
  }
  return std::nullopt;
}

generate::LlmCallTrace make_trace(const std::string& stage, const llm::PromptTemplate& prompt,
                                  const llm::ChatRequest& request,
                                  const Result<llm::ChatResponse>& response) {
  generate::LlmCallTrace t;
  t.stage = stage;
  t.template_name = prompt.name();
  t.template_hash = prompt.hash();
  for (const auto& m : request.messages) {
    if (m.role == "system") t.system = m.content;
    if (m.role == "user") t.prompt = m.content;
  }
  if (response) {
    t.response = response->text();
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
  auto j = json_in_answer(answer);
  if (!j) return invalid_input(where + ": keyword answer is not JSON");
  const json* list = nullptr;
  if (j->is_array()) list = &*j;
  else if (j->is_object() && j->contains("keywords") && (*j)["keywords"].is_array()) list = &(*j)["keywords"];
  if (!list) return invalid_input(where + ": keyword answer has no \"keywords\" list");
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
                                              generate::LlmCallTrace* trace) {
  auto text = prompt.render({{"question", question}, {"evidence", evidence}});
  if (!text) return text.status();
  llm::ChatRequest req;
  req.role = "keywords";
  req.stage = "keywords";
  req.question_id = question_id;
  req.template_hash = prompt.hash();
  req.messages = {{"user", *text}};
  req.sim.task = llm::SimTask::kKeywords;
  req.sim.question_id = question_id;
  req.sim.question = question;
  req.sim.evidence = evidence;
  auto resp = client.chat(req);
  generate::LlmCallTrace t = make_trace("keywords", prompt, req, resp);
  Result<std::vector<std::string>> out = resp ? parse_keyword_answer(resp->text(), "question " + question_id)
                                              : Result<std::vector<std::string>>(resp.status());
  if (resp && !out) t.error = out.status().message();
  if (trace) *trace = std::move(t);
  return out;
}

}  // namespace nl2sql::context
