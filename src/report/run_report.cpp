#include "nl2sql/report/run_report.h"
#include "nl2sql/report/prefix_share.h"
#include "nl2sql/run/run_data.h"

#include <algorithm>
#include <array>
#include <cstdlib>
#include <cmath>
#include <map>
#include <set>

#include <fmt/format.h>

#include "nl2sql/core/build_info.h"
#include "nl2sql/core/files.h"
#include "nl2sql/core/hash.h"
#include "nl2sql/core/text.h"
#include "nl2sql/core/thread_pool.h"
#include "nl2sql/eval/evaluator.h"
#include "nl2sql/eval/report.h"
#include "nl2sql/run/run_lock.h"

namespace nl2sql::report {
using nlohmann::json;

namespace {

const std::vector<std::string> kStages = {"context", "generate", "fix", "select", "eval", "total"};

double pct(size_t k, size_t n) { return n ? 100.0 * static_cast<double>(k) / static_cast<double>(n) : 0.0; }

// {n, correct, ex, ci95} for 0/1 outcomes; the bootstrap seed also depends on the group's name
// so groups of equal size do not share resamples.
json group_stats(const std::vector<int>& xs, const ReportOptions& o, const std::string& name) {
  size_t k = 0;
  for (int x : xs) k += static_cast<size_t>(x);
  auto ci = eval::bootstrap_ci(xs, o.bootstrap_samples, o.bootstrap_seed ^ core::xxh64(name));
  return {{"n", xs.size()}, {"correct", k}, {"ex", pct(k, xs.size())}, {"ci95", {ci.low, ci.high}}};
}

json grouped(const std::map<std::string, std::vector<int>>& groups, const ReportOptions& o, const std::string& kind) {
  json out = json::object();
  for (const auto& [k, xs] : groups) out[k] = group_stats(xs, o, kind + ":" + k);
  return out;
}

std::string fmt_num(double v, int digits = 2) { return fmt::format("{:.{}f}", v, digits); }

// The provider's own breakdown of a usage row (add_provider_shares): "12345 (61.5%)", or "not
// reported" when no call's server reported it; "(k of n calls)" when only some did.
std::string reported_cell(const json& v, const char* part, const char* reporting, const char* pct) {
  const double calls_reporting = v.value(reporting, 0.0);
  if (calls_reporting <= 0) return "not reported";
  std::string out = fmt_num(v.value(part, 0.0), 0);
  if (v.contains(pct) && v[pct].is_number()) out += " (" + fmt_num(v[pct].get<double>(), 1) + "%)";
  if (calls_reporting < v.value("calls", 0.0))
    out += " (" + fmt_num(calls_reporting, 0) + " of " + fmt_num(v.value("calls", 0.0), 0) + " calls)";
  return out;
}

std::string ci_text(const json& g) {
  return fmt::format("{:.2f} [{:.2f}, {:.2f}]", g["ex"].get<double>(), g["ci95"][0].get<double>(),
                     g["ci95"][1].get<double>());
}

}  // namespace

double percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  double pos = q * static_cast<double>(v.size() - 1);
  size_t lo = static_cast<size_t>(std::floor(pos));
  size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (pos - static_cast<double>(lo));
}

Result<ReportOptions> ReportOptions::from_config(const json& config) {
  ReportOptions o;
  const json& r = run::field(config, "report");
  if (r.is_null()) return o;
  if (!r.is_object()) return invalid_input("config key \"report\" must be an object");
  auto get_int = [&](const char* key, auto& out, long min) -> Status {
    const json& v = run::field(r, key);
    if (v.is_null()) return Status::ok();
    if (!v.is_number_integer() || v.get<long>() < min)
      return invalid_input(fmt::format("config key \"report.{}\" must be an integer >= {}", key, min));
    out = static_cast<std::decay_t<decltype(out)>>(v.get<long>());
    return Status::ok();
  };
  NL2SQL_RETURN_IF_ERROR(get_int("bootstrap_samples", o.bootstrap_samples, 100));
  NL2SQL_RETURN_IF_ERROR(get_int("bootstrap_seed", o.bootstrap_seed, 0));
  NL2SQL_RETURN_IF_ERROR(get_int("drilldown_limit", o.drilldown_limit, 0));
  NL2SQL_RETURN_IF_ERROR(get_int("preview_chars", o.preview_chars, 0));
  if (const json& h = run::field(r, "html"); !h.is_null()) {
    if (!h.is_boolean()) return invalid_input("config key \"report.html\" must be true or false");
    o.html = h.get<bool>();
  }
  if (const json& t = run::field(r, "title"); !t.is_null()) {
    if (!t.is_string()) return invalid_input("config key \"report.title\" must be a string");
    o.title = t.get<std::string>();
  }
  return o;
}

