// Test-suite distillation: neighbours told apart on the original, candidates screened one after
// another on the neighbours still standing, then the greedy choice (nl2sql/eval/testsuite.h).
#include "nl2sql/eval/testsuite.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <array>
#include <optional>
#include <chrono>
#include <map>
#include <mutex>
#include <set>

#include "nl2sql/core/files.h"
#include "nl2sql/core/hash.h"
#include "nl2sql/core/text.h"
#include "nl2sql/core/thread_pool.h"
#include "nl2sql/db/executor.h"
#include "nl2sql/db/result_compare.h"
#include "nl2sql/db/schema_info.h"
#include "nl2sql/eval/compare.h"
#include "nl2sql/sql/neighbours.h"
#include "nl2sql/sql/parser.h"
#include "testsuite_generate.h"
#include "tie_check.h"

namespace nl2sql::eval {
namespace {

namespace fs = std::filesystem;
using ordered_json = nlohmann::ordered_json;
using Clock = std::chrono::steady_clock;

constexpr const char* kFormat = "nl2sql test suite 1";

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

struct GoldQuery {
  std::string sql;
  std::vector<std::string> question_ids;
  bool order_matters = false;
  TieCheckKind tie = TieCheckKind::kNone;
  TieProbe probe;
  std::string left_out;            // why it takes no part (does not parse / fails on the original)
  bool tie_on_original = false;
  std::vector<sql::Neighbour> neighbours;
  std::vector<char> runs;          // per neighbour: runs on the original
  std::vector<char> by_original;   // per neighbour: told apart there
  size_t vetoes = 0;               // candidates rejected because of this gold
  std::vector<std::string> tie_on_variants;  // tie-dependent on the original: and on these variants
};

// A neighbour taking part: its gold and position.
struct NeighbourRef {
  size_t gold = 0, index = 0;
};

bool told_apart(const db::ExecutionResult& gold, const db::ExecutionResult& other, bool order_matters) {
  if (!other.ok()) return true;
  return !db::spider_ts_equal(gold.result, other.result, order_matters);
}

// Limits for a neighbour of a gold that answered `gold`: a result with more rows cannot equal
// it, so reading stops one row past the gold's count (memory stays that of the gold's answer,
// not of a neighbour that drops a filter over millions of rows).
db::QueryLimits capped(db::QueryLimits limits, const db::ExecutionResult& gold) {
  limits.row_cap = gold.result.rows.size() + 1;
  return limits;
}

// Does `g`'s answer on `db` depend on how the engine breaks ties?
bool tie_dependent(const GoldQuery& g, const db::ExecutionResult& answer, const fs::path& db,
                   const db::Executor& executor, const db::QueryLimits& limits) {
  switch (g.tie) {
    case TieCheckKind::kNone: return false;
    case TieCheckKind::kOrderByProbe: {
      auto r = executor.run(db, g.probe.sql, limits);
      return r.ok() && probe_shows_tie(g.probe, r.result);
    }
    case TieCheckKind::kReverseScan: {
      db::QueryLimits reversed = limits;
      reversed.reverse_scan_order = true;
      auto alt = executor.run(db, g.sql, reversed);
      return alt.ok() && !db::bird_equal(alt.result, answer.result);
    }
  }
  return false;
}

ordered_json options_json(const SuiteOptions& o) {
  return {{"seed", o.seed},
          {"candidates", o.candidates},
          {"max_databases", o.max_databases},
          {"max_rows", o.max_rows},
          {"pool_rows", o.pool_rows},
          {"lineage_rows", o.lineage_rows},
          {"max_neighbours", o.max_neighbours},
          {"query_timeout_s", o.query_timeout_s},
          {"original_timeout_s", o.original_timeout_s},
          {"held_out", o.held_out},
          {"original_check", o.original_check}};
}

uint64_t file_bytes(const fs::path& p) {
  std::error_code ec;
  auto n = fs::file_size(p, ec);
  return ec ? 0 : n;
}

// The suite.json of a finished build, when it was made with this key and its files are there.
std::optional<ordered_json> finished_build(const fs::path& dir, const std::string& key) {
  auto j = core::read_json_file(dir / "suite.json");
  if (!j.is_ok() || !j->is_object() || j->value("key", "") != key) return std::nullopt;
  for (const auto& v : j->value("variants", nlohmann::json::array()))
    if (!fs::exists(dir / v.value("file", ""))) return std::nullopt;
  return ordered_json::parse(j->dump());
}

Status place_original(const fs::path& original, const fs::path& target) {
  std::error_code ec;
  fs::remove(target, ec);
  fs::create_hard_link(original, target, ec);
  if (!ec) return Status::ok();
  fs::copy_file(original, target, fs::copy_options::overwrite_existing, ec);
  if (ec) return io_error("cannot copy " + original.filename().string() + " into the suite: " + ec.message());
  return Status::ok();
}

class DatabaseBuild {
 public:
  DatabaseBuild(const data::Dataset& ds, const std::string& db_id, const SuiteOptions& options,
                const std::function<void(const SuiteProgress&)>& progress, SuiteProgress base)
      : ds_(ds), db_id_(db_id), options_(options), progress_(progress), base_(std::move(base)) {}

