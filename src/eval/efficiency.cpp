// VES / R-VES, timed and on SQLite's step counters (see efficiency.h for the official rules).
#include "nl2sql/eval/efficiency.h"

#include <sqlite3.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <limits>
#include <memory>
#include <numeric>
#include <random>
#include <set>
#include <thread>

#include <fmt/format.h>

#include "nl2sql/core/thread_pool.h"
#include "nl2sql/db/result_compare.h"

namespace nl2sql::eval {
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

const char* efficiency_metric_name(EfficiencyMetric m) {
  switch (m) {
    case EfficiencyMetric::kVes: return "ves";
    case EfficiencyMetric::kRves: return "rves";
    case EfficiencyMetric::kVesSteps: return "ves_steps";
    case EfficiencyMetric::kRvesSteps: return "rves_steps";
  }
  return "?";
}

bool parse_efficiency_metric(const std::string& name, EfficiencyMetric* out) {
  std::string n = name;
  std::replace(n.begin(), n.end(), '_', '-');
  if (n == "ves") *out = EfficiencyMetric::kVes;
  else if (n == "rves") *out = EfficiencyMetric::kRves;
  else if (n == "ves-steps") *out = EfficiencyMetric::kVesSteps;
  else if (n == "rves-steps") *out = EfficiencyMetric::kRvesSteps;
  else return false;
  return true;
}

double ves_reward(double ratio) { return ratio > 0 ? std::sqrt(ratio) * 100.0 : 0.0; }

namespace {
double rves_step(double ratio) {
  if (ratio == 0) return 0;  // the script's test: incorrect pairs carry ratio 0
  if (ratio >= 2) return 1.25;
  if (ratio >= 1) return 1;
  if (ratio >= 0.5) return 0.75;
  if (ratio >= 0.25) return 0.5;
  return 0.25;
}
}  // namespace

double rves_reward(double ratio) { return std::sqrt(rves_step(ratio)) * 100.0; }

const std::vector<double>& rves_boundaries() {
  static const std::vector<double> b = {0.25, 0.5, 1.0, 2.0};
  return b;
}

FilteredRatios drop_outliers(const std::vector<double>& ratios) {
  FilteredRatios f;
  if (ratios.empty()) return f;
  const double n = static_cast<double>(ratios.size());
  const double mean = std::accumulate(ratios.begin(), ratios.end(), 0.0) / n;
  double var = 0;
  for (double r : ratios) var += (r - mean) * (r - mean);
  const double sd = std::sqrt(var / n);  // numpy's np.std: population σ
  std::vector<double> kept;
  for (double r : ratios)
    if (r < mean + 3 * sd && r > mean - 3 * sd) kept.push_back(r);  // strict, as the script
  if (kept.empty()) return f;  // the script divides by len(kept) = 0: the pair scores 0
  f.kept = kept.size();
  const double k = static_cast<double>(kept.size());
  f.mean = std::accumulate(kept.begin(), kept.end(), 0.0) / k;
  double kv = 0;
  for (double r : kept) kv += (r - f.mean) * (r - f.mean);
  f.sd = std::sqrt(kv / k);
  const double half = 1.96 * f.sd / std::sqrt(k);
  f.low = f.mean - half;
  f.high = f.mean + half;
  // Independent rounds: Student's t on the sample σ (with 3 rounds, 1.96·σ/√3 is far too
  // narrow); the t of the largest tabulated df not above kept − 1, so never narrower than exact.
  double rerun_half = half;
  if (kept.size() >= 2) {
    static constexpr std::pair<size_t, double> kT[] = {{1, 12.706}, {2, 4.303}, {3, 3.182}, {4, 2.776}, {5, 2.571},
                                                       {6, 2.447},  {7, 2.365}, {8, 2.306}, {9, 2.262}, {10, 2.228},
                                                       {15, 2.131}, {20, 2.086}, {30, 2.042}, {60, 2.000}, {120, 1.980}};
    const size_t df = kept.size() - 1;
    double t = kT[0].second;
    for (const auto& [d, v] : kT)
      if (d <= df) t = v;
    rerun_half = t * f.sd * std::sqrt(k / (k - 1)) / std::sqrt(k);
  }
  // Batch means over consecutive kept rounds: up to 10 batches of at least 5 rounds.
  const size_t batches = std::min<size_t>(10, kept.size() / 5);
  if (batches >= 2) {
    static constexpr double kT975[] = {12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262};
    std::vector<double> means(batches, 0.0);
    for (size_t b = 0; b < batches; ++b) {
      const size_t from = b * kept.size() / batches, to = (b + 1) * kept.size() / batches;
      means[b] = std::accumulate(kept.begin() + static_cast<std::ptrdiff_t>(from),
                                 kept.begin() + static_cast<std::ptrdiff_t>(to), 0.0) /
                 static_cast<double>(to - from);
    }
    const double bm = std::accumulate(means.begin(), means.end(), 0.0) / static_cast<double>(batches);
    double bv = 0;
    for (double m : means) bv += (m - bm) * (m - bm);
    const double se = std::sqrt(bv / static_cast<double>(batches - 1)) / std::sqrt(static_cast<double>(batches));
    rerun_half = std::max(rerun_half, kT975[batches - 2] * se);
  }
  rerun_half *= std::sqrt(2.0);  // the rerun's own noise beside this run's
  f.rerun_low = f.mean - rerun_half;
  f.rerun_high = f.mean + rerun_half;
  return f;
}

MeanInterval bootstrap_mean_ci(const std::vector<double>& values, int samples, uint64_t seed) {
  if (values.empty() || samples <= 0) return {};
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<size_t> pick(0, values.size() - 1);
  std::vector<double> means;
  means.reserve(static_cast<size_t>(samples));
  for (int s = 0; s < samples; ++s) {
    double sum = 0;
    for (size_t i = 0; i < values.size(); ++i) sum += values[pick(rng)];
    means.push_back(sum / static_cast<double>(values.size()));
  }
  std::sort(means.begin(), means.end());
  auto at = [&](double q) {
    size_t idx = static_cast<size_t>(q * static_cast<double>(means.size() - 1) + 0.5);
    return means[std::min(idx, means.size() - 1)];
  };
  return {at(0.025), at(0.975)};
}

namespace {
std::vector<double> average_ranks(const std::vector<double>& v) {
  std::vector<size_t> order(v.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return v[a] < v[b]; });
  std::vector<double> rank(v.size());
  for (size_t i = 0; i < order.size();) {
    size_t j = i;
    while (j + 1 < order.size() && v[order[j + 1]] == v[order[i]]) ++j;
    const double r = (static_cast<double>(i) + static_cast<double>(j)) / 2.0 + 1.0;
    for (size_t k = i; k <= j; ++k) rank[order[k]] = r;
    i = j + 1;
  }
  return rank;
}
}  // namespace

