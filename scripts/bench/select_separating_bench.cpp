// Separating-instance benchmark (issues 7 and 38): on pairs of queries that return different
// results, how often a separating instance is found, how small it is and how long the search
// takes. Two sets of pairs:
//  - mutations (default): gold against mutated gold, the sim provider's taxonomy mistakes (wrong
//    column, dropped condition, literal case, DISTINCT toggle, extra column, wrong aggregate,
//    wrong join key); syntax errors are left out (they do not run);
//  - --pairs FILE: real-style pairs written as two SQL queries each (JSON lines with benchmark,
//    db, class, a, b; scripts/bench/fixtures/separating_pairs.jsonl), summarized per class;
//    pairs whose queries give the same result on D, or do not run, are dropped and counted.
// Not a Google Benchmark kernel: a measurement with its own main, built by the same glob.
//
//   bench_select_separating_bench --spider DIR [--bird DIR] [--bird-db superhero]
//       [--db-path FILE] [--mutants N] [--seed S] [--max-questions N] [--show-failures] [--show-slow MS]
//       [--group-budget ROWS] [--keep-rows N] [--pairs FILE] [--before]
//
// --before switches off what issue 38 added (the growing draws, shrinking, the max_rows
// ceiling and the sample of a large D): the search as it was, in the same binary, for a
// before/after on one machine. The sample of a large D is made once per database when its
// builder opens, timed and printed on its own line (not in any pair). --show-slow MS prints,
// per pair at or over MS with both executions, the time of each part.

// Candidates are executed as the pipeline executes them: results past --keep-rows rows (default
// 100, fix.keep_rows) keep their first rows and a digest. Times per pair are given without and
// with the two executions; peak RSS of the whole measurement is printed last.
// --db-path replaces the BIRD database file (e.g. a x300 scaled copy of superhero).
// --group-budget sets InstanceOptions::lineage_group_budget (0: exact lineage everywhere); the
// pairs whose lineage kept a sample of groups are summarized on their own.
#include <sys/resource.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <functional>
#include <fstream>
#include <set>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "nl2sql/data/dataset.h"
#include "nl2sql/db/executor.h"
#include "nl2sql/db/result_digest.h"
#include "nl2sql/db/result_compare.h"
#include "nl2sql/sim/simulator.h"
#include "nl2sql/select/separating_instance.h"

using namespace nl2sql;

namespace {

struct Outcome {
  std::string dataset, question_id, mistake;  // mistake: the pair's class with --pairs
  bool subquery_in_where = false;
  bool found = false;
  bool too_large = false;  // separated, but by no instance within max_rows
  bool sampled = false;  // a lineage kept a sample of its groups
  size_t rows = 0;
  int attempts = 0;
  double ms = 0, lineage_ms = 0, cpu_ms = 0;  // wall; wall of the lineage step; thread CPU
  double exec_ms = 0;  // running the two candidates (gold, then the mutant) before selection
  double exec_cpu_ms = -1;  // the same in thread CPU time (--pairs only)
  std::string failure, gold, mutant;
};

bool has_where_subquery(const std::string& sql) {
  std::string u;
  for (char c : sql) u += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  size_t w = u.find("WHERE");
  if (w == std::string::npos) return false;
  std::string tail = u.substr(w);
  tail.erase(std::remove_if(tail.begin(), tail.end(), [](char c) { return std::isspace(static_cast<unsigned char>(c)); }), tail.end());
  return tail.find("(SELECT") != std::string::npos;
}

// CPU time of this thread: SQLite runs in the caller's thread, so this is the work a pair
// costs whatever else the machine is doing (wall time is also printed).
double thread_cpu_ms() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) / 1e6;
}

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t k = static_cast<size_t>(std::ceil(p * static_cast<double>(v.size()))) - 1;
  return v[std::min(k, v.size() - 1)];
}