  Result<DatabaseSuite> run() {
    const auto t0 = Clock::now();
    original_ = ds_.db_paths.at(db_id_);
    dir_ = options_.out_dir / db_id_;
    threads_ = options_.threads ? options_.threads : core::default_threads();
    auto schema = db::inspect_schema(original_);
    if (!schema) return schema.status();
    schema_ = std::move(*schema);
    collect_golds();
    auto fp = db::database_fingerprint(original_);
    if (!fp) return fp.status();
    ordered_json key_src = options_json(options_);
    key_src["format"] = kFormat;
    key_src["original"] = *fp;
    for (const auto& g : golds_) key_src["golds"].push_back(g.sql);
    key_ = core::xxh128_hex(key_src.dump());
    if (auto done = finished_build(dir_, key_)) return DatabaseSuite{db_id_, "kept", "", std::move(*done)};

    std::error_code ec;
    fs::remove_all(dir_, ec);
    fs::create_directories(dir_ / ".candidates", ec);
    if (ec) return io_error("cannot create " + (dir_ / ".candidates").string() + ": " + ec.message());

    db::ExecutorOptions eo;
    eo.limits.timeout_s = options_.original_timeout_s;
    eo.limits.row_cap = 0;
    db::Executor original_executor(eo);
    tell_apart_on_original(original_executor);
    const double original_s = seconds_since(t0);

    std::vector<std::string> gold_sql;
    for (const auto& g : golds_)
      if (g.left_out.empty()) gold_sql.push_back(g.sql);
    auto pools = sample_value_pools(original_, schema_, gold_sql, options_, original_executor);
    if (!pools) return pools.status();
    pools_ = std::move(*pools);

    const auto t1 = Clock::now();
    screen_candidates();
    const double screen_s = seconds_since(t1);
    const auto t2 = Clock::now();
    auto chosen = distil();
    if (!chosen) return chosen.status();
    const double distil_s = seconds_since(t2);
    const auto t3 = Clock::now();
    hold_out();
    const double held_out_s = seconds_since(t3);
    NL2SQL_RETURN_IF_ERROR(place_original(original_, dir_ / (db_id_ + ".sqlite")));
    fs::remove_all(dir_ / ".candidates", ec);

    ordered_json summary = summarize(*chosen);
    summary["seconds"] = {{"original", original_s},
                          {"candidates", screen_s},
                          {"distil", distil_s},
                          {"held_out", held_out_s},
                          {"total", seconds_since(t0)}};
    NL2SQL_RETURN_IF_ERROR(core::write_file_atomic(dir_ / "suite.json", summary.dump(2) + "\n"));
    return DatabaseSuite{db_id_, "built", "", std::move(summary)};
  }