double spearman(const std::vector<double>& a, const std::vector<double>& b) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  if (a.size() != b.size() || a.size() < 2) return nan;
  auto ra = average_ranks(a), rb = average_ranks(b);
  const double n = static_cast<double>(a.size());
  const double ma = std::accumulate(ra.begin(), ra.end(), 0.0) / n;
  const double mb = std::accumulate(rb.begin(), rb.end(), 0.0) / n;
  double sab = 0, saa = 0, sbb = 0;
  for (size_t i = 0; i < ra.size(); ++i) {
    sab += (ra[i] - ma) * (rb[i] - mb);
    saa += (ra[i] - ma) * (ra[i] - ma);
    sbb += (rb[i] - mb) * (rb[i] - mb);
  }
  if (saa == 0 || sbb == 0) return nan;
  return sab / std::sqrt(saa * sbb);
}

namespace {

std::string cpu_description() {
  std::ifstream in("/proc/cpuinfo");
  std::string line, model;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      auto colon = line.find(':');
      if (colon != std::string::npos) model = line.substr(colon + 2);
      break;
    }
  }
  if (model.empty()) model = "unknown CPU";
  return fmt::format("{} ({} logical cores)", model, std::thread::hardware_concurrency());
}

double load_average() {
  std::ifstream in("/proc/loadavg");
  double l = -1;
  if (!(in >> l)) return -1;
  return l;
}