namespace {

std::string or_unknown(const std::string& s) { return s.empty() ? std::string("unknown") : s; }

// What every section of the report reads.
struct ReportContext {
  const run::RunData& run;
  const ReportOptions& options;
  std::string metric;            // the eval metric that decides correctness
  std::string primary_selector;  // from the manifest, else the first selector seen
};

// EX under the primary metric and per evaluator metric.
void add_ex(json& rep, ReportContext& ctx) {
  const run::RunData& run = ctx.run;
  const ReportOptions& o = ctx.options;
  const std::string& metric = ctx.metric;
  std::vector<int> overall;
  std::map<std::string, std::vector<int>> by_diff, by_db, by_feature;
  std::set<std::string> metrics;
  json errors = json::array(), unusable = json::array(), ties = json::array();
  std::map<std::string, size_t> outcomes;
  double soft_f1 = 0;
  size_t soft_n = 0;
  for (const auto& r : run.records) {
    int c = r.correct(metric) ? 1 : 0;
    overall.push_back(c);
    by_diff[or_unknown(r.difficulty)].push_back(c);
    by_db[or_unknown(r.db_id)].push_back(c);
    if (!r.features.empty()) {
      for (const auto& f : r.features) by_feature[f].push_back(c);
    } else {
      by_feature["simple"].push_back(c);
    }
    if (!r.ok) errors.push_back({{"question_id", r.question_id}, {"error", r.error}});
    if (r.verdict) {
      const run::Verdict& v = *r.verdict;
      for (const auto& [mt, _] : v.verdicts) metrics.insert(mt);
      outcomes[v.outcome.empty() ? std::string("none") : v.outcome]++;
      soft_f1 += v.soft_f1;
      ++soft_n;
      if (v.gold_unusable) unusable.push_back(r.question_id);
      if (v.gold_tie_dependent) ties.push_back(r.question_id);
    } else {
      outcomes["not_evaluated"]++;
    }
  }
  rep["ex"] = {{"overall", group_stats(overall, o, "overall")},
               {"by_difficulty", grouped(by_diff, o, "difficulty")},
               {"by_db", grouped(by_db, o, "db")},
               {"by_feature", grouped(by_feature, o, "feature")}};
  json mj = json::object();
  for (const auto& mt : metrics) {
    std::vector<int> xs, usable;
    for (const auto& r : run.records) {
      int c = r.correct(mt) ? 1 : 0;
      xs.push_back(c);
      if (!(r.verdict && r.verdict->gold_unusable)) usable.push_back(c);
    }
    json g = group_stats(xs, o, "metric:" + mt);
    g["n_usable_gold"] = usable.size();
    g["ex_usable_gold"] = pct(static_cast<size_t>(std::count(usable.begin(), usable.end(), 1)), usable.size());
    mj[mt] = g;
  }
  rep["metrics"] = mj;
  rep["outcomes"] = outcomes;
  rep["soft_f1"] = soft_n ? soft_f1 / static_cast<double>(soft_n) : 0.0;
  rep["gold_unusable"] = unusable;
  rep["tie_dependent"] = ties;
  rep["errors"] = errors;
  // spider-ts on a test suite: EX on the original databases alone beside it, and the questions
  // only the original lets pass (absent when no question was judged on a suite).
  std::vector<eval::SuiteOutcome> suite;
  for (const auto& r : run.records) {
    if (!r.verdict) continue;
    const run::Verdict& v = *r.verdict;
    const auto ts = v.verdicts.find("spider_ts");
    suite.push_back({r.question_id, r.db_id, static_cast<size_t>(std::max<int64_t>(1, v.suite_databases)),
                     v.suite_original, ts != v.verdicts.end() && ts->second, v.suite_failed_on, v.suite_failure});
  }
  if (auto t = eval::test_suite_summary(suite); !t.is_null()) rep["test_suite"] = std::move(t);
}

// Selectors side by side, with the bounds every selector lives between.

// Separating-instance duels per selector that plays them: the paper's technical coverage —
// questions reaching the duel stage (a duel's instance was put to the model) over questions with
// two or more distinct results (a duel was planned) — and, per question, why duels were draws
// (the duel's "draw" kind: no_instance, too_large, timeout, no_lineage, answers_disagree,
// both_match, neither_matches). Empty when no selector played a duel.
json separating_duels(const run::RunData& run) {
  json out = json::object();
  for (const auto& r : run.records)
    for (const auto& [name, sel] : r.selections) {
      const std::vector<select::Duel>& duels = select::duels_of(sel.explanation);
      if (duels.empty()) continue;
      json& s = out[name];
      if (s.is_null()) s = {{"questions_contested", 0}, {"questions_dueled", 0}, {"draws", json::object()}, {"questions", json::array()}};
      bool asked = false;
      std::map<std::string, int> kinds;
      for (const auto& d : duels) {
        asked = asked || d.model_answers.has_value();
        const std::string kind = d.draw.value_or("");
        if (kind.empty()) continue;
        kinds[kind] += 1;
        json& all = s["draws"][kind];
        all = (all.is_number_integer() ? all.get<int>() : 0) + 1;
      }
      s["questions_contested"] = s["questions_contested"].get<int>() + 1;
      s["questions_dueled"] = s["questions_dueled"].get<int>() + (asked ? 1 : 0);
      if (!kinds.empty()) s["questions"].push_back({{"question_id", r.question_id}, {"draws", kinds}});
    }
  for (auto& [name, s] : out.items())
    s["technical_coverage"] = static_cast<double>(s["questions_dueled"].get<int>()) / s["questions_contested"].get<int>();
  return out;
}

void add_selectors(json& rep, ReportContext& ctx) {
  const run::RunData& run = ctx.run;
  const ReportOptions& o = ctx.options;
  const json& m = ctx.run.manifest;
  std::string& primary_sel = ctx.primary_selector;
  std::set<std::string> sel_names;
  if (run::field(m, "selectors").is_array())
    for (const auto& s : m["selectors"]) if (s.is_string()) sel_names.insert(s.get<std::string>());
  for (const auto& r : run.records)
    for (const auto& [k, _] : r.selections) sel_names.insert(k);
  if (primary_sel.empty() && !sel_names.empty()) primary_sel = *sel_names.begin();
  rep["primary_selector"] = primary_sel;
  json sj = json::object();
  for (const auto& s : sel_names) {
    std::vector<int> xs;
    double calls = 0, cost = 0;
    std::vector<double> lat;
    for (const auto& r : run.records) {
      auto it = r.selections.find(s);
      if (it == r.selections.end()) {
        xs.push_back(0);
        continue;
      }
      const run::SelectionRecord& sel = it->second;
      xs.push_back(r.ok && sel.correct.value_or(false) ? 1 : 0);
      calls += static_cast<double>(sel.llm_calls);
      cost += sel.cost_usd;
      lat.push_back(sel.latency_s);
    }
    json g = group_stats(xs, o, "selector:" + s);
    g["primary"] = s == primary_sel;
    g["llm_calls"] = calls;
    g["cost_usd"] = cost;
    g["latency_p50_s"] = percentile(lat, 0.5);
    sj[s] = g;
  }
  rep["selectors"] = sj;
  // Separating-instance duels whose model answer on D′ disagrees with gold's answer there:
  // evidence against the gold SQL, worth a look before trusting that question's verdict.
  json disputes = json::array();
  for (const auto& r : run.records) {
    size_t n = 0;
    for (const auto& [k, sel] : r.selections) {
      for (const auto& d : select::duels_of(sel.explanation))
        n += d.model_agrees_with_gold == false ? 1 : 0;
    }
    if (n > 0) disputes.push_back({{"question_id", r.question_id}, {"duels", n}});
  }
  rep["gold_disputes"] = disputes;
  if (json sep = separating_duels(run); !sep.empty()) rep["separating_duels"] = std::move(sep);
  std::vector<int> oracle, adversarial;
  for (const auto& r : run.records) {
    oracle.push_back(r.bounds && r.bounds->oracle ? 1 : 0);
    adversarial.push_back(r.bounds && r.bounds->adversarial ? 1 : 0);
  }
  rep["bounds"] = {{"oracle", group_stats(oracle, o, "oracle")}, {"adversarial", group_stats(adversarial, o, "adversarial")}};
}

// Generators: counts, executability, correctness, overlap.
void add_generators(json& rep, ReportContext& ctx) {
  const run::RunData& run = ctx.run;
  const size_t n = ctx.run.records.size();
  struct Gen {
    size_t candidates = 0, exec_before = 0, exec_after = 0, correct = 0, fixed_rounds = 0;
    std::set<std::string> questions, questions_correct, unique;
  };
  std::map<std::string, Gen> gens;
  std::map<std::string, size_t> overlap;
  for (const auto& r : run.records) {
    const std::string& qid = r.question_id;
    std::set<std::string> found;
    for (const auto& c : r.candidates) {
      const std::string generator = or_unknown(c.generator);
      Gen& g = gens[generator];
      ++g.candidates;
      g.questions.insert(qid);
      g.fixed_rounds += c.fix_rounds.size();
      if (!c.judged) continue;
      if (c.judged->executable_before_fix) ++g.exec_before;
      if (c.judged->executable_after_fix) ++g.exec_after;
      if (c.judged->correct.value_or(false)) {
        ++g.correct;
        g.questions_correct.insert(qid);
        found.insert(generator);
      }
    }
    if (found.size() == 1) gens[*found.begin()].unique.insert(qid);
    std::string key;
    for (const auto& g : found) key += (key.empty() ? "" : "+") + g;
    overlap[key]++;
  }
  json gj = json::object();
  for (const auto& [name, g] : gens)
    gj[name] = {{"candidates", g.candidates},
                {"questions", g.questions.size()},
                {"executable_before_fix", g.exec_before},
                {"executable_after_fix", g.exec_after},
                {"executable_before_fix_pct", pct(g.exec_before, g.candidates)},
                {"executable_after_fix_pct", pct(g.exec_after, g.candidates)},
                {"fix_rounds", g.fixed_rounds},
                {"correct_candidates", g.correct},
                {"questions_with_correct", g.questions_correct.size()},
                {"upper_bound_pct", pct(g.questions_correct.size(), n)},
                {"unique_correct", g.unique.size()}};
  rep["generators"] = gj;
  json ov = json::array();
  std::vector<std::pair<std::string, size_t>> ovs(overlap.begin(), overlap.end());
  std::stable_sort(ovs.begin(), ovs.end(), [](auto& a, auto& b) { return a.second > b.second; });
  for (const auto& [k, c] : ovs) {
    json names = json::array();
    size_t start = 0;
    while (!k.empty() && start <= k.size()) {
      size_t plus = k.find('+', start);
      names.push_back(k.substr(start, plus == std::string::npos ? std::string::npos : plus - start));
      if (plus == std::string::npos) break;
      start = plus + 1;
    }
    ov.push_back({{"generators", names}, {"questions", c}});
  }
  rep["overlap"] = ov;
}

// Curves vs number of candidates (CHASE-SQL Fig. 2).
void add_curves(json& rep, ReportContext& ctx) {
  const run::RunData& run = ctx.run;
  std::map<long, std::array<std::pair<size_t, size_t>, 4>> curves;  // k -> (hits, n) per series
  static const char* kSeries[] = {"upper", "lower", "self_consistency", "selector"};
  for (const auto& r : run.records) {
    for (const auto& [k, p] : r.curves) {
      auto& acc = curves[static_cast<long>(k)];
      const std::optional<bool> series[] = {p.upper, p.lower, p.self_consistency, p.selector};
      for (int i = 0; i < 4; ++i) {
        if (!series[i]) continue;
        acc[i].first += *series[i] ? 1 : 0;
        acc[i].second += 1;
      }
    }
  }
  json cj = json::array();
  for (const auto& [k, acc] : curves) {
    json p = {{"k", k}};
    for (int i = 0; i < 4; ++i) p[kSeries[i]] = acc[i].second ? json(pct(acc[i].first, acc[i].second)) : json(nullptr);
    p["n"] = acc[0].second;
    cj.push_back(p);
  }
  rep["curves"] = cj;

  // run.curve_selectors: accuracy vs k per selector, the mean over its repeats — on every
  // question and on the questions the separating-instance paper keeps ("contested": the k
  // candidates disagree and one of them is correct).
  struct Acc {
    double hits = 0;  // Σ over questions of the share of repeats that picked a correct candidate
    size_t n = 0;
    size_t repeats = 0;
  };
  std::map<long, std::map<std::string, std::array<Acc, 2>>> by_k;  // k -> selector -> (all, contested)
  std::map<long, std::array<size_t, 2>> questions;                  // k -> (all, contested)
  std::vector<std::string> names;
  for (const auto& r : run.records) {
    for (const auto& [k, p] : r.curves) {
      if (p.selectors.empty()) continue;
      const bool contested = p.contested.value_or(false);
      auto& q = questions[static_cast<long>(k)];
      q[0] += 1;
      q[1] += contested ? 1 : 0;
      for (const auto& [name, picks] : p.selectors) {
        if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
        if (picks.empty()) continue;
        const double share = static_cast<double>(std::count(picks.begin(), picks.end(), true)) /
                             static_cast<double>(picks.size());
        for (int c = 0; c < (contested ? 2 : 1); ++c) {
          Acc& a = by_k[static_cast<long>(k)][name][c];
          a.hits += share;
          a.n += 1;
          a.repeats = std::max(a.repeats, picks.size());
        }
      }
    }
  }
  // In the run's selector order (manifest "selectors": run.selectors as configured).
  std::vector<std::string> configured;
  if (const auto it = run.manifest.find("selectors"); it != run.manifest.end() && it->is_array())
    for (const auto& v : *it)
      if (v.is_string()) configured.push_back(v.get<std::string>());
  auto rank = [&](const std::string& n) {
    return static_cast<size_t>(std::find(configured.begin(), configured.end(), n) - configured.begin());
  };
  std::stable_sort(names.begin(), names.end(), [&](const std::string& a, const std::string& b) {
    return rank(a) != rank(b) ? rank(a) < rank(b) : a < b;
  });
  json sc = json::array();
  for (const auto& [k, per] : by_k) {
    json point = {{"k", k}, {"questions", questions[k][0]}, {"contested", questions[k][1]}};
    json all = json::object(), cont = json::object();
    for (const auto& [name, acc] : per) {
      auto entry = [](const Acc& a) {
        return json{{"mean_pct", a.n ? json(100.0 * a.hits / static_cast<double>(a.n)) : json(nullptr)},
                    {"n", a.n}, {"repeats", a.repeats}};
      };
      all[name] = entry(acc[0]);
      cont[name] = entry(acc[1]);
    }
    point["all"] = all;
    point["on_contested"] = cont;
    sc.push_back(point);
  }
  if (!sc.empty()) rep["selector_curves"] = {{"selectors", names}, {"points", sc}};
}

// Selection errors of the primary selector.
void add_selection_errors(json& rep, ReportContext& ctx) {
  const run::RunData& run = ctx.run;
  const std::string& metric = ctx.metric;
  const size_t n = ctx.run.records.size();
  std::map<std::string, std::vector<std::string>> cats;
  for (const char* c : {"correct", "wrong_selection", "no_correct_candidate", "gold_unusable", "failed"}) cats[c];
  for (const auto& r : run.records) {
    std::string cat;
    if (!r.ok) cat = "failed";
    else if (r.verdict && r.verdict->gold_unusable) cat = "gold_unusable";
    else if (r.correct(metric)) cat = "correct";
    else {
      bool any = r.bounds && r.bounds->oracle;
      for (const auto& c : r.candidates) any = any || (c.judged && c.judged->correct.value_or(false));
      cat = any ? "wrong_selection" : "no_correct_candidate";
    }
    cats[cat].push_back(r.question_id);
  }
  json se = json::object();
  for (const auto& [k, ids] : cats) se[k] = {{"count", ids.size()}, {"pct", pct(ids.size(), n)}, {"question_ids", ids}};
  rep["selection_errors"] = se;
}

// A stage's usage before any call: every count the report sums (doubles, as JSON numbers).
json zero_usage() {
  return {{"calls", 0.0},          {"prompt_tokens", 0.0},          {"completion_tokens", 0.0},
          {"cached_tokens", 0.0},  {"calls_reporting_cached", 0.0}, {"reasoning_tokens", 0.0},
          {"calls_reporting_reasoning", 0.0}, {"cost_usd", 0.0}, {"latency_s", 0.0}};
}

// The provider's cache share of the prompt tokens (cached_pct) and reasoning share of the
// completion tokens (reasoning_pct), null when no call reported the count: unknown, not 0%.
void add_provider_shares(json& u) {
  auto share = [&](const char* part, const char* reporting, const char* whole) -> json {
    if (u.value(reporting, 0.0) <= 0) return nullptr;
    const double w = u.value(whole, 0.0);
    return w > 0 ? 100.0 * u.value(part, 0.0) / w : 0.0;
  };
  u["cached_pct"] = share("cached_tokens", "calls_reporting_cached", "prompt_tokens");
  u["reasoning_pct"] = share("reasoning_tokens", "calls_reporting_reasoning", "completion_tokens");
}

// Tokens, cost, latency.
void add_usage(json& rep, ReportContext& ctx) { rep["usage"] = usage_report(ctx.run); }

}  // namespace

