// eval.* config keys → EvalOptions (see evaluator.h).
#include "nl2sql/eval/evaluator.h"

#include <algorithm>

namespace nl2sql::eval {

Result<EvalOptions> options_from_config(const core::Config& config, const std::string& auto_metrics) {
  EvalOptions o;
  std::string metrics = "auto";
  if (const nlohmann::json* m = config.find("eval.metrics")) {
    if (m->is_string()) {
      metrics = m->get<std::string>();
    } else if (m->is_array()) {
      metrics.clear();
      for (const auto& v : *m) {
        if (!v.is_string()) return invalid_input("config key eval.metrics: expected metric names");
        metrics += (metrics.empty() ? "" : ",") + v.get<std::string>();
      }
    } else {
      return invalid_input("config key eval.metrics: expected a metric name or a list of them");
    }
  }
  if (metrics == "auto") metrics = auto_metrics;
  auto parsed = parse_metric_spec(metrics);
  if (!parsed) return invalid_input("config key eval.metrics: " + parsed.status().message());
  o.metrics = parsed->metrics;
  o.efficiency = parsed->efficiency;
  o.judge = parsed->judge;
  if (o.metrics.empty()) {  // efficiency metrics or the judge alone: EX beside them, as "auto" gives it
    auto defaults = parse_metrics(auto_metrics);
    if (!defaults) return invalid_input("config key eval.metrics: " + defaults.status().message());
    o.metrics = *defaults;
  }
  auto repeats = config.get_int("eval.ves_repeats");
  if (!repeats) return repeats.status();
  o.ves_repeats = static_cast<int>(*repeats);
  auto timeout = config.get_number("eval.timeout_s");
  if (!timeout) return timeout.status();
  o.pred_limits.timeout_s = *timeout;
  o.gold_limits.timeout_s = *timeout;
  auto row_cap = config.get_int("eval.row_cap");
  if (!row_cap) return row_cap.status();
  o.pred_limits.row_cap = static_cast<size_t>(std::max<int64_t>(0, *row_cap));
  auto keep_distinct = config.get_bool("eval.keep_distinct");
  if (!keep_distinct) return keep_distinct.status();
  o.keep_distinct = *keep_distinct;
  auto check_ties = config.get_bool("eval.check_ties");
  if (!check_ties) return check_ties.status();
  o.check_ties = *check_ties;
  auto suite = config.get_string("eval.test_suite");
  if (!suite) return suite.status();
  o.test_suite = *suite;
  auto plug = config.get_bool("eval.plug_value");
  if (!plug) return plug.status();
  o.plug_value = *plug;
  return o;
}

}  // namespace nl2sql::eval
