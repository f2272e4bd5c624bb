// UsageCarry (run_parts.h).
#include <spdlog/spdlog.h>

#include "nl2sql/run/run_data.h"

#include "run_parts.h"

namespace nl2sql::pipeline {
namespace {

using nlohmann::json;

json usage_json(const run::StageUsage& u) { return run::run_usage_delta(u); }

}  // namespace

// `u` holds run-usage counts by name (run::run_usage_delta); a negative sign takes them back.
void UsageCarry::add(const std::string& question_id, const std::string& stage, const json& u, int sign) {
  json delta = json::object();
  for (const auto& [k, v] : u.items()) {
    if (v.is_number_integer()) delta[k] = sign * v.get<int64_t>();
    else if (v.is_number()) delta[k] = sign * v.get<double>();
  }
  if (auto st = run::add_run_usage(store_, stage, delta); !st)
    spdlog::warn("run store: question {}'s spent usage was not recorded: {}", question_id, st.message());
}

void UsageCarry::carry(const run::QuestionRecord& r, const StageTest& counted, const StageTest& provisional) {
  std::lock_guard lock(mu_);
  json pending = json::object();
  for (const auto& [stage, u] : r.usage) {
    const std::string pipeline_stage = stage == "curves" ? "select" : stage;
    if (counted(pipeline_stage)) continue;
    if (u.calls == 0 && u.prompt_tokens == 0 && u.completion_tokens == 0) continue;
    add(r.question_id, stage, usage_json(u), 1);
    if (provisional(pipeline_stage)) pending[stage] = usage_json(u);
  }
  if (pending.empty()) return;
  auto all = store_.get_meta(run::kProvisionalUsageKey);
  json marks = all && *all && (**all).is_object() ? **all : json::object();
  for (auto& [stage, u] : pending.items()) {
    json& m = marks[r.question_id][stage];
    if (!m.is_object()) m = json::object();
    for (const auto& [f, v] : u.items()) {
      if (v.is_number_integer()) m[f] = m.value(f, int64_t{0}) + v.get<int64_t>();
      else if (v.is_number()) m[f] = m.value(f, 0.0) + v.get<double>();
    }
  }
  if (auto st = store_.set_meta(run::kProvisionalUsageKey, marks); !st)
    spdlog::warn("run store: question {}'s provisional usage was not recorded: {}", r.question_id, st.message());
}

void UsageCarry::settle(const std::string& question_id) {
  std::lock_guard lock(mu_);
  auto all = store_.get_meta(run::kProvisionalUsageKey);
  if (!all || !*all || !(**all).is_object() || !(**all).contains(question_id)) return;
  json marks = **all;
  for (const auto& [stage, u] : marks[question_id].items()) add(question_id, stage, u, -1);
  marks.erase(question_id);
  if (auto st = store_.set_meta(run::kProvisionalUsageKey, marks); !st)
    spdlog::warn("run store: question {}'s provisional usage was not settled: {}", question_id, st.message());
}

}  // namespace nl2sql::pipeline