 private:
  void collect_golds() {
    std::map<std::string, size_t> by_sql;
    for (const auto& q : ds_.questions) {
      if (q.db_id != db_id_) continue;
      auto [it, fresh] = by_sql.try_emplace(q.gold_sql, golds_.size());
      if (fresh) {
        GoldQuery g;
        g.sql = q.gold_sql;
        g.order_matters = spider_order_matters(q.gold_sql);
        g.tie = tie_check_kind(q.gold_sql, &g.probe);
        auto stmt = sql::parse_query(q.gold_sql);
        if (!stmt.is_ok()) {
          g.left_out = "does not parse: " + stmt.status().message().substr(0, 200);
        } else {
          sql::NeighbourOptions no;
          no.max_neighbours = options_.max_neighbours;
          g.neighbours = sql::neighbour_queries(*stmt->select, schema_, no);
        }
        golds_.push_back(std::move(g));
      }
      golds_[it->second].question_ids.push_back(q.question_id);
    }
  }

  void tell_apart_on_original(const db::Executor& executor) {
    const db::QueryLimits limits = executor.options().limits;
    std::mutex mu;
    size_t done = 0;
    SuiteProgress p = base_;
    p.phase = "original";
    p.candidates = golds_.size();
    auto report = [&] {
      std::lock_guard lock(mu);
      p.candidate = ++done;
      if (progress_) progress_(p);
    };
    core::parallel_for(golds_.size(), threads_, [&](size_t gi) {
      run_on_original(gi, executor, limits);
      report();
    });
    collect_standing();
  }

  void run_on_original(size_t gi, const db::Executor& executor, const db::QueryLimits& limits) {
    GoldQuery& g = golds_[gi];
    if (!g.left_out.empty()) return;
    auto answer = executor.run(original_, g.sql, limits);
    if (!answer.ok()) {
      g.left_out = std::string("fails on the original (") + db::exec_status_name(answer.status) + "): " +
                   answer.error.substr(0, 200);
      return;
    }
    g.tie_on_original = tie_dependent(g, answer, original_, executor, limits);
    g.runs.assign(g.neighbours.size(), 0);
    g.by_original.assign(g.neighbours.size(), 0);
    for (size_t k = 0; k < g.neighbours.size(); ++k) {
      if (!options_.original_check) {  // compiles on the original: enough to take part
        g.runs[k] = executor.explain_query_plan(original_, g.neighbours[k].sql).ok();
        continue;
      }
      auto r = executor.run(original_, g.neighbours[k].sql, capped(limits, answer));
      if (r.status == db::ExecStatus::kRowCap) {  // more rows than the gold: told apart
        g.runs[k] = g.by_original[k] = 1;
        continue;
      }
      if (!r.ok()) continue;  // a neighbour that does not run says nothing about the gold
      g.runs[k] = 1;
      g.by_original[k] = told_apart(answer, r, g.order_matters);
    }
  }

  void collect_standing() {
    for (size_t gi = 0; gi < golds_.size(); ++gi) {
      const GoldQuery& g = golds_[gi];
      if (!g.left_out.empty()) continue;
      for (size_t k = 0; k < g.neighbours.size(); ++k) {
        if (!g.runs[k]) continue;
        if (!g.by_original[k]) standing_.insert(refs_.size());
        refs_.push_back({gi, k});
      }
    }
  }

  fs::path candidate_file(size_t i) const { return dir_ / ".candidates" / fmt::format("c{:04}.sqlite", i); }
  uint64_t candidate_seed(size_t i) const { return core::xxh64(db_id_ + '\x1f' + std::to_string(i), options_.seed); }

  // Gold answers on a candidate; empty when a gold fails there or its answer depends on tie
  // order (the gold that did is charged with the rejection).
  std::optional<std::vector<db::ExecutionResult>> gold_answers(const fs::path& file, const db::Executor& ex,
                                                               std::string* reason) {
    const db::QueryLimits limits = ex.options().limits;
    std::vector<db::ExecutionResult> answers(golds_.size());
    std::vector<char> veto(golds_.size(), 0);
    core::parallel_for(golds_.size(), threads_, [&](size_t gi) {
      const GoldQuery& g = golds_[gi];
      if (!g.left_out.empty()) return;
      answers[gi] = ex.run(file, g.sql, limits);
      if (!answers[gi].ok()) veto[gi] = 1;
      // A gold already tie-dependent on the original is flagged by eval there; rejecting
      // candidates for it would only shrink the pool (its ties on variants are reported).
      else if (!g.tie_on_original && tie_dependent(g, answers[gi], file, ex, limits)) veto[gi] = 2;
    });
    bool rejected = false;
    for (size_t gi = 0; gi < golds_.size(); ++gi) {
      if (!veto[gi]) continue;
      if (!rejected) *reason = veto[gi] == 1 ? "a gold query fails" : "a gold answer depends on tie order";
      rejected = true;
      ++golds_[gi].vetoes;
    }
    if (rejected) return std::nullopt;
    return answers;
  }

