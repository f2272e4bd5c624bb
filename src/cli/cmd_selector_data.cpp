// nl2sql selector-data: pairwise fine-tuning examples for the selection model from a finished
// run over a split with gold (correct vs incorrect candidates from different clusters).
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <iostream>

#include "cli/command.h"
#include "nl2sql/llm/prompt_template.h"
#include "nl2sql/run/run_data.h"
#include "nl2sql/select/training_data.h"

namespace nl2sql::cli {
namespace {

struct SelectorDataArgs {
  std::string run, out, prompts;
  uint64_t seed = 0;
  size_t max_pairs = 8;
};

int run_selector_data(const SelectorDataArgs& a) {
  auto run = run::load_run(a.run);
  if (!run) {
    spdlog::error("{}", run.status().message());
    return kExitBadInput;
  }
  std::vector<select::TrainingQuestion> questions;
  size_t usable = 0;
  for (const auto& r : run->records) {
    if (!r.ok) continue;
    select::TrainingQuestion q;
    q.question_id = r.question_id;
    q.question = r.question;
    q.evidence = r.evidence;
    // The schema as the generators saw it is not stored per question; the union-schema
    // restriction needs the database, so the pair prompt shows the SQL and results only.
    for (const auto& c : r.candidates) {
      if (!c.judged || !c.judged->correct) continue;
      select::TrainingCandidate tc;
      tc.sql = c.sql;
      tc.cluster = static_cast<int>(c.judged->cluster);
      tc.correct = *c.judged->correct;
      tc.result_preview = run::string_field(run::field(c.trace, "execution"), "preview");
      q.candidates.push_back(std::move(tc));
    }
    usable += !q.candidates.empty();
    questions.push_back(std::move(q));
  }
  select::TrainingOptions options;
  options.seed = a.seed;
  options.max_pairs_per_question = a.max_pairs;
  auto examples = select::build_selector_training_data(
      questions, options, a.prompts.empty() ? llm::bundled_prompts_dir() : std::filesystem::path(a.prompts));
  if (!examples) {
    spdlog::error("{}", examples.status().message());
    return kExitFailure;
  }
  if (auto st = select::write_training_jsonl(*examples, a.out); !st) {
    spdlog::error("{}", st.message());
    return kExitFailure;
  }
  std::cout << fmt::format("{} pairs from {} questions with gold-judged candidates → {}\n",
                           examples->size(), usable, a.out);
  return kExitOk;
}

RunFn setup_selector_data(CLI::App& parent) {
  auto* cmd = parent.add_subcommand("selector-data",
                                    "Pairwise fine-tuning data for the selector from a run with gold");
  auto a = std::make_shared<SelectorDataArgs>();
  cmd->add_option("--run", a->run, "Run folder")->required();
  cmd->add_option("--out", a->out, "Output JSONL (OpenAI chat fine-tuning format)")->required();
  cmd->add_option("--seed", a->seed, "Seed of the pair order shuffle")->capture_default_str();
  cmd->add_option("--max-pairs", a->max_pairs, "Pairs per question (0: all)")->capture_default_str();
  cmd->add_option("--prompts", a->prompts, "Prompts folder (default: bundled)");
  return [a]() { return run_selector_data(*a); };
}

NL2SQL_REGISTER_COMMAND("selector-data", setup_selector_data);

}  // namespace
}  // namespace nl2sql::cli