json usage_report(const run::RunData& run) {
  const size_t n = run.records.size();
  std::map<std::string, json> usage;
  json total = zero_usage();
  for (const auto& r : run.records) {
    for (const auto& [stage, v] : r.usage) {
      json& acc = usage[stage];
      if (acc.is_null()) acc = zero_usage();
      const std::pair<const char*, double> fields[] = {
          {"calls", static_cast<double>(v.calls)},
          {"prompt_tokens", static_cast<double>(v.prompt_tokens)},
          {"completion_tokens", static_cast<double>(v.completion_tokens)},
          {"cached_tokens", static_cast<double>(v.cached_tokens)},
          {"calls_reporting_cached", static_cast<double>(v.calls_reporting_cached)},
          {"reasoning_tokens", static_cast<double>(v.reasoning_tokens)},
          {"calls_reporting_reasoning", static_cast<double>(v.calls_reporting_reasoning)},
          {"cost_usd", v.cost_usd},
          {"latency_s", v.latency_s}};
      for (const auto& [f, x] : fields) {
        acc[f] = acc[f].get<double>() + x;
        total[f] = total[f].get<double>() + x;
      }
      // Prompts cut to fit the model's context: shown only when there were any.
      if (const double d = static_cast<double>(v.degraded_prompts); d > 0) {
        acc["degraded_prompts"] = acc.value("degraded_prompts", 0.0) + d;
        total["degraded_prompts"] = total.value("degraded_prompts", 0.0) + d;
      }
      // Answers from the response cache: no request, no spend; shown apart with what they saved.
      if (v.cache_hits > 0) {
        for (json* j : {&acc, &total}) {
          (*j)["cache_hits"] = j->value("cache_hits", 0.0) + static_cast<double>(v.cache_hits);
          (*j)["cache_prompt_tokens"] = j->value("cache_prompt_tokens", 0.0) + static_cast<double>(v.cache_prompt_tokens);
          (*j)["cache_completion_tokens"] =
              j->value("cache_completion_tokens", 0.0) + static_cast<double>(v.cache_completion_tokens);
          (*j)["saved_usd"] = j->value("saved_usd", 0.0) + v.saved_usd;
        }
      }
    }
  }
  // Calls of no question (each invocation's preflight), stored run-wide.
  if (run.run_usage.is_object())
    for (const auto& [stage, v] : run.run_usage.items()) {
      // A row whose provisional usage left again (pipeline.cpp) nets to nothing.
      if (!v.is_object() || (v.value("calls", 0.0) == 0 && v.value("prompt_tokens", 0.0) == 0 &&
                             v.value("completion_tokens", 0.0) == 0))
        continue;
      json& acc = usage[stage];
      if (acc.is_null()) acc = zero_usage();
      const json fields = zero_usage();
      for (const auto& [f, _] : fields.items()) {
        const double x = v.value(f, 0.0);
        acc[f] = acc[f].get<double>() + x;
        total[f] = total[f].get<double>() + x;
      }
    }
  const std::map<std::string, int64_t> duplicates = duplicate_requests(run);
  int64_t duplicates_total = 0;
  for (auto& [stage, acc] : usage) {
    const auto it = duplicates.find(stage);
    const int64_t d = it == duplicates.end() ? 0 : it->second;
    acc["duplicate_requests"] = d;
    duplicates_total += d;
  }
  total["duplicate_requests"] = duplicates_total;
  // The most a provider's prefix cache could serve (prefix_share.h): null where nothing was sent.
  const PrefixShare ps = prefix_share(run);
  auto share_of = [](const PrefixShareCounts& c) -> json { return c.requests > 0 ? json(c.share()) : json(nullptr); };
  total["prefix_share"] = share_of(ps.total);
  for (auto& [stage, acc] : usage) {
    const auto it = ps.by_stage.find(stage);
    acc["prefix_share"] = it == ps.by_stage.end() ? json(nullptr) : share_of(it->second);
  }
  for (json* j : {&total}) add_provider_shares(*j);
  for (auto& [_, acc] : usage) add_provider_shares(acc);
  json uj = json::object();
  for (auto& [k, v] : usage) uj[k] = v;
  return {{"stages", uj},
          {"total", total},
          {"cost_per_question_usd", n ? total["cost_usd"].get<double>() / static_cast<double>(n) : 0.0},
          {"prefix_share",
           {{"share", share_of(ps.total)},
            {"requests", ps.total.requests},
            {"prompt_chars", ps.total.prompt_chars},
            {"prefix_chars", ps.total.prefix_chars},
            {"block_chars", kPrefixBlockChars}}}};
}