  // Which of `ids` the candidate tells apart from their gold.
  std::vector<char> tell_apart(const fs::path& file, const db::Executor& ex,
                               const std::vector<db::ExecutionResult>& answers, const std::vector<size_t>& ids) {
    const db::QueryLimits limits = ex.options().limits;
    std::vector<char> told(ids.size(), 0);
    core::parallel_for(ids.size(), threads_, [&](size_t k) {
      const NeighbourRef& ref = refs_[ids[k]];
      const GoldQuery& g = golds_[ref.gold];
      auto r = ex.run(file, g.neighbours[ref.index].sql, capped(limits, answers[ref.gold]));
      told[k] = told_apart(answers[ref.gold], r, g.order_matters);  // a row-cap stop is a failure: told apart
    });
    return told;
  }

  db::ExecutorOptions candidate_executor_options() const {
    db::ExecutorOptions eo;
    eo.limits.timeout_s = options_.query_timeout_s;
    eo.limits.row_cap = 0;
    return eo;
  }

  void screen_candidates() {
    told_by_any_.clear();
    SuiteProgress p = base_;
    p.phase = "candidates";
    p.candidates = options_.candidates;
    p.neighbours = refs_.size();
    for (size_t i = 0; i < options_.candidates && !standing_.empty(); ++i) {
      const fs::path file = candidate_file(i);
      auto made = write_candidate(file, pools_, candidate_seed(i), options_.max_rows);
      ++generated_;
      if (!made) {
        ++rejected_[made.status().message().substr(0, 120)];
        continue;
      }
      std::error_code ec;
      {
        db::Executor ex(candidate_executor_options());
        std::string reason;
        auto answers = gold_answers(file, ex, &reason);
        bool keep = false;
        if (!answers) {
          ++rejected_[reason];
        } else {
          std::vector<size_t> ids(standing_.begin(), standing_.end());
          auto told = tell_apart(file, ex, *answers, ids);
          for (size_t k = 0; k < ids.size(); ++k)
            if (told[k]) {
              standing_.erase(ids[k]);
              told_by_any_.insert(ids[k]);
              keep = true;
            }
          if (keep) kept_.push_back(i);
          else ++useless_;
        }
        if (!keep) fs::remove(file, ec);
      }
      p.candidate = i + 1;
      p.kept = kept_.size();
      p.standing = standing_.size();
      if (progress_) progress_(p);
    }
  }

  // Fresh candidates (indexes past the screened ones) on the neighbours neither the original nor
  // the suite tells apart: what they tell apart estimates what the suite misses.
  void hold_out() {
    if (options_.held_out == 0) return;
    std::vector<size_t> open;
    for (size_t id = 0; id < refs_.size(); ++id) {
      const NeighbourRef& r = refs_[id];
      if (!golds_[r.gold].by_original[r.index] && !told_by_suite_.count(id)) open.push_back(id);
    }
    std::vector<size_t> vetoes;  // the screen's counts stay the screen's
    for (const auto& g : golds_) vetoes.push_back(g.vetoes);
    for (size_t k = 0; k < options_.held_out; ++k) {
      const size_t i = options_.candidates + k;
      const fs::path file = candidate_file(i);
      auto made = write_candidate(file, pools_, candidate_seed(i), options_.max_rows);
      if (!made) continue;
      {
        db::Executor ex(candidate_executor_options());
        std::string reason;
        auto answers = gold_answers(file, ex, &reason);
        if (answers) {
          ++held_out_eligible_;
          auto told = tell_apart(file, ex, *answers, open);
          for (size_t j = 0; j < open.size(); ++j)
            if (told[j]) held_out_told_.insert(open[j]);
        }
      }
      std::error_code ec;
      fs::remove(file, ec);
    }
    for (size_t gi = 0; gi < golds_.size(); ++gi) golds_[gi].vetoes = vetoes[gi];
  }

