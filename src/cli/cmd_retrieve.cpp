// nl2sql retrieve: the values and columns retrieval finds for one question (the debugging
// view), and, with the hidden --recall flag, the recall benchmark of scripts/bench/context_recall.sh.
// With --config, the question goes through context::ContextBuilder exactly as in the pipeline
// (LLM keywords, embedding re-ranking, column filtering when the config turns them on).
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <cmath>
#include <ctime>
#include <optional>
#include <iostream>
#include <map>
#include <regex>

#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "cli/config_options.h"
#include "cli/dataset_options.h"
#include "nl2sql/context/question_context.h"
#include "nl2sql/context/retrieve.h"
#include "nl2sql/context/text_match.h"
#include "nl2sql/llm/client.h"
#include "nl2sql/context/value_index.h"
#include "nl2sql/core/files.h"
#include "nl2sql/core/hash.h"
#include "nl2sql/db/executor.h"
#include "nl2sql/sim/simulator.h"

namespace nl2sql::cli {
namespace {
namespace fs = std::filesystem;
using nlohmann::json;

struct RetrieveArgs {
  DatasetOptions dataset;
  ConfigOptions config;
  bool json = false;
  // Which retrieval flags were given (they override the config).
  CLI::Option* min_similarity_opt = nullptr;
  CLI::Option* per_column_opt = nullptr;
  CLI::Option* top_opt = nullptr;
  CLI::Option* threads_opt = nullptr;
  std::string question_id;
  std::string index_dir;
  bool exhaustive = false;
  bool recall = false;
  std::vector<std::string> dbs;
  std::string json_out;
  size_t max_questions = 0;
  bool show_misses = false;
  bool typos = false;
  bool no_exhaustive = false;
  size_t threads = 0;
  context::RetrievalOptions ropts;
};

bool iequals(const std::string& a, const std::string& b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
         });
}

std::string sql_quote(const std::string& s, char q) {
  std::string out(1, q);
  for (char c : s) {
    if (c == q) out.push_back(q);
    out.push_back(c);
  }
  out.push_back(q);
  return out;
}

// CPU time of the calling thread: query timings stay meaningful on a loaded machine.
double thread_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

struct GoldPair {
  std::string column, literal;
};