std::string cached_tokens_cell(const json& row) {
  return reported_cell(row, "cached_tokens", "calls_reporting_cached", "cached_pct");
}

std::string reasoning_tokens_cell(const json& row) {
  return reported_cell(row, "reasoning_tokens", "calls_reporting_reasoning", "reasoning_pct");
}

namespace {

// Model calls that failed after their retries, and the retries, summed from the records'
// llm_faults (per stage, stored with the stage they belong to, so a resumed run keeps them).
void add_llm_faults(json& rep, ReportContext& ctx) {
  const run::RunData& run = ctx.run;
  {
    run::LlmFaults sum;
    int64_t questions_hit = 0, questions_unread = 0;
    for (const auto& r : run.records) {
      const run::LlmFaults& f = r.llm_faults;
      sum += f;
      questions_hit += (f.failed_calls + f.retries) > 0;
      // Answers no reader could use (absent from records written before they were counted).
      questions_unread += f.parse_failures > 0;
    }
    rep["llm_faults"] = {{"failed_calls", sum.failed_calls}, {"retries", sum.retries},
                         {"failed_by_kind", sum.failed_by_kind}, {"questions_affected", questions_hit},
                         {"parse_failures", sum.parse_failures}, {"parse_failures_by_stage", sum.parse_failures_by_stage},
                         {"questions_with_parse_failures", questions_unread}};
  }
  // Overload back-pressure: how often each endpoint answered "busy" and how far its requests in
  // flight were lowered (llm::Client's additive-increase, multiplicative-decrease limit).
  if (!run.endpoint_load.empty()) rep["endpoint_load"] = run.endpoint_load;
}

// The candidate pools read from files: what each held for the run, and what did not match.
std::string candidate_pools_markdown(const json& rep) {
  if (!rep.contains("candidate_pools") || rep["candidate_pools"].empty()) return "";
  std::string md =
      "## Candidate pools from files\n\n| generator | file | layout | candidates | questions with candidates | "
      "questions of this run not in the file | ids not in the dataset |\n|---|---|---|---:|---:|---:|---:|\n";
  std::string lists;
  auto listed = [](const json& ids) {
    std::string s;
    for (size_t i = 0; i < ids.size() && i < 50; ++i) s += (i ? ", " : "") + ids[i].get<std::string>();
    return ids.size() > 50 ? s + fmt::format(", … ({} in all; every one in report.json)", ids.size()) : s;
  };
  for (const auto& p : rep["candidate_pools"]) {
    const json missing = p.value("run_questions_missing", json::array());
    const json unknown = p.value("unknown_ids", json::array());
    md += fmt::format("| {} | {} | {} | {} | {} | {} | {} |\n", core::markdown_cell(p.value("label", "")),
                      core::markdown_cell(p.value("path", "")), core::markdown_cell(p.value("layout", "")),
                      p.value("candidates", 0), p.value("questions_with_candidates", 0), missing.size(), unknown.size());
    if (!missing.empty())
      lists += fmt::format("Questions of this run without a candidate from {}: {}.\n\n", core::markdown_cell(p.value("label", "")),
                           core::markdown_cell(listed(missing)));
    if (!unknown.empty())
      lists += fmt::format("Ids in {} that are not questions of the dataset: {}.\n\n", core::markdown_cell(p.value("path", "")),
                           core::markdown_cell(listed(unknown)));
  }
  return md + "\n" + lists;
}

// One line per overloaded profile (report.md and report.html share the words).
std::vector<std::string> endpoint_load_lines(const json& rep) {
  std::vector<std::string> out;
  if (!rep.contains("endpoint_load")) return out;
  for (const auto& [profile, l] : rep["endpoint_load"].items())
    out.push_back(fmt::format("Endpoint overload: profile {} answered \"busy\" {} times (429, 503 or a shared "
                              "context full); requests in flight were lowered to {} of {} and raised again as it "
                              "answered.",
                              profile, l.value("overloads", int64_t{0}), l.value("lowest_in_flight", int64_t{0}),
                              l.value("max_in_flight", int64_t{0})));
  return out;
}

// Latency per stage: mean and percentiles over the questions.
void add_latency(json& rep, ReportContext& ctx) {
  const run::RunData& run = ctx.run;
  json lat = json::object();
  std::set<std::string> lat_stages(kStages.begin(), kStages.end());
  for (const auto& r : run.records)
    for (const auto& [k, _] : r.latency_s) lat_stages.insert(k);
  for (const auto& s : lat_stages) {
    std::vector<double> xs;
    for (const auto& r : run.records)
      if (auto it = r.latency_s.find(s); it != r.latency_s.end()) xs.push_back(it->second);
    if (xs.empty()) continue;
    double sum = 0;
    for (double x : xs) sum += x;
    lat[s] = {{"n", xs.size()}, {"mean", sum / static_cast<double>(xs.size())}, {"p50", percentile(xs, 0.5)},
              {"p90", percentile(xs, 0.9)}, {"p95", percentile(xs, 0.95)}, {"max", percentile(xs, 1.0)}};
  }
  rep["latency_s"] = lat;
}

// WMA weights after each question.
void add_weights(json& rep, ReportContext& ctx) {
  const run::RunData& run = ctx.run;
  json weights = json::object();
  for (const auto& r : run.records) {
    if (!r.weights) continue;
    for (const auto& [expert, v] : *r.weights) weights[expert].push_back({r.index, v});
  }
  if (!weights.empty()) rep["weights"] = weights;
}

// The context stage's value ranking. CHASE-SQL re-ranks the values LSH retrieves by embedding
// similarity; that needs an embeddings profile (context.embeddings.profile), so the report says
// whether this run had one and on how many questions the re-ranking call failed and the
// edit-distance ranking was kept.
void add_context(json& rep, ReportContext& ctx) {
  const std::string profile = run::string_field(run::field(run::field(ctx.run.config, "context"), "embeddings"), "profile");
  size_t fell_back = 0;
  for (const auto& r : ctx.run.records) {
    if (!r.context) continue;
    for (const auto& e : r.context->errors)
      if (e.find("(edit-distance ranking kept)") != std::string::npos) {
        ++fell_back;
        break;
      }
  }
  rep["context"] = {{"embedding_rerank", !profile.empty()},
                    {"embeddings_profile", profile},
                    {"rerank_fell_back_questions", fell_back}};
}

}  // namespace