  struct Variant {
    size_t candidate = 0;
    std::string file;
    size_t rows = 0;
    uint64_t bytes = 0;
    size_t told_new = 0, told_total = 0;
  };

  Result<std::vector<Variant>> distil() {
    // Every candidate kept by the screen, on every neighbour the original does not tell apart.
    std::vector<size_t> open;
    for (size_t id = 0; id < refs_.size(); ++id) {
      const NeighbourRef& r = refs_[id];
      if (!golds_[r.gold].by_original[r.index]) open.push_back(id);
    }
    std::vector<std::set<size_t>> tells(kept_.size());
    std::vector<size_t> rows(kept_.size(), 0);
    for (size_t k = 0; k < kept_.size(); ++k) {
      db::Executor ex(candidate_executor_options());
      std::string reason;
      auto answers = gold_answers(candidate_file(kept_[k]), ex, &reason);
      if (!answers) return internal_error("candidate " + std::to_string(kept_[k]) + " of " + db_id_ + " changed: " + reason);
      auto told = tell_apart(candidate_file(kept_[k]), ex, *answers, open);
      for (size_t j = 0; j < open.size(); ++j)
        if (told[j]) tells[k].insert(open[j]);
      for (const auto& t : schema_.tables) {
        if (t.is_view) continue;
        auto n = ex.run(candidate_file(kept_[k]), "SELECT count(*) FROM " + core::quote_sql_identifier(t.name));
        if (n.ok() && !n.result.rows.empty() && n.result.rows[0][0].type == db::ValueType::kInteger)
          rows[k] += static_cast<size_t>(n.result.rows[0][0].i);
      }
    }
    for (const auto& s : tells) told_by_any_.insert(s.begin(), s.end());
    std::set<size_t> remaining = told_by_any_;
    std::vector<Variant> chosen;
    std::vector<char> used(kept_.size(), 0);
    while (chosen.size() < options_.max_databases) {
      size_t best = kept_.size(), best_gain = 0;
      for (size_t k = 0; k < kept_.size(); ++k) {
        if (used[k]) continue;
        size_t gain = 0;
        for (size_t id : tells[k]) gain += remaining.count(id);
        if (gain > best_gain) {
          best = k;
          best_gain = gain;
        }
      }
      if (best == kept_.size()) break;
      used[best] = 1;
      for (size_t id : tells[best]) remaining.erase(id);
      for (size_t id : tells[best]) told_by_suite_.insert(id);
      Variant v;
      v.candidate = kept_[best];
      v.file = fmt::format("{}_ts{:02}.sqlite", db_id_, chosen.size() + 1);
      v.rows = rows[best];
      v.told_new = best_gain;
      v.told_total = tells[best].size();
      std::error_code ec;
      fs::rename(candidate_file(kept_[best]), dir_ / v.file, ec);
      if (ec) return io_error("cannot move a variant into " + dir_.string() + ": " + ec.message());
      v.bytes = file_bytes(dir_ / v.file);
      chosen.push_back(std::move(v));
    }
    // Golds tie-dependent on the original: on which variants their answer depends on tie order too.
    for (auto& g : golds_) {
      if (!g.left_out.empty() || !g.tie_on_original) continue;
      db::Executor ex(candidate_executor_options());
      for (const auto& v : chosen) {
        auto answer = ex.run(dir_ / v.file, g.sql);
        if (answer.ok() && tie_dependent(g, answer, dir_ / v.file, ex, ex.options().limits))
          g.tie_on_variants.push_back(v.file);
      }
    }
    return chosen;
  }

  // How many neighbours were generated, run on the original and told apart, in all and by kind.
  struct NeighbourCounts {
    size_t generated = 0, runs = 0, by_original = 0, by_suite = 0, by_any = 0;
    std::map<std::string, std::array<size_t, 5>> kinds;  // generated, run, original, suite, any
  };

