// nl2sql generate: the developer's microscope on the generate and fix stages for one question —
// every candidate with its reasoning, SQL, execution status, result preview and fixer rounds.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <iostream>
#include <optional>

#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "cli/dataset_options.h"
#include "nl2sql/context/retrieve.h"
#include "nl2sql/context/value_index.h"
#include "nl2sql/core/config.h"
#include "nl2sql/core/hash.h"
#include "nl2sql/db/executor.h"
#include "nl2sql/db/result_compare.h"
#include "nl2sql/eval/compare.h"
#include "nl2sql/core/files.h"
#include "nl2sql/fix/fixer.h"
#include "nl2sql/generate/generator.h"
#include "nl2sql/llm/client.h"
#include "nl2sql/llm/prompt_template.h"
#include "nl2sql/sim/simulator.h"

namespace nl2sql::cli {
namespace {

struct GenerateArgs {
  DatasetOptions dataset;
  std::string config_path;
  std::vector<std::string> sets;
  std::string question_id;
  std::string index_dir;
  bool no_index = false;
  std::string prompts_dir;
  bool json = false;
  bool show_prompts = false;
  // Benchmark mode (scripts/bench/generate_stage.sh).
  bool bench = false;
  size_t max_questions = 0;
  std::vector<std::string> dbs;
  std::vector<std::string> pool;
  std::string json_out;
};

std::string indent(const std::string& text, const std::string& pad = "    ") {
  std::string out = pad;
  for (char c : text) {
    out += c;
    if (c == '\n') out += pad;
  }
  return out;
}

std::string exec_line(const feedback::ExecutionSummary& e) {
  if (!e.executed) return "not executed";
  if (e.ok()) return fmt::format("ok, {} row(s) x {} column(s), {:.1f} ms", e.rows, e.columns, e.elapsed_ms);
  return fmt::format("{}: {}", db::exec_status_name(e.status), e.error);
}

void print_candidate(const generate::Candidate& c, bool show_prompts) {
  std::string provider = c.calls.empty() ? "" : c.calls.back().provider;
  std::cout << fmt::format("== {} (generator {}, profile {}{}, {} tokens, LLM {:.2f} s)\n", c.id, c.generator,
                           c.profile.empty() ? "?" : c.profile, provider == "sim" ? " [SIMULATED]" : "", c.tokens(),
                           c.llm_latency_s());
  if (show_prompts)
    for (const auto& call : c.calls)
      std::cout << fmt::format("-- prompt ({}, template {} {})\n{}\n", call.stage, call.template_name,
                               call.template_hash.substr(0, 12), indent(call.prompt));
  if (!c.reasoning.empty()) std::cout << "reasoning:\n" << indent(c.reasoning) << "\n";
  if (!c.extraction_ok) {
    std::cout << "extraction failed: " << c.extraction_error << "\n\n";
    return;
  }
  if (c.original_sql != c.sql) std::cout << "original SQL:\n" << indent(c.original_sql) << "\n";
  std::cout << "SQL:\n" << indent(c.sql) << "\n";
  if (c.rejected) {
    std::cout << c.rejection << "\n\n";
    return;
  }
  std::cout << "execution: " << exec_line(c.execution) << "\n";
  if (!c.execution.preview.empty()) std::cout << indent(c.execution.preview) << "\n";
  for (const auto& r : c.fix_rounds) {
    std::cout << fmt::format("fix round {} [{}]: {}\n", r.round, r.failure_class,
                             r.sql_after == r.sql_before ? "SQL unchanged" : "SQL changed");
    std::cout << indent(r.feedback) << "\n";
    if (r.sql_after != r.sql_before) std::cout << "  → " << r.sql_after << "\n";
    std::cout << "  execution after: " << exec_line(r.execution_after) << "\n";
  }
  if (c.still_failing) std::cout << "STILL FAILING after " << c.fix_rounds.size() << " fix round(s)\n";
  std::cout << "\n";
}

// Benchmark over many questions: per generator, executability before and after the fixer and
// the first candidate's EX; the upper bound EX (some candidate equals gold) as the pool grows
// (1, 3, 7, 21 candidates taken round-robin over the --pool generators); stage time per
// question excluding the LLM latency the client reports.
int run_bench(const GenerateArgs& a, const data::Dataset& ds, const core::Config& config, llm::Client& client,
              const std::vector<std::unique_ptr<generate::Generator>>& generators, const fix::Fixer& fixer,
              int64_t run_seed) {
  db::Executor executor;
  struct PerGen {
    size_t candidates = 0, exec_before = 0, exec_after = 0, still_failing = 0, rejected = 0, no_sql = 0;
    size_t first_ex_before = 0, first_ex_after = 0, any_ex = 0, rounds = 0;
  };
  std::map<std::string, PerGen> per;
  const std::vector<size_t> ks = {1, 3, 7, 21};
  std::vector<size_t> upper(ks.size(), 0);
  size_t questions = 0;
  double stage_seconds = 0, llm_seconds = 0;
  const bool spider = ds.benchmark == data::Benchmark::kSpider;
  (void)config;
  for (const auto& q : ds.questions) {
    if (a.max_questions && questions >= a.max_questions) break;
    if (!a.dbs.empty() && std::find(a.dbs.begin(), a.dbs.end(), q.db_id) == a.dbs.end()) continue;
    const auto& schema = ds.schemas.at(q.db_id);
    const auto db_path = ds.db_paths.at(q.db_id);
    auto gold = executor.run(db_path, q.gold_sql);
    if (!gold.ok()) continue;  // a gold query that does not run judges nothing
    ++questions;
    const bool order_matters = spider && eval::spider_order_matters(q.gold_sql);
    auto equal = [&](const db::ResultSet& pred) {
      return spider ? db::spider_ts_equal(gold.result, pred, order_matters) : db::bird_equal(pred, gold.result);
    };
    auto judge = [&](const std::string& sql) {
      if (sql.empty()) return false;
      auto r = executor.run(db_path, sql);
      return r.ok() && equal(r.result);
    };
    generate::GenerationInput in;
    in.question = &q;
    in.schema = &schema;
    in.db_path = db_path;
    in.seed = core::xxh64(q.question_id + "\x1fgenerate", static_cast<uint64_t>(run_seed));
    fix::FixInput fin{&q, &schema, db_path, nullptr, nullptr, &executor, in.seed};
    std::map<std::string, std::vector<bool>> pool_hits;  // generator label -> per candidate
    for (const auto& g : generators) {
      const auto t0 = std::chrono::steady_clock::now();
      auto cands = g->generate(in);
      if (!cands) {
        spdlog::error("{}", cands.status().message());
        return kExitFailure;
      }
      std::vector<generate::Candidate> before = *cands;
      for (auto& c : *cands)
        if (auto st = fixer.fix(c, fin); !st) {
          spdlog::error("{}", st.message());
          return kExitFailure;
        }
      stage_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      for (size_t i = 0; i < cands->size(); ++i) {
        auto& c = (*cands)[i];
        const std::string label = c.generator == "presql" || c.generator == "postsql" ? c.generator : g->name();
        auto& p = per[label];
        llm_seconds += c.llm_latency_s();
        ++p.candidates;
        p.rounds += c.fix_rounds.size();
        p.rejected += c.rejected;
        p.no_sql += !c.extraction_ok;
        p.exec_after += c.execution.ok();
        p.still_failing += c.still_failing;
        // Before fixing: the first SQL as extracted (the fixer keeps it in original_sql).
        auto b = before[i];
        if (b.extraction_ok && !b.sql.empty()) {
          auto r = executor.run(db_path, b.sql);
          p.exec_before += r.ok();
        }
        const bool hit = judge(c.sql);
        pool_hits[label].push_back(hit);
        if (pool_hits[label].size() == 1) {
          p.first_ex_before += judge(c.original_sql.empty() ? c.sql : c.original_sql);
          p.first_ex_after += hit;
        }
      }
    }
    for (auto& [label, hits] : pool_hits) per[label].any_ex += std::any_of(hits.begin(), hits.end(), [](bool b) { return b; });
    // Round-robin pool over --pool generators (all when empty).
    std::vector<bool> order;
    std::vector<std::string> labels = a.pool;
    if (labels.empty())
      for (const auto& [label, hits] : pool_hits) labels.push_back(label);
    for (size_t i = 0;; ++i) {
      bool any = false;
      for (const auto& l : labels) {
        auto it = pool_hits.find(l);
        if (it != pool_hits.end() && i < it->second.size()) {
          order.push_back(it->second[i]);
          any = true;
        }
      }
      if (!any) break;
    }
    for (size_t k = 0; k < ks.size(); ++k) {
      bool hit = false;
      for (size_t i = 0; i < std::min(ks[k], order.size()); ++i) hit = hit || order[i];
      upper[k] += hit;
    }
  }
  auto pct = [](size_t n, size_t d) { return d ? 100.0 * static_cast<double>(n) / static_cast<double>(d) : 0.0; };
  std::cout << fmt::format("{} questions ({}){}\n", questions, ds.questions_file.filename().string(),
                           client.any_simulated() ? " -- SIMULATED answers (sim provider): machinery check, not a model" : "");
  std::cout << fmt::format("{:<10} {:>6} {:>11} {:>11} {:>9} {:>8} {:>10} {:>10} {:>9}\n", "generator", "cands",
                           "exec before", "exec after", "still bad", "rounds", "EX1 before", "EX1 after", "any EX");
  nlohmann::json j = {{"questions", questions}, {"simulated", client.any_simulated()}};
  for (const auto& [label, p] : per) {
    std::cout << fmt::format("{:<10} {:>6} {:>10.1f}% {:>10.1f}% {:>8.1f}% {:>8.2f} {:>9.1f}% {:>9.1f}% {:>8.1f}%\n", label,
                             p.candidates, pct(p.exec_before, p.candidates), pct(p.exec_after, p.candidates),
                             pct(p.still_failing, p.candidates),
                             p.candidates ? static_cast<double>(p.rounds) / static_cast<double>(p.candidates) : 0.0,
                             pct(p.first_ex_before, questions), pct(p.first_ex_after, questions), pct(p.any_ex, questions));
    j["generators"][label] = {{"candidates", p.candidates}, {"exec_before_pct", pct(p.exec_before, p.candidates)},
                              {"exec_after_pct", pct(p.exec_after, p.candidates)},
                              {"still_failing_pct", pct(p.still_failing, p.candidates)},
                              {"fix_rounds_per_candidate", p.candidates ? static_cast<double>(p.rounds) / static_cast<double>(p.candidates) : 0.0},
                              {"first_ex_before_pct", pct(p.first_ex_before, questions)},
                              {"first_ex_after_pct", pct(p.first_ex_after, questions)},
                              {"any_ex_pct", pct(p.any_ex, questions)}};
  }
  std::string pool_name;
  for (const auto& l : a.pool) pool_name += (pool_name.empty() ? "" : ",") + l;
  std::cout << "upper bound EX (some candidate equals gold), round-robin over " << (pool_name.empty() ? "all" : pool_name)
            << ":";
  for (size_t k = 0; k < ks.size(); ++k) {
    std::cout << fmt::format("  {} cand {:.1f}%", ks[k], pct(upper[k], questions));
    j["upper_bound_pct"][std::to_string(ks[k])] = pct(upper[k], questions);
  }
  const double per_q = questions ? (stage_seconds - llm_seconds) / static_cast<double>(questions) : 0.0;
  std::cout << fmt::format("\nstage time per question excluding reported LLM latency: {:.2f} ms "
                           "(generate + execute + fix; sim answers are computed in-process and included)\n",
                           1000 * per_q);
  j["stage_ms_per_question_excl_llm"] = 1000 * per_q;
  if (!a.json_out.empty())
    if (auto st = core::write_file_atomic(a.json_out, j.dump(2)); !st) {
      spdlog::error("{}", st.message());
      return kExitFailure;
    }
  return kExitOk;
}

// The stage as both modes build it: generators, fixer and the run seed (generate.seed).
// Logs the failing config key's message and returns nullopt on a bad config.
struct Stage {
  std::vector<std::unique_ptr<generate::Generator>> generators;
  std::optional<fix::Fixer> fixer;
  int64_t seed = 0;
};

std::optional<Stage> build_stage(const GenerateArgs& a, const core::Config& config, llm::Client* client,
                                 const db::Executor& executor) {
  const std::filesystem::path prompts = a.prompts_dir.empty() ? llm::bundled_prompts_dir() : std::filesystem::path(a.prompts_dir);
  Stage stage;
  auto generators = generate::make_generators(config, client, &executor, prompts);
  if (!generators) {
    spdlog::error("{}", generators.status().message());
    return std::nullopt;
  }
  stage.generators = std::move(*generators);
  auto fixer = fix::Fixer::create(config, client, prompts);
  if (!fixer) {
    spdlog::error("{}", fixer.status().message());
    return std::nullopt;
  }
  stage.fixer.emplace(std::move(*fixer));
  auto seed = config.get_int("generate.seed");
  if (!seed) {
    spdlog::error("{}", seed.status().message());
    return std::nullopt;
  }
  stage.seed = *seed;
  return stage;
}

int run_bench_setup(const GenerateArgs& a, const data::Dataset& ds, const core::Config& config) {
  auto client = sim::make_client(config, &ds);
  if (!client) {
    spdlog::error("{}", client.status().message());
    return kExitBadInput;
  }
  db::Executor executor;
  auto stage = build_stage(a, config, client->get(), executor);
  if (!stage) return kExitBadInput;
  return run_bench(a, ds, config, **client, stage->generators, *stage->fixer, stage->seed);
}

int run_generate(const GenerateArgs& a) {
  core::Config config;
  if (!a.config_path.empty()) {
    auto loaded = core::Config::load(a.config_path);
    if (!loaded) {
      spdlog::error("{}", loaded.status().message());
      return kExitBadInput;
    }
    config = std::move(loaded).value();
  }
  if (auto st = config.apply_overrides(a.sets); !st) {
    spdlog::error("{}", st.message());
    return kExitBadInput;
  }
  if (a.question_id.empty() && !a.bench) {
    spdlog::error("--question-id is required");
    return kExitBadInput;
  }
  auto ds = a.dataset.load();
  if (!ds) return kExitBadInput;
  if (a.bench) return run_bench_setup(a, *ds, config);
  const data::Question* q = ds->find_question(a.question_id);
  if (!q) {
    spdlog::error("question {} not found in {}", a.question_id, ds->questions_file.string());
    return kExitBadInput;
  }
  const auto& schema = ds->schemas.at(q->db_id);
  const auto db_path = ds->db_paths.at(q->db_id);
  db::Executor executor;

  std::optional<context::ValueIndex> index;
  std::optional<context::Retrieval> retrieval;
  if (!a.no_index) {
    context::IndexOptions iopts;
    iopts.index_dir = a.index_dir;
    auto idx = context::open_index(q->db_id, db_path, schema, iopts, executor);
    if (!idx) {
      spdlog::error("{}", idx.status().message());
      return kExitFailure;
    }
    index = std::move(*idx);
    retrieval = context::retrieve(*index, schema, q->question, q->evidence);
  }

  auto client = sim::make_client(config, &*ds);
  if (!client) {
    spdlog::error("{}", client.status().message());
    return kExitBadInput;
  }
  auto stage = build_stage(a, config, client->get(), executor);
  if (!stage) return kExitBadInput;
  const auto& generators = stage->generators;
  const auto& fixer = stage->fixer;
  const int64_t run_seed = stage->seed;

  generate::GenerationInput in;
  in.question = q;
  in.schema = &schema;
  in.db_path = db_path;
  in.index = index ? &*index : nullptr;
  in.retrieval = retrieval ? &*retrieval : nullptr;
  in.seed = core::xxh64(q->question_id + "\x1fgenerate", static_cast<uint64_t>(run_seed));
  fix::FixInput fin{q, &schema, db_path, in.index, in.retrieval, &executor, in.seed};

  if (!a.json) {
    std::cout << fmt::format("question {} ({}): {}\n", q->question_id, q->db_id, q->question);
    if (!q->evidence.empty()) std::cout << "evidence: " << q->evidence << "\n";
    if ((*client)->any_simulated())
      std::cout << "NOTE: the sim provider answers (gold-derived, SIMULATED): not a model's output.\n";
    std::cout << "\n";
  }
  nlohmann::json out = nlohmann::json::array();
  for (const auto& g : generators) {
    auto cands = g->generate(in);
    if (!cands) {
      spdlog::error("{}", cands.status().message());
      return kExitFailure;
    }
    for (auto& c : *cands) {
      if (auto st = fixer->fix(c, fin); !st) {
        spdlog::error("{}", st.message());
        return kExitFailure;
      }
      if (a.json) out.push_back(generate::to_json(c));
      else print_candidate(c, a.show_prompts);
    }
  }
  if (a.json) std::cout << out.dump(2) << "\n";
  return kExitOk;
}

RunFn setup(CLI::App& app) {
  auto args = std::make_shared<GenerateArgs>();
  auto* cmd = app.add_subcommand("generate", "Generate (and fix) the candidates of one question and show each one");
  args->dataset.add_to(*cmd);
  cmd->add_option("--config", args->config_path, "Config file (generate.*, fix.*, llm.*)");
  cmd->add_option("--set", args->sets, "Config override a.b=value (repeatable)");
  cmd->add_option("--question-id", args->question_id, "Question to generate for");
  cmd->add_option("--index-dir", args->index_dir, "Value index folder (default $NL2SQL_CACHE_DIR/index)");
  cmd->add_flag("--no-index", args->no_index, "Do not open the value index (no example or retrieved values)");
  cmd->add_option("--prompts", args->prompts_dir, "Prompt templates folder (default: the bundled prompts/)");
  cmd->add_flag("--json", args->json, "Print the candidates' traces as JSON");
  cmd->add_flag("--show-prompts", args->show_prompts, "Print every rendered prompt");
  // Benchmark mode for scripts/bench/generate_stage.sh (not part of the user interface).
  cmd->add_flag("--bench", args->bench, "Executability and upper-bound EX over all questions")->group("");
  cmd->add_option("--max-questions", args->max_questions, "--bench: stop after this many questions")->group("");
  cmd->add_option("--db", args->dbs, "--bench: only these databases")->group("");
  cmd->add_option("--pool", args->pool, "--bench: generators whose candidates form the upper-bound pool")->group("");
  cmd->add_option("--json-out", args->json_out, "--bench: write the numbers as JSON")->group("");
  return [args] { return run_generate(*args); };
}

NL2SQL_REGISTER_COMMAND("generate", setup);

}  // namespace
}  // namespace nl2sql::cli
