// nl2sql retrieve: the values and columns retrieval finds for one question (the debugging
// view), and, with the hidden --recall flag, the recall benchmark of scripts/bench/context_recall.sh.
// With --config, the question goes through context::ContextBuilder exactly as in the pipeline
// (LLM keywords, embedding re-ranking, column filtering when the config turns them on).
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <ctime>
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
  struct Tally {
    std::vector<size_t> hits = std::vector<size_t>(3, 0);
    double seconds = 0;  // wall
    double cpu = 0;      // thread CPU
    size_t scored = 0;
  } lsh, exh;
  size_t pairs = 0, questions = 0, unindexed = 0;
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
    auto measure = [&](bool exhaustive, Tally& tally) {
      ro.exhaustive = exhaustive;
      auto t0 = std::chrono::steady_clock::now();
      double c0 = thread_cpu_seconds();
      auto res = context::retrieve(index, schema, q.question, q.evidence, ro);
      tally.cpu += thread_cpu_seconds() - c0;
      tally.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      tally.scored += res.candidates_scored;
      return res;
    };
    auto rl = measure(false, lsh);
    auto re = measure(true, exh);
    for (const auto& t : targets) {
      ++pairs;
      if (index.find_exact(t.table, t.column, t.literal) < 0) ++unindexed;
      auto rank = [&](const context::Retrieval& r) {
        for (size_t i = 0; i < r.values.size(); ++i)
          if (r.values[i].value == t.literal && iequals(r.values[i].table, t.table) &&
              iequals(r.values[i].column, t.column))
            return i;
        return r.values.size() + ks.back();
      };
      size_t r1 = rank(rl), r2 = rank(re);
      if (a.show_misses && r1 >= ks.back())
        std::cout << fmt::format("miss {} ({}): {}.{} = '{}'{}  | {}\n", q.question_id, q.db_id, t.table, t.column,
                                 t.literal, r2 < ks.back() ? " [exhaustive hit]" : "", q.question);
      for (size_t k = 0; k < ks.size(); ++k) {
        lsh.hits[k] += r1 < ks[k];
        exh.hits[k] += r2 < ks[k];
      }
    }
  }
  auto pct = [&](size_t n) { return pairs ? 100.0 * static_cast<double>(n) / static_cast<double>(pairs) : 0.0; };
  std::cout << fmt::format("{} questions, {} (question, column, literal) pairs; {} pairs in columns the index skips or values dropped\n",
                           questions, pairs, unindexed);
  json j = {{"questions", questions}, {"pairs", pairs}, {"unindexed_pairs", unindexed}};
  for (auto [name, t] : {std::pair<const char*, Tally*>{"lsh", &lsh}, {"exhaustive", &exh}}) {
    std::cout << fmt::format("  {:<10} recall@5 {:6.2f}%  @10 {:6.2f}%  @20 {:6.2f}%  query CPU {:.3f} s ({:.3f} ms/question; wall {:.3f} s), {} edit distances\n",
                             name, pct(t->hits[0]), pct(t->hits[1]), pct(t->hits[2]), t->cpu,
                             questions ? 1000 * t->cpu / static_cast<double>(questions) : 0.0, t->seconds, t->scored);
    j[name] = {{"recall@5", pct(t->hits[0])}, {"recall@10", pct(t->hits[1])}, {"recall@20", pct(t->hits[2])},
               {"cpu_seconds", t->cpu}, {"wall_seconds", t->seconds}, {"edit_distances", t->scored}};
  }
  double ratio = lsh.cpu > 0 ? exh.cpu / lsh.cpu : 0;
  std::cout << fmt::format("  exhaustive / LSH query CPU time: {:.1f}x\n", ratio);
  j["time_ratio"] = ratio;
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
  auto ds = a.dataset.load();
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
  context::IndexStatus status;
  {
    // Opened here first only to report whether the index was fresh; the builder reuses the file.
    auto idx = context::open_index(q->db_id, ds->db_paths.at(q->db_id), schema, (*builder)->settings().index,
                                   executor, &status);
    if (!idx) {
      spdlog::error("{}", idx.status().message());
      return kExitFailure;
    }
  }
  auto t0 = std::chrono::steady_clock::now();
  auto ctx = (*builder)->build(*q, schema, ds->db_paths.at(q->db_id), 0);
  double ms = 1000 * std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (!ctx) {
    spdlog::error("{}", ctx.status().message());
    return kExitFailure;
  }
  if (a.json) {
    std::cout << ctx->to_json().dump(2) << "\n";
    return kExitOk;
  }
  const auto& r = ctx->retrieval;
  std::cout << fmt::format("question {} ({}): {}\n", q->question_id, q->db_id, q->question);
  if (!q->evidence.empty()) std::cout << "evidence: " << q->evidence << "\n";
  std::cout << fmt::format("index: {} values, {} ({})\n", ctx->index->size(), status.action, status.file.string());
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
  std::cout << fmt::format("matched values ({}, {} edit distances, {:.2f} ms{}):\n", r.values.size(),
                           r.candidates_scored, ms,
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
  cmd->add_flag("--recall", args->recall, "Recall@5/10/20 of LSH vs exhaustive over all questions")->group("");
  cmd->add_option("--db", args->dbs, "--recall: only these databases")->group("");
  cmd->add_option("--recall-json", args->json_out, "--recall: write the numbers as JSON")->group("");
  cmd->add_flag("--show-misses", args->show_misses, "--recall: print each pair LSH misses")->group("");
  cmd->add_option("--max-questions", args->max_questions, "--recall: stop after this many measured questions")->group("");
  return [args] { return run_retrieve(*args); };
}

NL2SQL_REGISTER_COMMAND("retrieve", setup);

}  // namespace
}  // namespace nl2sql::cli
