// What one run shares across its questions (the clients, the stages, the store, the WMA
// sequencing) and the run's own settings, read once. Private to the pipeline layer.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "nl2sql/context/question_context.h"
#include "nl2sql/core/config.h"
#include "nl2sql/core/hash.h"
#include "nl2sql/db/executor.h"
#include "nl2sql/db/result_cache.h"
#include "nl2sql/eval/evaluator.h"
#include "nl2sql/fix/fixer.h"
#include "nl2sql/generate/generator.h"
#include "nl2sql/llm/client.h"
#include "nl2sql/llm/prompt_library.h"
#include "nl2sql/pipeline/pipeline.h"
#include "nl2sql/run/run_store.h"
#include "nl2sql/select/selector.h"
#include "nl2sql/select/weights.h"

namespace nl2sql::pipeline {

class Progress;
using Clock = std::chrono::steady_clock;

inline double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// Settings of the run itself (run.*, eval.*), read once; errors name the key.
struct RunSettings {
  uint64_t seed = 0;
  size_t threads = 8;
  size_t sql_threads = 0;
  std::optional<double> max_cost_usd;
  std::vector<std::string> selectors;
  std::string primary_selector;
  std::vector<size_t> curve_points{1, 3, 7, 21};
  bool curve_selector = true;
  // run.curve_selectors (empty: the primary alone when curve_selector) and their repeats.
  std::vector<std::string> curve_selectors;
  size_t curve_repeats = 1;
  size_t curve_repeats_primary = 1;
  eval::EvalOptions eval;  // eval.*: metrics ("auto": official + relaxed), limits, ties
};

Result<RunSettings> load_run_settings(const core::Config& config, data::Benchmark benchmark);

// Everything one run shares across questions. Immutable after setup except where noted.
struct Shared {
  const RunOptions* options = nullptr;
  RunSettings settings;
  const data::Dataset* ds = nullptr;
  core::Config config;
  std::unique_ptr<llm::PromptLibrary> prompts;  // bundled templates, or prompts.dir's overrides
  std::unique_ptr<llm::Client> client;
  std::unique_ptr<db::Executor> executor;
  std::unique_ptr<db::ResultCache> exec_cache;
  std::unique_ptr<eval::ItemJudge> judge;
  std::unique_ptr<context::ContextBuilder> context;
  std::vector<std::unique_ptr<generate::Generator>> generators;
  std::vector<std::string> generator_names;
  std::optional<fix::Fixer> fixer;
  std::map<std::string, std::unique_ptr<select::Selector>> selectors;
  // What an expert of the weight updates is (select.wma.experts), as the voting selectors key them.
  select::ExpertKind expert_kind = select::ExpertKind::kGenerator;
  std::shared_ptr<select::WeightStore> weights;  // null unless a voting selector runs
  std::map<std::string, std::string> fingerprints;  // db_id → database fingerprint
  // The candidate pools read from files ("file" generators): label, path, layout, hash and how
  // they cover the dataset and this run's questions (manifest "candidate_pools"; empty: none).
  nlohmann::json candidate_pools = nlohmann::json::array();
  // Databases whose tables and views declare no collation: their questions' memos answer a
  // DISTINCT query from its plain twin (fix::ExecutionMemo::derive_distinct).
  std::set<std::string> collation_free;
  run::RunStore* store = nullptr;
  Progress* progress = nullptr;

  // Sequencing of the select stage for weighted voting (question t waits for t−1).
  std::vector<std::string> order;  // question ids in run order
  std::mutex seq_mu;
  std::condition_variable seq_cv;
  size_t seq_next = 0;             // guarded by seq_mu
  std::set<size_t> seq_done;       // guarded by seq_mu: positions finished out of order
};

}  // namespace nl2sql::pipeline
