#include "nl2sql/run/question_record.h"

#include <cstdlib>

#include "nl2sql/core/json_read.h"

namespace nl2sql::run {
using nlohmann::json;
using core::known_keys_only;
using core::read_key;

namespace {

// An optional bool: true / false, or null / absent as nullopt.
Status read_tri(const json& j, const char* key, std::optional<bool>& out, const std::string& where) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return Status::ok();
  if (!it->is_boolean()) return invalid_input(where + ": key \"" + key + "\" must be true, false or null");
  out = it->get<bool>();
  return Status::ok();
}

json tri_json(const std::optional<bool>& v) { return v ? json(*v) : json(nullptr); }

// An object member, checked to be an object (or absent / null, read as an empty object).
Result<const json*> object_at(const json& j, const char* key, const std::string& where) {
  static const json kEmpty = json::object();
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return &kEmpty;
  if (!it->is_object()) return invalid_input(where + ": key \"" + key + "\" must be an object");
  return &*it;
}

Result<const json*> array_at(const json& j, const char* key, const std::string& where) {
  static const json kEmpty = json::array();
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return &kEmpty;
  if (!it->is_array()) return invalid_input(where + ": key \"" + key + "\" must be a list");
  return &*it;
}

json usage_json(const StageUsage& u) {
  json out = {{"calls", u.calls},         {"prompt_tokens", u.prompt_tokens},
              {"completion_tokens", u.completion_tokens}, {"cost_usd", u.cost_usd},
              {"latency_s", u.latency_s}};
  // Written only when some call reported them, so records of servers that do not keep their form.
  if (u.calls_reporting_cached > 0) {
    out["cached_tokens"] = u.cached_tokens;
    out["calls_reporting_cached"] = u.calls_reporting_cached;
  }
  if (u.calls_reporting_reasoning > 0) {
    out["reasoning_tokens"] = u.reasoning_tokens;
    out["calls_reporting_reasoning"] = u.calls_reporting_reasoning;
  }
  if (u.degraded_prompts > 0) out["degraded_prompts"] = u.degraded_prompts;
  if (u.cache_hits > 0) {
    out["cache_hits"] = u.cache_hits;
    out["cache_prompt_tokens"] = u.cache_prompt_tokens;
    out["cache_completion_tokens"] = u.cache_completion_tokens;
    out["saved_usd"] = u.saved_usd;
  }
  return out;
}

Result<StageUsage> usage_from_json(const json& j, const std::string& where) {
  NL2SQL_RETURN_IF_ERROR(known_keys_only(
      j, {"calls", "prompt_tokens", "completion_tokens", "cost_usd", "latency_s", "cached_tokens",
          "calls_reporting_cached", "reasoning_tokens", "calls_reporting_reasoning", "degraded_prompts", "cache_hits",
          "cache_prompt_tokens", "cache_completion_tokens", "saved_usd"},
      where));
  StageUsage u;
  NL2SQL_RETURN_IF_ERROR(read_key(j, "calls", u.calls, where));
  NL2SQL_RETURN_IF_ERROR(read_key(j, "prompt_tokens", u.prompt_tokens, where));
  NL2SQL_RETURN_IF_ERROR(read_key(j, "completion_tokens", u.completion_tokens, where));
  NL2SQL_RETURN_IF_ERROR(read_key(j, "cost_usd", u.cost_usd, where));
  NL2SQL_RETURN_IF_ERROR(read_key(j, "latency_s", u.latency_s, where));
  NL2SQL_RETURN_IF_ERROR(read_key(j, "cached_tokens", u.cached_tokens, where));
  NL2SQL_RETURN_IF_ERROR(read_key(j, "calls_reporting_cached", u.calls_reporting_cached, where));
  NL2SQL_RETURN_IF_ERROR(read_key(j, "reasoning_tokens", u.reasoning_tokens, where));
  NL2SQL_RETURN_IF_ERROR(read_key(j, "calls_reporting_reasoning", u.calls_reporting_reasoning, where));
  NL2SQL_RETURN_IF_ERROR(read_key(j, "degraded_prompts", u.degraded_prompts, where));
  NL2SQL_RETURN_IF_ERROR(read_key(j, "cache_hits", u.cache_hits, where));
  NL2SQL_RETURN_IF_ERROR(read_key(j, "cache_prompt_tokens", u.cache_prompt_tokens, where));
  NL2SQL_RETURN_IF_ERROR(read_key(j, "cache_completion_tokens", u.cache_completion_tokens, where));
  NL2SQL_RETURN_IF_ERROR(read_key(j, "saved_usd", u.saved_usd, where));
  return u;
}

json verdict_json(const Verdict& v) {
  json out = {{"verdicts", v.verdicts},         {"outcome", v.outcome},
              {"soft_f1", v.soft_f1},           {"pred_status", v.pred_status},
              {"error", v.error},               {"gold_status", v.gold_status},
              {"gold_error", v.gold_error},     {"gold_unusable", v.gold_unusable},
              {"gold_tie_dependent", v.gold_tie_dependent},
              {"pred_rows", v.pred_rows},       {"gold_rows", v.gold_rows},
              {"difficulty", v.difficulty}};
  if (v.suite_databases > 1) {
    out["test_suite"] = {{"databases", v.suite_databases}, {"original", v.suite_original}};
    if (!v.suite_failed_on.empty()) {
      out["test_suite"]["failed_on"] = v.suite_failed_on;
      out["test_suite"]["why"] = v.suite_failure;
    }
  }
  return out;
}

Result<Verdict> verdict_from_json(const json& j, const std::string& where) {
  if (!j.is_object()) return invalid_input(where + ": key \"verdict\" must be an object or null");
  Verdict v;
  const std::string w = where + ", verdict";
  NL2SQL_RETURN_IF_ERROR(known_keys_only(
      j, {"verdicts", "outcome", "soft_f1", "pred_status", "error", "gold_status", "gold_error", "gold_unusable",
          "gold_tie_dependent", "pred_rows", "gold_rows", "difficulty", "test_suite"},
      w));
  NL2SQL_RETURN_IF_ERROR(read_key(j, "verdicts", v.verdicts, w));
  NL2SQL_RETURN_IF_ERROR(read_key(j, "outcome", v.outcome, w));
  NL2SQL_RETURN_IF_ERROR(read_key(j, "soft_f1", v.soft_f1, w));
  NL2SQL_RETURN_IF_ERROR(read_key(j, "pred_status", v.pred_status, w));
  NL2SQL_RETURN_IF_ERROR(read_key(j, "error", v.error, w));
  NL2SQL_RETURN_IF_ERROR(read_key(j, "gold_status", v.gold_status, w));
  NL2SQL_RETURN_IF_ERROR(read_key(j, "gold_error", v.gold_error, w));
  NL2SQL_RETURN_IF_ERROR(read_key(j, "gold_unusable", v.gold_unusable, w));
  NL2SQL_RETURN_IF_ERROR(read_key(j, "gold_tie_dependent", v.gold_tie_dependent, w));
  NL2SQL_RETURN_IF_ERROR(read_key(j, "pred_rows", v.pred_rows, w));
  NL2SQL_RETURN_IF_ERROR(read_key(j, "gold_rows", v.gold_rows, w));
  NL2SQL_RETURN_IF_ERROR(read_key(j, "difficulty", v.difficulty, w));
  if (j.contains("test_suite")) {
    const json& t = j["test_suite"];
    if (!t.is_object()) return invalid_input(w + ": key \"test_suite\" must be an object");
    const std::string tw = w + ", test_suite";
    NL2SQL_RETURN_IF_ERROR(known_keys_only(t, {"databases", "original", "failed_on", "why"}, tw));
    NL2SQL_RETURN_IF_ERROR(read_key(t, "databases", v.suite_databases, tw));
    NL2SQL_RETURN_IF_ERROR(read_key(t, "original", v.suite_original, tw));
    NL2SQL_RETURN_IF_ERROR(read_key(t, "failed_on", v.suite_failed_on, tw));
    NL2SQL_RETURN_IF_ERROR(read_key(t, "why", v.suite_failure, tw));
  }
  return v;
}

json candidate_json(const CandidateRecord& c) {
  json out = generate::to_json(static_cast<const generate::Candidate&>(c));
  if (c.judged) {
    const auto& g = *c.judged;
    out["correct"] = tri_json(g.correct);
    out["cluster"] = g.cluster;
    out["executable_before_fix"] = g.executable_before_fix;
    out["executable_after_fix"] = g.executable_after_fix;
    out["verdict"] = {{"outcome", g.outcome}, {"verdicts", g.verdicts}};
  }
  return out;
}

// The judgement keys, split off the generate layer's trace.
constexpr const char* kJudgementKeys[] = {"correct", "cluster", "executable_before_fix",
                                          "executable_after_fix", "verdict"};

Result<CandidateRecord> candidate_from_json(const json& j, const std::string& where) {
  if (!j.is_object()) return invalid_input(where + ": each candidate must be an object");
  json trace = j;
  for (const char* k : kJudgementKeys) trace.erase(k);
  auto cand = generate::candidate_from_json(trace);
  if (!cand) return cand.status().with_context(where);
  CandidateRecord c;
  static_cast<generate::Candidate&>(c) = std::move(*cand);
  const std::string w = where + ", candidate " + (c.id.empty() ? "?" : c.id);
  bool judged = false;
  for (const char* k : kJudgementKeys) judged = judged || j.contains(k);
  if (judged) {
    CandidateRecord::Judgement g;
    NL2SQL_RETURN_IF_ERROR(read_tri(j, "correct", g.correct, w));
    NL2SQL_RETURN_IF_ERROR(read_key(j, "cluster", g.cluster, w));
    NL2SQL_RETURN_IF_ERROR(read_key(j, "executable_before_fix", g.executable_before_fix, w));
    NL2SQL_RETURN_IF_ERROR(read_key(j, "executable_after_fix", g.executable_after_fix, w));
    auto v = object_at(j, "verdict", w);
    if (!v) return v.status();
    NL2SQL_RETURN_IF_ERROR(known_keys_only(**v, {"outcome", "verdicts"}, w + ", verdict"));
    NL2SQL_RETURN_IF_ERROR(read_key(**v, "outcome", g.outcome, w + ", verdict"));
    NL2SQL_RETURN_IF_ERROR(read_key(**v, "verdicts", g.verdicts, w + ", verdict"));
    c.judged = std::move(g);
  }
  return c;
}

json calls_json(const std::vector<llm::LlmCallTrace>& calls) {
  json out = json::array();
  for (const auto& c : calls) out.push_back(llm::to_json(c));
  return out;
}

Result<std::vector<llm::LlmCallTrace>> calls_from_json(const json& j, const std::string& where) {
  if (!j.is_array()) return invalid_input(where + " must be a list");
  std::vector<llm::LlmCallTrace> out;
  for (const auto& c : j) {
    auto call = llm::call_trace_from_json(c, where);
    if (!call) return call.status();
    out.push_back(std::move(*call));
  }
  return out;
}

}  // namespace

