// nl2sql generate: the developer's microscope on the generate and fix stages for one question —
// every candidate with its reasoning, SQL, execution status, result preview and fixer rounds.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <iostream>
#include <optional>

#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "cli/config_options.h"
#include "cli/dataset_options.h"
#include "nl2sql/context/question_context.h"
#include "nl2sql/context/retrieve.h"
#include "nl2sql/context/value_index.h"
#include "nl2sql/core/config.h"
#include "nl2sql/core/hash.h"
#include "nl2sql/db/executor.h"
#include "nl2sql/fix/fixer.h"
#include "nl2sql/generate/generator.h"
#include "nl2sql/llm/client.h"
#include "nl2sql/llm/prompt_library.h"
#include "nl2sql/sim/simulator.h"

namespace nl2sql::cli {
namespace {

struct GenerateArgs {
  DatasetOptions dataset;
  ConfigOptions config;
  std::string question_id;
  std::string index_dir;
  bool no_index = false;
  bool json = false;
  bool show_prompts = false;
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

// The stage: generators, fixer and the run seed (run.seed, so the question's seeds are the
// ones `nl2sql run` derives).
// Logs the failing config key's message and returns nullopt on a bad config.
struct Stage {
  std::vector<std::unique_ptr<generate::Generator>> generators;
  std::optional<fix::Fixer> fixer;
  int64_t seed = 0;
};

std::optional<Stage> build_stage(const GenerateArgs& a, const core::Config& config, llm::Client* client,
                                 const db::Executor& executor) {
  auto prompts = llm::PromptLibrary::from_config(config);
  if (!prompts) {
    spdlog::error("{}", prompts.status().message());
    return std::nullopt;
  }
  Stage stage;
  auto spec = a.dataset.spec(config);  // dc and qp take their demonstrations from its train split
  auto generators = generate::make_generators(config, client, &executor, *prompts, spec ? &*spec : nullptr);
  if (!generators) {
    spdlog::error("{}", generators.status().message());
    return std::nullopt;
  }
  stage.generators = std::move(*generators);
  auto fixer = fix::Fixer::create(config, client, *prompts);
  if (!fixer) {
    spdlog::error("{}", fixer.status().message());
    return std::nullopt;
  }
  stage.fixer.emplace(std::move(*fixer));
  auto seed = config.get_int("run.seed");
  if (!seed) {
    spdlog::error("{}", seed.status().message());
    return std::nullopt;
  }
  stage.seed = *seed;
  return stage;
}

// What the question's prompts show beside the schema: the value index and the retrieved values
// (unless --no-index), and the metadata as in a run (descriptions written by `nl2sql metadata
// --describe` are read from its cache file; this command writes none).
struct QuestionInputs {
  std::optional<context::ValueIndex> index;
  std::optional<context::Retrieval> retrieval;
  std::optional<context::DatabaseMetadata> metadata;
};

// Fills `inputs`; returns kExitOk, or the exit code of the failure it logged.
int open_question_inputs(const GenerateArgs& a, const core::Config& config, const data::Question& q,
                         const data::Schema& schema, const std::filesystem::path& db_path,
                         const db::Executor& executor, QuestionInputs& inputs) {
  if (!a.no_index) {
    context::IndexOptions iopts;
    iopts.index_dir = a.index_dir;
    auto idx = context::open_index(q.db_id, db_path, schema, iopts, executor);
    if (!idx) {
      spdlog::error("{}", idx.status().message());
      return kExitFailure;
    }
    inputs.index = std::move(*idx);
    inputs.retrieval = context::retrieve(*inputs.index, schema, q.question, q.evidence);
  }
  auto settings = context::load_context_settings(config);
  if (!settings) {
    spdlog::error("{}", settings.status().message());
    return kExitBadInput;
  }
  if (settings->metadata) {
    auto m = context::open_metadata(q.db_id, db_path, schema, settings->meta,
                                    a.index_dir.empty() ? settings->index.index_dir : std::filesystem::path(a.index_dir),
                                    false, executor);
    if (!m) {
      spdlog::error("{}", m.status().message());
      return kExitFailure;
    }
    inputs.metadata = std::move(*m);
  }
  return kExitOk;
}

int run_generate(const GenerateArgs& a) {
  auto loaded = a.config.load();
  if (!loaded) return kExitBadInput;
  const core::Config& config = *loaded;
  if (a.question_id.empty()) {
    spdlog::error("--question-id is required");
    return kExitBadInput;
  }
  auto ds = a.dataset.load(config);
  if (!ds) return kExitBadInput;
  const data::Question* q = ds->find_question(a.question_id);
  if (!q) {
    spdlog::error("question {} not found in {}", a.question_id, ds->questions_file.string());
    return kExitBadInput;
  }
  const auto& schema = ds->schemas.at(q->db_id);
  const auto db_path = ds->db_paths.at(q->db_id);
  db::Executor executor;

  QuestionInputs inputs;
  if (int code = open_question_inputs(a, config, *q, schema, db_path, executor, inputs); code != kExitOk) return code;

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
  in.index = inputs.index ? &*inputs.index : nullptr;
  in.retrieval = inputs.retrieval ? &*inputs.retrieval : nullptr;
  in.seed = core::stage_seed(static_cast<uint64_t>(run_seed), q->question_id, "generate");
  in.schema_seed = generate::schema_seed(static_cast<uint64_t>(run_seed), q->db_id);
  in.metadata = inputs.metadata ? &*inputs.metadata : nullptr;
  fix::FixInput fin{q, &schema, db_path, in.index, in.retrieval, &executor, 0};
  fin.metadata = in.metadata;

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
      fin.seed = core::stage_seed(static_cast<uint64_t>(run_seed), q->question_id, "fix#" + c.id);
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

RunFn setup_generate(CLI::App& app) {
  auto args = std::make_shared<GenerateArgs>();
  auto* cmd = app.add_subcommand("generate", "Generate (and fix) the candidates of one question and show each one");
  args->dataset.add_to(*cmd);
  args->config.add_to(*cmd, /*required=*/false);
  cmd->add_option("--question-id", args->question_id, "Question to generate for");
  cmd->add_option("--index-dir", args->index_dir, "Value index folder (default $NL2SQL_CACHE_DIR/index)");
  cmd->add_flag("--no-index", args->no_index, "Do not open the value index (no example or retrieved values)");
  args->config.add_prompts_flag(*cmd);
  cmd->add_flag("--json", args->json, "Print the candidates' traces as JSON");
  cmd->add_flag("--show-prompts", args->show_prompts, "Print every rendered prompt");
  return [args] { return run_generate(*args); };
}

NL2SQL_REGISTER_COMMAND("generate", setup_generate);

}  // namespace
}  // namespace nl2sql::cli