json build_report(const run::RunData& run, const ReportOptions& o) {
  const json& m = run.manifest;
  const std::string metric = run::primary_metric(m);
  std::string primary_sel = run::string_field(m, "primary_selector");
  const size_t n = run.records.size();

  json rep;
  rep["tool"] = {{"name", "nl2sql"}, {"version", core::build_info().version}};
  rep["run"] = {{"name", run.name},           {"title", o.title.empty() ? run.name : o.title},
                {"manifest", m},              {"simulated", run::tri_bool(run::field(m, "simulated")) == 1}};
  rep["simulated"] = run::tri_bool(run::field(m, "simulated")) == 1;
  rep["primary_metric"] = metric;
  rep["n_questions"] = n;
  rep["n_expected"] = run::field(m, "question_ids").is_array() ? run::field(m, "question_ids").size() : n;
  // Questions the selection named whose database was missing: listed, never silently dropped.
  rep["skipped"] = run::field(m, "skipped").is_array() ? run::field(m, "skipped") : json::array();
  // Candidate pools read from files, with the run's questions each lacks and the ids it has that
  // the dataset does not.
  if (run::field(m, "candidate_pools").is_array()) rep["candidate_pools"] = run::field(m, "candidate_pools");

  ReportContext ctx{run, o, metric, primary_sel};
  add_ex(rep, ctx);
  add_selectors(rep, ctx);
  add_generators(rep, ctx);
  add_curves(rep, ctx);
  add_selection_errors(rep, ctx);
  add_usage(rep, ctx);
  add_llm_faults(rep, ctx);
  add_latency(rep, ctx);
  add_weights(rep, ctx);
  add_context(rep, ctx);

  json questions = json::array();
  for (const auto& r : run.records) questions.push_back(run::to_json(r));
  rep["questions"] = std::move(questions);
  return rep;
}