LlmFaults& LlmFaults::operator+=(const LlmFaults& o) {
  failed_calls += o.failed_calls;
  retries += o.retries;
  parse_failures += o.parse_failures;
  for (const auto& [k, v] : o.failed_by_kind) failed_by_kind[k] += v;
  for (const auto& [k, v] : o.parse_failures_by_stage) parse_failures_by_stage[k] += v;
  return *this;
}

json to_json(const LlmFaults& f) {
  return {{"failed_calls", f.failed_calls},
          {"retries", f.retries},
          {"failed_by_kind", f.failed_by_kind},
          {"parse_failures", f.parse_failures},
          {"parse_failures_by_stage", f.parse_failures_by_stage}};
}

Result<LlmFaults> faults_from_json(const json& j, const std::string& where) {
  LlmFaults f;
  if (j.is_null()) return f;
  if (!j.is_object()) return invalid_input(where + ": key \"llm_faults\" must be an object");
  const std::string w = where + ", llm_faults";
  NL2SQL_RETURN_IF_ERROR(known_keys_only(
      j, {"failed_calls", "retries", "parse_failures", "failed_by_kind", "parse_failures_by_stage"}, w));
  NL2SQL_RETURN_IF_ERROR(read_key(j, "failed_calls", f.failed_calls, w));
  NL2SQL_RETURN_IF_ERROR(read_key(j, "retries", f.retries, w));
  NL2SQL_RETURN_IF_ERROR(read_key(j, "parse_failures", f.parse_failures, w));
  NL2SQL_RETURN_IF_ERROR(read_key(j, "failed_by_kind", f.failed_by_kind, w));
  NL2SQL_RETURN_IF_ERROR(read_key(j, "parse_failures_by_stage", f.parse_failures_by_stage, w));
  return f;
}

