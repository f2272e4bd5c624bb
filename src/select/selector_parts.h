// What the selectors share (private to the select layer): input checks, the consistency choice,
// the model ask with its trace, the per-database schema cache, and one factory per selector —
// each selector lives in a file of its own, and selectors.cpp reads the config and picks one.
#pragma once

#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "nl2sql/core/config.h"
#include "nl2sql/db/executor.h"
#include "nl2sql/llm/client.h"
#include "nl2sql/llm/prompt_template.h"
#include "nl2sql/select/clusters.h"
#include "nl2sql/select/selector.h"
#include "nl2sql/select/separating_instance.h"
#include "nl2sql/select/weights.h"
#include "nl2sql/sql/analysis.h"

namespace nl2sql::select::detail {

std::string qid(const SelectionInput& in);
Status check_input(const SelectionInput& in);
// Best candidate by the shared tie-break order among those with SQL (used when no candidate
// executed): -1 when the pool has no SQL at all.
int first_ranked(const SelectionInput& in);
nlohmann::json clusters_json(const PoolClusters& pc, const SelectionInput& in);
// The consistency choice: representative of the largest cluster; nothing executable → the
// best-ranked candidate with SQL.
int consistency_choice(const PoolClusters& pc, const SelectionInput& in);
Result<ResultEquality> read_equality(const core::Config& config, const std::string& key);

// Result groups as the baselines of the separating-instance paper form them (AlphaSQL's
// selection script, DeepEye-SQL's selection module): candidates with a successful execution that
// passes `keep`, grouped by their result under `equality`; groups in order of first appearance in
// the pool, members in pool order. `total` counts the candidates grouped (the denominator of a
// group's consistency score).
struct ResultGroups {
  std::vector<std::vector<int>> groups;
  size_t total = 0;
};
ResultGroups result_groups(const SelectionInput& in, ResultEquality equality,
                           const std::function<bool(const db::ExecutionResult&)>& keep);
// AlphaSQL's valid result: at least one row holding a non-NULL value (in the whole answer: read
// from the digest when only the first rows are held).
bool has_non_null_row(const db::ExecutionResult& execution);
// The groups of the first `keep` test that groups anything (AlphaSQL and DeepEye-SQL fall back
// from "valid" results to every successful one): which test was used is `fallback_used`.
ResultGroups first_nonempty_groups(const SelectionInput& in, ResultEquality equality,
                                   const std::function<bool(const db::ExecutionResult&)>& strict, bool& fallback_used);
// The seed of one sampled ask of a selector (distinct per selection seed, purpose and index).
int64_t ask_seed(const SelectionInput& in, const std::string& purpose, int64_t index);

struct ModelAsk {
  llm::Client* client;
  const llm::PromptTemplate* tpl;
  std::string role;
  AskMemo* memo = nullptr;  // the question's; an answer found there is not asked again
};
// Renders the template, asks, and keeps the call's trace (failed calls included). With a memo, a
// request already answered for the question returns that answer without a call or a trace.
Result<std::string> ask_model(const ModelAsk& ask, const std::map<std::string, std::string>& values,
                              llm::ChatRequest request, std::vector<llm::LlmCallTrace>& calls);
// One ask of ask_all.
struct Ask {
  std::map<std::string, std::string> values;
  llm::ChatRequest request;
};
// Asks that do not depend on each other (a selector's samples, its duels) go out together,
// each waiting for its own model slot. The answers, and the traces appended to `calls`, come
// back in the asks' order, as asking one after another would leave them.
std::vector<Result<std::string>> ask_all(const ModelAsk& ask, std::vector<Ask> asks,
                                         std::vector<llm::LlmCallTrace>& calls);
llm::ChatRequest base_request(const SelectionInput& in, llm::CallTask task, int64_t sample_index);

// Per-question sql::Schema, loaded once per database file.
class SchemaCache {
 public:
  std::shared_ptr<const sql::Schema> get(const std::filesystem::path& db) const;

 private:
  mutable std::mutex mu_;
  mutable std::map<std::string, std::shared_ptr<const sql::Schema>> cache_;  // guarded by mu_
};
std::string schema_for(const SelectionInput& in, const SchemaCache& cache, const std::vector<std::string>& sqls);

struct TournamentOptions {
  bool representatives_only = false;  // CHASE-SQL Algorithm 3 scores every candidate
  int64_t max_pairs = 0;  // pairs sent to the model; 0: all
  bool both_orders = true;
};

struct DuelOptions {
  int64_t max_representatives = 6;
  // The model answers the question on each instance `asks` times and the majority counts, as
  // the paper votes over samples at the model's sampling temperature: each ask is sampled at
  // `temperature` with a seed of its own. At temperature 0 the answers would be one answer
  // repeated, so the model is asked once.
  int64_t asks = 3;
  double temperature = 0.7;
  InstanceOptions instance;
};

enum class VoteKind { kWma, kRwma, kNaive };

std::unique_ptr<Selector> make_self_consistency(ResultEquality eq);
std::unique_ptr<Selector> make_tournament(TournamentOptions o, llm::Client* client, llm::PromptTemplate tpl);
std::unique_ptr<Selector> make_ranker(bool representatives_only, llm::Client* client, llm::PromptTemplate tpl);
std::unique_ptr<Selector> make_separating_instances(DuelOptions o, llm::Client* client, const db::Executor* executor,
                                                    llm::PromptTemplate tpl);
// The separating-instance paper's baselines (SISelection, §Baselines and Appendix C).
struct NaiveOptions {
  int64_t asks = 3;          // sampled answers the chosen SQL is voted over
  double temperature = 0.7;  // 0: asked once
};
struct DeepEyeOptions {
  int64_t top_k = 2;         // result groups kept for adjudication (DeepEye-SQL's filter_top_k_sql)
  double threshold = 0.6;    // shortcut: the top group's consistency score at least this
  int64_t votes = 3;         // sampled verdicts per pair
  double temperature = 0.7;  // 0: asked once
};
std::unique_ptr<Selector> make_alphasql_consistency();
std::unique_ptr<Selector> make_alphasql_naive(NaiveOptions o, llm::Client* client, llm::PromptTemplate tpl);
std::unique_ptr<Selector> make_deepeye_selection(DeepEyeOptions o, llm::Client* client, llm::PromptTemplate tpl);
std::unique_ptr<Selector> make_expert_vote(VoteKind kind, bool by_profile, std::shared_ptr<WeightStore> weights);

}  // namespace nl2sql::select::detail
