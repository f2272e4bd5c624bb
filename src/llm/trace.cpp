// LlmCallTrace JSON: stable keys; a key this build does not write is refused on read.
#include "nl2sql/llm/trace.h"

#include <nlohmann/json.hpp>

#include "nl2sql/core/json_read.h"

namespace nl2sql::llm {

using nlohmann::json;
using core::read_key;

json to_json(const LlmCallTrace& c) {
  json j = {{"stage", c.stage},
            {"template", c.template_name},
            {"template_hash", c.template_hash},
            {"profile", c.profile},
            {"model", c.model},
            {"provider", c.provider},
            {"system", c.system},
            {"prompt", c.prompt},
            {"response", c.response},
            {"error", c.error},
            {"prompt_tokens", c.prompt_tokens},
            {"completion_tokens", c.completion_tokens},
            {"cost_usd", c.cost_usd},
            {"latency_s", c.latency_s},
            {"from_cache", c.from_cache}};
  // Omitted when empty, so traces of models that do not reason read as before.
  if (!c.reasoning.empty()) j["reasoning"] = c.reasoning;
  if (c.answer_from_reasoning) j["answer_from_reasoning"] = true;
  if (c.prompt_rung > 0) j["prompt_rung"] = c.prompt_rung;
  if (c.cached_tokens) j["cached_tokens"] = *c.cached_tokens;
  if (c.reasoning_tokens) j["reasoning_tokens"] = *c.reasoning_tokens;
  if (c.temperature) j["temperature"] = *c.temperature;
  if (c.seed) j["seed"] = *c.seed;
  if (!c.request_hash.empty()) j["request_hash"] = c.request_hash;
  if (!c.shared_from.empty()) j["shared_from"] = c.shared_from;
  return j;
}

Result<LlmCallTrace> call_trace_from_json(const json& j, const std::string& where) {
  if (!j.is_object()) return invalid_input(where + ": a model call must be an object");
  NL2SQL_RETURN_IF_ERROR(core::known_keys_only(
      j, {"stage", "template", "template_hash", "profile", "model", "provider", "system", "prompt", "response",
          "error", "prompt_tokens", "completion_tokens", "cost_usd", "latency_s", "from_cache", "reasoning",
          "answer_from_reasoning", "prompt_rung", "cached_tokens", "reasoning_tokens", "temperature", "seed",
          "request_hash", "shared_from"},
      where + ", model call"));
  LlmCallTrace c;
  NL2SQL_RETURN_IF_ERROR(read_key(j, "stage", c.stage, where));
  NL2SQL_RETURN_IF_ERROR(read_key(j, "template", c.template_name, where));
  NL2SQL_RETURN_IF_ERROR(read_key(j, "template_hash", c.template_hash, where));
  NL2SQL_RETURN_IF_ERROR(read_key(j, "profile", c.profile, where));
  NL2SQL_RETURN_IF_ERROR(read_key(j, "model", c.model, where));
  NL2SQL_RETURN_IF_ERROR(read_key(j, "provider", c.provider, where));
  NL2SQL_RETURN_IF_ERROR(read_key(j, "prompt", c.prompt, where));
  NL2SQL_RETURN_IF_ERROR(read_key(j, "system", c.system, where));
  NL2SQL_RETURN_IF_ERROR(read_key(j, "response", c.response, where));
  NL2SQL_RETURN_IF_ERROR(read_key(j, "reasoning", c.reasoning, where));
  NL2SQL_RETURN_IF_ERROR(read_key(j, "answer_from_reasoning", c.answer_from_reasoning, where));
  int64_t rung = 0;
  NL2SQL_RETURN_IF_ERROR(read_key(j, "prompt_rung", rung, where));
  c.prompt_rung = static_cast<int>(rung);
  NL2SQL_RETURN_IF_ERROR(read_key(j, "error", c.error, where));
  NL2SQL_RETURN_IF_ERROR(read_key(j, "prompt_tokens", c.prompt_tokens, where));
  NL2SQL_RETURN_IF_ERROR(read_key(j, "completion_tokens", c.completion_tokens, where));
  for (auto [k, field] : {std::pair{"cached_tokens", &c.cached_tokens}, std::pair{"reasoning_tokens", &c.reasoning_tokens}})
    if (auto it = j.find(k); it != j.end() && !it->is_null()) {
      if (!it->is_number_integer()) return invalid_input(where + ": field \"" + k + "\" must be an integer");
      *field = it->get<int64_t>();
    }
  NL2SQL_RETURN_IF_ERROR(read_key(j, "cost_usd", c.cost_usd, where));
  NL2SQL_RETURN_IF_ERROR(read_key(j, "latency_s", c.latency_s, where));
  NL2SQL_RETURN_IF_ERROR(read_key(j, "from_cache", c.from_cache, where));
  if (auto it = j.find("temperature"); it != j.end() && !it->is_null()) {
    if (!it->is_number()) return invalid_input(where + ": field \"temperature\" must be a number");
    c.temperature = it->get<double>();
  }
  if (auto it = j.find("seed"); it != j.end() && !it->is_null()) {
    if (!it->is_number_integer()) return invalid_input(where + ": field \"seed\" must be an integer");
    c.seed = it->get<int64_t>();
  }
  NL2SQL_RETURN_IF_ERROR(read_key(j, "request_hash", c.request_hash, where));
  NL2SQL_RETURN_IF_ERROR(read_key(j, "shared_from", c.shared_from, where));
  return c;
}

}  // namespace nl2sql::llm
