#include "nl2sql/context/recall_bench.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <ctime>
#include <regex>

#include "nl2sql/context/text_match.h"
#include "nl2sql/core/hash.h"
#include "nl2sql/core/text.h"

namespace nl2sql::context {
namespace {

using nlohmann::json;

constexpr const char* kTypoKinds[] = {"deletion", "substitution", "insertion", "transposition"};
constexpr size_t kTopK = RecallBench::kKs[2];

// CPU time of the calling thread: query timings stay meaningful on a loaded machine.
double thread_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

// ASCII-case-insensitive replacement of every occurrence of `from` in `text`; the count replaced.
size_t replace_all_icase(std::string& text, const std::string& from, const std::string& to) {
  if (from.empty()) return 0;
  const std::string lf = core::lower(from);
  std::string lt = core::lower(text);
  size_t n = 0;
  for (size_t p = lt.find(lf); p != std::string::npos; p = lt.find(lf, p + to.size())) {
    text.replace(p, from.size(), to);
    lt.replace(p, from.size(), core::lower(to));
    ++n;
  }
  return n;
}

double quantile(std::vector<double> v, double p) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  size_t i = static_cast<size_t>(std::ceil(p * static_cast<double>(v.size())));
  return v[std::min(v.size(), std::max<size_t>(i, 1)) - 1];
}

double pct(size_t n, size_t of) { return of ? 100.0 * static_cast<double>(n) / static_cast<double>(of) : 0.0; }

struct Target {
  std::string table, column, literal;
};

struct Mode {
  const char* name;
  bool exhaustive, short_values;
};

// The running benchmark: one question at a time, every mode on every ask.
class Bench {
 public:
  Bench(const data::Dataset& ds, const RecallBenchOptions& o, const db::Executor& executor)
      : ds_(ds), o_(o), executor_(executor) {
    modes_ = {{"index", false, true}, {"lsh_only", false, false}};
    if (o.exhaustive_baseline) modes_.push_back({"exhaustive", true, true});
    out_.typos = o.typos;
    for (const auto& m : modes_) out_.modes.emplace_back(m.name);
    out_.sets.assign(4, std::vector<RecallTally>(modes_.size()));
    ro_ = o.retrieval;
    ro_.max_values = kTopK;
    ro_.match_columns = false;
  }

  void question(const data::Question& q, const ValueIndex& index) {
    const auto targets = targets_of(q);
    if (targets.empty()) return;
    ++out_.questions;
    std::vector<const Target*> all;
    for (const auto& t : targets) {
      all.push_back(&t);
      ++out_.pairs;
      if (index.find_exact(t.table, t.column, t.literal) < 0) ++out_.unindexed_pairs;
    }
    const auto& schema = ds_.schemas.at(q.db_id);
    std::vector<size_t> ranks;  // mode-major: modes x targets
    measure(index, schema, q.question, q.evidence, all, out_.sets[0], &ranks);
    if (o_.on_miss)
      for (size_t i = 0; i < targets.size(); ++i) {
        const size_t r_index = ranks[i];
        const size_t r_exh = o_.exhaustive_baseline ? ranks[2 * targets.size() + i] : kTopK;
        if (r_index >= kTopK)
          o_.on_miss(fmt::format("miss {} ({}): {}.{} = '{}'{}  | {}", q.question_id, q.db_id, targets[i].table,
                                 targets[i].column, targets[i].literal, r_exh < kTopK ? " [exhaustive hit]" : "",
                                 q.question));
      }
    if (o_.typos)
      for (const auto& t : targets) typos(q, index, schema, t);
  }

  size_t questions() const { return out_.questions; }
  RecallBench finish() { return std::move(out_); }