// `col = 'literal'` / `col = "literal"` comparisons in gold SQL (qualified or quoted column
// names allowed).
std::vector<GoldPair> gold_pairs(const std::string& sql) {
  static const std::regex re(
      R"re((?:[A-Za-z_]\w*\.)?(?:"([^"]+)"|`([^`]+)`|\[([^\]]+)\]|([A-Za-z_]\w*))\s*=\s*(?:'((?:[^']|'')*)'|"((?:[^"]|"")*)"))re");
  std::vector<GoldPair> out;
  for (auto it = std::sregex_iterator(sql.begin(), sql.end(), re); it != std::sregex_iterator(); ++it) {
    const auto& m = *it;
    std::string col;
    for (int g = 1; g <= 4; ++g)
      if (m[g].matched) col = m[g].str();
    // Spider's gold often writes string literals in double quotes (SQLite reads an unknown
    // double-quoted identifier as a string); the database check below settles which it is.
    const bool single = m[5].matched;
    std::string lit = single ? m[5].str() : m[6].str();
    const std::string twice = single ? "''" : "\"\"";
    for (size_t p = lit.find(twice); p != std::string::npos; p = lit.find(twice, p + 1)) lit.erase(p, 1);
    out.push_back({col, lit});
  }
  return out;
}

// ASCII-case-insensitive replacement of every occurrence of `from` in `text`; the count replaced.
size_t replace_all_icase(std::string& text, const std::string& from, const std::string& to) {
  if (from.empty()) return 0;
  auto lower = [](std::string s) {
    for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return s;
  };
  const std::string lf = lower(from);
  std::string lt = lower(text);
  size_t n = 0;
  for (size_t p = lt.find(lf); p != std::string::npos; p = lt.find(lf, p + to.size())) {
    text.replace(p, from.size(), to);
    lt.replace(p, from.size(), lower(to));
    ++n;
  }
  return n;
}

std::string ascii_lower(std::string s) {
  for (char& c : s)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c + 32);
  return s;
}

constexpr const char* kTypoKinds[] = {"deletion", "substitution", "insertion", "transposition"};

// One one-letter typo of `literal` of the given kind (0 deletion, 1 substitution, 2 insertion,
// 3 adjacent transposition) at a letter drawn from `seed`; nothing when the literal has fewer
// than three code points or two letters, or when the typo normalizes to the literal itself.
std::optional<std::string> make_typo(const std::string& literal, int kind, uint64_t seed) {
  std::u32string u = context::decode_utf8(literal);
  auto is_letter = [](char32_t c) { return (c >= U'a' && c <= U'z') || (c >= U'A' && c <= U'Z'); };
  std::vector<size_t> letters, swaps;
  for (size_t i = 0; i < u.size(); ++i) {
    if (is_letter(u[i])) letters.push_back(i);
    if (i + 1 < u.size() && is_letter(u[i]) && is_letter(u[i + 1]) &&
        context::fold_code_point(u[i]) != context::fold_code_point(u[i + 1]))
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
  std::string out = context::encode_utf8(u);
  if (context::normalize_text(out) == context::normalize_text(literal)) return std::nullopt;
  return out;
}

// The recall benchmark (scripts/bench/context_recall.sh). Every (question, column, literal) where
// the gold SQL compares the column to a literal stored in it is a pair; a hit is that value in
// that column among the top k values. Three ways of finding candidates are compared on the same
// keywords: the index as retrieval uses it (LSH bands + short values), the LSH bands alone, and
// the exhaustive scan. With --typos, every pair whose literal is written in the question or the
// evidence is asked again with the literal replaced by a one-letter typo of each kind (deletion,
// substitution, insertion, transposition), once as written, once with the whole text lowercased
// and once as the typo alone (one keyword). Times are the thread CPU time of each retrieve() call.
int run_recall(const RetrieveArgs& a, const data::Dataset& ds) {
  db::Executor executor;
  context::IndexOptions iopts;
  iopts.index_dir = a.index_dir;
  iopts.threads = a.threads;
  std::vector<context::DatabaseRef> refs;
  for (const auto& [id, path] : ds.db_paths)
    if (a.dbs.empty() || std::find(a.dbs.begin(), a.dbs.end(), id) != a.dbs.end())
      refs.push_back({id, path, &ds.schemas.at(id)});
  auto st = context::ensure_indexes(refs, iopts, executor);
  if (!st) {
    spdlog::error("{}", st.status().message());
    return kExitFailure;
  }
  std::map<std::string, context::ValueIndex> indexes;
  for (const auto& r : refs) {
    auto idx = context::open_index(r.db_id, r.db_path, *r.schema, iopts, executor);
    if (!idx) {
      spdlog::error("{}", idx.status().message());
      return kExitFailure;
    }
    indexes.emplace(r.db_id, std::move(*idx));
  }
  const std::vector<size_t> ks = {5, 10, 20};
  struct Mode {
    const char* name;
    bool exhaustive, short_values;
  };
  std::vector<Mode> modes = {{"index", false, true}, {"lsh_only", false, false}, {"exhaustive", true, true}};
  if (a.no_exhaustive) modes.pop_back();  // timing runs at scale: the baseline costs seconds a question
  struct Tally {
    size_t cases = 0;
    std::vector<size_t> hits = std::vector<size_t>(3, 0);
    double seconds = 0;      // wall
    double cpu = 0;          // thread CPU
    std::vector<double> ms;  // thread CPU per retrieve() call
    size_t scored = 0;
  };
  // [set][mode]: set 0 the literals as asked, 1 typos as written, 2 typos lowercased, 3 the typo
  // alone as the whole question (one keyword: the time of one lookup).
  std::vector<std::vector<Tally>> tallies(4, std::vector<Tally>(modes.size()));
  size_t pairs = 0, questions = 0, unindexed = 0, typo_pairs = 0, not_in_text = 0;
  std::map<std::string, size_t> typo_kinds;
  db::QueryLimits limits;
  limits.row_cap = 0;
  for (const auto& q : ds.questions) {
    if (a.max_questions > 0 && questions >= a.max_questions) break;
    auto idx_it = indexes.find(q.db_id);
    if (idx_it == indexes.end()) continue;
    const auto& index = idx_it->second;
    const auto& schema = ds.schemas.at(q.db_id);
    // Targets: (table, column, literal) where the literal is stored in that column.
    struct Target { std::string table, column, literal; };
    std::vector<Target> targets;
    for (const auto& gp : gold_pairs(q.gold_sql)) {
      for (const auto& t : schema.tables)
        for (const auto& c : t.columns) {
          if (!iequals(c.name, gp.column)) continue;
          auto r = executor.run(ds.db_paths.at(q.db_id),
                                fmt::format("SELECT 1 FROM {} WHERE {} = {} LIMIT 1", sql_quote(t.name, '"'),
                                            sql_quote(c.name, '"'), sql_quote(gp.literal, '\'')),
                                limits);
          if (r.ok() && !r.result.rows.empty()) targets.push_back({t.name, c.name, gp.literal});
        }
    }
    if (targets.empty()) continue;
    ++questions;
    context::RetrievalOptions ro = a.ropts;
    ro.max_values = ks.back();
    ro.match_columns = false;
    auto rank = [&](const context::Retrieval& r, const Target& t) {
      for (size_t i = 0; i < r.values.size(); ++i)
        if (r.values[i].value == t.literal && iequals(r.values[i].table, t.table) &&
            iequals(r.values[i].column, t.column))
          return i;
      return r.values.size() + ks.back();
    };
    // Runs every mode on one text and scores the given targets.
    auto measure = [&](const std::string& question, const std::string& evidence,
                       const std::vector<const Target*>& want, std::vector<Tally>& set,
                       std::vector<size_t>* ranks) {
      for (size_t m = 0; m < modes.size(); ++m) {
        ro.exhaustive = modes[m].exhaustive;
        ro.short_values = modes[m].short_values;
        auto t0 = std::chrono::steady_clock::now();
        double c0 = thread_cpu_seconds();
        auto res = context::retrieve(index, schema, question, evidence, ro);
        const double cpu = thread_cpu_seconds() - c0;
        Tally& tally = set[m];
        tally.cpu += cpu;
        tally.ms.push_back(1000 * cpu);
        tally.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        tally.scored += res.candidates_scored;
        for (const Target* t : want) {
          const size_t r = rank(res, *t);
          if (ranks) ranks->push_back(r);
          ++tally.cases;
          for (size_t k = 0; k < ks.size(); ++k) tally.hits[k] += r < ks[k];
        }
      }
    };
    std::vector<const Target*> all;
    for (const auto& t : targets) {
      all.push_back(&t);
      ++pairs;
      if (index.find_exact(t.table, t.column, t.literal) < 0) ++unindexed;
    }
    std::vector<size_t> ranks;  // mode-major: modes x targets
    measure(q.question, q.evidence, all, tallies[0], &ranks);
    if (a.show_misses)
      for (size_t i = 0; i < targets.size(); ++i) {
        const size_t r_index = ranks[i], r_exh = a.no_exhaustive ? ks.back() : ranks[2 * targets.size() + i];
        if (r_index >= ks.back())
          std::cout << fmt::format("miss {} ({}): {}.{} = '{}'{}  | {}\n", q.question_id, q.db_id, targets[i].table,
                                   targets[i].column, targets[i].literal,
                                   r_exh < ks.back() ? " [exhaustive hit]" : "", q.question);
      }
    if (!a.typos) continue;
    for (const auto& t : targets) {
      std::string probe_q = q.question, probe_e = q.evidence;
      if (replace_all_icase(probe_q, t.literal, "\x01") + replace_all_icase(probe_e, t.literal, "\x01") == 0) {
        ++not_in_text;
        continue;
      }
      ++typo_pairs;
      for (int kind = 0; kind < 4; ++kind) {
        auto typo = make_typo(t.literal, kind,
                              core::xxh64(q.question_id + '\x1f' + t.literal + '\x1f' + std::to_string(kind)));
        if (!typo) continue;
        ++typo_kinds[kTypoKinds[kind]];
        std::string tq = q.question, te = q.evidence;
        replace_all_icase(tq, t.literal, *typo);
        replace_all_icase(te, t.literal, *typo);
        std::vector<size_t> typo_ranks;
        measure(tq, te, {&t}, tallies[1], &typo_ranks);
        if (a.show_misses && typo_ranks[0] >= ks[1])
          std::cout << fmt::format("typo miss {} ({}): {}.{} = '{}' asked as '{}' ({}){}\n", q.question_id, q.db_id,
                                   t.table, t.column, t.literal, *typo, kTypoKinds[kind],
                                   !a.no_exhaustive && typo_ranks[2] < ks[1] ? " [exhaustive hit]" : "");
        measure(ascii_lower(tq), ascii_lower(te), {&t}, tallies[2], nullptr);
        measure(*typo, "", {&t}, tallies[3], nullptr);
      }
    }
  }
  auto pct = [](size_t n, size_t of) { return of ? 100.0 * static_cast<double>(n) / static_cast<double>(of) : 0.0; };
  auto quantile = [](std::vector<double> v, double p) {
    if (v.empty()) return 0.0;
    std::sort(v.begin(), v.end());
    size_t i = static_cast<size_t>(std::ceil(p * static_cast<double>(v.size())));
    return v[std::min(v.size(), std::max<size_t>(i, 1)) - 1];
  };
  auto mode_json = [&](const Tally& t) {
    return json{{"recall@5", pct(t.hits[0], t.cases)},  {"recall@10", pct(t.hits[1], t.cases)},
                {"recall@20", pct(t.hits[2], t.cases)}, {"cases", t.cases},
                {"cpu_seconds", t.cpu},                 {"wall_seconds", t.seconds},
                {"calls", t.ms.size()},                 {"p50_ms", quantile(t.ms, 0.5)},
                {"p95_ms", quantile(t.ms, 0.95)},       {"edit_distances", t.scored}};
  };
  auto print_set = [&](const std::vector<Tally>& set) {
    for (size_t m = 0; m < modes.size(); ++m) {
      const Tally& t = set[m];
      std::cout << fmt::format(
          "  {:<10} recall@5 {:6.2f}%  @10 {:6.2f}%  @20 {:6.2f}%  query CPU p50 {:.3f} ms  p95 {:.3f} ms "
          "(total {:.3f} s over {} calls; wall {:.3f} s), {} edit distances\n",
          modes[m].name, pct(t.hits[0], t.cases), pct(t.hits[1], t.cases), pct(t.hits[2], t.cases),
          quantile(t.ms, 0.5), quantile(t.ms, 0.95), t.cpu, t.ms.size(), t.seconds, t.scored);
    }
  };
  std::cout << fmt::format("{} questions, {} (question, column, literal) pairs; {} pairs in columns the index skips or values dropped\n",
                           questions, pairs, unindexed);
  print_set(tallies[0]);
  json j = {{"questions", questions}, {"pairs", pairs}, {"unindexed_pairs", unindexed}};
  for (size_t m = 0; m < modes.size(); ++m) j[modes[m].name] = mode_json(tallies[0][m]);
  double ratio = tallies[0][0].cpu > 0 && !a.no_exhaustive ? tallies[0][2].cpu / tallies[0][0].cpu : 0;
  std::cout << fmt::format("  exhaustive / index query CPU time: {:.1f}x\n", ratio);
  j["time_ratio"] = ratio;
  if (a.typos) {
    std::string kinds;
    for (const auto& [k, n] : typo_kinds) kinds += fmt::format("{}{} {}", kinds.empty() ? "" : ", ", n, k);
    std::cout << fmt::format("one-letter typos: {} pairs written in the question or evidence ({} not written there), "
                             "{} typos ({})\n",
                             typo_pairs, not_in_text, tallies[1][0].cases, kinds);
    j["typos"] = {{"pairs", typo_pairs}, {"pairs_not_in_text", not_in_text}, {"kinds", typo_kinds}};
    const char* names[] = {"", "as_written", "lowercased", "keyword_alone"};
    const char* titles[] = {"", "in the question as written", "in the question lowercased",
                            "alone (the typo as the whole question: one keyword lookup)"};
    for (size_t set = 1; set <= 3; ++set) {
      std::cout << fmt::format(" typos {}:\n", titles[set]);
      print_set(tallies[set]);
      json sj;
      for (size_t m = 0; m < modes.size(); ++m) sj[modes[m].name] = mode_json(tallies[set][m]);
      j["typos"][names[set]] = sj;
    }
  }
  if (!a.json_out.empty()) {
    Status s = core::write_file_atomic(a.json_out, j.dump(2));
    if (!s) {
      spdlog::error("{}", s.message());
      return kExitFailure;
    }
  }
  return kExitOk;
}

int run_retrieve(const RetrieveArgs& a) {
  auto config = a.config.load();  // first: a bad config stops the command before any work
  if (!config) return kExitBadInput;
  auto ds = a.dataset.load(*config);
  if (!ds) return kExitBadInput;
  if (a.recall) return run_recall(a, *ds);
  if (a.question_id.empty()) {
    spdlog::error("--question-id is required");
    return kExitBadInput;
  }
  const data::Question* q = ds->find_question(a.question_id);
  if (!q) {
    spdlog::error("question {} not found in {}", a.question_id, ds->questions_file.string());
    return kExitBadInput;
  }
  auto settings = context::load_context_settings(*config);
  if (!settings) {
    spdlog::error("{}", settings.status().message());
    return kExitBadInput;
  }
  // Flags beat the config.
  if (!a.index_dir.empty()) settings->index.index_dir = a.index_dir;
  if (a.threads_opt->count()) settings->index.threads = a.threads;
  auto& ro = settings->retrieval;
  if (a.min_similarity_opt->count()) ro.min_similarity = a.ropts.min_similarity;
  if (a.per_column_opt->count()) ro.per_column = a.ropts.per_column;
  if (a.top_opt->count()) ro.max_values = a.ropts.max_values;
  ro.extra_keywords = a.ropts.extra_keywords;
  ro.exhaustive = a.exhaustive;
  const bool needs_model = settings->llm_keywords || settings->column_filter || settings->describe ||
                           !settings->embeddings.profile.empty();
  std::unique_ptr<llm::Client> client;
  if (needs_model) {
    auto c = sim::make_client(*config, &*ds);
    if (!c) {
      spdlog::error("{}", c.status().message());
      return kExitBadInput;
    }
    client = std::move(*c);
  }
  db::Executor executor;
  auto builder = context::ContextBuilder::create(std::move(*settings), client.get(), executor);
  if (!builder) {
    spdlog::error("{}", builder.status().message());
    return kExitBadInput;
  }
  const auto& schema = ds->schemas.at(q->db_id);
  // The index is opened (loaded, or built when missing or stale) and timed on its own; the
  // builder keeps it, so the context below is timed without any index loading.
  context::IndexStatus status;
  auto t_load = std::chrono::steady_clock::now();
  auto idx = (*builder)->index(q->db_id, ds->db_paths.at(q->db_id), schema, &status);
  const double load_ms = 1000 * std::chrono::duration<double>(std::chrono::steady_clock::now() - t_load).count();
  if (!idx) {
    spdlog::error("{}", idx.status().message());
    return kExitFailure;
  }
  auto t0 = std::chrono::steady_clock::now();
  auto ctx = (*builder)->build(*q, schema, ds->db_paths.at(q->db_id), 0);
  double ms = 1000 * std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (!ctx) {
    spdlog::error("{}", ctx.status().message());
    return kExitFailure;
  }
  if (a.json) {
    json j = ctx->to_json();
    j["timings_ms"] = {{"index_load", load_ms}, {"context", ms}};
    j["index"] = {{"action", status.action}, {"file", status.file.string()}, {"values", (*idx)->size()}};
    std::cout << j.dump(2) << "\n";
    return kExitOk;
  }
  const auto& r = ctx->retrieval;
  std::cout << fmt::format("question {} ({}): {}\n", q->question_id, q->db_id, q->question);
  if (!q->evidence.empty()) std::cout << "evidence: " << q->evidence << "\n";
  std::cout << fmt::format("index: {} values, {} ({}), opened in {:.2f} ms\n", ctx->index->size(), status.action,
                           status.file.string(), load_ms);
  std::cout << fmt::format("keywords ({}):", r.keywords.size());
  for (const auto& k : r.keywords) std::cout << fmt::format(" \"{}\"[{}]", k.text, k.source);
  std::cout << "\n";
  if ((*builder)->settings().llm_keywords) {
    // Where each model keyword went: new ones are tagged [llm] above; the rest the heuristic had.
    std::vector<std::string> also;
    for (const auto& k : ctx->llm_keywords)
      for (const auto& h : r.keywords)
        if (h.source != "llm" && context::normalize_text(h.text) == context::normalize_text(k)) also.push_back(k);
    std::cout << fmt::format("  model keywords: {} ({} new, {} also found by the heuristic{}{})\n",
                             ctx->llm_keywords.size(), ctx->llm_keywords.size() - also.size(), also.size(),
                             also.empty() ? "" : ": ", fmt::join(also, ", "));
  }
  std::cout << fmt::format("matched values ({}, {} edit distances, context {:.2f} ms without the index opening{}):\n",
                           r.values.size(), r.candidates_scored, ms,
                           (*builder)->settings().embeddings.profile.empty() ? "" : ", re-ranked by embeddings");
  for (const auto& v : r.values)
    std::cout << fmt::format("  {}.{} = {} ({:.3f}, keyword \"{}\")\n", v.table, v.column,
                             sql_quote(v.value, '\''), v.score, v.keyword);
  std::cout << fmt::format("matched columns ({}):\n", r.columns.size());
  for (const auto& c : r.columns)
    std::cout << fmt::format("  {}.{} ({:.3f}, {} ~ \"{}\")\n", c.table, c.column, c.score, c.via, c.keyword);
  if ((*builder)->settings().column_filter) {
    std::cout << fmt::format("selected columns ({}{}):", ctx->selected_columns.size(),
                             ctx->selected_columns.empty() ? ", i.e. the whole schema" : "");
    for (const auto& c : ctx->selected_columns)
      std::cout << " " << c << (ctx->join_keys.count(c) ? "[join key]" : "");
    std::cout << "\n";
    if (!ctx->dropped_tables.empty())
      std::cout << fmt::format("dropped tables: {}\n", fmt::join(ctx->dropped_tables, ", "));
  }
  if (!ctx->calls.empty()) {
    size_t simulated = 0;
    for (const auto& c : ctx->calls) simulated += c.provider == "sim";
    std::cout << fmt::format("model calls: {}{}\n", ctx->calls.size(),
                             simulated ? fmt::format(" ({} simulated: gold-derived answers, not a model's)", simulated) : "");
  }
  for (const auto& e : ctx->errors) std::cout << "error: " << e << "\n";
  return kExitOk;
}

RunFn setup(CLI::App& app) {
  auto args = std::make_shared<RetrieveArgs>();
  auto* cmd = app.add_subcommand("retrieve", "Show the keywords, matched values and matched columns of one question");
  args->dataset.add_to(*cmd);
  args->config.add_to(*cmd, false);
  auto& ro = args->ropts;
  cmd->add_option("--question-id", args->question_id, "Question to retrieve for");
  cmd->add_flag("--json", args->json, "Print the question's context as JSON (keywords, values, columns, selected columns, calls)");
  cmd->add_option("--index-dir", args->index_dir, "Index folder (default $NL2SQL_CACHE_DIR/index or ~/.cache/nl2sql/index)");
  args->threads_opt = cmd->add_option("--threads", args->threads, "Worker threads when an index must be built (0: one per core)")->capture_default_str();
  cmd->add_flag("--exhaustive", args->exhaustive, "Score every indexed value instead of the LSH candidates");
  args->min_similarity_opt = cmd->add_option("--min-similarity", ro.min_similarity, "Normalized edit similarity a value needs")->capture_default_str();
  args->per_column_opt = cmd->add_option("--per-column", ro.per_column, "Most values kept per column")->capture_default_str();
  args->top_opt = cmd->add_option("--top", ro.max_values, "Most values shown")->capture_default_str();
  cmd->add_option("--keyword", ro.extra_keywords, "Extra keyword (repeatable), merged after the heuristic ones");
  // Benchmark mode for scripts/bench/context_recall.sh (not part of the user interface).
  cmd->add_flag("--recall", args->recall, "Recall@5/10/20 of the index (LSH + short values), LSH alone and exhaustive over all questions")->group("");
  cmd->add_option("--db", args->dbs, "--recall: only these databases")->group("");
  cmd->add_option("--recall-json", args->json_out, "--recall: write the numbers as JSON")->group("");
  cmd->add_flag("--show-misses", args->show_misses, "--recall: print each pair the index misses")->group("");
  cmd->add_flag("--no-exhaustive", args->no_exhaustive, "--recall: leave out the exhaustive baseline (timing runs)")->group("");
  cmd->add_flag("--typos", args->typos, "--recall: also ask each literal with one-letter typos (as written and lowercased)")->group("");
  cmd->add_option("--max-questions", args->max_questions, "--recall: stop after this many measured questions")->group("");
  return [args] { return run_retrieve(*args); };
}

NL2SQL_REGISTER_COMMAND("retrieve", setup);

}  // namespace
}  // namespace nl2sql::cli
