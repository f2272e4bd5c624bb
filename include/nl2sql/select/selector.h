// Selection: choose one candidate per question from a pool. Every selector takes the same
// SelectionInput — the question, its database and schema, and the candidates with their
// execution results (executed once, through db::Executor, by the caller or by
// execute_pool()) — and returns a Selection: the chosen candidate plus an explanation record
// (scores, pairwise decisions, instances used, model calls) that the trace keeps.
//
// Selectors never see gold, by construction: SelectionInput holds a data::Task (no gold field)
// and the candidates. The bounds (oracle / adversarial) and gold's answer on a separating
// instance are computed by the pipeline from per-candidate verdicts, not here. Selectors that
// call a model go through llm::Client only; their calls are tagged (llm::CallTag), and the
// offline simulator looks gold up itself.
//
// Thread-safety: a Selector object is immutable after construction; select() may be called
// from several threads at once for different questions.
#pragma once

#include <map>

#include <mutex>

#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "nl2sql/context/metadata.h"
#include "nl2sql/core/config.h"
#include "nl2sql/core/status.h"
#include "nl2sql/data/dataset.h"
#include "nl2sql/db/executor.h"
#include "nl2sql/generate/candidate.h"
#include "nl2sql/llm/prompt_library.h"
#include "nl2sql/select/separating_instance.h"

namespace nl2sql::llm {
class Client;
}

namespace nl2sql::select {

class WeightStore;

struct PoolCandidate {
  std::string id;         // Candidate::id
  std::string generator;  // for tie-breaks in generator order and for expert voting
  std::string profile;
  std::string sql;
  // null: not executable (rejected, no SQL). Shared and immutable: candidates whose queries are
  // the same hold one result (the question's execution memo), and copies of a pool cost nothing.
  std::shared_ptr<const db::ExecutionResult> result;
};

// Verdicts of the pairwise selector by ordered pair of SQL texts ("A", "B", or "" when the
// answer was unusable). A pair's prompt depends only on the question and the two queries, so
// one question's selections (the pool, and the curves' re-runs on its prefixes) share them and no
// pair is asked twice. Thread-safe.
struct PairVerdicts {
  std::optional<std::string> find(const std::string& a, const std::string& b) const {
    std::lock_guard lock(mu);
    auto it = side.find({a, b});
    if (it == side.end()) return std::nullopt;
    return it->second;
  }
  void put(const std::string& a, const std::string& b, const std::string& verdict) {
    std::lock_guard lock(mu);
    side[{a, b}] = verdict;
  }

 private:
  mutable std::mutex mu;
  std::map<std::pair<std::string, std::string>, std::string> side;  // guarded by mu
};

// Answers of one question's model-calling selectors by request (role, template, rendered prompt,
// temperature, seed, sample index). The curves re-run selectors on prefixes of the pool
// (run.curve_selectors), and a prefix often shows the model a prompt it has already been sent
// with the same seed — e.g. the same two groups to adjudicate at K = 11 and K = 24 — so such a
// request is sent once and its answer serves the repeat (no identical request twice). Thread-safe.
struct AskMemo {
  std::optional<std::string> find(const std::string& key) const {
    std::lock_guard lock(mu);
    auto it = answers.find(key);
    if (it == answers.end()) return std::nullopt;
    return it->second;
  }
  void put(const std::string& key, const std::string& answer) {
    std::lock_guard lock(mu);
    answers[key] = answer;
  }