  NeighbourCounts count_neighbours() const {
    NeighbourCounts c;
    for (const auto& g : golds_) {
      c.generated += g.neighbours.size();
      for (size_t k = 0; k < g.neighbours.size(); ++k) {
        auto& kind = c.kinds[g.neighbours[k].kind];
        ++kind[0];
        if (g.runs.size() > k && g.runs[k]) {
          ++c.runs;
          ++kind[1];
          if (g.by_original[k]) {
            ++c.by_original;
            ++kind[2];
            ++kind[3];
            ++kind[4];
          }
        }
      }
    }
    for (size_t id : told_by_suite_) ++c.kinds[golds_[refs_[id].gold].neighbours[refs_[id].index].kind][3];
    for (size_t id : told_by_any_) ++c.kinds[golds_[refs_[id].gold].neighbours[refs_[id].index].kind][4];
    c.by_suite = c.by_original + told_by_suite_.size();
    c.by_any = c.by_original + told_by_any_.size();
    return c;
  }

  ordered_json neighbours_summary(const NeighbourCounts& c) const {
    ordered_json n;
    n["generated"] = c.generated;
    n["run_on_original"] = c.runs;
    n["original_checked"] = options_.original_check;
    n["told_apart_by_original"] = c.by_original;
    n["told_apart_by_suite"] = c.by_suite;
    n["told_apart_by_any_candidate"] = c.by_any;
    n["never_told_apart"] = c.runs - c.by_any;
    n["coverage"] = c.by_any ? static_cast<double>(c.by_suite) / static_cast<double>(c.by_any) : 1.0;
    if (options_.original_check)
      n["original_coverage"] = c.by_any ? static_cast<double>(c.by_original) / static_cast<double>(c.by_any) : 1.0;
    else
      n["original_coverage"] = nullptr;
    ordered_json by_kind = ordered_json::object();
    for (const auto& [kind, k] : c.kinds)
      by_kind[kind] = {{"generated", k[0]}, {"run_on_original", k[1]}, {"told_apart_by_original", k[2]},
                       {"told_apart_by_suite", k[3]}, {"told_apart_by_any_candidate", k[4]}};
    n["by_kind"] = std::move(by_kind);
    return n;
  }

  ordered_json describe_neighbour(size_t id) const {
    const NeighbourRef& r = refs_[id];
    const GoldQuery& g = golds_[r.gold];
    return ordered_json{{"question_ids", g.question_ids}, {"gold", g.sql},
                        {"kind", g.neighbours[r.index].kind}, {"neighbour", g.neighbours[r.index].sql}};
  }

  // Up to 20 examples each: told apart by a candidate only, by a held-out one only, never.
  void add_neighbour_examples(size_t by_suite, ordered_json& s) const {
    ordered_json uncovered = ordered_json::array();
    for (size_t id : told_by_any_)
      if (!told_by_suite_.count(id) && uncovered.size() < 20) uncovered.push_back(describe_neighbour(id));
    s["told_apart_by_a_candidate_only"] = std::move(uncovered);
    if (options_.held_out > 0) {
      ordered_json missed = ordered_json::array();
      for (size_t id : held_out_told_)
        if (missed.size() < 20) missed.push_back(describe_neighbour(id));
      s["held_out"] = {{"candidates", options_.held_out},
                       {"eligible", held_out_eligible_},
                       {"told_apart_by_held_out_only", held_out_told_.size()},
                       {"coverage", static_cast<double>(by_suite) / static_cast<double>(std::max<size_t>(1, by_suite + held_out_told_.size()))},
                       {"examples", std::move(missed)}};
    }
    ordered_json never = ordered_json::array();
    for (size_t id : standing_)
      if (never.size() < 20) never.push_back(describe_neighbour(id));
    s["never_told_apart_examples"] = std::move(never);
  }

