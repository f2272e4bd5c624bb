// Traced model calls (see model_call.h).
#include "nl2sql/generate/model_call.h"

#include "nl2sql/llm/client.h"

namespace nl2sql::generate {

Result<ModelAnswer> call_model(llm::Client& client, const ModelCall& call) {
  ModelAnswer out;
  out.trace.stage = call.stage;
  if (call.prompt == nullptr) return internal_error("call_model: no prompt template");
  out.trace.template_name = call.prompt->name();
  out.trace.template_hash = call.prompt->hash();
  auto rendered = call.prompt->render(call.values);
  if (!rendered) return rendered.status();
  out.trace.prompt = *rendered;
  out.trace.system = call.system;

  llm::ChatRequest req;
  req.role = call.role;
  req.profile = call.profile;
  if (!call.system.empty()) req.messages.push_back({"system", call.system});
  req.messages.push_back({"user", *rendered});
  req.temperature = call.temperature;
  req.sample_index = call.sample_index;
  req.template_hash = call.prompt->hash();
  req.stage = call.stage;
  req.question_id = call.question_id;
  req.sim = call.sim;
  if (auto p = client.settings().resolve(call.role, call.profile); p) {
    out.trace.profile = (*p)->name;
    out.trace.model = (*p)->model;
    out.trace.provider = (*p)->provider;
  }
  auto r = client.chat(req);
  if (!r) {
    auto kind = llm::call_error_kind(r.status());
    if (kind == llm::CallErrorKind::kCancelled || kind == llm::CallErrorKind::kConfig ||
        r.status().code() == ErrorCode::kCancelled)
      return r.status();
    out.trace.error = r.status().message();
    return out;
  }
  out.ok = true;
  out.text = r->text();
  out.trace.response = out.text;
  out.trace.profile = r->profile.empty() ? out.trace.profile : r->profile;
  out.trace.model = r->model.empty() ? out.trace.model : r->model;
  out.trace.provider = r->provider;
  out.trace.prompt_tokens = r->usage.prompt_tokens;
  out.trace.completion_tokens = r->usage.completion_tokens;
  out.trace.cost_usd = r->cost_usd;
  out.trace.latency_s = r->latency_s;
  out.trace.from_cache = r->from_cache;
  return out;
}

llm::SimContext sim_generate_context(const data::Question& q, const std::string& generator,
                                     int64_t sample_index) {
  llm::SimContext s;
  s.task = llm::SimTask::kGenerate;
  s.question_id = q.question_id;
  s.question = q.question;
  s.evidence = q.evidence;
  s.gold_sql = q.gold_sql;
  s.db_id = q.db_id;
  s.difficulty = q.difficulty;
  s.generator = generator;
  s.sample_index = sample_index;
  return s;
}

}  // namespace nl2sql::generate