// The steps variants' cache entry: the counters of one execution as a one-row result, under
// a key that names SQLite's version (counts may change with it).
std::string steps_variant() { return std::string("vm-steps/") + sqlite3_libversion(); }

db::CachedExecution counters_entry(const db::StatementCounters& c) {
  db::CachedExecution e;
  e.result.result.columns = {"vm_steps", "vm_steps_first_row", "fullscan_steps", "sorts"};
  e.result.result.rows.push_back({db::Value::integer(c.vm_steps), db::Value::integer(c.vm_steps_first_row),
                                  db::Value::integer(c.fullscan_steps), db::Value::integer(c.sorts)});
  return e;
}

bool counters_from_entry(const db::CachedExecution& e, db::StatementCounters* c) {
  if (!e.result.ok() || e.result.result.rows.size() != 1 || e.result.result.rows[0].size() != 4) return false;
  const auto& r = e.result.result.rows[0];
  for (const auto& v : r)
    if (v.type != db::ValueType::kInteger) return false;
  c->vm_steps = r[0].i;
  c->vm_steps_first_row = r[1].i;
  c->fullscan_steps = r[2].i;
  c->sorts = r[3].i;
  return true;
}

// A ratio of counts as the scripts take a ratio of times; a statement always takes steps, so a
// zero count means it was not measured (scored 0, as a failed pair).
double count_ratio(int64_t gold, int64_t pred) {
  return pred > 0 ? static_cast<double>(gold) / static_cast<double>(pred) : 0.0;
}

// The timed rounds' connections: read-only, opened as the scripts' sqlite3.connect opens them,
// with file locking (not immutable=1). Each statement then takes and drops SQLite's shared lock
// and checks for a hot journal, about 10 us per query on superhero: a fixed cost inside the
// scripts' clock that an immutable connection skips, pushing small queries' ratios away from 1.
db::ExecutorOptions timed_executor_options() {
  db::ExecutorOptions o;
  o.immutable = false;
  return o;
}

bool wants(const EfficiencyOptions& o, EfficiencyMetric m) {
  return std::find(o.metrics.begin(), o.metrics.end(), m) != o.metrics.end();
}

}  // namespace

namespace {

// One efficiency measurement: correctness and step counts for every pair (parallel, cached),
// then the timed rounds one pair at a time. Holds what the steps share: the dataset, the
// predictions, the cache, each database's fingerprint and each pair's used budget.
class EfficiencyMeasurement {
 public:
  EfficiencyMeasurement(const data::Dataset& ds, const std::vector<PredictedSql>& preds,
                        const EfficiencyOptions& options, db::ResultCache* cache,
                        std::map<std::string, std::string> fingerprints, EfficiencyReport& report)
      : ds_(ds), preds_(preds), options_(options), cache_(cache), fingerprints_(std::move(fingerprints)),
        report_(report),
        budget_s_(options.timeout_s > 0 ? options.timeout_s * std::max(1, options.repeats) : 0.0),
        budget_used_s_(ds.questions.size(), 0.0) {}