  // The golds left out and those whose answer depends on tie order.
  void add_gold_lists(ordered_json& s) const {
    ordered_json left_out = ordered_json::array();
    ordered_json unstable = ordered_json::array();
    for (const auto& g : golds_) {
      if (!g.left_out.empty())
        left_out.push_back({{"question_ids", g.question_ids}, {"gold", g.sql}, {"reason", g.left_out}});
      if (g.tie_on_original || g.vetoes > 0)
        unstable.push_back({{"question_ids", g.question_ids},
                            {"gold", g.sql},
                            {"tie_dependent_on_original", g.tie_on_original},
                            {"tie_dependent_on_variants", g.tie_on_variants},
                            {"candidates_rejected", g.vetoes}});
    }
    s["golds"] = golds_.size();
    s["golds_left_out"] = std::move(left_out);
    s["unstable_golds"] = std::move(unstable);
  }

  void add_variants(const std::vector<Variant>& chosen, ordered_json& s) const {
    ordered_json variants = ordered_json::array();
    size_t rows = 0;
    uint64_t bytes = 0;
    for (const auto& v : chosen) {
      variants.push_back({{"file", v.file}, {"candidate", v.candidate}, {"seed", candidate_seed(v.candidate)},
                          {"rows", v.rows}, {"bytes", v.bytes}, {"told_apart_new", v.told_new},
                          {"told_apart", v.told_total}});
      rows += v.rows;
      bytes += v.bytes;
    }
    s["variants"] = std::move(variants);
    s["variant_rows"] = rows;
    s["variant_bytes"] = bytes;
  }

  ordered_json summarize(const std::vector<Variant>& chosen) const {
    ordered_json s;
    s["db_id"] = db_id_;
    s["format"] = kFormat;
    s["key"] = key_;
    s["options"] = options_json(options_);
    s["original"] = {{"file", db_id_ + ".sqlite"}, {"bytes", file_bytes(original_)}};
    const NeighbourCounts counts = count_neighbours();
    s["neighbours"] = neighbours_summary(counts);
    add_neighbour_examples(counts.by_suite, s);
    add_gold_lists(s);
    ordered_json rejected = ordered_json::object();
    for (const auto& [why, count] : rejected_) rejected[why] = count;
    s["candidates"] = {{"generated", generated_}, {"rejected", std::move(rejected)},
                       {"told_nothing_new", useless_}, {"kept_by_screen", kept_.size()}};
    add_variants(chosen, s);
    ordered_json pools = ordered_json::object();
    for (const auto& tp : pools_.tables)
      pools[tp.table->name] = {{"sampled_rows", tp.rows.size()}, {"from_lineage", tp.lineage_rows}};
    s["value_pools"] = std::move(pools);
    s["notes"] = pools_.notes;
    return s;
  }

