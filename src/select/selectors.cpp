// The selectors' factory: reads a method's config keys and builds it (each selector lives in its
// own file: self_consistency.cpp, tournament.cpp, ranker.cpp, separating_duels.cpp,
// expert_vote.cpp), plus the gold check of separating-instance duels.
#include <map>
#include <optional>
#include <set>

#include "nl2sql/llm/prompt_template.h"
#include "nl2sql/select/external.h"
#include "nl2sql/select/selector.h"
#include "nl2sql/select/separating_instance.h"
#include "nl2sql/select/weights.h"
#include "external_selector.h"
#include "selector_parts.h"

namespace nl2sql::select {
namespace {

using json = nlohmann::json;
using namespace detail;

const std::map<std::string, std::string>& template_roles() {
  static const std::map<std::string, std::string> m = {
      {"tournament", "select_pairwise"}, {"ranker", "select_rank"}, {"separating_instances", "evaluate_on_instance"},
      {"alphasql_naive", "select_naive"}, {"deepeye_selection", "select_deepeye_pair"}};
  return m;
}

// The method's template, or the file its `select.<method>.template` key names instead.
Result<llm::PromptTemplate> load_prompt(const SelectorServices& services, const core::Config& config,
                                        const std::string& method) {
  std::optional<llm::PromptLibrary> bundled;
  const llm::PromptLibrary* prompts = services.prompts ? services.prompts : &bundled.emplace(llm::PromptLibrary::bundled());
  const std::string key = "select." + method + ".template";
  auto file = config.get_string(key, "");
  if (!file.is_ok()) return file.status();
  auto t = prompts->load_as(template_roles().at(method), *file);
  if (!t.is_ok() && !file->empty()) return t.status().with_context("config key \"" + key + "\"");
  return t;
}

}  // namespace

namespace {

// What a method's builder reads: its name, its config keys' prefix ("select.<method>."), the
// config and the services.
struct MethodConfig {
  const std::string& method;
  const std::string& prefix;
  const core::Config& config;
  const SelectorServices& services;
};
using SelectorOrError = Result<std::unique_ptr<Selector>>;

Result<double> read_temperature(const core::Config& config, const std::string& key) {
  auto t = config.get_number(key);
  if (!t.is_ok()) return t.status();
  if (*t < 0 || *t > 2) return invalid_input("config key \"" + key + "\": must be in [0, 2]");
  return *t;
}

SelectorOrError build_self_consistency(const MethodConfig& m) {
  auto eq = read_equality(m.config, m.prefix + "equality");
  if (!eq.is_ok()) return eq.status();
  return make_self_consistency(*eq);
}

SelectorOrError build_tournament(const MethodConfig& m) {
  TournamentOptions o;
  auto reps = m.config.get_bool(m.prefix + "representatives_only");
  auto cap = m.config.get_int(m.prefix + "max_pairs");
  auto both = m.config.get_bool(m.prefix + "both_orders");
  if (!reps.is_ok()) return reps.status();
  if (!cap.is_ok()) return cap.status();
  if (!both.is_ok()) return both.status();
  if (*cap < 0) return invalid_input("config key \"" + m.prefix + "max_pairs\": must be >= 0");
  o.representatives_only = *reps;
  o.max_pairs = *cap;
  o.both_orders = *both;
  auto tpl = load_prompt(m.services, m.config, m.method);
  if (!tpl.is_ok()) return tpl.status();
  return make_tournament(o, m.services.client, std::move(*tpl));
}

SelectorOrError build_ranker(const MethodConfig& m) {
  auto reps = m.config.get_bool(m.prefix + "representatives_only");
  if (!reps.is_ok()) return reps.status();
  auto tpl = load_prompt(m.services, m.config, m.method);
  if (!tpl.is_ok()) return tpl.status();
  return make_ranker(*reps, m.services.client, std::move(*tpl));
}

Result<DuelOptions> read_duel_options(const MethodConfig& m) {
  const std::string& prefix = m.prefix;
  DuelOptions o;
  auto reps = m.config.get_int(prefix + "max_representatives");
  auto asks = m.config.get_int(prefix + "asks");
  auto tries = m.config.get_int(prefix + "max_attempts");
  auto timeout = m.config.get_number(prefix + "query_timeout_s");
  auto temperature = m.config.get_number(prefix + "temperature");
  auto budget = m.config.get_int(prefix + "lineage_group_budget");
  auto max_rows = m.config.get_int(prefix + "max_rows");
  auto sample_rows = m.config.get_int(prefix + "sample_rows");
  if (!temperature.is_ok()) return temperature.status();
  if (*temperature < 0 || *temperature > 2)
    return invalid_input("config key \"" + prefix + "temperature\": must be in [0, 2]");
  for (const auto* r : {&reps, &asks, &tries, &budget, &max_rows, &sample_rows})
    if (!r->is_ok()) return r->status();
  if (!timeout.is_ok()) return timeout.status();
  if (*reps < 2) return invalid_input("config key \"" + prefix + "max_representatives\": must be >= 2");
  if (*asks < 1) return invalid_input("config key \"" + prefix + "asks\": must be >= 1");
  if (*tries < 1) return invalid_input("config key \"" + prefix + "max_attempts\": must be >= 1");
  if (*budget < 0) return invalid_input("config key \"" + prefix + "lineage_group_budget\": must be >= 0");
  if (*max_rows < 1) return invalid_input("config key \"" + prefix + "max_rows\": must be >= 1");
  if (*sample_rows < 0) return invalid_input("config key \"" + prefix + "sample_rows\": must be >= 0");
  o.max_representatives = *reps;
  o.asks = *temperature == 0 ? 1 : *asks;
  o.temperature = *temperature;
  o.instance.max_attempts = static_cast<int>(*tries);
  o.instance.query_timeout_s = *timeout;
  o.instance.lineage_group_budget = *budget;
  o.instance.max_rows = static_cast<size_t>(*max_rows);
  o.instance.sample_rows = *sample_rows;
  return o;
}

SelectorOrError build_separating_instances(const MethodConfig& m) {
  auto o = read_duel_options(m);
  if (!o.is_ok()) return o.status();
  auto tpl = load_prompt(m.services, m.config, m.method);
  if (!tpl.is_ok()) return tpl.status();
  return make_separating_instances(*o, m.services.client, m.services.executor, std::move(*tpl));
}

// The separating-instance paper's baselines.
SelectorOrError build_alphasql_consistency(const MethodConfig&) { return make_alphasql_consistency(); }

SelectorOrError build_alphasql_naive(const MethodConfig& m) {
  NaiveOptions o;
  auto asks = m.config.get_int(m.prefix + "asks");
  if (!asks.is_ok()) return asks.status();
  if (*asks < 1) return invalid_input("config key \"" + m.prefix + "asks\": must be >= 1");
  auto t = read_temperature(m.config, m.prefix + "temperature");
  if (!t.is_ok()) return t.status();
  o.asks = *asks;
  o.temperature = *t;
  auto tpl = load_prompt(m.services, m.config, m.method);
  if (!tpl.is_ok()) return tpl.status();
  return make_alphasql_naive(o, m.services.client, std::move(*tpl));
}

SelectorOrError build_deepeye_selection(const MethodConfig& m) {
  const std::string& prefix = m.prefix;
  DeepEyeOptions o;
  auto top_k = m.config.get_int(prefix + "top_k");
  auto votes = m.config.get_int(prefix + "votes");
  auto threshold = m.config.get_number(prefix + "threshold");
  if (!top_k.is_ok()) return top_k.status();
  if (!votes.is_ok()) return votes.status();
  if (!threshold.is_ok()) return threshold.status();
  if (*top_k < 2) return invalid_input("config key \"" + prefix + "top_k\": must be >= 2");
  if (*votes < 1) return invalid_input("config key \"" + prefix + "votes\": must be >= 1");
  if (*threshold < 0 || *threshold > 1) return invalid_input("config key \"" + prefix + "threshold\": must be in [0, 1]");
  auto t = read_temperature(m.config, prefix + "temperature");
  if (!t.is_ok()) return t.status();
  o.top_k = *top_k;
  o.votes = *votes;
  o.threshold = *threshold;
  o.temperature = *t;
  auto tpl = load_prompt(m.services, m.config, m.method);
  if (!tpl.is_ok()) return tpl.status();
  return make_deepeye_selection(o, m.services.client, std::move(*tpl));
}

// wma, rwma and naive_vote: one vote over the experts, weighted or not.
SelectorOrError build_expert_vote(const MethodConfig& m) {
  auto experts = configured_experts(m.config);
  if (!experts.is_ok()) return experts.status();
  auto weights = m.services.weights;
  if (!weights) {
    auto eps = configured_epsilon(m.config);
    if (!eps.is_ok()) return eps.status();
    weights = std::make_shared<WeightStore>(*eps);
  }
  VoteKind kind = m.method == "wma" ? VoteKind::kWma : m.method == "rwma" ? VoteKind::kRwma : VoteKind::kNaive;
  return make_expert_vote(kind, *experts == ExpertKind::kProfile, std::move(weights));
}

// One row per method, in documentation order: its traits as the built selector states them
// (SelectorTraits.EveryMethodStatesWhatItsSelectorDoes checks they agree) and its builder. A
// method that calls a model is built only with an LLM client, one that reads the database only
// with an executor.
struct MethodRow {
  const char* name;
  SelectorTraits traits;
  SelectorOrError (*build)(const MethodConfig&);
};
SelectorTraits asks(std::string_view role) { return {.calls_model = true, .model_role = role, .uses_seed = true}; }
const std::vector<MethodRow>& method_rows() {
  static const std::vector<MethodRow> rows = {
      {"self_consistency", {}, build_self_consistency},
      {"tournament", asks("select"), build_tournament},
      {"ranker", asks("rank"), build_ranker},
      {"separating_instances", {.calls_model = true, .model_role = "nl_eval", .uses_seed = true, .reads_database = true},
       build_separating_instances},
      {"wma", {.uses_expert_weights = true}, build_expert_vote},
      {"rwma", {.uses_expert_weights = true, .uses_seed = true}, build_expert_vote},
      {"naive_vote", {.uses_expert_weights = true}, build_expert_vote},
      {"alphasql_consistency", {}, build_alphasql_consistency},
      {"alphasql_naive", asks("select"), build_alphasql_naive},
      {"deepeye_selection", asks("select"), build_deepeye_selection},
  };
  return rows;
}

}  // namespace

std::optional<std::string> selector_template_role(const std::string& method) {
  auto it = template_roles().find(method);
  if (it == template_roles().end()) return std::nullopt;
  return it->second;
}

const std::vector<std::string>& selector_methods() {
  static const std::vector<std::string> m = [] {
    std::vector<std::string> names;
    for (const auto& row : method_rows()) names.emplace_back(row.name);
    return names;
  }();
  return m;
}

Result<SelectorTraits> method_traits(const std::string& method) {
  for (const auto& row : method_rows())
    if (method == row.name) return row.traits;
  std::string known;
  for (const auto& m : selector_methods()) known += (known.empty() ? "" : ", ") + m;
  return invalid_input("unknown selector method \"" + method + "\" (known: " + known + ")");
}

Result<SelectorTraits> method_traits(const std::string& method, const core::Config& config) {
  if (external_item(config, method)) return external_traits();
  return method_traits(method);
}

Result<ExpertKind> configured_experts(const core::Config& config) {
  auto experts = config.get_string("select.wma.experts");
  if (!experts.is_ok()) return experts.status();
  if (*experts == "generator") return ExpertKind::kGenerator;
  if (*experts == "profile") return ExpertKind::kProfile;
  return invalid_input("config key \"select.wma.experts\": expected generator or profile (got \"" + *experts + "\")");
}

Result<int64_t> configured_expert_count(const core::Config& config) {
  if (config.has("select.wma.expert_count")) return config.get_int("select.wma.expert_count");
  auto kind = configured_experts(config);
  if (!kind.is_ok()) return kind.status();
  const auto* g = config.find("generate.generators");
  if (!g || !g->is_array() || g->empty()) return int64_t{4};
  if (*kind == ExpertKind::kGenerator) return static_cast<int64_t>(g->size());
  std::set<std::string> profiles;
  bool unnamed = false;  // a generator without `profiles` writes with its role's profile
  for (const auto& gen : *g) {
    const auto* listed = gen.is_object() && gen.contains("profiles") ? &gen.at("profiles") : nullptr;
    if (!listed || !listed->is_array() || listed->empty()) {
      unnamed = true;
      continue;
    }
    for (const auto& p : *listed)
      if (p.is_string()) profiles.insert(p.get<std::string>());
  }
  return static_cast<int64_t>(profiles.size()) + (unnamed ? 1 : 0);
}

Result<double> configured_epsilon(const core::Config& config) {
  if (config.has("select.wma.epsilon")) {
    auto e = config.get_number("select.wma.epsilon");
    if (!e.is_ok()) return e.status();
    if (!(*e > 0 && *e < 1)) return invalid_input("config key \"select.wma.epsilon\": must be in (0, 1)");
    return *e;
  }
  auto n = configured_expert_count(config);
  auto horizon = config.get_number("select.wma.horizon");
  auto err = config.get_number("select.wma.best_expert_error");
  if (!n.is_ok()) return n.status();
  if (!horizon.is_ok()) return horizon.status();
  if (!err.is_ok()) return err.status();
  return optimal_epsilon(static_cast<size_t>(std::max<int64_t>(1, *n)), *horizon * *err);
}

Result<std::unique_ptr<Selector>> make_selector_named(const std::string& method,
                                                      const core::Config& config,
                                                      const SelectorServices& services) {
  const std::string prefix = "select." + method + ".";
  if (external_item(config, method)) {
    if (method_traits(method).is_ok())
      return invalid_input("config key \"select.external." + method + "\": " + method +
                           " is a built-in selector; give the program another label");
    return make_external_selector(method, config, services);
  }
  for (const auto& row : method_rows()) {
    if (method != row.name) continue;
    if (row.traits.calls_model && !services.client)
      return invalid_input("select method " + method + " calls a model: it needs an LLM client");
    if (row.traits.reads_database && !services.executor)
      return invalid_input("select method " + method + " reads the database: it needs an executor");
    return row.build(MethodConfig{method, prefix, config, services});
  }
  std::string known;
  for (const auto& m : selector_methods()) known += (known.empty() ? "" : ", ") + m;
  return invalid_input("config key \"select.method\": unknown method \"" + method + "\" (known: " + known + ")");
}

void check_duels_against_gold(Selection& selection, const std::filesystem::path& db_path,
                              const db::Executor& executor, const std::string& gold_sql) {
  if (selection.duel_instances.empty() || gold_sql.empty()) return;
  auto* duels = selection.explanation.is_object() && selection.explanation.contains("duels")
                    ? &selection.explanation["duels"]
                    : nullptr;
  if (duels == nullptr || !duels->is_array()) return;
  auto builder = InstanceBuilder::open(db_path, executor);
  if (!builder.is_ok()) return;
  for (const auto& di : selection.duel_instances) {
    if (di.duel >= duels->size()) continue;
    auto g = builder->run_on(di.instance, gold_sql);
    if (!g.is_ok()) continue;
    json& d = (*duels)[di.duel];
    d["gold_answer"] = render_answer_rows(*g);
    if (di.majority) d["model_agrees_with_gold"] = answers_match(*di.majority, *g);
  }
}

}  // namespace nl2sql::select
