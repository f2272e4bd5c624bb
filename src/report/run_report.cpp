#include "nl2sql/report/run_report.h"
#include "nl2sql/run/run_data.h"

#include <algorithm>
#include <array>
#include <cstdlib>
#include <cmath>
#include <map>
#include <set>

#include <fmt/format.h>

#include "nl2sql/core/files.h"
#include "nl2sql/core/hash.h"
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

std::string md_cell(std::string s) {
  std::string out;
  for (char c : s) {
    if (c == '|') out += "\\|";
    else if (c == '\n' || c == '\r' || c == '\t') out += ' ';
    else out += c;
  }
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

json build_report(const run::RunData& run, const ReportOptions& o) {
  const json& m = run.manifest;
  const std::string metric = run::primary_metric(m);
  std::string primary_sel = run::string_field(m, "primary_selector");
  const size_t n = run.records.size();

  json rep;
  rep["tool"] = {{"name", "nl2sql"}, {"version", NL2SQL_VERSION}};
  rep["run"] = {{"name", run.name},           {"title", o.title.empty() ? run.name : o.title},
                {"manifest", m},              {"simulated", run::tri_bool(run::field(m, "simulated")) == 1}};
  rep["simulated"] = run::tri_bool(run::field(m, "simulated")) == 1;
  rep["primary_metric"] = metric;
  rep["n_questions"] = n;
  rep["n_expected"] = run::field(m, "question_ids").is_array() ? run::field(m, "question_ids").size() : n;
  // Questions the selection named whose database was missing: listed, never silently dropped.
  rep["skipped"] = run::field(m, "skipped").is_array() ? run::field(m, "skipped") : json::array();

  // --- EX under the primary metric and per evaluator metric.
  std::vector<int> overall;
  std::map<std::string, std::vector<int>> by_diff, by_db, by_feature;
  std::set<std::string> metrics;
  json errors = json::array(), unusable = json::array(), ties = json::array();
  std::map<std::string, size_t> outcomes;
  double soft_f1 = 0;
  size_t soft_n = 0;
  for (const auto& r : run.records) {
    int c = run::record_correct(r, metric) ? 1 : 0;
    overall.push_back(c);
    by_diff[run::string_field(r, "difficulty", "unknown")].push_back(c);
    by_db[run::string_field(r, "db_id", "unknown")].push_back(c);
    const json& feats = run::field(r, "features");
    if (feats.is_array() && !feats.empty()) {
      for (const auto& f : feats)
        if (f.is_string()) by_feature[f.get<std::string>()].push_back(c);
    } else {
      by_feature["simple"].push_back(c);
    }
    const json& v = run::field(r, "verdict");
    if (const json& vv = run::field(v, "verdicts"); vv.is_object())
      for (auto it = vv.begin(); it != vv.end(); ++it) metrics.insert(it.key());
    if (run::string_field(r, "status", "ok") != "ok")
      errors.push_back({{"question_id", r["question_id"]}, {"error", run::string_field(r, "error")}});
    if (!v.is_null()) {
      outcomes[run::string_field(v, "outcome", "none")]++;
      if (run::field(v, "soft_f1").is_number()) {
        soft_f1 += v["soft_f1"].get<double>();
        ++soft_n;
      }
      if (run::tri_bool(run::field(v, "gold_unusable")) == 1) unusable.push_back(r["question_id"]);
      if (run::tri_bool(run::field(v, "gold_tie_dependent")) == 1) ties.push_back(r["question_id"]);
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
      int c = run::record_correct(r, mt) ? 1 : 0;
      xs.push_back(c);
      if (run::tri_bool(run::field(run::field(r, "verdict"), "gold_unusable")) != 1) usable.push_back(c);
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

  // --- Selectors side by side, with the bounds every selector lives between.
  std::set<std::string> sel_names;
  if (run::field(m, "selectors").is_array())
    for (const auto& s : m["selectors"]) if (s.is_string()) sel_names.insert(s.get<std::string>());
  for (const auto& r : run.records)
    if (run::field(r, "selections").is_object())
      for (const auto& [k, _] : r["selections"].items()) sel_names.insert(k);
  if (primary_sel.empty() && !sel_names.empty()) primary_sel = *sel_names.begin();
  rep["primary_selector"] = primary_sel;
  json sj = json::object();
  for (const auto& s : sel_names) {
    std::vector<int> xs;
    double calls = 0, cost = 0;
    std::vector<double> lat;
    for (const auto& r : run.records) {
      const json& sel = run::field(run::field(r, "selections"), s.c_str());
      xs.push_back(run::string_field(r, "status", "ok") == "ok" && run::tri_bool(run::field(sel, "correct")) == 1 ? 1 : 0);
      calls += run::number_field(sel, "llm_calls");
      cost += run::number_field(sel, "cost_usd");
      if (run::field(sel, "latency_s").is_number()) lat.push_back(sel["latency_s"].get<double>());
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
    if (!run::field(r, "selections").is_object()) continue;
    size_t n = 0;
    for (const auto& [k, sel] : r["selections"].items()) {
      const json& duels = run::field(run::field(sel, "explanation"), "duels");
      if (duels.is_array())
        for (const auto& d : duels) n += run::tri_bool(run::field(d, "model_agrees_with_gold")) == 0 ? 1 : 0;
    }
    if (n > 0) disputes.push_back({{"question_id", run::string_field(r, "question_id")}, {"duels", n}});
  }
  rep["gold_disputes"] = disputes;
  std::vector<int> oracle, adversarial;
  for (const auto& r : run.records) {
    oracle.push_back(run::tri_bool(run::field(run::field(r, "bounds"), "oracle")) == 1 ? 1 : 0);
    adversarial.push_back(run::tri_bool(run::field(run::field(r, "bounds"), "adversarial")) == 1 ? 1 : 0);
  }
  rep["bounds"] = {{"oracle", group_stats(oracle, o, "oracle")}, {"adversarial", group_stats(adversarial, o, "adversarial")}};

  // --- Generators: counts, executability, correctness, overlap.
  struct Gen {
    size_t candidates = 0, exec_before = 0, exec_after = 0, correct = 0, fixed_rounds = 0;
    std::set<std::string> questions, questions_correct, unique;
  };
  std::map<std::string, Gen> gens;
  std::map<std::string, size_t> overlap;
  for (const auto& r : run.records) {
    std::string qid = r["question_id"].get<std::string>();
    std::set<std::string> found;
    const json& cands = run::field(r, "candidates");
    if (cands.is_array())
      for (const auto& c : cands) {
        Gen& g = gens[run::string_field(c, "generator", "unknown")];
        ++g.candidates;
        g.questions.insert(qid);
        if (run::tri_bool(run::field(c, "executable_before_fix")) == 1) ++g.exec_before;
        if (run::tri_bool(run::field(c, "executable_after_fix")) == 1) ++g.exec_after;
        if (run::field(c, "fix_rounds").is_array()) g.fixed_rounds += c["fix_rounds"].size();
        if (run::tri_bool(run::field(c, "correct")) == 1) {
          ++g.correct;
          g.questions_correct.insert(qid);
          found.insert(run::string_field(c, "generator", "unknown"));
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

  // --- Curves vs number of candidates (CHASE-SQL Fig. 2).
  std::map<long, std::array<std::pair<size_t, size_t>, 4>> curves;  // k -> (hits, n) per series
  static const char* kSeries[] = {"upper", "lower", "self_consistency", "selector"};
  for (const auto& r : run.records) {
    const json& cs = run::field(r, "curves");
    if (!cs.is_object()) continue;
    for (const auto& [k, v] : cs.items()) {
      long kk = std::atol(k.c_str());
      if (kk <= 0) continue;
      auto& acc = curves[kk];
      for (int i = 0; i < 4; ++i) {
        int b = run::tri_bool(run::field(v, kSeries[i]));
        if (b < 0) continue;
        acc[i].first += static_cast<size_t>(b);
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

  // --- Selection errors of the primary selector.
  std::map<std::string, std::vector<std::string>> cats;
  for (const char* c : {"correct", "wrong_selection", "no_correct_candidate", "gold_unusable", "failed"}) cats[c];
  for (const auto& r : run.records) {
    std::string qid = r["question_id"].get<std::string>();
    std::string cat;
    if (run::string_field(r, "status", "ok") != "ok") cat = "failed";
    else if (run::tri_bool(run::field(run::field(r, "verdict"), "gold_unusable")) == 1) cat = "gold_unusable";
    else if (run::record_correct(r, metric)) cat = "correct";
    else {
      bool any = false;
      if (run::field(r, "candidates").is_array())
        for (const auto& c : r["candidates"]) any = any || run::tri_bool(run::field(c, "correct")) == 1;
      if (!any && run::tri_bool(run::field(run::field(r, "bounds"), "oracle")) == 1) any = true;
      cat = any ? "wrong_selection" : "no_correct_candidate";
    }
    cats[cat].push_back(qid);
  }
  json se = json::object();
  for (const auto& [k, ids] : cats) se[k] = {{"count", ids.size()}, {"pct", pct(ids.size(), n)}, {"question_ids", ids}};
  rep["selection_errors"] = se;

  // --- Tokens, cost, latency.
  std::map<std::string, json> usage;
  json total = {{"calls", 0.0}, {"prompt_tokens", 0.0}, {"completion_tokens", 0.0}, {"cost_usd", 0.0}, {"latency_s", 0.0}};
  for (const auto& r : run.records) {
    const json& u = run::field(r, "usage");
    if (!u.is_object()) continue;
    for (const auto& [stage, v] : u.items()) {
      json& acc = usage[stage];
      if (acc.is_null()) acc = {{"calls", 0.0}, {"prompt_tokens", 0.0}, {"completion_tokens", 0.0}, {"cost_usd", 0.0}, {"latency_s", 0.0}};
      for (const char* f : {"calls", "prompt_tokens", "completion_tokens", "cost_usd", "latency_s"}) {
        acc[f] = acc[f].get<double>() + run::number_field(v, f);
        total[f] = total[f].get<double>() + run::number_field(v, f);
      }
      // Prompts cut to fit the model's context: shown only when there were any.
      if (const double d = run::number_field(v, "degraded_prompts"); d > 0) {
        acc["degraded_prompts"] = acc.value("degraded_prompts", 0.0) + d;
        total["degraded_prompts"] = total.value("degraded_prompts", 0.0) + d;
      }
    }
  }
  json uj = json::object();
  for (auto& [k, v] : usage) uj[k] = v;
  rep["usage"] = {{"stages", uj}, {"total", total}, {"cost_per_question_usd", n ? total["cost_usd"].get<double>() / static_cast<double>(n) : 0.0}};
  // --- Model calls that failed after their retries, and the retries, summed from the records'
  // llm_faults (per stage, stored with the stage they belong to, so a resumed run keeps them).
  {
    int64_t failed = 0, retries = 0, questions_hit = 0, unread = 0, questions_unread = 0;
    std::map<std::string, int64_t> by_kind, unread_by_stage;
    for (const auto& r : run.records) {
      const json& f = run::field(r, "llm_faults");
      if (!f.is_object()) continue;
      int64_t qf = f.value("failed_calls", int64_t{0}), qr = f.value("retries", int64_t{0});
      failed += qf;
      retries += qr;
      questions_hit += (qf + qr) > 0;
      const json kinds = f.value("failed_by_kind", json::object());
      for (const auto& [k, v] : kinds.items())
        if (v.is_number_integer()) by_kind[k] += v.get<int64_t>();
      // Answers no reader could use (absent from records written before they were counted).
      const int64_t qp = f.value("parse_failures", int64_t{0});
      unread += qp;
      questions_unread += qp > 0;
      const json stages = f.value("parse_failures_by_stage", json::object());
      for (const auto& [k, v] : stages.items())
        if (v.is_number_integer()) unread_by_stage[k] += v.get<int64_t>();
    }
    rep["llm_faults"] = {{"failed_calls", failed}, {"retries", retries},
                         {"failed_by_kind", by_kind}, {"questions_affected", questions_hit},
                         {"parse_failures", unread}, {"parse_failures_by_stage", unread_by_stage},
                         {"questions_with_parse_failures", questions_unread}};
  }
  json lat = json::object();
  std::set<std::string> lat_stages(kStages.begin(), kStages.end());
  for (const auto& r : run.records)
    if (run::field(r, "latency_s").is_object())
      for (const auto& [k, _] : r["latency_s"].items()) lat_stages.insert(k);
  for (const auto& s : lat_stages) {
    std::vector<double> xs;
    for (const auto& r : run.records) {
      const json& v = run::field(run::field(r, "latency_s"), s.c_str());
      if (v.is_number()) xs.push_back(v.get<double>());
    }
    if (xs.empty()) continue;
    double sum = 0;
    for (double x : xs) sum += x;
    lat[s] = {{"n", xs.size()}, {"mean", sum / static_cast<double>(xs.size())}, {"p50", percentile(xs, 0.5)},
              {"p90", percentile(xs, 0.9)}, {"p95", percentile(xs, 0.95)}, {"max", percentile(xs, 1.0)}};
  }
  rep["latency_s"] = lat;

  // --- WMA weights after each question.
  json weights = json::object();
  for (const auto& r : run.records) {
    const json& w = run::field(r, "weights");
    if (!w.is_object()) continue;
    for (const auto& [expert, v] : w.items())
      if (v.is_number()) weights[expert].push_back({r["index"], v});
  }
  if (!weights.empty()) rep["weights"] = weights;

  rep["questions"] = run.records;
  return rep;
}

std::string render_markdown(const json& rep) {
  std::string md;
  const json& run = rep["run"];
  md += fmt::format("# nl2sql run report: {}\n\n", md_cell(run["title"].get<std::string>()));
  if (rep["simulated"].get<bool>())
    md += "> **SIMULATED — not a model's accuracy.** The answers come from the offline `sim` provider, "
          "which derives them from the gold SQL.\n\n";
  const json& man = run["manifest"];
  md += fmt::format("Benchmark `{}` split `{}`, {} of {} questions recorded, primary metric `{}`, primary selector `{}`.\n",
                    md_cell(run::string_field(man, "benchmark", "?")), md_cell(run::string_field(man, "split", "?")),
                    rep["n_questions"].get<size_t>(), rep["n_expected"].get<size_t>(),
                    rep["primary_metric"].get<std::string>(), md_cell(rep["primary_selector"].get<std::string>()));
  md += fmt::format("Dataset fingerprint `{}`, config hash `{}`, seed {}, tool {}.\n\n",
                    md_cell(run::string_field(man, "dataset_fingerprint")), md_cell(run::string_field(man, "config_hash")),
                    md_cell(run::string_field(man, "seed")), md_cell(run::string_field(man, "tool_version")));
  const json& ov = rep["ex"]["overall"];
  md += fmt::format("**EX {:.2f}%** (95% CI [{:.2f}, {:.2f}]), {} / {} correct; {} failed questions.\n\n",
                    ov["ex"].get<double>(), ov["ci95"][0].get<double>(), ov["ci95"][1].get<double>(),
                    rep["ex"]["overall"]["correct"].get<size_t>(),
                    rep["ex"]["overall"]["n"].get<size_t>(), rep["errors"].size());
  auto group_table = [&](const char* title, const json& g) {
    if (g.empty()) return;
    md += fmt::format("## EX by {}\n\n| {} | n | correct | EX % [95% CI] |\n|---|---:|---:|---|\n", title, title);
    for (const auto& [k, v] : g.items())
      md += fmt::format("| {} | {} | {} | {} |\n", md_cell(k), v["n"].get<size_t>(), v["correct"].get<size_t>(), ci_text(v));
    md += "\n";
  };
  group_table("difficulty", rep["ex"]["by_difficulty"]);
  group_table("database", rep["ex"]["by_db"]);
  group_table("SQL feature", rep["ex"]["by_feature"]);
  if (!rep["metrics"].empty()) {
    md += "## Evaluator metrics\n\n| metric | EX % [95% CI] | EX % excluding unusable gold |\n|---|---|---:|\n";
    for (const auto& [k, v] : rep["metrics"].items())
      md += fmt::format("| {} | {} | {} |\n", md_cell(k), ci_text(v), fmt_num(v["ex_usable_gold"].get<double>()));
    md += fmt::format("\nSoft-F1 {}; outcomes:", fmt_num(rep["soft_f1"].get<double>() * 100));
    for (const auto& [k, v] : rep["outcomes"].items()) md += fmt::format(" {} {}", md_cell(k), v.get<size_t>());
    md += fmt::format("; gold unusable {}; tie-dependent gold {}.\n\n", rep["gold_unusable"].size(), rep["tie_dependent"].size());
  }
  md += "## Selectors\n\n| selector | EX % [95% CI] | LLM calls | cost USD |\n|---|---|---:|---:|\n";
  for (const auto& [k, v] : rep["selectors"].items())
    md += fmt::format("| {}{} | {} | {} | {} |\n", md_cell(k), v["primary"].get<bool>() ? " (primary)" : "", ci_text(v),
                      fmt_num(v["llm_calls"].get<double>(), 0), fmt_num(v["cost_usd"].get<double>(), 4));
  md += fmt::format("| oracle (upper bound) | {} | | |\n| adversarial (lower bound) | {} | | |\n\n",
                    ci_text(rep["bounds"]["oracle"]), ci_text(rep["bounds"]["adversarial"]));
  if (!rep["gold_disputes"].empty()) {
    std::string ids;
    for (const auto& g : rep["gold_disputes"]) ids += (ids.empty() ? "" : ", ") + g["question_id"].get<std::string>();
    md += fmt::format("Separating-instance duels where the model's answer on D′ disagrees with gold's (evidence "
                      "against the gold SQL): {} question(s): {}.\n\n",
                      rep["gold_disputes"].size(), md_cell(ids));
  }
  if (!rep["generators"].empty()) {
    md += "## Generators\n\n| generator | candidates | executable before fix % | after fix % | correct candidates | questions with a correct one | unique correct | upper bound % |\n|---|---:|---:|---:|---:|---:|---:|---:|\n";
    for (const auto& [k, v] : rep["generators"].items())
      md += fmt::format("| {} | {} | {} | {} | {} | {} | {} | {} |\n", md_cell(k), v["candidates"].get<size_t>(),
                        fmt_num(v["executable_before_fix_pct"].get<double>()), fmt_num(v["executable_after_fix_pct"].get<double>()),
                        v["correct_candidates"].get<size_t>(), v["questions_with_correct"].get<size_t>(),
                        v["unique_correct"].get<size_t>(), fmt_num(v["upper_bound_pct"].get<double>()));
    md += "\nWhich generators found a correct candidate (questions per exact set):\n\n| generators | questions |\n|---|---:|\n";
    for (const auto& e : rep["overlap"]) {
      std::string names;
      for (const auto& g : e["generators"]) names += (names.empty() ? "" : " + ") + g.get<std::string>();
      md += fmt::format("| {} | {} |\n", names.empty() ? "(none)" : md_cell(names), e["questions"].get<size_t>());
    }
    md += "\n";
  }
  if (!rep["curves"].empty()) {
    md += "## Accuracy vs number of candidates\n\n| candidates | upper bound % | lower bound % | self-consistency % | selector % |\n|---:|---:|---:|---:|---:|\n";
    auto cell = [](const json& v) { return v.is_number() ? fmt_num(v.get<double>()) : std::string("–"); };
    for (const auto& p : rep["curves"])
      md += fmt::format("| {} | {} | {} | {} | {} |\n", p["k"].get<long>(), cell(p["upper"]), cell(p["lower"]),
                        cell(p["self_consistency"]), cell(p["selector"]));
    md += "\n";
  }
  md += "## Selection errors (primary selector)\n\n| case | questions | % |\n|---|---:|---:|\n";
  for (const char* k : {"correct", "wrong_selection", "no_correct_candidate", "gold_unusable", "failed"}) {
    const json& v = rep["selection_errors"][k];
    md += fmt::format("| {} | {} | {} |\n", k, v["count"].get<size_t>(), fmt_num(v["pct"].get<double>()));
  }
  md += "\n## Tokens, cost and latency\n\n| stage | calls | prompt tokens | completion tokens | cost USD |\n|---|---:|---:|---:|---:|\n";
  for (const auto& [k, v] : rep["usage"]["stages"].items())
    md += fmt::format("| {} | {} | {} | {} | {} |\n", md_cell(k), fmt_num(v["calls"].get<double>(), 0),
                      fmt_num(v["prompt_tokens"].get<double>(), 0), fmt_num(v["completion_tokens"].get<double>(), 0),
                      fmt_num(v["cost_usd"].get<double>(), 4));
  const json& t = rep["usage"]["total"];
  md += fmt::format("| **total** | {} | {} | {} | {} |\n\n", fmt_num(t["calls"].get<double>(), 0),
                    fmt_num(t["prompt_tokens"].get<double>(), 0), fmt_num(t["completion_tokens"].get<double>(), 0),
                    fmt_num(t["cost_usd"].get<double>(), 4));
  if (t.value("degraded_prompts", 0.0) > 0) {
    md += "Prompts whose schema was lightened to fit the model's context (llm.models.*.context_tokens): ";
    std::string parts;
    for (const auto& [k, v] : rep["usage"]["stages"].items())
      if (v.value("degraded_prompts", 0.0) > 0)
        parts += (parts.empty() ? "" : ", ") + md_cell(k) + " " + fmt_num(v["degraded_prompts"].get<double>(), 0);
    md += parts + ".\n\n";
  }
  if (rep.contains("llm_faults")) {
    const json& f = rep["llm_faults"];
    md += fmt::format("Model calls failed after retries: {}; retries: {}; questions affected: {}",
                      f["failed_calls"].get<int64_t>(), f["retries"].get<int64_t>(),
                      f["questions_affected"].get<int64_t>());
    std::string kinds;
    for (const auto& [k, v] : f["failed_by_kind"].items())
      kinds += fmt::format("{}{} {}", kinds.empty() ? "" : ", ", md_cell(k), v.get<int64_t>());
    md += kinds.empty() ? ".\n\n" : " (" + kinds + ").\n\n";
    if (f.value("parse_failures", int64_t{0}) > 0) {
      std::string stages;
      const json by_stage = f.value("parse_failures_by_stage", json::object());
      for (const auto& [k, v] : by_stage.items())
        stages += fmt::format("{}{} {}", stages.empty() ? "" : ", ", md_cell(k), v.get<int64_t>());
      md += fmt::format("Answers that could not be read (parse failures): {} in {} question(s) ({}).\n\n",
                        f["parse_failures"].get<int64_t>(), f.value("questions_with_parse_failures", int64_t{0}),
                        stages);
    }
  }
  md += "| stage | latency p50 s | p90 s | p95 s | max s |\n|---|---:|---:|---:|---:|\n";
  for (const auto& [k, v] : rep["latency_s"].items())
    md += fmt::format("| {} | {} | {} | {} | {} |\n", md_cell(k), fmt_num(v["p50"].get<double>(), 3),
                      fmt_num(v["p90"].get<double>(), 3), fmt_num(v["p95"].get<double>(), 3), fmt_num(v["max"].get<double>(), 3));
  if (rep.contains("weights")) {
    md += "\n## WMA weights (last value)\n\n| expert | weight |\n|---|---:|\n";
    for (const auto& [k, v] : rep["weights"].items())
      md += fmt::format("| {} | {} |\n", md_cell(k), fmt_num(v.back()[1].get<double>(), 4));
  }
  if (!rep["skipped"].empty()) {
    md += "\n## Skipped questions (database missing)\n\n| question | db_id | reason |\n|---|---|---|\n";
    for (const auto& e : rep["skipped"])
      md += fmt::format("| {} | {} | {} |\n", md_cell(e.value("question_id", "")), md_cell(e.value("db_id", "")),
                        md_cell(e.value("reason", "")));
  }
  if (!rep["errors"].empty()) {
    md += "\n## Failed questions\n\n| question | error |\n|---|---|\n";
    for (const auto& e : rep["errors"])
      md += fmt::format("| {} | {} |\n", md_cell(e["question_id"].get<std::string>()), md_cell(e["error"].get<std::string>()));
  }
  return md;
}

std::string render_csv(const run::RunData& run) {
  const std::string metric = run::primary_metric(run.manifest);
  std::set<std::string> sels;
  for (const auto& r : run.records)
    if (run::field(r, "selections").is_object())
      for (const auto& [k, _] : r["selections"].items()) sels.insert(k);
  std::string out = "question_id,index,db_id,difficulty,status,correct,outcome,features,candidates,correct_candidates,oracle,adversarial";
  for (const auto& s : sels) out += "," + eval::csv_field("sel_" + s);
  out += ",cost_usd,latency_s,prediction,error\n";
  for (const auto& r : run.records) {
    size_t nc = 0, ncc = 0;
    if (run::field(r, "candidates").is_array())
      for (const auto& c : r["candidates"]) {
        ++nc;
        if (run::tri_bool(run::field(c, "correct")) == 1) ++ncc;
      }
    std::string feats;
    if (run::field(r, "features").is_array())
      for (const auto& f : r["features"]) if (f.is_string()) feats += (feats.empty() ? "" : ";") + f.get<std::string>();
    double cost = 0;
    if (run::field(r, "usage").is_object())
      for (const auto& [_, u] : r["usage"].items()) cost += run::number_field(u, "cost_usd");
    auto b = [](const json& v) { int t = run::tri_bool(v); return t < 0 ? std::string() : std::to_string(t); };
    out += fmt::format("{},{},{},{},{},{},{},{},{},{},{},{}", eval::csv_field(run::string_field(r, "question_id")),
                       r["index"].get<long>(), eval::csv_field(run::string_field(r, "db_id")),
                       eval::csv_field(run::string_field(r, "difficulty")), eval::csv_field(run::string_field(r, "status", "ok")),
                       run::record_correct(r, metric) ? 1 : 0, eval::csv_field(run::string_field(run::field(r, "verdict"), "outcome")),
                       eval::csv_field(feats), nc, ncc, b(run::field(run::field(r, "bounds"), "oracle")),
                       b(run::field(run::field(r, "bounds"), "adversarial")));
    for (const auto& s : sels) out += "," + b(run::field(run::field(run::field(r, "selections"), s.c_str()), "correct"));
    out += fmt::format(",{},{},{},{}\n", fmt_num(cost, 6), fmt_num(run::number_field(run::field(r, "latency_s"), "total"), 3),
                       eval::csv_field(run::string_field(r, "prediction")), eval::csv_field(run::string_field(r, "error")));
  }
  return out;
}

Status write_reports(const run::RunData& run, const std::filesystem::path& out_dir, const ReportOptions& o) {
  std::error_code ec;
  std::filesystem::create_directories(out_dir, ec);
  if (ec) return io_error("cannot create " + out_dir.string() + ": " + ec.message());
  json rep = build_report(run, o);
  NL2SQL_RETURN_IF_ERROR(core::write_file_atomic(out_dir / "report.json", rep.dump(1, ' ', false, json::error_handler_t::replace) + "\n"));
  NL2SQL_RETURN_IF_ERROR(core::write_file_atomic(out_dir / "report.md", render_markdown(rep)));
  NL2SQL_RETURN_IF_ERROR(core::write_file_atomic(out_dir / "per_question.csv", render_csv(run)));
  if (o.html) NL2SQL_RETURN_IF_ERROR(core::write_file_atomic(out_dir / "report.html", render_html(rep, run, o)));
  return Status::ok();
}

Status write_run_reports(const std::filesystem::path& dir) {
  auto reading = run::RunFolderLock::acquire_shared(dir);
  if (!reading) return reading.status();
  auto data = run::load_run(dir);
  if (!data) return data.status();
  auto options = ReportOptions::from_config(data->config);
  if (!options) return options.status();
  return write_reports(*data, dir, *options);
}

}  // namespace nl2sql::report