 private:
  // Cases of one question: (table, column, literal) where the literal is stored in that column.
  std::vector<Target> targets_of(const data::Question& q) const {
    db::QueryLimits limits;
    limits.row_cap = 0;
    std::vector<Target> targets;
    for (const auto& gp : column_literal_comparisons(q.gold_sql))
      for (const auto& t : ds_.schemas.at(q.db_id).tables)
        for (const auto& c : t.columns) {
          if (!core::iequals(c.name, gp.column)) continue;
          auto r = executor_.run(ds_.db_paths.at(q.db_id),
                                 fmt::format("SELECT 1 FROM {} WHERE {} = {} LIMIT 1", core::quote_sql_identifier(t.name),
                                             core::quote_sql_identifier(c.name), core::quote_sql_string(gp.literal)),
                                 limits);
          if (r.ok() && !r.result.rows.empty()) targets.push_back({t.name, c.name, gp.literal});
        }
    return targets;
  }

  static size_t rank(const Retrieval& r, const Target& t) {
    for (size_t i = 0; i < r.values.size(); ++i)
      if (r.values[i].value == t.literal && core::iequals(r.values[i].table, t.table) &&
          core::iequals(r.values[i].column, t.column))
        return i;
    return r.values.size() + kTopK;
  }

  // Runs every mode on one text and scores the given targets.
  void measure(const ValueIndex& index, const data::Schema& schema, const std::string& question,
               const std::string& evidence, const std::vector<const Target*>& want, std::vector<RecallTally>& set,
               std::vector<size_t>* ranks) {
    for (size_t m = 0; m < modes_.size(); ++m) {
      ro_.exhaustive = modes_[m].exhaustive;
      ro_.short_values = modes_[m].short_values;
      const auto t0 = std::chrono::steady_clock::now();
      const double c0 = thread_cpu_seconds();
      auto res = retrieve(index, schema, question, evidence, ro_);
      const double cpu = thread_cpu_seconds() - c0;
      RecallTally& tally = set[m];
      tally.cpu_seconds += cpu;
      tally.cpu_ms.push_back(1000 * cpu);
      tally.wall_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      tally.edit_distances += res.candidates_scored;
      for (const Target* t : want) {
        const size_t r = rank(res, *t);
        if (ranks) ranks->push_back(r);
        ++tally.cases;
        for (size_t k = 0; k < 3; ++k) tally.hits[k] += r < RecallBench::kKs[k];
      }
    }
  }

  void typos(const data::Question& q, const ValueIndex& index, const data::Schema& schema, const Target& t) {
    std::string probe_q = q.question, probe_e = q.evidence;
    if (replace_all_icase(probe_q, t.literal, "\x01") + replace_all_icase(probe_e, t.literal, "\x01") == 0) {
      ++out_.pairs_not_in_text;
      return;
    }
    ++out_.typo_pairs;
    for (int kind = 0; kind < 4; ++kind) {
      auto typo = make_typo(t.literal, kind,
                            core::xxh64(q.question_id + '\x1f' + t.literal + '\x1f' + std::to_string(kind)));
      if (!typo) continue;
      ++out_.typo_kinds[kTypoKinds[kind]];
      std::string tq = q.question, te = q.evidence;
      replace_all_icase(tq, t.literal, *typo);
      replace_all_icase(te, t.literal, *typo);
      std::vector<size_t> typo_ranks;
      measure(index, schema, tq, te, {&t}, out_.sets[1], &typo_ranks);
      if (o_.on_miss && typo_ranks[0] >= RecallBench::kKs[1])
        o_.on_miss(fmt::format("typo miss {} ({}): {}.{} = '{}' asked as '{}' ({}){}", q.question_id, q.db_id, t.table,
                               t.column, t.literal, *typo, kTypoKinds[kind],
                               o_.exhaustive_baseline && typo_ranks[2] < RecallBench::kKs[1] ? " [exhaustive hit]" : ""));
      measure(index, schema, core::lower(tq), core::lower(te), {&t}, out_.sets[2], nullptr);
      measure(index, schema, *typo, "", {&t}, out_.sets[3], nullptr);
    }
  }

