#include "shared.h"

#include <algorithm>

#include <spdlog/spdlog.h>

#include "nl2sql/core/thread_pool.h"
#include "nl2sql/select/external.h"

namespace nl2sql::pipeline {
using nlohmann::json;

Result<RunSettings> load_run_settings(const core::Config& config, data::Benchmark benchmark) {
  RunSettings s;
  auto seed = config.get_int("run.seed");
  if (!seed) return seed.status();
  s.seed = static_cast<uint64_t>(*seed);
  // 0 = automatic: questions in parallel up to the LLM layer's global in-flight limit (each
  // question mostly waits on the model), SQL on one thread per core.
  auto threads = config.get_int("run.threads");
  if (!threads) return threads.status();
  if (*threads < 0) return invalid_input("config key run.threads: must be >= 0 (0: automatic)");
  auto in_flight = config.get_int("llm.max_in_flight");
  if (!in_flight) return in_flight.status();
  s.threads = *threads > 0 ? static_cast<size_t>(*threads)
                           : static_cast<size_t>(std::clamp<int64_t>(*in_flight, 1, 64));
  auto sql_threads = config.get_int("run.sql_threads");
  if (!sql_threads) return sql_threads.status();
  if (*sql_threads < 0) return invalid_input("config key run.sql_threads: must be >= 0 (0: one per core)");
  s.sql_threads = *sql_threads > 0 ? static_cast<size_t>(*sql_threads) : core::default_threads();
  if (config.has("run.max_cost_usd") && !config.find("run.max_cost_usd")->is_null()) {
    auto c = config.get_number("run.max_cost_usd");
    if (!c) return c.status();
    s.max_cost_usd = *c;
  }
  if (const json* sel = config.find("run.selectors")) {
    if (!sel->is_array()) return invalid_input("config key run.selectors: expected a list of selector names");
    for (const auto& v : *sel) {
      if (!v.is_string()) return invalid_input("config key run.selectors: expected a list of selector names");
      s.selectors.push_back(v.get<std::string>());
    }
  }
  auto method = config.get_string("select.method");
  if (!method) return method.status();
  auto primary = config.get_string("run.primary_selector", *method);
  if (!primary) return primary.status();
  s.primary_selector = *primary;
  if (std::find(s.selectors.begin(), s.selectors.end(), s.primary_selector) == s.selectors.end())
    s.selectors.insert(s.selectors.begin(), s.primary_selector);
  if (const json* cp = config.find("run.curve_points")) {
    if (!cp->is_array()) return invalid_input("config key run.curve_points: expected a list of integers");
    s.curve_points.clear();
    for (const auto& v : *cp) {
      if (!v.is_number_integer() || v.get<int64_t>() < 1)
        return invalid_input("config key run.curve_points: expected positive integers");
      s.curve_points.push_back(v.get<size_t>());
    }
  }
  auto curve_sel = config.get_bool("run.curve_selector");
  if (!curve_sel) return curve_sel.status();
  s.curve_selector = *curve_sel;
  if (const json* cs = config.find("run.curve_selectors")) {
    if (!cs->is_array()) return invalid_input("config key run.curve_selectors: expected a list of selector names");
    for (const auto& v : *cs) {
      if (!v.is_string()) return invalid_input("config key run.curve_selectors: expected a list of selector names");
      const std::string name = v.get<std::string>();
      if (std::find(s.selectors.begin(), s.selectors.end(), name) == s.selectors.end())
        return invalid_input("config key run.curve_selectors: \"" + name + "\" is not in run.selectors");
      auto traits = select::method_traits(name, config);
      if (!traits) return invalid_input("config key run.curve_selectors: " + traits.status().message());
      if (traits->uses_expert_weights)
        return invalid_input("config key run.curve_selectors: \"" + name +
                             "\" learns its weights question by question and cannot be re-run on prefixes");
      if (std::find(s.curve_selectors.begin(), s.curve_selectors.end(), name) == s.curve_selectors.end())
        s.curve_selectors.push_back(name);
    }
  }
  auto repeats = config.get_int("run.curve_repeats");
  if (!repeats) return repeats.status();
  if (*repeats < 1) return invalid_input("config key run.curve_repeats: must be >= 1");
  s.curve_repeats = static_cast<size_t>(*repeats);
  s.curve_repeats_primary = s.curve_repeats;
  if (config.has("run.curve_repeats_primary") && !config.find("run.curve_repeats_primary")->is_null()) {
    auto rp = config.get_int("run.curve_repeats_primary");
    if (!rp) return rp.status();
    if (*rp < 1) return invalid_input("config key run.curve_repeats_primary: must be >= 1");
    s.curve_repeats_primary = static_cast<size_t>(*rp);
  }
  // "auto": the benchmark's official metric first (it decides correctness), relaxed beside it.
  auto eval = eval::options_from_config(
      config, benchmark == data::Benchmark::kSpider ? "spider-ts,relaxed" : "bird,relaxed");
  if (!eval) return eval.status();
  // Efficiency metrics and the judge are scored by `nl2sql eval --config` on the run's
  // predictions, not by the run's own judging.
  if (!eval->efficiency.empty() || eval->judge)
    spdlog::warn("eval.metrics: ves/rves/ves-steps/rves-steps/judge are computed by `nl2sql eval --config`, "
                 "not by `nl2sql run`; the run judges EX only");
  eval->efficiency.clear();
  eval->judge = false;
  s.eval = std::move(*eval);
  return s;
}

}  // namespace nl2sql::pipeline