json to_json(const SelectionRecord& s) {
  json out = {{"chosen", s.chosen},           {"candidate_id", s.candidate_id},
              {"sql", s.sql},                 {"correct", tri_json(s.correct)},
              {"llm_calls", s.llm_calls},     {"cost_usd", s.cost_usd},
              {"latency_s", s.latency_s},     {"explanation", select::to_json(s.explanation)}};
  if (s.calls) out["calls"] = calls_json(*s.calls);
  return out;
}

Result<SelectionRecord> selection_from_json(const json& j, const std::string& selector, const std::string& where) {
  if (!j.is_object()) return invalid_input(where + " must be an object");
  NL2SQL_RETURN_IF_ERROR(known_keys_only(j, {"chosen", "candidate_id", "sql", "correct", "llm_calls", "cost_usd",
                                             "latency_s", "explanation", "calls"},
                                         where));
  SelectionRecord s;
  NL2SQL_RETURN_IF_ERROR(read_key(j, "chosen", s.chosen, where));
  NL2SQL_RETURN_IF_ERROR(read_key(j, "candidate_id", s.candidate_id, where));
  NL2SQL_RETURN_IF_ERROR(read_key(j, "sql", s.sql, where));
  NL2SQL_RETURN_IF_ERROR(read_tri(j, "correct", s.correct, where));
  NL2SQL_RETURN_IF_ERROR(read_key(j, "llm_calls", s.llm_calls, where));
  NL2SQL_RETURN_IF_ERROR(read_key(j, "cost_usd", s.cost_usd, where));
  NL2SQL_RETURN_IF_ERROR(read_key(j, "latency_s", s.latency_s, where));
  if (auto it = j.find("explanation"); it != j.end()) {
    auto e = select::explanation_from_json(*it, selector, where);
    if (!e) return e.status();
    s.explanation = std::move(*e);
  }
  if (auto it = j.find("calls"); it != j.end() && !it->is_null()) {
    auto calls = calls_from_json(*it, where + ", calls");
    if (!calls) return calls.status();
    s.calls = std::move(*calls);
  }
  return s;
}