  const data::Dataset& ds_;
  const RecallBenchOptions& o_;
  const db::Executor& executor_;
  std::vector<Mode> modes_;
  RetrievalOptions ro_;
  RecallBench out_;
};

}  // namespace

double RecallTally::recall(size_t k_index) const { return pct(hits.at(k_index), cases); }

json RecallTally::to_json() const {
  return json{{"recall@5", recall(0)},          {"recall@10", recall(1)},
              {"recall@20", recall(2)},         {"cases", cases},
              {"cpu_seconds", cpu_seconds},     {"wall_seconds", wall_seconds},
              {"calls", cpu_ms.size()},         {"p50_ms", quantile(cpu_ms, 0.5)},
              {"p95_ms", quantile(cpu_ms, 0.95)}, {"edit_distances", edit_distances}};
}

double RecallBench::time_ratio() const {
  if (modes.size() < 3 || sets.empty() || sets[0][0].cpu_seconds <= 0) return 0;
  return sets[0][2].cpu_seconds / sets[0][0].cpu_seconds;
}

json RecallBench::to_json() const {
  json j = {{"questions", questions}, {"pairs", pairs}, {"unindexed_pairs", unindexed_pairs}};
  for (size_t m = 0; m < modes.size(); ++m) j[modes[m]] = sets[0][m].to_json();
  j["time_ratio"] = time_ratio();
  if (typos) {
    j["typos"] = {{"pairs", typo_pairs}, {"pairs_not_in_text", pairs_not_in_text}, {"kinds", typo_kinds}};
    const char* names[] = {"", "as_written", "lowercased", "keyword_alone"};
    for (size_t set = 1; set <= 3; ++set) {
      json sj;
      for (size_t m = 0; m < modes.size(); ++m) sj[modes[m]] = sets[set][m].to_json();
      j["typos"][names[set]] = sj;
    }
  }
  return j;
}

std::string RecallBench::summary() const {
  auto print_set = [&](const std::vector<RecallTally>& set) {
    std::string out;
    for (size_t m = 0; m < modes.size(); ++m) {
      const RecallTally& t = set[m];
      out += fmt::format(
          "  {:<10} recall@5 {:6.2f}%  @10 {:6.2f}%  @20 {:6.2f}%  query CPU p50 {:.3f} ms  p95 {:.3f} ms "
          "(total {:.3f} s over {} calls; wall {:.3f} s), {} edit distances\n",
          modes[m], t.recall(0), t.recall(1), t.recall(2), quantile(t.cpu_ms, 0.5), quantile(t.cpu_ms, 0.95),
          t.cpu_seconds, t.cpu_ms.size(), t.wall_seconds, t.edit_distances);
    }
    return out;
  };
  std::string out = fmt::format(
      "{} questions, {} (question, column, literal) pairs; {} pairs in columns the index skips or values dropped\n",
      questions, pairs, unindexed_pairs);
  out += print_set(sets[0]);
  out += fmt::format("  exhaustive / index query CPU time: {:.1f}x\n", time_ratio());
  if (!typos) return out;
  std::string kinds;
  for (const auto& [k, n] : typo_kinds) kinds += fmt::format("{}{} {}", kinds.empty() ? "" : ", ", n, k);
  out += fmt::format("one-letter typos: {} pairs written in the question or evidence ({} not written there), "
                     "{} typos ({})\n",
                     typo_pairs, pairs_not_in_text, sets[1][0].cases, kinds);
  const char* titles[] = {"", "in the question as written", "in the question lowercased",
                          "alone (the typo as the whole question: one keyword lookup)"};
  for (size_t set = 1; set <= 3; ++set) out += fmt::format(" typos {}:\n", titles[set]) + print_set(sets[set]);
  return out;
}