namespace {

// The title, the run's identity and EX: overall, by difficulty, database and feature, every metric, the test suite.
void markdown_accuracy(std::string& md, const json& rep) {
  const json& run = rep["run"];
  md += fmt::format("# nl2sql run report: {}\n\n", core::markdown_cell(run["title"].get<std::string>()));
  if (rep["simulated"].get<bool>())
    md += "> **SIMULATED — not a model's accuracy.** The answers come from the offline `sim` provider, "
          "which derives them from the gold SQL.\n\n";
  const json& man = run["manifest"];
  md += fmt::format("Benchmark `{}` split `{}`, {} of {} questions recorded, primary metric `{}`, primary selector `{}`.\n",
                    core::markdown_cell(run::string_field(man, "benchmark", "?")), core::markdown_cell(run::string_field(man, "split", "?")),
                    rep["n_questions"].get<size_t>(), rep["n_expected"].get<size_t>(),
                    rep["primary_metric"].get<std::string>(), core::markdown_cell(rep["primary_selector"].get<std::string>()));
  md += fmt::format("Dataset fingerprint `{}`, config hash `{}`, seed {}, tool {}.\n\n",
                    core::markdown_cell(run::string_field(man, "dataset_fingerprint")), core::markdown_cell(run::string_field(man, "config_hash")),
                    core::markdown_cell(run::string_field(man, "seed")), core::markdown_cell(run::string_field(man, "tool_version")));
  if (const json& c = run::field(rep, "context"); c.is_object()) {
    if (c["embedding_rerank"].get<bool>())
      md += fmt::format("Value retrieval: LSH + edit distance, re-ranked by embedding similarity (profile `{}`){}.\n\n",
                        core::markdown_cell(c["embeddings_profile"].get<std::string>()),
                        c["rerank_fell_back_questions"].get<size_t>() > 0
                            ? fmt::format("; the re-ranking call failed on {} question(s), which kept the "
                                          "edit-distance ranking",
                                          c["rerank_fell_back_questions"].get<size_t>())
                            : std::string());
    else
      md += "Value retrieval: LSH + edit distance only. **Embedding re-ranking was off** (no "
            "`context.embeddings.profile`; CHASE-SQL re-ranks retrieved values by embedding similarity).\n\n";
  }
  const json& ov = rep["ex"]["overall"];
  md += fmt::format("**EX {:.2f}%** (95% CI [{:.2f}, {:.2f}]), {} / {} correct; {} failed questions.\n\n",
                    ov["ex"].get<double>(), ov["ci95"][0].get<double>(), ov["ci95"][1].get<double>(),
                    rep["ex"]["overall"]["correct"].get<size_t>(),
                    rep["ex"]["overall"]["n"].get<size_t>(), rep["errors"].size());
  auto group_table = [&](const char* title, const json& g) {
    if (g.empty()) return;
    md += fmt::format("## EX by {}\n\n| {} | n | correct | EX % [95% CI] |\n|---|---:|---:|---|\n", title, title);
    for (const auto& [k, v] : g.items())
      md += fmt::format("| {} | {} | {} | {} |\n", core::markdown_cell(k), v["n"].get<size_t>(), v["correct"].get<size_t>(), ci_text(v));
    md += "\n";
  };
  group_table("difficulty", rep["ex"]["by_difficulty"]);
  group_table("database", rep["ex"]["by_db"]);
  group_table("SQL feature", rep["ex"]["by_feature"]);
  if (!rep["metrics"].empty()) {
    md += "## Evaluator metrics\n\n| metric | EX % [95% CI] | EX % excluding unusable gold |\n|---|---|---:|\n";
    for (const auto& [k, v] : rep["metrics"].items())
      md += fmt::format("| {} | {} | {} |\n", core::markdown_cell(k), ci_text(v), fmt_num(v["ex_usable_gold"].get<double>()));
    md += fmt::format("\nSoft-F1 {}; outcomes:", fmt_num(rep["soft_f1"].get<double>() * 100));
    for (const auto& [k, v] : rep["outcomes"].items()) md += fmt::format(" {} {}", core::markdown_cell(k), v.get<size_t>());
    md += fmt::format("; gold unusable {}; tie-dependent gold {}.\n\n", rep["gold_unusable"].size(), rep["tie_dependent"].size());
  }
  if (rep.contains("test_suite")) md += eval::test_suite_markdown(rep["test_suite"]).substr(1) + "\n";
}

// The selectors against the bounds, the duels, the generators, the curves and the primary selector's errors.
void markdown_selectors(std::string& md, const json& rep) {
  md += "## Selectors\n\n| selector | EX % [95% CI] | LLM calls | cost USD |\n|---|---|---:|---:|\n";
  for (const auto& [k, v] : rep["selectors"].items())
    md += fmt::format("| {}{} | {} | {} | {} |\n", core::markdown_cell(k), v["primary"].get<bool>() ? " (primary)" : "", ci_text(v),
                      fmt_num(v["llm_calls"].get<double>(), 0), fmt_num(v["cost_usd"].get<double>(), 4));
  md += fmt::format("| oracle (upper bound) | {} | | |\n| adversarial (lower bound) | {} | | |\n\n",
                    ci_text(rep["bounds"]["oracle"]), ci_text(rep["bounds"]["adversarial"]));
  if (!rep["gold_disputes"].empty()) {
    std::string ids;
    for (const auto& g : rep["gold_disputes"]) ids += (ids.empty() ? "" : ", ") + g["question_id"].get<std::string>();
    md += fmt::format("Separating-instance duels where the model's answer on D′ disagrees with gold's (evidence "
                      "against the gold SQL): {} question(s): {}.\n\n",
                      rep["gold_disputes"].size(), core::markdown_cell(ids));
  }
  if (rep.contains("separating_duels")) {
    md += "Separating-instance duels: technical coverage (questions whose duels reached the model / questions with two or "
          "more distinct results) and why duels were draws, per question.\n\n| selector | coverage | draws by reason | "
          "questions with draws |\n|---|---|---|---|\n";
    for (const auto& [k, v] : rep["separating_duels"].items()) {
      std::string draws, questions;
      for (const auto& [kind, n] : v["draws"].items()) draws += fmt::format("{}{} {}", draws.empty() ? "" : ", ", kind, n.get<int>());
      for (const auto& q : v["questions"]) {
        std::string kinds;
        for (const auto& [kind, n] : q["draws"].items()) kinds += fmt::format("{}{} {}", kinds.empty() ? "" : ", ", kind, n.get<int>());
        questions += fmt::format("{}{} ({})", questions.empty() ? "" : "; ", q["question_id"].get<std::string>(), kinds);
      }
      md += fmt::format("| {} | {}/{} ({}%) | {} | {} |\n", core::markdown_cell(k), v["questions_dueled"].get<int>(),
                        v["questions_contested"].get<int>(), fmt_num(100.0 * v["technical_coverage"].get<double>()),
                        core::markdown_cell(draws.empty() ? "none" : draws), core::markdown_cell(questions.empty() ? "none" : questions));
    }
    md += "\n";
  }
  if (!rep["generators"].empty()) {
    md += "## Generators\n\n| generator | candidates | executable before fix % | after fix % | correct candidates | questions with a correct one | unique correct | upper bound % |\n|---|---:|---:|---:|---:|---:|---:|---:|\n";
    for (const auto& [k, v] : rep["generators"].items())
      md += fmt::format("| {} | {} | {} | {} | {} | {} | {} | {} |\n", core::markdown_cell(k), v["candidates"].get<size_t>(),
                        fmt_num(v["executable_before_fix_pct"].get<double>()), fmt_num(v["executable_after_fix_pct"].get<double>()),
                        v["correct_candidates"].get<size_t>(), v["questions_with_correct"].get<size_t>(),
                        v["unique_correct"].get<size_t>(), fmt_num(v["upper_bound_pct"].get<double>()));
    md += "\nWhich generators found a correct candidate (questions per exact set):\n\n| generators | questions |\n|---|---:|\n";
    for (const auto& e : rep["overlap"]) {
      std::string names;
      for (const auto& g : e["generators"]) names += (names.empty() ? "" : " + ") + g.get<std::string>();
      md += fmt::format("| {} | {} |\n", names.empty() ? "(none)" : core::markdown_cell(names), e["questions"].get<size_t>());
    }
    md += "\n";
  }
  md += candidate_pools_markdown(rep);
  if (!rep["curves"].empty()) {
    md += "## Accuracy vs number of candidates\n\n| candidates | upper bound % | lower bound % | self-consistency % | selector % |\n|---:|---:|---:|---:|---:|\n";
    auto cell = [](const json& v) { return v.is_number() ? fmt_num(v.get<double>()) : std::string("–"); };
    for (const auto& p : rep["curves"])
      md += fmt::format("| {} | {} | {} | {} | {} |\n", p["k"].get<long>(), cell(p["upper"]), cell(p["lower"]),
                        cell(p["self_consistency"]), cell(p["selector"]));
    md += "\n";
  }
  if (rep.contains("selector_curves")) {
    const json& sc = rep["selector_curves"];
    const bool sim = rep["simulated"].get<bool>();
    md += std::string("## Accuracy vs number of candidates per selector") + (sim ? " (SIMULATED)" : "") + "\n\n";
    md += "Each selector re-run on the first k candidates (run.curve_selectors); a cell is the mean EX over its "
          "repeats (run.curve_repeats, each with a selection seed of its own; selectors that call no model run "
          "once), followed by ×R, its number of repeats. *Contested*: the questions the separating-instance paper keeps at this k "
          "(the k candidates return two or more different results and one of them is correct).\n\n";
    for (const char* part : {"on_contested", "all"}) {
      md += std::string(part == std::string("all") ? "All questions:" : "Contested questions (the paper's measure):") +
            "\n\n| candidates | questions |";
      std::string rule = "|---:|---:|";
      for (const auto& name : sc["selectors"]) {
        md += " " + core::markdown_cell(name.get<std::string>()) + " % |";
        rule += "---:|";
      }
      md += "\n" + rule + "\n";
      for (const auto& p : sc["points"]) {
        md += fmt::format("| {} | {} |", p["k"].get<long>(),
                          p[part == std::string("all") ? "questions" : "contested"].get<size_t>());
        for (const auto& name : sc["selectors"]) {
          const json& e = p[part].value(name.get<std::string>(), json::object());
          md += e.contains("mean_pct") && e["mean_pct"].is_number()
                    ? fmt::format(" {} ×{} |", fmt_num(e["mean_pct"].get<double>()), e["repeats"].get<size_t>())
                    : std::string(" – |");
        }
        md += "\n";
      }
      md += "\n";
    }
  }
  md += "## Selection errors (primary selector)\n\n| case | questions | % |\n|---|---:|---:|\n";
  for (const char* k : {"correct", "wrong_selection", "no_correct_candidate", "gold_unusable", "failed"}) {
    const json& v = rep["selection_errors"][k];
    md += fmt::format("| {} | {} | {} |\n", k, v["count"].get<size_t>(), fmt_num(v["pct"].get<double>()));
  }
}

// Tokens, cost and latency per stage, the model faults, the weights and the failed questions.
void markdown_usage(std::string& md, const json& rep) {
  md += "\n## Tokens, cost and latency\n\n| stage | calls | prompt tokens | of which cached by the provider | "
        "completion tokens | of which reasoning | cost USD | duplicate requests |\n|---|---:|---:|---:|---:|---:|---:|---:|\n";
  auto usage_row = [](const std::string& label, const json& v) {
    return fmt::format("| {} | {} | {} | {} | {} | {} | {} | {} |\n", label, fmt_num(v["calls"].get<double>(), 0),
                       fmt_num(v["prompt_tokens"].get<double>(), 0), cached_tokens_cell(v),
                       fmt_num(v["completion_tokens"].get<double>(), 0), reasoning_tokens_cell(v),
                       fmt_num(v["cost_usd"].get<double>(), 4), v.value("duplicate_requests", int64_t{0}));
  };
  for (const auto& [k, v] : rep["usage"]["stages"].items()) md += usage_row(core::markdown_cell(k), v);
  const json& t = rep["usage"]["total"];
  md += usage_row("**total**", t) + "\n";
  if (t.contains("prefix_share") && t["prefix_share"].is_number())
    md += fmt::format("Prefix share: {}% of the prompt characters sent repeat the longest prefix of an earlier request "
                      "of the run — the most a provider's prefix cache could serve.\n\n",
                      fmt_num(100 * t["prefix_share"].get<double>(), 1));
  if (t.value("duplicate_requests", int64_t{0}) > 0)
    md += fmt::format("**Warning:** {} request(s) repeated a request body this run had already sent, byte for byte "
                      "(duplicate requests; the target is 0).\n\n",
                      t.value("duplicate_requests", int64_t{0}));
  if (t.value("cache_hits", 0.0) > 0)
    md += fmt::format("Answers served from the response cache (not calls, nothing spent): {}, which would have cost "
                      "${} at the profiles' prices.\n\n",
                      fmt_num(t["cache_hits"].get<double>(), 0), fmt_num(t["saved_usd"].get<double>(), 4));
  if (t.value("degraded_prompts", 0.0) > 0) {
    md += "Prompts whose schema was lightened to fit the model's context (llm.models.*.context_tokens): ";
    std::string parts;
    for (const auto& [k, v] : rep["usage"]["stages"].items())
      if (v.value("degraded_prompts", 0.0) > 0)
        parts += (parts.empty() ? "" : ", ") + core::markdown_cell(k) + " " + fmt_num(v["degraded_prompts"].get<double>(), 0);
    md += parts + ".\n\n";
  }
  if (rep.contains("llm_faults")) {
    const json& f = rep["llm_faults"];
    md += fmt::format("Model calls failed after retries: {}; retries: {}; questions affected: {}",
                      f["failed_calls"].get<int64_t>(), f["retries"].get<int64_t>(),
                      f["questions_affected"].get<int64_t>());
    std::string kinds;
    for (const auto& [k, v] : f["failed_by_kind"].items())
      kinds += fmt::format("{}{} {}", kinds.empty() ? "" : ", ", core::markdown_cell(k), v.get<int64_t>());
    md += kinds.empty() ? ".\n\n" : " (" + kinds + ").\n\n";
    for (const auto& line : endpoint_load_lines(rep)) md += core::markdown_cell(line) + "\n\n";
    if (f.value("parse_failures", int64_t{0}) > 0) {
      std::string stages;
      const json by_stage = f.value("parse_failures_by_stage", json::object());
      for (const auto& [k, v] : by_stage.items())
        stages += fmt::format("{}{} {}", stages.empty() ? "" : ", ", core::markdown_cell(k), v.get<int64_t>());
      md += fmt::format("Answers that could not be read (parse failures): {} in {} question(s) ({}).\n\n",
                        f["parse_failures"].get<int64_t>(), f.value("questions_with_parse_failures", int64_t{0}),
                        stages);
    }
  }
  md += "| stage | latency p50 s | p90 s | p95 s | max s |\n|---|---:|---:|---:|---:|\n";
  for (const auto& [k, v] : rep["latency_s"].items())
    md += fmt::format("| {} | {} | {} | {} | {} |\n", core::markdown_cell(k), fmt_num(v["p50"].get<double>(), 3),
                      fmt_num(v["p90"].get<double>(), 3), fmt_num(v["p95"].get<double>(), 3), fmt_num(v["max"].get<double>(), 3));
  if (rep.contains("weights")) {
    md += "\n## WMA weights (last value)\n\n| expert | weight |\n|---|---:|\n";
    for (const auto& [k, v] : rep["weights"].items())
      md += fmt::format("| {} | {} |\n", core::markdown_cell(k), fmt_num(v.back()[1].get<double>(), 4));
  }
  if (!rep["skipped"].empty()) {
    md += "\n## Skipped questions (database missing)\n\n| question | db_id | reason |\n|---|---|---|\n";
    for (const auto& e : rep["skipped"])
      md += fmt::format("| {} | {} | {} |\n", core::markdown_cell(e.value("question_id", "")), core::markdown_cell(e.value("db_id", "")),
                        core::markdown_cell(e.value("reason", "")));
  }
  if (!rep["errors"].empty()) {
    md += "\n## Failed questions\n\n| question | error |\n|---|---|\n";
    for (const auto& e : rep["errors"])
      md += fmt::format("| {} | {} |\n", core::markdown_cell(e["question_id"].get<std::string>()), core::markdown_cell(e["error"].get<std::string>()));
  }
}

}  // namespace