bool operator==(const CandidateRecord& a, const CandidateRecord& b) { return candidate_json(a) == candidate_json(b); }
bool operator==(const SelectionRecord& a, const SelectionRecord& b) { return to_json(a) == to_json(b); }
bool operator==(const QuestionRecord& a, const QuestionRecord& b) { return to_json(a) == to_json(b); }

bool QuestionRecord::correct(const std::string& metric) const {
  if (!ok || !verdict) return false;
  auto it = verdict->verdicts.find(metric);
  // A verdict without the metric (an older run): the evaluator's outcome RES3 means correct
  // under its primary metric.
  if (it == verdict->verdicts.end()) return verdict->outcome == "RES3";
  return it->second;
}

json to_json(const QuestionRecord& r) {
  json out;
  out["question_id"] = r.question_id;
  out["index"] = r.index;
  out["db_id"] = r.db_id;
  out["question"] = r.question;
  out["evidence"] = r.evidence;
  out["difficulty"] = r.difficulty;
  out["gold_sql"] = r.gold_sql;
  out["status"] = r.ok ? "ok" : "error";
  out["error"] = r.error;
  out["features"] = r.features;
  if (r.context) out["context"] = context::to_json(*r.context);
  json cands = json::array();
  for (const auto& c : r.candidates) cands.push_back(candidate_json(c));
  out["candidates"] = std::move(cands);
  json sels = json::object();
  for (const auto& [name, s] : r.selections) sels[name] = to_json(s);
  out["selections"] = std::move(sels);
  out["primary_selector"] = r.primary_selector;
  out["prediction"] = r.prediction;
  out["verdict"] = r.verdict ? verdict_json(*r.verdict) : json(nullptr);
  if (r.bounds) out["bounds"] = {{"oracle", r.bounds->oracle}, {"adversarial", r.bounds->adversarial}};
  // The evaluated part: always written for an answered question, for a failed one when filled.
  if (r.ok || !r.curves.empty()) {
    json curves = json::object();
    for (const auto& [k, p] : r.curves) {
      json point = {{"upper", tri_json(p.upper)}, {"lower", tri_json(p.lower)},
                    {"self_consistency", tri_json(p.self_consistency)}, {"selector", tri_json(p.selector)}};
      if (!p.selectors.empty()) {
        point["selectors"] = p.selectors;
        point["contested"] = tri_json(p.contested);
      }
      curves[std::to_string(k)] = std::move(point);
    }
    out["curves"] = std::move(curves);
  }
  if (r.ok || !r.usage.empty()) {
    json usage = json::object();
    for (const auto& [stage, u] : r.usage) usage[stage] = usage_json(u);
    out["usage"] = std::move(usage);
  }
  out["llm_faults"] = to_json(r.llm_faults);
  if (r.ok || !r.latency_s.empty()) out["latency_s"] = r.latency_s;
  if (r.weights) out["weights"] = *r.weights;
  if (!r.curve_calls.empty()) out["curve_calls"] = calls_json(r.curve_calls);
  return out;
}