  // Correctness (BIRD's set rule) and, for the steps metrics, step counts of pair i.
  void check_pair(size_t i) {
    const data::Question& q = ds_.questions[i];
    EfficiencyItem& item = report_.items[i];
    item.question_id = q.question_id;
    item.db_id = q.db_id;
    item.difficulty = q.difficulty;
    for (EfficiencyMetric m : options_.metrics) item.scores[efficiency_metric_name(m)] = {};
    if (!preds_[i].present) {
      item.status = "missing";
      return;
    }
    const fs::path& db_path = ds_.db_paths.at(q.db_id);
    const std::string& fp = fingerprints_.at(q.db_id);
    // The official fetchall has no row cap; the whole pair shares timeout × repeats.
    db::QueryLimits limits;
    limits.timeout_s = budget_s_;
    limits.row_cap = 0;
    const auto started = Clock::now();
    auto pred = run_cached(db_path, fp, preds_[i].sql, limits);
    if (!pred.ok()) {
      item.status = pred.status == db::ExecStatus::kTimeout ? "timeout" : "pred_error";
      item.error = pred.error;
      return;
    }
    if (budget_s_ > 0) {
      limits.timeout_s = budget_s_ - std::chrono::duration<double>(Clock::now() - started).count();
      if (limits.timeout_s <= 0) {
        item.status = "timeout";
        return;
      }
    }
    auto gold = run_cached(db_path, fp, q.gold_sql, limits);
    if (!gold.ok()) {
      item.status = gold.status == db::ExecStatus::kTimeout ? "timeout" : "gold_error";
      item.error = gold.error;
      return;
    }
    budget_used_s_[i] = std::chrono::duration<double>(Clock::now() - started).count();
    if (!db::bird_equal(pred.result, gold.result)) {
      item.status = "incorrect";
      return;
    }
    item.status = "ok";
    if (wants(options_, EfficiencyMetric::kVesSteps) || wants(options_, EfficiencyMetric::kRvesSteps))
      score_steps(db_path, fp, preds_[i].sql, q.gold_sql, item);
  }

  // The timed rounds of a correct pair i, then its VES / R-VES scores.
  void time_pair(size_t i) {
    EfficiencyItem& item = report_.items[i];
    std::vector<double> first_ratios, whole_ratios;
    const auto started = Clock::now();
    std::string failure;
    for (int round = 0; round < options_.repeats && failure.empty(); ++round) {
      double first = 0, whole = 0;
      if (!time_round(i, started, item, &failure, &first, &whole)) break;
      first_ratios.push_back(first);
      whole_ratios.push_back(whole);
    }
    if (!failure.empty()) {
      // The timed scores are 0, as the script's; the steps ones do not depend on the clock.
      item.timed_failure = failure;
      for (EfficiencyMetric m : {EfficiencyMetric::kVes, EfficiencyMetric::kRves})
        if (wants(options_, m)) item.scores[efficiency_metric_name(m)] = {};
      return;
    }
    score_timed(first_ratios, whole_ratios, item);
  }

 private:
  // Through the cache (timeouts are never stored there, so a pair that ran out is rerun).
  db::ExecutionResult run_cached(const fs::path& db_path, const std::string& fp, const std::string& sql,
                                 const db::QueryLimits& limits) {
    std::string key;
    if (cache_) {
      key = db::ResultCache::key(fp, sql);
      if (auto hit = cache_->get(key, limits.row_cap)) return std::move(hit->result);
    }
    db::CachedExecution e;
    e.result = shared_.run(db_path, sql, limits);
    e.row_cap = limits.row_cap;
    if (cache_) cache_->put(key, e);
    return std::move(e.result);
  }

  bool step_counts(const fs::path& db_path, const std::string& fp, const std::string& sql,
                   const db::QueryLimits& limits, db::StatementCounters* c, std::string* error) {
    std::string key;
    if (cache_) {
      key = db::ResultCache::key(fp, sql, steps_variant());
      if (auto hit = cache_->get(key, 0); hit && counters_from_entry(*hit, c)) return true;
    }
    auto r = shared_.run(db_path, sql, limits);
    if (!r.ok()) {
      *error = r.error;
      return false;
    }
    *c = r.counters;
    if (cache_) cache_->put(key, counters_entry(*c));
    return true;
  }