std::string render_markdown(const json& rep) {
  std::string md;
  markdown_accuracy(md, rep);
  markdown_selectors(md, rep);
  markdown_usage(md, rep);
  return md;
}

std::string render_csv(const run::RunData& run) {
  const std::string metric = run::primary_metric(run.manifest);
  std::set<std::string> sels;
  for (const auto& r : run.records)
    for (const auto& [k, _] : r.selections) sels.insert(k);
  std::string out = "question_id,index,db_id,difficulty,status,correct,outcome,features,candidates,correct_candidates,oracle,adversarial";
  for (const auto& s : sels) out += "," + eval::csv_field("sel_" + s);
  out += ",cost_usd,latency_s,prediction,error\n";
  auto tri = [](const std::optional<bool>& v) { return v ? std::to_string(*v ? 1 : 0) : std::string(); };
  for (const auto& r : run.records) {
    size_t ncc = 0;
    for (const auto& c : r.candidates) ncc += c.judged && c.judged->correct.value_or(false) ? 1 : 0;
    std::string feats;
    for (const auto& f : r.features) feats += (feats.empty() ? "" : ";") + f;
    double cost = 0;
    for (const auto& [_, u] : r.usage) cost += u.cost_usd;
    const std::optional<bool> oracle = r.bounds ? std::optional<bool>(r.bounds->oracle) : std::nullopt;
    const std::optional<bool> adversarial = r.bounds ? std::optional<bool>(r.bounds->adversarial) : std::nullopt;
    out += fmt::format("{},{},{},{},{},{},{},{},{},{},{},{}", eval::csv_field(r.question_id), r.index,
                       eval::csv_field(r.db_id), eval::csv_field(r.difficulty), eval::csv_field(r.ok ? "ok" : "error"),
                       r.correct(metric) ? 1 : 0, eval::csv_field(r.verdict ? r.verdict->outcome : std::string()),
                       eval::csv_field(feats), r.candidates.size(), ncc, tri(oracle), tri(adversarial));
    for (const auto& s : sels) {
      auto it = r.selections.find(s);
      out += "," + (it == r.selections.end() ? std::string() : tri(it->second.correct));
    }
    auto total = r.latency_s.find("total");
    out += fmt::format(",{},{},{},{}\n", fmt_num(cost, 6), fmt_num(total == r.latency_s.end() ? 0.0 : total->second, 3),
                       eval::csv_field(r.prediction), eval::csv_field(r.error));
  }
  return out;
}