void summarize(const std::string& label, const std::vector<Outcome>& all,
               const std::function<bool(const Outcome&)>& keep) {
  size_t n = 0, found = 0, too_large = 0;
  std::vector<double> rows, ms, lineage_ms, cpu_ms, with_exec_ms, with_exec_cpu_ms;
  for (const auto& o : all) {
    if (!keep(o)) continue;
    ++n;
    ms.push_back(o.ms);
    lineage_ms.push_back(o.lineage_ms);
    cpu_ms.push_back(o.cpu_ms);
    with_exec_ms.push_back(o.ms + o.exec_ms);
    if (o.exec_cpu_ms >= 0) with_exec_cpu_ms.push_back(o.cpu_ms + o.exec_cpu_ms);
    too_large += o.too_large ? 1 : 0;
    if (o.found) {
      ++found;
      rows.push_back(static_cast<double>(o.rows));
    }
  }
  if (n == 0) return;
  std::printf("%-34s pairs %5zu  separated %5.1f%%  rows median %4.1f p95 %4.1f max %4.0f  time/pair p50 %7.1f ms p95 %7.1f ms max %7.1f ms\n",
              label.c_str(), n, 100.0 * static_cast<double>(found) / static_cast<double>(n),
              percentile(rows, 0.5), percentile(rows, 0.95), percentile(rows, 1.0), percentile(ms, 0.5),
              percentile(ms, 0.95), percentile(ms, 1.0));
  if (too_large > 0) std::printf("%-34s   too large (over max_rows): %zu\n", "", too_large);
  std::printf("%-34s   of which lineage on D: p50 %7.1f ms p95 %7.1f ms; thread CPU/pair p50 %7.1f ms p95 %7.1f ms\n",
              "", percentile(lineage_ms, 0.5), percentile(lineage_ms, 0.95), percentile(cpu_ms, 0.5),
              percentile(cpu_ms, 0.95));
  std::printf("%-34s   including running both candidates: time/pair p50 %7.1f ms p95 %7.1f ms max %7.1f ms\n", "",
              percentile(with_exec_ms, 0.5), percentile(with_exec_ms, 0.95), percentile(with_exec_ms, 1.0));
  if (!with_exec_cpu_ms.empty())
    std::printf("%-34s   including running both candidates: thread CPU/pair p50 %7.1f ms p95 %7.1f ms max %7.1f ms\n", "",
                percentile(with_exec_cpu_ms, 0.5), percentile(with_exec_cpu_ms, 0.95), percentile(with_exec_cpu_ms, 1.0));
}

struct Counts {
  size_t lineage_errors = 0;
  size_t witnesses_run = 0, witnesses_shared = 0, witnesses_empty = 0;  // over every pair's two lineages
};

// Lineage of both queries (given their results on D, as the selector is: candidates run once
// before selection, so lineage runs only the witnesses) and the search, timed together.
void measure(const select::InstanceBuilder& builder, const std::string& a, const db::ResultSet& result_a,
             const std::string& b, const db::ResultSet& result_b, uint64_t seed, Counts& counts, Outcome& o) {
  auto t0 = std::chrono::steady_clock::now();
  const double c0 = thread_cpu_ms();
  auto la = builder.lineage(a, &result_a);
  auto lb = builder.lineage(b, &result_b);
  o.lineage_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  if (!la.is_ok() || !lb.is_ok()) {
    ++counts.lineage_errors;
    o.failure = "lineage: " + (!la.is_ok() ? la.status() : lb.status()).message();
  } else {
    o.sampled = !la->sampled.empty() || !lb->sampled.empty();
    for (const auto* l : {&*la, &*lb}) {
      counts.witnesses_run += static_cast<size_t>(l->witnesses_run);
      counts.witnesses_shared += static_cast<size_t>(l->witnesses_shared);
      counts.witnesses_empty += static_cast<size_t>(l->witnesses_empty);
    }
    auto s = builder.separate(*la, *lb, seed);
    if (!s.is_ok()) o.failure = s.status().message();
    else {
      o.found = s->found;
      o.too_large = s->too_large;
      o.rows = s->instance.rows();
      o.attempts = s->attempts;
      if (!s->found) o.failure = s->failure;
    }
  }
  o.ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  o.cpu_ms = thread_cpu_ms() - c0;
}

}  // namespace