Result<RecallBench> run_recall_bench(const data::Dataset& ds, const RecallBenchOptions& options,
                                     const db::Executor& executor) {
  std::vector<DatabaseRef> refs;
  for (const auto& [id, path] : ds.db_paths)
    if (options.dbs.empty() || std::find(options.dbs.begin(), options.dbs.end(), id) != options.dbs.end())
      refs.push_back({id, path, &ds.schemas.at(id)});
  auto built = ensure_indexes(refs, options.index, executor);
  if (!built) return built.status();
  std::map<std::string, ValueIndex> indexes;
  for (const auto& r : refs) {
    auto idx = open_index(r.db_id, r.db_path, *r.schema, options.index, executor);
    if (!idx) return idx.status();
    indexes.emplace(r.db_id, std::move(*idx));
  }
  Bench bench(ds, options, executor);
  size_t asked = 0;
  for (const auto& q : ds.questions) {
    if (options.max_questions > 0 && asked >= options.max_questions) break;
    auto it = indexes.find(q.db_id);
    if (it == indexes.end()) continue;
    const size_t before = bench.questions();
    bench.question(q, it->second);
    asked += bench.questions() > before;
  }
  return bench.finish();
}

std::vector<ColumnLiteral> column_literal_comparisons(const std::string& sql) {
  static const std::regex re(
      R"re((?:[A-Za-z_]\w*\.)?(?:"([^"]+)"|`([^`]+)`|\[([^\]]+)\]|([A-Za-z_]\w*))\s*=\s*(?:'((?:[^']|'')*)'|"((?:[^"]|"")*)"))re");
  std::vector<ColumnLiteral> out;
  for (auto it = std::sregex_iterator(sql.begin(), sql.end(), re); it != std::sregex_iterator(); ++it) {
    const auto& m = *it;
    std::string col;
    for (int g = 1; g <= 4; ++g)
      if (m[g].matched) col = m[g].str();
    // Spider's gold often writes string literals in double quotes (SQLite reads an unknown
    // double-quoted identifier as a string); run_recall_bench checks the database for which it is.
    const bool single = m[5].matched;
    std::string lit = single ? m[5].str() : m[6].str();
    const std::string twice = single ? "''" : "\"\"";
    for (size_t p = lit.find(twice); p != std::string::npos; p = lit.find(twice, p + 1)) lit.erase(p, 1);
    out.push_back({col, lit});
  }
  return out;
}

std::optional<std::string> make_typo(const std::string& literal, int kind, uint64_t seed) {
  std::u32string u = decode_utf8(literal);
  auto is_letter = [](char32_t c) { return (c >= U'a' && c <= U'z') || (c >= U'A' && c <= U'Z'); };
  std::vector<size_t> letters, swaps;
  for (size_t i = 0; i < u.size(); ++i) {
    if (is_letter(u[i])) letters.push_back(i);
    if (i + 1 < u.size() && is_letter(u[i]) && is_letter(u[i + 1]) && fold_code_point(u[i]) != fold_code_point(u[i + 1]))
      swaps.push_back(i);
  }
  if (u.size() < 3 || letters.size() < 2) return std::nullopt;
  core::SplitMix64 r(seed);
  const size_t pos = letters[r.next_u64() % letters.size()];
  const char32_t other = U'a' + static_cast<char32_t>(r.next_u64() % 26);
  switch (kind) {
    case 0: u.erase(pos, 1); break;
    case 1: {
      const char32_t base = u[pos] >= U'a' ? U'a' : U'A';
      u[pos] = base + (u[pos] - base + 1 + static_cast<char32_t>(r.next_u64() % 25)) % 26;
      break;
    }
    case 2: u.insert(pos + 1, 1, other); break;
    default:
      if (swaps.empty()) return std::nullopt;
      {
        const size_t i = swaps[r.next_u64() % swaps.size()];
        std::swap(u[i], u[i + 1]);
      }
  }
  std::string out = encode_utf8(u);
  if (normalize_text(out) == normalize_text(literal)) return std::nullopt;
  return out;
}

}  // namespace nl2sql::context