std::string dump_report(json& report) {
  auto whole = [&] { return report.dump(1, ' ', false, json::error_handler_t::replace); };
  auto it = report.find("questions");
  if (it == report.end() || !it->is_array() || it->size() < 2) return whole();
  // The report without its questions, then each question as the whole dump lays it out: one
  // level deeper (two more spaces on every line; a dumped string holds no raw line break).
  json questions = std::move(*it);
  *it = json::array();
  const std::string head = whole();
  *it = std::move(questions);
  const std::string marker = "\n \"questions\": []";
  const size_t at = head.find(marker);
  if (at == std::string::npos) return whole();
  const json& qs = *it;
  auto parts = core::parallel_map<std::string>(qs.size(), core::default_threads(), [&](size_t i) {
    const std::string one = qs[i].dump(1, ' ', false, json::error_handler_t::replace);
    std::string out;
    out.reserve(one.size() + one.size() / 8);
    out += "  ";
    for (char c : one) {
      out += c;
      if (c == '\n') out += "  ";
    }
    return out;
  });
  size_t size = head.size() + 16;
  for (const auto& p : parts) size += p.size() + 2;
  std::string text;
  text.reserve(size);
  text.append(head, 0, at);
  text += "\n \"questions\": [\n";
  for (size_t i = 0; i < parts.size(); ++i) {
    if (i) text += ",\n";
    text += parts[i];
  }
  text += "\n ]";
  text.append(head, at + marker.size(), std::string::npos);
  return text;
}

Status write_reports(const run::RunData& run, const std::filesystem::path& out_dir, const ReportOptions& o) {
  std::error_code ec;
  std::filesystem::create_directories(out_dir, ec);
  if (ec) return io_error("cannot create " + out_dir.string() + ": " + ec.message());
  json rep = build_report(run, o);
  NL2SQL_RETURN_IF_ERROR(core::write_file_atomic(out_dir / "report.json", dump_report(rep) + "\n"));
  NL2SQL_RETURN_IF_ERROR(core::write_file_atomic(out_dir / "report.md", render_markdown(rep)));
  NL2SQL_RETURN_IF_ERROR(core::write_file_atomic(out_dir / "per_question.csv", render_csv(run)));
  if (o.html) NL2SQL_RETURN_IF_ERROR(core::write_file_atomic(out_dir / "report.html", render_html(rep, run, o)));
  return Status::ok();
}

std::map<std::string, int64_t> duplicate_requests(const run::RunData& run) {
  // The first sending may be another question's (the os generator's per-database example
  // prompts were such repeats); a hash is set only on answers a server gave (llm::ChatResponse).
  std::set<std::string> sent;
  std::map<std::string, int64_t> duplicates;
  for (const auto& r : run.records)
    for (const auto& call : run::recorded_calls(r)) {
      const llm::LlmCallTrace& t = *call.trace;
      const std::string& hash = t.request_hash;
      if (hash.empty() || !t.shared_from.empty()) continue;
      if (!sent.insert(hash).second) duplicates[call.stage] += 1;
    }
  return duplicates;
}

Status write_run_reports(const std::filesystem::path& dir, std::map<std::string, int64_t>* duplicates,
                         std::optional<std::vector<run::QuestionRecord>> records) {
  auto reading = run::RunFolderLock::acquire_shared(dir);
  if (!reading) return reading.status();
  auto data = run::load_run(dir, std::move(records));
  if (!data) return data.status();
  if (duplicates) *duplicates = duplicate_requests(*data);
  auto options = ReportOptions::from_config(data->config);
  if (!options) return options.status();
  return write_reports(*data, dir, *options);
}

}  // namespace nl2sql::report