// --pairs: the real-style pairs of a JSON-lines file, on the databases under the Spider and
// BIRD folders given (a pair whose benchmark has no folder is skipped); --db-path replaces
// BIRD's `bird_db`. Summarized per database and per class.
int run_pairs(const std::string& file, const std::string& spider, const std::string& bird, const std::string& bird_db,
              const std::string& db_path, size_t keep_rows, uint64_t seed, const select::InstanceOptions& io,
              bool show_failures, double slow_ms) {
  std::ifstream in(file);
  if (!in) { std::fprintf(stderr, "cannot read %s\n", file.c_str()); return 1; }
  db::ExecutorOptions eo;
  eo.limits.timeout_s = 30;
  db::Executor executor(eo);
  db::QueryLimits run_limits = eo.limits;
  run_limits.hash_rows_after = keep_rows;
  run_limits.step_on_caller = true;  // so the thread's CPU time counts the two executions
  std::map<std::string, std::unique_ptr<select::InstanceBuilder>> builders;
  std::vector<Outcome> outcomes;
  std::map<std::string, size_t> dropped_same, dropped_error;  // per class
  Counts counts;
  std::string line;
  size_t index = 0;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    const auto j = nlohmann::json::parse(line);
    const std::string bench = j.at("benchmark"), db = j.at("db"), cls = j.at("class");
    std::string path;
    if (bench == "spider" && !spider.empty()) path = spider + "/database/" + db + "/" + db + ".sqlite";
    if (bench == "bird" && !bird.empty())
      path = !db_path.empty() && db == bird_db ? db_path : bird + "/dev_databases/" + db + "/" + db + ".sqlite";
    if (path.empty() || (bench == "bird" && !db_path.empty() && db != bird_db)) continue;
    ++index;
    const std::string label = db + (bench == "bird" && !db_path.empty() ? "(scaled)" : "");
    auto& builder = builders[path];
    if (!builder) {
      auto b = select::InstanceBuilder::open(path, executor, io);
      if (!b.is_ok()) { std::fprintf(stderr, "%s\n", b.status().to_string().c_str()); return 1; }
      builder = std::make_unique<select::InstanceBuilder>(std::move(*b));
      // Once per database (shared by every builder of the process): timed on its own.
      const auto s0 = std::chrono::steady_clock::now();
      const double sc0 = thread_cpu_ms();
      auto prepared = builder->prepare_sample();
      std::printf("%s: sample of D made in %.0f ms (thread CPU %.0f ms)%s\n", label.c_str(),
                  std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - s0).count(),
                  thread_cpu_ms() - sc0, prepared.is_ok() ? "" : (": " + prepared.message()).c_str());
    }
    const std::string a = j.at("a"), b = j.at("b");
    const auto a0 = std::chrono::steady_clock::now();
    const double c0 = thread_cpu_ms();
    auto ra = executor.run(path, a, run_limits);
    auto rb = executor.run(path, b, run_limits);
    const double exec_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - a0).count();
    const double exec_cpu_ms = thread_cpu_ms() - c0;
    if (!ra.ok() || !rb.ok()) { ++dropped_error[cls]; continue; }
    auto whole = [](const db::ExecutionResult& e) { return e.digest ? *e.digest : db::digest_of(e.result); };
    if (db::relaxed_equal(whole(ra), whole(rb))) { ++dropped_same[cls]; continue; }
    Outcome o;
    o.dataset = label;
    o.question_id = j.at("id");
    o.mistake = cls;
    measure(*builder, a, ra.result, b, rb.result, seed * 1000003 + index, counts, o);
    o.exec_ms = exec_ms;
    o.exec_cpu_ms = exec_cpu_ms;
    if (slow_ms > 0 && o.ms + o.exec_ms >= slow_ms)
      std::printf("SLOW %s %s %s: %.0f ms with both executions (executions %.0f ms, lineage %.0f ms, search %.0f ms, %d attempts, %zu rows)\n",
                  label.c_str(), o.question_id.c_str(), cls.c_str(), o.ms + o.exec_ms, o.exec_ms, o.lineage_ms,
                  o.ms - o.lineage_ms, o.attempts, o.rows);
    if (show_failures && !o.found)
      std::printf("FAIL %s %s %s: %s\n  a: %s\n  b: %s\n", label.c_str(), o.question_id.c_str(), cls.c_str(),
                  o.failure.substr(0, 200).c_str(), a.c_str(), b.c_str());
    outcomes.push_back(std::move(o));
  }
  size_t same = 0, error = 0;
  for (const auto& [c, n] : dropped_same) same += n;
  for (const auto& [c, n] : dropped_error) error += n;
  std::printf("real-style pairs with different results on D: %zu (dropped: same result on D %zu, not runnable %zu; lineage errors: %zu)\n",
              outcomes.size(), same, error, counts.lineage_errors);
  for (const auto& [c, n] : dropped_same) std::printf("  dropped as the same on D, %s: %zu\n", c.c_str(), n);
  std::set<std::string> datasets, classes;
  for (const auto& o : outcomes) datasets.insert(o.dataset), classes.insert(o.mistake);
  for (const auto& d : datasets) summarize(d, outcomes, [&](const Outcome& o) { return o.dataset == d; });
  for (const auto& c : classes) summarize("  " + c, outcomes, [&](const Outcome& o) { return o.mistake == c; });
  summarize("all", outcomes, [](const Outcome&) { return true; });
  return 0;
}

