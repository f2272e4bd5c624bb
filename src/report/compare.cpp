#include "nl2sql/report/compare.h"
#include "nl2sql/run/run_data.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <set>

#include <fmt/format.h>

#include "nl2sql/core/hash.h"
#include "nl2sql/report/run_report.h"

namespace nl2sql::report {
using nlohmann::json;

McNemar mcnemar(size_t b, size_t c) {
  McNemar m;
  m.b = b;
  m.c = c;
  size_t n = b + c;
  if (n < 25) {
    m.method = "exact_binomial";
    size_t k = std::min(b, c);
    m.statistic = static_cast<double>(k);
    if (n == 0) {
      m.p_value = 1;
      return m;
    }
    // P[X <= k] for X ~ Bin(n, 1/2), summed in log space for accuracy.
    double tail = 0;
    for (size_t i = 0; i <= k; ++i)
      tail += std::exp(std::lgamma(n + 1.0) - std::lgamma(i + 1.0) - std::lgamma(n - i + 1.0) - static_cast<double>(n) * std::log(2.0));
    m.p_value = std::min(1.0, 2 * tail);
    return m;
  }
  m.method = "chi2_continuity";
  double d = std::fabs(static_cast<double>(b) - static_cast<double>(c)) - 1.0;
  m.statistic = d * d / static_cast<double>(n);
  m.p_value = std::erfc(std::sqrt(m.statistic / 2.0));  // survival function of chi-square, 1 df
  return m;
}

eval::Interval paired_bootstrap_diff(const std::vector<int>& a, const std::vector<int>& b, int samples, uint64_t seed) {
  const size_t n = std::min(a.size(), b.size());
  if (n == 0 || samples <= 0) return {};
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<size_t> pick(0, n - 1);
  std::vector<double> diffs;
  diffs.reserve(static_cast<size_t>(samples));
  for (int s = 0; s < samples; ++s) {
    long d = 0;
    for (size_t i = 0; i < n; ++i) {
      size_t j = pick(rng);
      d += b[j] - a[j];
    }
    diffs.push_back(100.0 * static_cast<double>(d) / static_cast<double>(n));
  }
  std::sort(diffs.begin(), diffs.end());
  auto at = [&](double q) {
    size_t idx = static_cast<size_t>(q * static_cast<double>(diffs.size() - 1) + 0.5);
    return diffs[std::min(idx, diffs.size() - 1)];
  };
  return {at(0.025), at(0.975)};
}

namespace {

// A run's tokens and cost as its report states them (usage_report), per stage and in total,
// without the per-question figure (runs of different sizes are compared by their totals).
json usage_of(const run::RunData& run) {
  json u = usage_report(run);
  return {{"stages", u["stages"]}, {"total", u["total"]}};
}

// One run's usage row in the comparison's tables.
std::string usage_cells(const json& row) {
  return fmt::format("{:.0f} | {} | {:.0f} | {} | {:.4f}", row["prompt_tokens"].get<double>(), cached_tokens_cell(row),
                     row["completion_tokens"].get<double>(), reasoning_tokens_cell(row), row["cost_usd"].get<double>());
}

}  // namespace

json compare_runs(const std::vector<run::RunData>& runs, const CompareOptions& o) {
  json out;
  out["runs"] = json::array();
  out["comparisons"] = json::array();
  if (runs.empty()) return out;
  // question_id -> correct, per run
  std::vector<std::map<std::string, int>> correct(runs.size());
  std::map<std::string, std::pair<int64_t, std::string>> info;  // index, db_id (from the baseline)
  for (size_t r = 0; r < runs.size(); ++r) {
    std::string metric = run::primary_metric(runs[r].manifest);
    for (const auto& rec : runs[r].records) {
      const std::string& id = rec.question_id;
      correct[r][id] = rec.correct(metric) ? 1 : 0;
      if (!info.count(id)) info[id] = {rec.index, rec.db_id};
    }
  }
  std::vector<std::string> common;
  for (const auto& [id, _] : correct[0]) {
    bool all = true;
    for (size_t r = 1; r < runs.size(); ++r) all = all && correct[r].count(id);
    if (all) common.push_back(id);
  }
  std::sort(common.begin(), common.end(), [&](const auto& x, const auto& y) { return info[x] < info[y]; });
  out["common_questions"] = common.size();
  auto pct = [](long k, size_t n) { return n ? 100.0 * static_cast<double>(k) / static_cast<double>(n) : 0.0; };
  std::vector<std::vector<int>> vec(runs.size());
  for (size_t r = 0; r < runs.size(); ++r) {
    long all = 0, k = 0;
    for (const auto& [_, c] : correct[r]) all += c;
    for (const auto& id : common) {
      vec[r].push_back(correct[r][id]);
      k += correct[r][id];
    }
    auto ci = eval::bootstrap_ci(vec[r], o.bootstrap_samples, o.bootstrap_seed ^ core::xxh64(runs[r].name));
    out["runs"].push_back({{"name", runs[r].name},
                           {"n", correct[r].size()},
                           {"ex_all", pct(all, correct[r].size())},
                           {"correct_common", k},
                           {"ex_common", pct(k, common.size())},
                           {"ci95", {ci.low, ci.high}},
                           {"simulated", run::tri_bool(run::field(runs[r].manifest, "simulated")) == 1},
                           {"usage", usage_of(runs[r])}});
  }
  for (size_t r = 1; r < runs.size(); ++r) {
    size_t b = 0, c = 0;
    json flipped = json::array();
    for (size_t i = 0; i < common.size(); ++i) {
      int x = vec[0][i], y = vec[r][i];
      if (x == y) continue;
      (x ? b : c)++;
      if (o.max_flips_listed == 0 || flipped.size() < o.max_flips_listed)
        flipped.push_back({{"question_id", common[i]}, {"db_id", info[common[i]].second}, {"baseline", x == 1}, {"run", y == 1}});
    }
    McNemar m = mcnemar(b, c);
    auto ci = paired_bootstrap_diff(vec[0], vec[r], o.bootstrap_samples, o.bootstrap_seed + r);
    double ea = out["runs"][0]["ex_common"].get<double>(), eb = out["runs"][r]["ex_common"].get<double>();
    out["comparisons"].push_back({{"baseline", runs[0].name},
                                  {"run", runs[r].name},
                                  {"ex_baseline", ea},
                                  {"ex_run", eb},
                                  {"diff", eb - ea},
                                  {"diff_ci95", {ci.low, ci.high}},
                                  {"mcnemar", {{"b", m.b}, {"c", m.c}, {"statistic", m.statistic}, {"p_value", m.p_value}, {"method", m.method}}},
                                  {"flipped", flipped}});
  }
  return out;
}

std::string compare_markdown(const json& cmp) {
  std::string md = fmt::format("# Run comparison ({} common questions)\n\n", cmp["common_questions"].get<size_t>());
  bool sim = false;
  for (const auto& r : cmp["runs"]) sim = sim || r["simulated"].get<bool>();
  if (sim) md += "> **SIMULATED — not a model's accuracy** (at least one run used the `sim` provider).\n\n";
  md += "| run | questions | EX % (all) | EX % (common) | 95% CI | Δ vs baseline (pp) | 95% CI of Δ | McNemar b / c | p | test |\n"
        "|---|---:|---:|---:|---|---:|---|---:|---:|---|\n";
  for (size_t i = 0; i < cmp["runs"].size(); ++i) {
    const json& r = cmp["runs"][i];
    md += fmt::format("| {} | {} | {:.2f} | {:.2f} | [{:.2f}, {:.2f}] |", r["name"].get<std::string>(), r["n"].get<size_t>(),
                      r["ex_all"].get<double>(), r["ex_common"].get<double>(), r["ci95"][0].get<double>(), r["ci95"][1].get<double>());
    if (i == 0) {
      md += " (baseline) | | | | |\n";
      continue;
    }
    const json& c = cmp["comparisons"][i - 1];
    md += fmt::format(" {:+.2f} | [{:+.2f}, {:+.2f}] | {} / {} | {:.4g} | {} |\n", c["diff"].get<double>(), c["diff_ci95"][0].get<double>(),
                      c["diff_ci95"][1].get<double>(), c["mcnemar"]["b"].get<size_t>(), c["mcnemar"]["c"].get<size_t>(),
                      c["mcnemar"]["p_value"].get<double>(), c["mcnemar"]["method"].get<std::string>());
  }
  md += "\nb: right in the baseline and wrong in the run; c: the reverse. McNemar: exact binomial when b + c < 25, "
        "else chi-square with continuity correction.\n";
  md += "\n## Tokens and cost\n\nCached: prompt tokens the provider's prompt cache served (not nl2sql's response "
        "cache); reasoning: completion tokens spent reasoning, as each server reported them.\n\n"
        "| stage | run | prompt tokens | of which cached | completion tokens | of which reasoning | cost USD |\n"
        "|---|---|---:|---:|---:|---:|---:|\n";
  std::set<std::string> stages;
  for (const auto& r : cmp["runs"])
    if (r.contains("usage"))
      for (const auto& [k, _] : r["usage"]["stages"].items()) stages.insert(k);
  for (const auto& stage : stages)
    for (const auto& r : cmp["runs"])
      if (r.contains("usage") && r["usage"]["stages"].contains(stage))
        md += fmt::format("| {} | {} | {} |\n", stage, r["name"].get<std::string>(), usage_cells(r["usage"]["stages"][stage]));
  for (const auto& r : cmp["runs"])
    if (r.contains("usage"))
      md += fmt::format("| **total** | {} | {} |\n", r["name"].get<std::string>(), usage_cells(r["usage"]["total"]));
  for (const auto& c : cmp["comparisons"]) {
    if (c["flipped"].empty()) continue;
    md += fmt::format("\n## Flipped: {} vs {}\n\n| question | db | baseline | run |\n|---|---|---|---|\n", c["baseline"].get<std::string>(),
                      c["run"].get<std::string>());
    for (const auto& f : c["flipped"])
      md += fmt::format("| {} | {} | {} | {} |\n", f["question_id"].get<std::string>(), f["db_id"].get<std::string>(),
                        f["baseline"].get<bool>() ? "✓" : "✗", f["run"].get<bool>() ? "✓" : "✗");
  }
  return md;
}

}  // namespace nl2sql::report