  void score_steps(const fs::path& db_path, const std::string& fp, const std::string& pred_sql,
                   const std::string& gold_sql, EfficiencyItem& item) {
    db::QueryLimits step_limits;
    step_limits.timeout_s = options_.timeout_s;
    step_limits.row_cap = 0;
    std::string error;
    if (!step_counts(db_path, fp, pred_sql, step_limits, &item.pred_counters, &error) ||
        !step_counts(db_path, fp, gold_sql, step_limits, &item.gold_counters, &error)) {
      item.error = "step count: " + error;
      return;  // the steps scores stay 0
    }
    for (EfficiencyMetric m : {EfficiencyMetric::kVesSteps, EfficiencyMetric::kRvesSteps}) {
      if (!wants(options_, m)) continue;
      EfficiencyScore& s = item.scores[efficiency_metric_name(m)];
      const bool first_row = m == EfficiencyMetric::kVesSteps;
      s.ratio = first_row ? count_ratio(item.gold_counters.vm_steps_first_row, item.pred_counters.vm_steps_first_row)
                          : count_ratio(item.gold_counters.vm_steps, item.pred_counters.vm_steps);
      s.ratio_low = s.ratio_high = s.rerun_low = s.rerun_high = s.ratio;
      s.rounds = s.kept = 1;
      s.reward = first_row ? ves_reward(s.ratio) : rves_reward(s.ratio);
    }
  }

  // One round of pair i: the prediction then gold, each on a fresh connection of a fresh
  // executor (opened before the clock starts: the timings begin at prepare). Gives gold's time
  // over the prediction's to the first row and to the end; false with `failure` when it fails.
  bool time_round(size_t i, Clock::time_point started, EfficiencyItem& item, std::string* failure,
                  double* first_ratio, double* whole_ratio) {
    const data::Question& q = ds_.questions[i];
    const fs::path& db_path = ds_.db_paths.at(q.db_id);
    double t[2][2] = {{0, 0}, {0, 0}};  // [pred, gold][first row, whole]
    for (int side = 0; side < 2; ++side) {
      db::QueryLimits limits;
      limits.row_cap = 0;
      limits.step_on_caller = true;
      if (budget_s_ > 0) {
        limits.timeout_s =
            budget_s_ - budget_used_s_[i] - std::chrono::duration<double>(Clock::now() - started).count();
        if (limits.timeout_s <= 0) {
          *failure = "timeout";
          return false;
        }
      }
      auto fresh = std::make_unique<db::Executor>(timed_executor_options());
      auto r = fresh->run(db_path, side == 0 ? preds_[i].sql : q.gold_sql, limits);
      // mini-dev's clock also covers conn.close(): closing the executor closes its connection.
      const auto close_started = Clock::now();
      fresh.reset();
      const double close_ms = std::chrono::duration<double, std::milli>(Clock::now() - close_started).count();
      if (!r.ok()) {
        *failure = r.status == db::ExecStatus::kTimeout ? "timeout" : (side == 0 ? "pred_error" : "gold_error");
        item.error = r.error;
        return false;
      }
      t[side][0] = r.first_row_ms;
      t[side][1] = r.statement_ms + close_ms;
    }
    if (t[0][0] <= 0 || t[0][1] <= 0) {  // the script's ZeroDivisionError: the pair scores 0
      *failure = "pred_error";
      item.error = "a prediction timing of 0";
      return false;
    }
    *first_ratio = t[1][0] / t[0][0];
    *whole_ratio = t[1][1] / t[0][1];
    return true;
  }

  void score_timed(const std::vector<double>& first_ratios, const std::vector<double>& whole_ratios,
                   EfficiencyItem& item) const {
    for (EfficiencyMetric m : {EfficiencyMetric::kVes, EfficiencyMetric::kRves}) {
      if (!wants(options_, m)) continue;
      const bool first_row = m == EfficiencyMetric::kVes;
      FilteredRatios f = drop_outliers(first_row ? first_ratios : whole_ratios);
      EfficiencyScore& s = item.scores[efficiency_metric_name(m)];
      s.ratio = f.mean;
      s.ratio_sd = f.sd;
      s.ratio_low = f.low;
      s.ratio_high = f.high;
      s.rerun_low = f.rerun_low;
      s.rerun_high = f.rerun_high;
      s.rounds = static_cast<size_t>(options_.repeats);
      s.kept = f.kept;
      s.reward = first_row ? ves_reward(f.mean) : rves_reward(f.mean);
      if (!first_row && f.kept > 0)
        s.near_boundary = rves_step(std::max(f.rerun_low, 1e-300)) != rves_step(std::max(f.rerun_high, 1e-300));
    }
  }