int main(int argc, char** argv) {
  std::string spider, bird, bird_db = "superhero", db_path;
  int mutants = 2, max_questions = 0;
  size_t keep_rows = 100;
  uint64_t seed = 1;
  bool show_failures = false;
  double slow_ms = 0;
  std::string pairs_file;
  bool before = false;
  select::InstanceOptions io;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string { return i + 1 < argc ? argv[++i] : ""; };
    if (a == "--spider") spider = next();
    else if (a == "--bird") bird = next();
    else if (a == "--bird-db") bird_db = next();
    else if (a == "--db-path") db_path = next();
    else if (a == "--mutants") mutants = std::stoi(next());
    else if (a == "--seed") seed = std::stoull(next());
    else if (a == "--max-questions") max_questions = std::stoi(next());
    else if (a == "--show-failures") show_failures = true;
    else if (a == "--show-slow") slow_ms = std::stod(next());
    else if (a == "--group-budget") io.lineage_group_budget = std::stoll(next());
    else if (a == "--keep-rows") keep_rows = std::stoul(next());
    else if (a == "--pairs") pairs_file = next();
    else if (a == "--before") before = true;
    else { std::fprintf(stderr, "unknown argument %s\n", a.c_str()); return 2; }
  }
  if (before) {
    io.grow = false;
    io.shrink_budget_s = 0;
    io.max_rows = SIZE_MAX;
    io.search_budget_s = 0;
    io.sample_rows = 0;
  }
  if (!pairs_file.empty()) return run_pairs(pairs_file, spider, bird, bird_db, db_path, keep_rows, seed, io, show_failures, slow_ms);
  struct Source { std::string label; data::Dataset ds; };
  std::vector<Source> sources;
  if (!spider.empty()) {
    data::DatasetSpec spec;
    spec.benchmark = data::Benchmark::kSpider;
    spec.data_dir = spider;
    auto ds = data::load_dataset(spec);
    if (!ds.is_ok()) { std::fprintf(stderr, "%s\n", ds.status().to_string().c_str()); return 1; }
    sources.push_back({"spider-dev", std::move(*ds)});
  }
  if (!bird.empty()) {
    data::DatasetSpec spec;
    spec.benchmark = data::Benchmark::kBird;
    spec.data_dir = bird;
    spec.load_descriptions = false;
    auto ds = data::load_dataset(spec);
    if (!ds.is_ok()) { std::fprintf(stderr, "%s\n", ds.status().to_string().c_str()); return 1; }
    std::vector<data::Question> keep;
    for (auto& q : ds->questions)
      if (q.db_id == bird_db) keep.push_back(q);
    ds->questions = std::move(keep);
    if (!db_path.empty()) ds->db_paths[bird_db] = db_path;
    sources.push_back({"bird-" + bird_db + (db_path.empty() ? "" : "(scaled)"), std::move(*ds)});
  }
  db::ExecutorOptions eo;
  eo.limits.timeout_s = 30;
  db::Executor executor(eo);
  // Candidates run as the pipeline runs them (its question memo): past fix.keep_rows rows (100
  // by default) a result keeps its first rows and the digest of the rest, so a pair's memory is
  // bounded by what lineage and the witnesses hold, not by the answers' size.
  db::QueryLimits run_limits = eo.limits;
  run_limits.hash_rows_after = keep_rows;
  std::vector<Outcome> outcomes;
  size_t skipped_same = 0, skipped_error = 0;
  Counts counts;
  const std::vector<sim::SqlMistake> mistakes = {
      sim::SqlMistake::kWrongColumn,   sim::SqlMistake::kDroppedCondition, sim::SqlMistake::kLiteralCase,
      sim::SqlMistake::kDistinctToggle, sim::SqlMistake::kExtraColumn,     sim::SqlMistake::kWrongAggregate,
      sim::SqlMistake::kWrongJoinKey};
  for (auto& src : sources) {
    std::map<std::string, std::unique_ptr<select::InstanceBuilder>> builders;
    int count = 0;
    for (const auto& q : src.ds.questions) {
      if (max_questions > 0 && count++ >= max_questions) break;
      const auto& path = src.ds.db_paths.at(q.db_id);
      auto& builder = builders[q.db_id];
      if (!builder) {
        auto b = select::InstanceBuilder::open(path, executor, io);
        if (!b.is_ok()) { std::fprintf(stderr, "%s\n", b.status().to_string().c_str()); continue; }
        builder = std::make_unique<select::InstanceBuilder>(std::move(*b));
        const auto s0 = std::chrono::steady_clock::now();
        auto prepared = builder->prepare_sample();
        const double sample_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - s0).count();
        if (sample_ms > 50 || !prepared.is_ok())
          std::printf("%s: sample of D made in %.0f ms%s\n", q.db_id.c_str(), sample_ms,
                      prepared.is_ok() ? "" : (": " + prepared.message()).c_str());
      }
      const auto g0 = std::chrono::steady_clock::now();
      auto gold = executor.run(path, q.gold_sql, run_limits);
      const double gold_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - g0).count();
      if (!gold.ok()) { ++skipped_error; continue; }
      // Mutants: `mutants` mistakes per question, rotating through the taxonomy; every mistake
      // for golds with a subquery in WHERE (the hard case the target names).
      const bool sub = has_where_subquery(q.gold_sql);
      sim::SimRng rng(seed * 1000003 + q.index);
      size_t start = q.index % mistakes.size();
      int made = 0;
      for (size_t k = 0; k < mistakes.size() && (sub || made < mutants); ++k) {
        auto m = mistakes[(start + k) % mistakes.size()];
        auto mutant = sim::apply_mistake(q.gold_sql, m, rng);
        if (!mutant) continue;
        const auto m0 = std::chrono::steady_clock::now();
        auto r = executor.run(path, *mutant, run_limits);
        const double mutant_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - m0).count();
        if (!r.ok()) { ++skipped_error; continue; }
        // Compared on whole answers: a result cut past keep_rows is compared on its digest.
        auto whole = [](const db::ExecutionResult& e) { return e.digest ? *e.digest : db::digest_of(e.result); };
        if (db::relaxed_equal(whole(r), whole(gold))) { ++skipped_same; continue; }
        ++made;
        Outcome o;
        o.dataset = src.label;
        o.question_id = q.question_id;
        o.mistake = sim::sql_mistake_name(m);
        o.subquery_in_where = sub;
        measure(*builder, q.gold_sql, gold.result, *mutant, r.result, seed ^ (q.index * 7919 + k), counts, o);
        o.exec_ms = gold_ms + mutant_ms;
        o.gold = q.gold_sql;
        o.mutant = *mutant;
        // Slow by the time including both candidates' executions.
        if (slow_ms > 0 && o.ms + o.exec_ms >= slow_ms)
          std::printf("SLOW %s q%s %s: %.0f ms (lineage %.0f ms; with both executions %.0f ms)\n  gold:   %s\n  mutant: %s\n",
                      src.label.c_str(), q.question_id.c_str(), o.mistake.c_str(), o.ms, o.lineage_ms, o.ms + o.exec_ms,
                      q.gold_sql.c_str(), mutant->c_str());
        if (show_failures && !o.found)
          std::printf("FAIL %s q%s %s: %s\n  gold:   %s\n  mutant: %s\n", src.label.c_str(),
                      q.question_id.c_str(), o.mistake.c_str(), o.failure.substr(0, 200).c_str(),
                      q.gold_sql.c_str(), mutant->c_str());
        outcomes.push_back(std::move(o));
      }
    }
  }
  std::printf("pairs with different results: %zu (mutants equal to gold skipped: %zu; not runnable: %zu; lineage errors: %zu)\n",
              outcomes.size(), skipped_same, skipped_error, counts.lineage_errors);
  std::printf("witness queries of the pairs' lineages: run %zu, shared within the pair %zu, known empty from an empty result %zu\n",
              counts.witnesses_run, counts.witnesses_shared, counts.witnesses_empty);
  for (const auto& src : sources) {
    summarize(src.label, outcomes, [&](const Outcome& o) { return o.dataset == src.label; });
    summarize(src.label + " / subquery in WHERE", outcomes,
              [&](const Outcome& o) { return o.dataset == src.label && o.subquery_in_where; });
  }
  summarize("all", outcomes, [](const Outcome&) { return true; });
  {
    struct rusage ru{};
    getrusage(RUSAGE_SELF, &ru);
    std::printf("peak RSS: %.1f MiB\n", static_cast<double>(ru.ru_maxrss) / 1024.0);
  }
  summarize("  lineage sampled (group budget " + std::to_string(io.lineage_group_budget) + ")", outcomes,
            [](const Outcome& o) { return o.sampled; });
  for (const auto& m : mistakes)
    summarize(std::string("  ") + sim::sql_mistake_name(m), outcomes,
              [&](const Outcome& o) { return o.mistake == sim::sql_mistake_name(m); });
  return 0;
}