  const data::Dataset& ds_;
  const std::string db_id_;
  const SuiteOptions& options_;
  const std::function<void(const SuiteProgress&)>& progress_;
  const SuiteProgress base_;
  fs::path original_, dir_;
  size_t threads_ = 1;
  db::SchemaInfo schema_;
  std::string key_;
  std::vector<GoldQuery> golds_;
  std::vector<NeighbourRef> refs_;          // every neighbour that runs on the original
  std::set<size_t> standing_;               // refs_ not told apart yet
  std::set<size_t> told_by_any_;            // refs_ told apart by some candidate (not the original)
  std::set<size_t> told_by_suite_;          // … by a chosen variant
  ValuePools pools_;
  std::vector<size_t> kept_;                // candidates the screen kept
  size_t generated_ = 0, useless_ = 0;
  std::map<std::string, size_t> rejected_;  // reason -> candidates
  std::set<size_t> held_out_told_;          // refs_ only held-out candidates tell apart
  size_t held_out_eligible_ = 0;
};

}  // namespace

Result<std::vector<DatabaseSuite>> build_test_suite(const data::Dataset& ds, const SuiteOptions& options,
                                                    const std::function<void(const SuiteProgress&)>& progress) {
  std::vector<std::string> dbs = options.databases;
  if (dbs.empty()) {
    std::set<std::string> with_questions;
    for (const auto& q : ds.questions) with_questions.insert(q.db_id);
    dbs.assign(with_questions.begin(), with_questions.end());
  }
  for (const auto& id : dbs)
    if (!ds.db_paths.count(id)) return invalid_input("--db " + id + ": no such database in " + ds.db_root.string());
  std::error_code ec;
  if (fs::exists(options.out_dir, ec) && fs::equivalent(options.out_dir, ds.db_root, ec))
    return invalid_input("--out " + options.out_dir.string() + " is the benchmark's own database folder; choose another");
  fs::create_directories(options.out_dir, ec);
  if (ec) return io_error("cannot create " + options.out_dir.string() + ": " + ec.message());
  std::vector<DatabaseSuite> out;
  for (size_t i = 0; i < dbs.size(); ++i) {
    SuiteProgress base;
    base.db_id = dbs[i];
    base.db_index = i + 1;
    base.db_count = dbs.size();
    DatabaseBuild build(ds, dbs[i], options, progress, base);
    auto r = build.run();
    if (r.is_ok()) {
      out.push_back(std::move(*r));
    } else {
      spdlog::error("test suite of {}: {}", dbs[i], r.status().message());
      out.push_back({dbs[i], "failed", r.status().message(), ordered_json::object()});
    }
    // After each database, so an interrupted build keeps a manifest of what is done.
    auto m = suite_manifest(ds, options, out);
    auto w = core::write_file_atomic(options.out_dir / "manifest.json", m.dump(2) + "\n");
    if (!w.ok()) return w;
  }
  return out;
}

ordered_json suite_manifest(const data::Dataset& ds, const SuiteOptions& options,
                            const std::vector<DatabaseSuite>& suites) {
  ordered_json m;
  m["format"] = kFormat;
  m["benchmark"] = data::benchmark_name(ds.benchmark);
  m["split"] = ds.split;
  m["questions_file"] = ds.questions_file.filename().string();
  m["options"] = options_json(options);
  size_t variants = 0, rows = 0, by_suite = 0, by_any = 0, by_original = 0, runs = 0, failed = 0, held_out = 0;
  uint64_t bytes = 0;
  double seconds = 0;
  ordered_json dbs = ordered_json::object();
  for (const auto& s : suites) {
    if (s.action == "failed") {
      ++failed;
      dbs[s.db_id] = {{"action", "failed"}, {"error", s.error}};
      continue;
    }
    const auto& j = s.summary;
    variants += j["variants"].size();
    rows += j.value("variant_rows", size_t{0});
    bytes += j.value("variant_bytes", uint64_t{0});
    const auto& n = j["neighbours"];
    by_suite += n.value("told_apart_by_suite", size_t{0});
    by_any += n.value("told_apart_by_any_candidate", size_t{0});
    by_original += n.value("told_apart_by_original", size_t{0});
    runs += n.value("run_on_original", size_t{0});
    if (j.contains("held_out")) held_out += j["held_out"].value("told_apart_by_held_out_only", size_t{0});
    if (j.contains("seconds")) seconds += j["seconds"].value("total", 0.0);
    ordered_json entry = j;
    entry["action"] = s.action;
    dbs[s.db_id] = std::move(entry);
  }
  m["total"] = {{"databases", suites.size()},
                {"failed", failed},
                {"variants", variants},
                {"variant_rows", rows},
                {"variant_bytes", bytes},
                {"neighbours_run_on_original", runs},
                {"told_apart_by_original", by_original},
                {"told_apart_by_suite", by_suite},
                {"told_apart_by_any_candidate", by_any},
                {"coverage", by_any ? static_cast<double>(by_suite) / static_cast<double>(by_any) : 1.0},
                {"original_coverage", options.original_check ? nlohmann::ordered_json(by_any ? static_cast<double>(by_original) / static_cast<double>(by_any) : 1.0) : nlohmann::ordered_json()},
                {"build_seconds", seconds}};
  if (options.held_out > 0) {
    m["total"]["told_apart_by_held_out_only"] = held_out;
    m["total"]["held_out_coverage"] = static_cast<double>(by_suite) / static_cast<double>(std::max<size_t>(1, by_suite + held_out));
  }
  m["databases"] = std::move(dbs);
  return m;
}

}  // namespace nl2sql::eval