std::vector<RecordedCall> recorded_calls(const QuestionRecord& r) {
  std::vector<RecordedCall> out;
  auto add_all = [&](const std::vector<llm::LlmCallTrace>& calls, const std::string& stage, const std::string& owner) {
    for (const auto& c : calls) out.push_back({stage, owner, &c});
  };
  if (r.context) add_all(r.context->calls, "context", "");
  for (const auto& c : r.candidates) {
    add_all(c.calls, "generate", c.id);
    for (const auto& round : c.fix_rounds) out.push_back({"fix", c.id, &round.call});
  }
  for (const auto& [name, s] : r.selections)
    if (s.calls) add_all(*s.calls, "select", name);
  add_all(r.curve_calls, "curves", "");
  return out;
}

Result<QuestionRecord> record_from_json(const json& j, int version) {
  if (version < 1 || version > kRecordVersion)
    return invalid_input("record version " + std::to_string(version) + " is not one this build reads (1.." +
                         std::to_string(kRecordVersion) + ")");
  if (!j.is_object()) return invalid_input("a final record must be a JSON object");
  QuestionRecord r;
  auto id = j.find("question_id");
  if (id == j.end() || !id->is_string()) return invalid_input("final record without a string \"question_id\"");
  r.question_id = id->get<std::string>();
  const std::string where = "question " + r.question_id;
  auto index = j.find("index");
  if (index == j.end() || !index->is_number_integer())
    return invalid_input(where + ": final record without an integer \"index\"");
  r.index = index->get<int64_t>();
  NL2SQL_RETURN_IF_ERROR(known_keys_only(
      j, {"question_id", "index", "db_id", "question", "evidence", "difficulty", "gold_sql", "status", "error",
          "features", "context", "candidates", "selections", "primary_selector", "prediction", "verdict", "bounds",
          "curves", "usage", "llm_faults", "latency_s", "weights", "curve_calls"},
      where + ", final record"));
  NL2SQL_RETURN_IF_ERROR(read_key(j, "db_id", r.db_id, where));
  NL2SQL_RETURN_IF_ERROR(read_key(j, "question", r.question, where));
  NL2SQL_RETURN_IF_ERROR(read_key(j, "evidence", r.evidence, where));
  NL2SQL_RETURN_IF_ERROR(read_key(j, "difficulty", r.difficulty, where));
  NL2SQL_RETURN_IF_ERROR(read_key(j, "gold_sql", r.gold_sql, where));
  std::string status = "ok";
  if (auto it = j.find("status"); it != j.end() && !it->is_null()) {
    if (!it->is_string()) return invalid_input(where + ": \"status\" must be \"ok\" or \"error\"");
    status = it->get<std::string>();
  }
  r.ok = status == "ok";
  NL2SQL_RETURN_IF_ERROR(read_key(j, "error", r.error, where));
  if (auto f = array_at(j, "features", where); !f) return f.status();
  else
    for (const auto& x : **f)
      if (x.is_string()) r.features.push_back(x.get<std::string>());
  if (auto it = j.find("context"); it != j.end() && !it->is_null()) {
    auto ctx = context::context_record_from_json(*it, where + ", context");
    if (!ctx) return ctx.status();
    r.context = std::move(*ctx);
  }

  auto cands = array_at(j, "candidates", where);
  if (!cands) return cands.status();
  for (const auto& c : **cands) {
    auto cand = candidate_from_json(c, where);
    if (!cand) return cand.status();
    r.candidates.push_back(std::move(*cand));
  }
  auto sels = object_at(j, "selections", where);
  if (!sels) return sels.status();
  for (const auto& [name, s] : (*sels)->items()) {
    auto sel = selection_from_json(s, name, where + ", selection \"" + name + "\"");
    if (!sel) return sel.status();
    r.selections.emplace(name, std::move(*sel));
  }
  NL2SQL_RETURN_IF_ERROR(read_key(j, "primary_selector", r.primary_selector, where));
  NL2SQL_RETURN_IF_ERROR(read_key(j, "prediction", r.prediction, where));
  if (auto it = j.find("verdict"); it != j.end() && !it->is_null()) {
    auto v = verdict_from_json(*it, where);
    if (!v) return v.status();
    r.verdict = std::move(*v);
  }
  if (auto it = j.find("bounds"); it != j.end() && !it->is_null()) {
    if (!it->is_object()) return invalid_input(where + ": \"bounds\" must be an object");
    Bounds b;
    NL2SQL_RETURN_IF_ERROR(known_keys_only(*it, {"oracle", "adversarial"}, where + ", bounds"));
    NL2SQL_RETURN_IF_ERROR(read_key(*it, "oracle", b.oracle, where + ", bounds"));
    NL2SQL_RETURN_IF_ERROR(read_key(*it, "adversarial", b.adversarial, where + ", bounds"));
    r.bounds = b;
  }
  auto curves = object_at(j, "curves", where);
  if (!curves) return curves.status();
  for (const auto& [k, v] : (*curves)->items()) {
    char* end = nullptr;
    long long kk = std::strtoll(k.c_str(), &end, 10);
    if (k.empty() || *end != '\0' || kk <= 0)
      return invalid_input(where + ": curve point \"" + k + "\" is not a positive number of candidates");
    if (!v.is_object()) return invalid_input(where + ": curve point \"" + k + "\" must be an object");
    CurvePoint p;
    const std::string w = where + ", curve point " + k;
    NL2SQL_RETURN_IF_ERROR(
        known_keys_only(v, {"upper", "lower", "self_consistency", "selector", "selectors", "contested"}, w));
    NL2SQL_RETURN_IF_ERROR(read_tri(v, "upper", p.upper, w));
    NL2SQL_RETURN_IF_ERROR(read_tri(v, "lower", p.lower, w));
    NL2SQL_RETURN_IF_ERROR(read_tri(v, "self_consistency", p.self_consistency, w));
    NL2SQL_RETURN_IF_ERROR(read_tri(v, "selector", p.selector, w));
    if (auto sel = v.find("selectors"); sel != v.end()) {
      if (!sel->is_object()) return invalid_input(w + ": \"selectors\" must be an object");
      for (const auto& [name, picks] : sel->items()) {
        if (!picks.is_array()) return invalid_input(w + ": selectors." + name + " must be a list of booleans");
        auto& out = p.selectors[name];
        for (const auto& b : picks) {
          if (!b.is_boolean()) return invalid_input(w + ": selectors." + name + " must be a list of booleans");
          out.push_back(b.get<bool>());
        }
      }
      NL2SQL_RETURN_IF_ERROR(read_tri(v, "contested", p.contested, w));
    }
    r.curves[kk] = p;
  }
  auto usage = object_at(j, "usage", where);
  if (!usage) return usage.status();
  for (const auto& [stage, u] : (*usage)->items()) {
    auto su = usage_from_json(u, where + ", usage \"" + stage + "\"");
    if (!su) return su.status();
    r.usage[stage] = *su;
  }
  if (auto it = j.find("llm_faults"); it != j.end()) {
    auto f = faults_from_json(*it, where);
    if (!f) return f.status();
    r.llm_faults = std::move(*f);
  }
  if (auto lat = object_at(j, "latency_s", where); !lat) return lat.status();
  NL2SQL_RETURN_IF_ERROR(read_key(j, "latency_s", r.latency_s, where));
  if (auto it = j.find("weights"); it != j.end() && !it->is_null()) {
    std::map<std::string, double> w;
    NL2SQL_RETURN_IF_ERROR(read_key(j, "weights", w, where));
    r.weights = std::move(w);
  }
  if (auto it = j.find("curve_calls"); it != j.end() && !it->is_null()) {
    auto calls = calls_from_json(*it, where + ", curve_calls");
    if (!calls) return calls.status();
    r.curve_calls = std::move(*calls);
  }
  return r;
}

Result<int> record_version(const json& manifest) {
  auto it = manifest.find("record_version");
  if (it == manifest.end() || it->is_null()) return 1;
  if (!it->is_number_integer()) return invalid_input("manifest: \"record_version\" must be an integer");
  const int64_t v = it->get<int64_t>();
  if (v < 1 || v > kRecordVersion)
    return invalid_input("the run's records are version " + std::to_string(v) + "; this build of nl2sql reads up to version " +
                         std::to_string(kRecordVersion) + " (written by a newer nl2sql? use that version to read it)");
  return static_cast<int>(v);
}

}  // namespace nl2sql::run