 private:
  mutable std::mutex mu;
  std::map<std::string, std::string> answers;  // guarded by mu
};

struct SelectionInput {
  const data::Task* question = nullptr;
  const data::Schema* schema = nullptr;
  // In the schema of every selector prompt, as in the generators' (context.metadata.enabled);
  // null when off.
  const context::DatabaseMetadata* metadata = nullptr;
  std::filesystem::path db_path;
  std::vector<PoolCandidate> candidates;
  std::vector<std::string> generator_order;  // config order, for deterministic tie-breaks
  uint64_t seed = 0;                         // derived from (run seed, question id, "select")
  // Shared by one question's selections (see PairVerdicts); null: the selection keeps its own.
  std::shared_ptr<PairVerdicts> pair_verdicts;
  // Shared by one question's selections (see AskMemo); null: every request is sent.
  std::shared_ptr<AskMemo> ask_memo;
};

struct Selection {
  int chosen = -1;  // index into SelectionInput::candidates; -1: nothing selectable
  std::string selector;
  nlohmann::json explanation;  // selector-specific: scores, duels, instances, votes …
  std::vector<llm::LlmCallTrace> calls;
  // separating_instances: each duel's D′ (by index into explanation["duels"]) and the model's
  // majority answer on it, when there was one — so a caller holding gold can check the evidence
  // (check_duels_against_gold); never stored.
  struct DuelInstance {
    size_t duel = 0;
    InstanceTables instance;
    std::optional<db::ResultSet> majority;
  };
  std::vector<DuelInstance> duel_instances;
  int64_t llm_calls() const { return static_cast<int64_t>(calls.size()); }
};

// What a selector needs and does beyond its pick. The pipeline asks these (a selector built, or
// a method by name before it is built) and never compares method names, so a new selector
// states its needs here and nothing in the pipeline changes.
struct SelectorTraits {
  // Learns expert weights question by question (wma, rwma, naive_vote): the run hands it one
  // shared WeightStore, its selections run in question order, and it cannot be re-run on
  // prefixes of a pool (run.curve_selectors).
  bool uses_expert_weights = false;
  bool calls_model = false;  // asks a model: needs a client, its answers vary with the seed
  std::string_view model_role = {};  // the role whose profile it asks ("select", "rank", "nl_eval")
  bool uses_seed = false;    // its pick depends on SelectionInput::seed (a model's or its own draw)
  bool reads_database = false;  // runs queries on rows of D (needs the executor)
  // The pick depends on the pool alone: re-running it on the same pool gives the same pick.
  bool deterministic() const { return !calls_model && !uses_seed; }
  bool operator==(const SelectorTraits&) const = default;
};

class Selector {
 public:
  virtual ~Selector() = default;
  virtual std::string name() const = 0;
  virtual SelectorTraits traits() const = 0;
  virtual Result<Selection> select(const SelectionInput& input) const = 0;
};

// What selectors may use. `client` may be null for selectors that never call a model;
// `executor` is needed by separating_instances (reads rows of D); `weights` is the expert-weight
// store of wma / rwma (null: the selector keeps its own, starting from equal weights).
// Gold's answer on each duel's D′ ("gold_answer") and whether the model's majority agreed with
// it ("model_agrees_with_gold"), written into the selection's explanation: evidence against the
// gold SQL when they disagree on a handful of rows (the report lists those questions). Called by
// the pipeline, which holds gold; selectors never do.
void check_duels_against_gold(Selection& selection, const std::filesystem::path& db_path,
                              const db::Executor& executor, const std::string& gold_sql);

struct SelectorServices {
  llm::Client* client = nullptr;
  const db::Executor* executor = nullptr;
  const llm::PromptLibrary* prompts = nullptr;  // null: the bundled prompts
  std::shared_ptr<WeightStore> weights;
};

// The template a method's `select.<method>.template` key replaces ("select_pairwise" for
// tournament …); nullopt for a method that calls no model.
std::optional<std::string> selector_template_role(const std::string& method);

// The selector methods make_selector_named() knows, in documentation order.
const std::vector<std::string>& selector_methods();

// The traits a method's selector will have, before it is built (the pipeline sets up a voting
// selector's weight store first). Equal to traits() of the built selector (a test checks every
// method). Fails on an unknown method, naming the known ones.
Result<SelectorTraits> method_traits(const std::string& method);

// Builds the selector `method` (self_consistency | tournament | ranker | separating_instances
// | wma | rwma | naive_vote | alphasql_consistency | alphasql_naive | deepeye_selection) with
// its options under `select.<method>.*`. Fails, naming the key,
// on bad options or a missing service (e.g. tournament without a client).
Result<std::unique_ptr<Selector>> make_selector_named(const std::string& method,
                                                      const core::Config& config,
                                                      const SelectorServices& services);

// What an expert of the voting selectors is (`select.wma.experts`): the generator or the model
// profile that wrote a candidate. The votes and the pipeline's weight updates key experts alike.
enum class ExpertKind { kGenerator, kProfile };
Result<ExpertKind> configured_experts(const core::Config& config);
inline const std::string& expert_of(ExpertKind kind, const std::string& generator,
                                    const std::string& profile) {
  return kind == ExpertKind::kProfile ? profile : generator;
}

// The number of experts a config sets up, n in ε's default: `select.wma.expert_count` when set;
// else, with experts = profile, the distinct profiles the generators name (`profiles`; a
// generator naming none writes with one profile), with experts = generator, the number of
// `generate.generators` (4 when none is listed).
Result<int64_t> configured_expert_count(const core::Config& config);

// ε for the expert votes: `select.wma.epsilon` when set, else the mistake-bound optimum
// sqrt(ln n / m) (see weights.h) with n = configured_expert_count() and
// m = `select.wma.horizon` × `select.wma.best_expert_error`.
// The pipeline creates the run's WeightStore with it.
Result<double> configured_epsilon(const core::Config& config);

}  // namespace nl2sql::select