  const data::Dataset& ds_;
  const std::vector<PredictedSql>& preds_;
  const EfficiencyOptions& options_;
  db::ResultCache* cache_;
  const std::map<std::string, std::string> fingerprints_;
  EfficiencyReport& report_;
  const double budget_s_;
  db::Executor shared_;  // correctness and step counts (pooled connections)
  // Seconds of each pair's budget its correctness executions used (the rounds get the rest).
  std::vector<double> budget_used_s_;
};

}  // namespace

Result<EfficiencyReport> measure_efficiency(const data::Dataset& ds,
                                            const std::vector<PredictedSql>& preds,
                                            const EfficiencyOptions& options,
                                            db::ResultCache* cache) {
  if (preds.size() != ds.questions.size())
    return internal_error("efficiency: predictions are not aligned with the questions");
  EfficiencyReport report;
  report.metrics = options.metrics;
  report.repeats = options.repeats;
  report.cpu = cpu_description();
  report.items.resize(ds.questions.size());
  const bool timed = wants(options, EfficiencyMetric::kVes) || wants(options, EfficiencyMetric::kRves);
  std::map<std::string, std::string> fingerprints;
  for (const auto& [db_id, path] : ds.db_paths) {
    auto f = db::database_fingerprint(path);
    if (!f) return f.status();
    fingerprints[db_id] = *f;
  }
  EfficiencyMeasurement measurement(ds, preds, options, cache, std::move(fingerprints), report);
  core::parallel_for(ds.questions.size(), std::max<size_t>(1, options.threads),
                     [&](size_t i) { measurement.check_pair(i); });
  if (cache) cache->flush();
  if (!timed) return report;

  // The timed rounds: one pair at a time.
  report.load_before = load_average();
  const auto timed_started = Clock::now();
  for (size_t i = 0; i < ds.questions.size(); ++i)
    if (report.items[i].status == "ok") measurement.time_pair(i);
  report.timed_s = std::chrono::duration<double>(Clock::now() - timed_started).count();
  report.load_after = load_average();
  return report;
}

nlohmann::json efficiency_summary(const EfficiencyReport& report, int bootstrap_samples, uint64_t seed) {
  using nlohmann::json;
  json s;
  s["repeats"] = report.repeats;
  s["cpu"] = report.cpu;
  if (report.load_before >= 0) s["load_average_before"] = report.load_before;
  if (report.load_after >= 0) s["load_average_after"] = report.load_after;
  s["timed_s"] = report.timed_s;
  std::map<std::string, size_t> statuses;
  for (const auto& it : report.items) ++statuses[it.status];
  s["pairs"] = statuses;
  json metrics = json::object();
  static const std::vector<std::string> kLevels = {"simple", "moderate", "challenging"};
  for (EfficiencyMetric m : report.metrics) {
    const std::string name = efficiency_metric_name(m);
    std::map<std::string, std::vector<double>> by_diff;
    std::vector<double> all;
    size_t near = 0;
    json near_list = json::array();
    for (const auto& it : report.items) {
      const auto sc = it.scores.find(name);
      const double r = sc == it.scores.end() ? 0.0 : sc->second.reward;
      all.push_back(r);
      by_diff[it.difficulty.empty() ? "unknown" : it.difficulty].push_back(r);
      if (sc != it.scores.end() && sc->second.near_boundary) {
        ++near;
        near_list.push_back({{"question_id", it.question_id},
                             {"ratio", sc->second.ratio},
                             {"rerun_interval", {sc->second.rerun_low, sc->second.rerun_high}}});
      }
    }
    auto mean = [](const std::vector<double>& v) {
      return v.empty() ? 0.0 : std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
    };
    json mj;
    json d = json::object();
    for (const auto& [k, v] : by_diff) d[k] = {{"count", v.size()}, {"score", mean(v)}};
    mj["by_difficulty"] = d;
    auto ci = bootstrap_mean_ci(all, bootstrap_samples, seed);
    mj["overall"] = {{"count", all.size()}, {"score", mean(all)}, {"ci95", {ci.low, ci.high}}};
    if (m == EfficiencyMetric::kRves) {
      mj["near_boundary"] = near;
      mj["near_boundary_list"] = near_list;
    }
    metrics[name] = mj;
  }
  s["metrics"] = metrics;
  // How well the reproducible scores rank the pairs as the clock does.
  json corr = json::object();
  for (auto [timed, steps] : {std::pair{EfficiencyMetric::kVes, EfficiencyMetric::kVesSteps},
                              std::pair{EfficiencyMetric::kRves, EfficiencyMetric::kRvesSteps}}) {
    const std::string tn = efficiency_metric_name(timed), sn = efficiency_metric_name(steps);
    if (!std::count(report.metrics.begin(), report.metrics.end(), timed) ||
        !std::count(report.metrics.begin(), report.metrics.end(), steps))
      continue;
    std::vector<double> a, b;
    for (const auto& it : report.items) {
      if (it.status != "ok") continue;
      const auto& x = it.scores.at(tn);
      const auto& y = it.scores.at(sn);
      if (x.ratio > 0 && y.ratio > 0) {
        a.push_back(x.ratio);
        b.push_back(y.ratio);
      }
    }
    const double rho = spearman(a, b);
    corr[tn + "~" + sn] = {{"pairs", a.size()}, {"spearman", std::isnan(rho) ? json(nullptr) : json(rho)}};
  }
  if (!corr.empty()) s["rank_correlation"] = corr;
  return s;
}

std::string efficiency_table(const nlohmann::json& summary, const std::string& metric) {
  const auto& m = summary["metrics"][metric];
  std::vector<std::string> levels = {"simple", "moderate", "challenging"};
  for (auto& [k, v] : m["by_difficulty"].items())
    if (std::find(levels.begin(), levels.end(), k) == levels.end()) levels.push_back(k);
  std::string counts, scores, head = fmt::format("{:20} ", "");
  for (const auto& l : levels) {
    head += fmt::format("{:20} ", l);
    const bool has = m["by_difficulty"].contains(l);
    counts += fmt::format("{:<20} ", has ? m["by_difficulty"][l]["count"].get<size_t>() : 0);
    scores += fmt::format("{:<20.2f} ", has ? m["by_difficulty"][l]["score"].get<double>() : 0.0);
  }
  head += fmt::format("{:20}", "total");
  counts += fmt::format("{:<20}", m["overall"]["count"].get<size_t>());
  scores += fmt::format("{:<20.2f}", m["overall"]["score"].get<double>());
  static const std::map<std::string, std::string> kTitle = {
      {"ves", "VES"}, {"rves", "R-VES"}, {"ves_steps", "VES (steps)"}, {"rves_steps", "R-VES (steps)"}};
  std::string title = kTitle.count(metric) ? kTitle.at(metric) : metric;
  std::string out = head + "\n" + fmt::format("{:20} ", "count") + counts + "\n";
  out += fmt::format("{:=^104}\n", fmt::format("    {}   ", title));
  out += fmt::format("{:20} ", metric) + scores + "\n";
  out += fmt::format("95% bootstrap CI of the total: [{:.2f}, {:.2f}]\n", m["overall"]["ci95"][0].get<double>(),
                     m["overall"]["ci95"][1].get<double>());
  return out;
}

}  // namespace nl2sql::eval
