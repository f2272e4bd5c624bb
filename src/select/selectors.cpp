// The selectors: self-consistency, pairwise tournament, ranker, separating-instance duels and
// the expert votes (WMA / RWMA / naive), plus the factory.
#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <mutex>
#include <random>
#include <set>

#include "nl2sql/context/schema_render.h"
#include "nl2sql/core/hash.h"
#include "nl2sql/llm/answer.h"
#include "nl2sql/llm/client.h"
#include "nl2sql/llm/model_call.h"
#include "nl2sql/llm/prompt_template.h"
#include "nl2sql/select/clusters.h"
#include "nl2sql/select/selector.h"
#include "nl2sql/select/separating_instance.h"
#include "nl2sql/select/weights.h"
#include "prompt_parts.h"

namespace nl2sql::select {
namespace {

using json = nlohmann::json;

std::string qid(const SelectionInput& in) { return in.question ? in.question->question_id : "?"; }

Status check_input(const SelectionInput& in) {
  if (!in.question) return invalid_input("selection input without a question");
  return Status::ok();
}

// Best candidate by the shared tie-break order among those with SQL (used when no candidate
// executed): -1 when the pool has no SQL at all.
int first_ranked(const SelectionInput& in) {
  int best = -1;
  for (int i = 0; i < static_cast<int>(in.candidates.size()); ++i) {
    if (in.candidates[static_cast<size_t>(i)].sql.empty()) continue;
    if (best < 0 || candidate_rank(in.candidates, i, in.generator_order) <
                        candidate_rank(in.candidates, best, in.generator_order))
      best = i;
  }
  return best;
}

json clusters_json(const PoolClusters& pc, const SelectionInput& in) {
  json out = json::array();
  for (const auto& c : pc.clusters) {
    json ids = json::array();
    for (int m : c.members) ids.push_back(in.candidates[static_cast<size_t>(m)].id);
    out.push_back({{"members", ids}, {"representative", in.candidates[static_cast<size_t>(c.representative)].id}});
  }
  return out;
}

// The consistency choice: representative of the largest cluster; nothing executable → the
// best-ranked candidate with SQL.
int consistency_choice(const PoolClusters& pc, const SelectionInput& in) {
  return pc.clusters.empty() ? first_ranked(in) : pc.clusters.front().representative;
}

Result<ResultEquality> read_equality(const core::Config& config, const std::string& key) {
  auto s = config.get_string(key, std::string("relaxed"));
  if (!s.is_ok()) return s.status();
  if (*s == "relaxed") return ResultEquality::kRelaxed;
  if (*s == "exact") return ResultEquality::kExact;
  return invalid_input("config key \"" + key + "\": expected relaxed or exact, got \"" + *s + "\"");
}

// ---- model calls ----

struct ModelAsk {
  llm::Client* client;
  const llm::PromptTemplate* tpl;
  std::string role;
};

Result<std::string> ask_model(const ModelAsk& ask, const std::map<std::string, std::string>& values,
                              llm::ChatRequest request, std::vector<llm::LlmCallTrace>& calls) {
  auto prompt = ask.tpl->render(values);
  if (!prompt.is_ok()) return prompt.status();
  request.role = ask.role;
  request.stage = "select";
  request.template_hash = ask.tpl->hash();
  request.messages = {{"system", detail::kSystemPrompt}, {"user", *prompt}};
  auto r = ask.client->chat(request);
  calls.push_back(llm::trace_of("select", *ask.tpl, request, r));
  if (!r.is_ok()) return r.status();
  return r->text();
}

llm::ChatRequest base_request(const SelectionInput& in, llm::CallTask task, int64_t sample_index) {
  llm::ChatRequest req;
  req.question_id = qid(in);
  req.sample_index = sample_index;
  req.tag.task = task;
  req.tag.question_id = qid(in);
  req.tag.question = in.question->question;
  req.tag.evidence = in.question->evidence;
  req.tag.db_id = in.question->db_id;
  req.tag.sample_index = sample_index;
  return req;
}

// Per-question sql::Schema, loaded once per database file.
class SchemaCache {
 public:
  std::shared_ptr<const sql::Schema> get(const std::filesystem::path& db) const {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = cache_.find(db.string());
    if (it != cache_.end()) return it->second;
    auto s = db::inspect_schema(db);
    std::shared_ptr<const sql::Schema> p =
        s.is_ok() ? std::make_shared<const sql::Schema>(std::move(*s)) : nullptr;
    cache_[db.string()] = p;
    return p;
  }

 private:
  mutable std::mutex mu_;
  mutable std::map<std::string, std::shared_ptr<const sql::Schema>> cache_;  // guarded by mu_
};

std::string schema_for(const SelectionInput& in, const SchemaCache& cache,
                       const std::vector<std::string>& sqls) {
  if (!in.schema) return "(schema not available)";
  auto s = cache.get(in.db_path);
  return detail::union_schema_text(*in.schema, s.get(), sqls);
}

// ---- self-consistency ----

class SelfConsistency : public Selector {
 public:
  explicit SelfConsistency(ResultEquality eq) : eq_(eq) {}
  std::string name() const override { return "self_consistency"; }
  Result<Selection> select(const SelectionInput& in) const override {
    NL2SQL_RETURN_IF_ERROR(check_input(in));
    Selection s;
    s.selector = name();
    auto pc = cluster_pool(in.candidates, eq_, in.generator_order);
    s.chosen = consistency_choice(pc, in);
    s.explanation = {{"equality", eq_ == ResultEquality::kRelaxed ? "relaxed" : "exact"},
                     {"clusters", clusters_json(pc, in)},
                     {"executable", pc.executable}};
    return s;
  }

 private:
  ResultEquality eq_;
};

// ---- pairwise tournament (CHASE-SQL Algorithm 3) ----

struct TournamentOptions {
  bool representatives_only = true;
  int64_t max_pairs = 0;  // pairs sent to the model; 0: all
  bool both_orders = true;
};

class Tournament : public Selector {
 public:
  Tournament(TournamentOptions o, llm::Client* client, llm::PromptTemplate tpl)
      : o_(o), client_(client), tpl_(std::move(tpl)) {}
  std::string name() const override { return "tournament"; }

  Result<Selection> select(const SelectionInput& in) const override {
    NL2SQL_RETURN_IF_ERROR(check_input(in));
    Selection s;
    s.selector = name();
    auto pc = cluster_pool(in.candidates, ResultEquality::kRelaxed, in.generator_order);
    std::vector<int> players;
    for (const auto& c : pc.clusters) {
      if (o_.representatives_only) players.push_back(c.representative);
      else {
        std::vector<int> m = c.members;
        std::sort(m.begin(), m.end(), [&](int a, int b) {
          return candidate_rank(in.candidates, a, in.generator_order) <
                 candidate_rank(in.candidates, b, in.generator_order);
        });
        players.insert(players.end(), m.begin(), m.end());
      }
    }
    json decisions = json::array();
    std::map<int, double> score;
    for (int p : players) score[p] = 0;
    int64_t model_pairs = 0, skipped = 0;
    const ModelAsk ask{client_, &tpl_, "select"};
    for (size_t x = 0; x < players.size(); ++x) {
      for (size_t y = x + 1; y < players.size(); ++y) {
        const int i = players[x], j = players[y];
        const auto& ci = in.candidates[static_cast<size_t>(i)];
        const auto& cj = in.candidates[static_cast<size_t>(j)];
        if (pc.cluster_of[static_cast<size_t>(i)] == pc.cluster_of[static_cast<size_t>(j)]) {
          score[i] += 1;  // equal results: the first of the pair wins, no model call
          decisions.push_back({{"a", ci.id}, {"b", cj.id}, {"winner", ci.id}, {"by", "equal_results"}});
          continue;
        }
        if (o_.max_pairs > 0 && model_pairs >= o_.max_pairs) {
          ++skipped;
          continue;
        }
        const int64_t pair_index = model_pairs++;
        const std::string schema = schema_for(in, schemas_, {ci.sql, cj.sql});
        for (int order = 0; order < (o_.both_orders ? 2 : 1); ++order) {
          const int a = order == 0 ? i : j, b = order == 0 ? j : i;
          const auto& ca = in.candidates[static_cast<size_t>(a)];
          const auto& cb = in.candidates[static_cast<size_t>(b)];
          auto req = base_request(in, llm::CallTask::kSelectPair, pair_index * 2 + order);
          req.tag.generator = "tournament";
          req.tag.candidates = {ca.sql, cb.sql};
          auto text = ask_model(ask,
                                detail::pairwise_values(in.question->question, in.question->evidence,
                                                        schema, ca.sql, detail::result_preview(ca.result->result),
                                                        cb.sql, detail::result_preview(cb.result->result)),
                                req, s.calls);
          json d = {{"a", ca.id}, {"b", cb.id}, {"by", "model"}};
          if (!text.is_ok()) {
            d["error"] = text.status().message();
          } else if (auto w = llm::read_pairwise_winner(*text)) {
            const int winner = *w == "A" ? a : b;
            score[winner] += 1;
            d["winner"] = in.candidates[static_cast<size_t>(winner)].id;
          } else {
            d["error"] = w.status().message();
            client_->accounting().record_parse_failure("select", qid(in), "pairwise");
          }
          decisions.push_back(std::move(d));
        }
      }
    }
    // Highest score; ties: consistency (cluster order), then the candidate rank.
    int best = -1;
    for (int p : players) {
      if (best < 0) { best = p; continue; }
      if (score[p] > score[best]) { best = p; continue; }
      if (score[p] < score[best]) continue;
      int cp = pc.cluster_of[static_cast<size_t>(p)], cb = pc.cluster_of[static_cast<size_t>(best)];
      if (cp < cb || (cp == cb && candidate_rank(in.candidates, p, in.generator_order) <
                                      candidate_rank(in.candidates, best, in.generator_order)))
        best = p;
    }
    s.chosen = best >= 0 ? best : first_ranked(in);
    json scores = json::object();
    for (int p : players) scores[in.candidates[static_cast<size_t>(p)].id] = score[p];
    s.explanation = {{"scores", scores}, {"decisions", decisions}, {"model_pairs", model_pairs},
                     {"pairs_over_cap", skipped}, {"clusters", clusters_json(pc, in)}};
    return s;
  }

 private:
  TournamentOptions o_;
  llm::Client* client_;
  llm::PromptTemplate tpl_;
  SchemaCache schemas_;
};

// ---- ranker ----

class Ranker : public Selector {
 public:
  Ranker(bool reps_only, llm::Client* client, llm::PromptTemplate tpl)
      : reps_only_(reps_only), client_(client), tpl_(std::move(tpl)) {}
  std::string name() const override { return "ranker"; }

  Result<Selection> select(const SelectionInput& in) const override {
    NL2SQL_RETURN_IF_ERROR(check_input(in));
    Selection s;
    s.selector = name();
    auto pc = cluster_pool(in.candidates, ResultEquality::kRelaxed, in.generator_order);
    std::vector<int> players;
    for (const auto& c : pc.clusters) {
      if (reps_only_) players.push_back(c.representative);
      else players.insert(players.end(), c.members.begin(), c.members.end());
    }
    s.chosen = consistency_choice(pc, in);
    if (players.size() <= 1) {
      s.explanation = {{"ranking", json::array()}, {"note", "one result: nothing to rank"}};
      return s;
    }
    std::string listing;
    std::vector<std::string> sqls;
    for (size_t k = 0; k < players.size(); ++k) {
      const auto& c = in.candidates[static_cast<size_t>(players[k])];
      sqls.push_back(c.sql);
      listing += "Candidate " + std::to_string(k) + ":\n```sql\n" + c.sql + "\n```\nResult:\n" +
                 detail::result_preview(c.result->result) + "\n";
    }
    auto req = base_request(in, llm::CallTask::kRank, 0);
    req.tag.generator = "ranker";
    req.tag.candidates = sqls;
    auto text = ask_model({client_, &tpl_, "rank"},
                          {{"question", in.question->question},
                           {"evidence", in.question->evidence.empty() ? "(none)" : in.question->evidence},
                           {"schema", schema_for(in, schemas_, sqls)},
                           {"candidates", listing},
                           {"count", std::to_string(players.size())}},
                          req, s.calls);
    json ranking = json::array();
    std::string unread;  // why no ranking could be read from a successful call
    if (text.is_ok()) {
      auto r = detail::read_ranking(*text, players.size());
      if (r) {
        for (int64_t k : *r) ranking.push_back(k);
      } else {
        unread = r.status().message();
        client_->accounting().record_parse_failure("select", qid(in), "rank");
      }
    }
    if (!ranking.empty()) {
      s.chosen = players[static_cast<size_t>(ranking[0].get<int64_t>())];
      s.explanation = {{"ranking", ranking}};
    } else {
      s.explanation = {{"ranking", ranking},
                       {"fallback", "consistency: " + (text.is_ok() ? "no ranking in the answer (" + unread + ")"
                                                                    : text.status().message())}};
    }
    json ids = json::array();
    for (int p : players) ids.push_back(in.candidates[static_cast<size_t>(p)].id);
    s.explanation["candidates"] = ids;
    return s;
  }

 private:
  bool reps_only_;
  llm::Client* client_;
  llm::PromptTemplate tpl_;
  SchemaCache schemas_;
};

// ---- separating-instance duels ----

struct DuelOptions {
  int64_t max_representatives = 6;
  int64_t asks = 3;
  InstanceOptions instance;
};

class SeparatingInstances : public Selector {
 public:
  SeparatingInstances(DuelOptions o, llm::Client* client, const db::Executor* executor,
                      llm::PromptTemplate tpl)
      : o_(o), client_(client), executor_(executor), tpl_(std::move(tpl)) {}
  std::string name() const override { return "separating_instances"; }

  Result<Selection> select(const SelectionInput& in) const override {
    NL2SQL_RETURN_IF_ERROR(check_input(in));
    Selection s;
    s.selector = name();
    auto pc = cluster_pool(in.candidates, ResultEquality::kRelaxed, in.generator_order);
    s.chosen = consistency_choice(pc, in);
    std::vector<int> players;
    for (const auto& c : pc.clusters)
      if (static_cast<int64_t>(players.size()) < o_.max_representatives) players.push_back(c.representative);
    if (players.size() <= 1) {
      s.explanation = {{"duels", json::array()}, {"note", "one result: no duel"}};
      return s;
    }
    auto builder = InstanceBuilder::open(in.db_path, *executor_, o_.instance);
    if (!builder.is_ok()) return builder.status().with_context("question " + qid(in));
    std::map<int, Result<QueryLineage>> lineage;
    for (int p : players) {
      const auto& c = in.candidates[static_cast<size_t>(p)];
      // Representatives have run on D already: their lineage needs only the witness queries.
      const db::ResultSet* known = c.result && c.result->ok() ? &c.result->result : nullptr;
      lineage.emplace(p, builder->lineage(c.sql, known));
    }
    std::map<int, double> score;
    json duels = json::array();
    int64_t pair_index = 0;
    for (size_t x = 0; x < players.size(); ++x) {
      for (size_t y = x + 1; y < players.size(); ++y, ++pair_index) {
        const int i = players[x], j = players[y];
        const auto& ci = in.candidates[static_cast<size_t>(i)];
        const auto& cj = in.candidates[static_cast<size_t>(j)];
        json d = {{"a", ci.id}, {"b", cj.id}};
        auto draw = [&](const std::string& why) {
          score[i] += 0.5;
          score[j] += 0.5;
          d["outcome"] = "draw";
          d["why"] = why;
        };
        const auto& la = lineage.at(i);
        const auto& lb = lineage.at(j);
        if (!la.is_ok() || !lb.is_ok()) {
          draw("lineage: " + (!la.is_ok() ? la.status() : lb.status()).message());
          duels.push_back(std::move(d));
          continue;
        }
        core::KeyHasher h;
        h.add(static_cast<int64_t>(in.seed)).add("separating_instance").add(ci.id).add(cj.id);
        const uint64_t seed = h.seed();
        // Approximate lineage guides the search only (D′ is verified), but say where it was used.
        json notes = json::object();
        for (const auto& [side, l] : {std::pair<const char*, const QueryLineage*>{"a", &*la}, {"b", &*lb}}) {
          if (!l->fallbacks.empty()) notes[side]["over_approximated"] = l->fallbacks;
          if (!l->sampled.empty()) notes[side]["sampled"] = l->sampled;
        }
        if (!notes.empty()) d["lineage"] = std::move(notes);
        auto inst = builder->separate(*la, *lb, seed);
        if (!inst.is_ok()) {
          draw("instance: " + inst.status().message());
          duels.push_back(std::move(d));
          continue;
        }
        d["instance"] = inst->to_json();
        if (!inst->found) {
          draw("no separating instance");
          duels.push_back(std::move(d));
          continue;
        }
        s.duel_instances.push_back({duels.size(), inst->instance, std::nullopt});
        std::vector<std::string> tables;
        std::set<std::string> columns;
        for (const auto& [t, rs] : inst->instance.tables)
          for (const auto& c : rs.columns) columns.insert(t + "." + c);
        std::string schema = "(schema not available)";
        if (in.schema) {
          context::RenderOptions ro;
          ro.examples = 0;
          ro.columns = columns;
          schema = context::render_schema(*in.schema, ro);
        }
        std::vector<db::ResultSet> answers;
        json model_answers = json::array();
        for (int64_t k = 0; k < o_.asks; ++k) {
          auto req = base_request(in, llm::CallTask::kNlEval, pair_index * o_.asks + k);
          req.tag.generator = "separating_instances";
          const InstanceBuilder* b = &*builder;
          const InstanceTables* tables_on = &inst->instance;
          req.tag.answer_on_instance = [b, tables_on](const std::string& sql) -> Result<std::string> {
            auto r = b->run_on(*tables_on, sql);
            if (!r.is_ok()) return r.status();
            return render_answer_rows(*r);
          };
          auto text = ask_model({client_, &tpl_, "nl_eval"},
                                {{"question", in.question->question},
                                 {"evidence", in.question->evidence.empty() ? "(none)" : in.question->evidence},
                                 {"schema", schema},
                                 {"instance", inst->instance.to_prompt_text()}},
                                req, s.calls);
          if (!text.is_ok()) {
            model_answers.push_back({{"error", text.status().message()}});
            continue;
          }
          auto parsed = parse_answer_rows(*text);
          if (!parsed.is_ok()) {
            client_->accounting().record_parse_failure("select", qid(in), "nl_eval");
            model_answers.push_back({{"error", parsed.status().message()}});
            continue;
          }
          model_answers.push_back(render_answer_rows(*parsed));
          answers.push_back(std::move(*parsed));
        }
        d["model_answers"] = model_answers;
        // Majority: an answer that at least half of the asks (rounded up) agree with.
        const db::ResultSet* majority = nullptr;
        for (const auto& a : answers) {
          int64_t agree = 0;
          for (const auto& b : answers) agree += answers_match(a, b) ? 1 : 0;
          if (agree * 2 > o_.asks) { majority = &a; break; }
        }
        if (!majority) {
          draw("the model's answers disagree");
          duels.push_back(std::move(d));
          continue;
        }
        d["majority"] = render_answer_rows(*majority);
        s.duel_instances.back().majority = *majority;
        const bool ma = answers_match(*majority, inst->answer_a);
        const bool mb = answers_match(*majority, inst->answer_b);
        if (ma && !mb) {
          score[i] += 1;
          d["outcome"] = "a";
        } else if (mb && !ma) {
          score[j] += 1;
          d["outcome"] = "b";
        } else {
          draw(ma ? "both match" : "neither matches");
        }
        duels.push_back(std::move(d));
      }
    }
    // A unique top score wins; otherwise consistency decides.
    double top = -1;
    for (int p : players) top = std::max(top, score[p]);
    std::vector<int> leaders;
    for (int p : players)
      if (score[p] == top) leaders.push_back(p);
    s.chosen = leaders.front();  // several leaders: players are in consistency order
    json scores = json::object();
    for (int p : players) scores[in.candidates[static_cast<size_t>(p)].id] = score[p];
    s.explanation = {{"scores", scores}, {"duels", duels},
                     {"decided_by", leaders.size() == 1 ? "duels" : "consistency"},
                     {"clusters", clusters_json(pc, in)}};
    return s;
  }

 private:
  DuelOptions o_;
  llm::Client* client_;
  const db::Executor* executor_;
  llm::PromptTemplate tpl_;
};

// ---- expert votes ----

enum class VoteKind { kWma, kRwma, kNaive };

class ExpertVote : public Selector {
 public:
  ExpertVote(VoteKind kind, bool by_profile, std::shared_ptr<WeightStore> weights)
      : kind_(kind), by_profile_(by_profile), weights_(std::move(weights)) {}
  std::string name() const override {
    return kind_ == VoteKind::kWma ? "wma" : kind_ == VoteKind::kRwma ? "rwma" : "naive_vote";
  }

  Result<Selection> select(const SelectionInput& in) const override {
    NL2SQL_RETURN_IF_ERROR(check_input(in));
    Selection s;
    s.selector = name();
    auto pc = cluster_pool(in.candidates, ResultEquality::kRelaxed, in.generator_order);
    s.chosen = consistency_choice(pc, in);
    if (pc.clusters.empty()) {
      s.explanation = {{"note", "nothing executable"}};
      return s;
    }
    auto expert_of = [&](const PoolCandidate& c) { return by_profile_ ? c.profile : c.generator; };
    // An expert proposing k executable candidates spreads its weight over them.
    std::map<std::string, int> proposals;
    for (size_t i = 0; i < in.candidates.size(); ++i)
      if (pc.cluster_of[i] >= 0) ++proposals[expert_of(in.candidates[i])];
    std::map<std::string, double> weights;
    for (const auto& [e, n] : proposals)
      weights[e] = kind_ == VoteKind::kNaive ? 1.0 : weights_->weight(e);
    std::vector<double> mass(pc.clusters.size(), 0.0);
    for (size_t i = 0; i < in.candidates.size(); ++i) {
      if (pc.cluster_of[i] < 0) continue;
      const auto e = expert_of(in.candidates[i]);
      mass[static_cast<size_t>(pc.cluster_of[i])] += weights[e] / proposals[e];
    }
    size_t pick = 0;
    json draw_info;
    if (kind_ == VoteKind::kRwma) {
      double total = 0;
      for (double m : mass) total += m;
      std::mt19937_64 rng(in.seed ^ 0x72776d61ULL);
      double u = static_cast<double>(rng() >> 11) * 0x1.0p-53 * total;
      draw_info = u;
      double acc = 0;
      pick = mass.size() - 1;
      for (size_t k = 0; k < mass.size(); ++k) {
        acc += mass[k];
        if (u < acc) { pick = k; break; }
      }
    } else {
      for (size_t k = 1; k < mass.size(); ++k)
        if (mass[k] > mass[pick] + 1e-12) pick = k;  // ties keep the larger (earlier) cluster
    }
    s.chosen = pc.clusters[pick].representative;
    s.explanation = {{"weights", weights}, {"cluster_mass", mass}, {"chosen_cluster", pick},
                     {"experts", by_profile_ ? "profile" : "generator"},
                     {"clusters", clusters_json(pc, in)}};
    if (kind_ == VoteKind::kRwma) s.explanation["draw"] = draw_info;
    return s;
  }

 private:
  VoteKind kind_;
  bool by_profile_;
  std::shared_ptr<WeightStore> weights_;
};

Result<llm::PromptTemplate> load_prompt(const SelectorServices& services, const std::string& name) {
  auto dir = services.prompts_dir.empty() ? llm::bundled_prompts_dir() : services.prompts_dir;
  return llm::PromptTemplate::load_named(dir, name);
}

}  // namespace

const std::vector<std::string>& selector_methods() {
  static const std::vector<std::string> m = {"self_consistency", "tournament", "ranker",
                                             "separating_instances", "wma", "rwma", "naive_vote"};
  return m;
}

Result<double> configured_epsilon(const core::Config& config) {
  if (config.has("select.wma.epsilon")) {
    auto e = config.get_number("select.wma.epsilon");
    if (!e.is_ok()) return e.status();
    if (!(*e > 0 && *e < 1)) return invalid_input("config key \"select.wma.epsilon\": must be in (0, 1)");
    return *e;
  }
  int64_t experts = 4;
  if (const auto* g = config.find("generate.generators"); g && g->is_array() && !g->empty())
    experts = static_cast<int64_t>(g->size());
  auto n = config.get_int("select.wma.expert_count", experts);
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
  auto need_client = [&]() -> Status {
    if (!services.client)
      return invalid_input("select method " + method + " calls a model: it needs an LLM client");
    return Status::ok();
  };
  if (method == "self_consistency") {
    auto eq = read_equality(config, prefix + "equality");
    if (!eq.is_ok()) return eq.status();
    return std::unique_ptr<Selector>(new SelfConsistency(*eq));
  }
  if (method == "tournament") {
    NL2SQL_RETURN_IF_ERROR(need_client());
    TournamentOptions o;
    auto reps = config.get_bool(prefix + "representatives_only", true);
    auto cap = config.get_int(prefix + "max_pairs", 0);
    auto both = config.get_bool(prefix + "both_orders", true);
    if (!reps.is_ok()) return reps.status();
    if (!cap.is_ok()) return cap.status();
    if (!both.is_ok()) return both.status();
    if (*cap < 0) return invalid_input("config key \"" + prefix + "max_pairs\": must be >= 0");
    o.representatives_only = *reps;
    o.max_pairs = *cap;
    o.both_orders = *both;
    auto tpl = load_prompt(services, "select_pairwise");
    if (!tpl.is_ok()) return tpl.status();
    return std::unique_ptr<Selector>(new Tournament(o, services.client, std::move(*tpl)));
  }
  if (method == "ranker") {
    NL2SQL_RETURN_IF_ERROR(need_client());
    auto reps = config.get_bool(prefix + "representatives_only", true);
    if (!reps.is_ok()) return reps.status();
    auto tpl = load_prompt(services, "select_rank");
    if (!tpl.is_ok()) return tpl.status();
    return std::unique_ptr<Selector>(new Ranker(*reps, services.client, std::move(*tpl)));
  }
  if (method == "separating_instances") {
    NL2SQL_RETURN_IF_ERROR(need_client());
    if (!services.executor)
      return invalid_input("select method separating_instances reads the database: it needs an executor");
    DuelOptions o;
    auto reps = config.get_int(prefix + "max_representatives", 6);
    auto asks = config.get_int(prefix + "asks", 3);
    auto tries = config.get_int(prefix + "max_attempts", 42);
    auto timeout = config.get_number(prefix + "query_timeout_s", 5.0);
    auto budget = config.get_int(prefix + "lineage_group_budget", 100000);
    for (const auto* r : {&reps, &asks, &tries, &budget})
      if (!r->is_ok()) return r->status();
    if (!timeout.is_ok()) return timeout.status();
    if (*reps < 2) return invalid_input("config key \"" + prefix + "max_representatives\": must be >= 2");
    if (*asks < 1) return invalid_input("config key \"" + prefix + "asks\": must be >= 1");
    if (*tries < 1) return invalid_input("config key \"" + prefix + "max_attempts\": must be >= 1");
    if (*budget < 0) return invalid_input("config key \"" + prefix + "lineage_group_budget\": must be >= 0");
    o.max_representatives = *reps;
    o.asks = *asks;
    o.instance.max_attempts = static_cast<int>(*tries);
    o.instance.query_timeout_s = *timeout;
    o.instance.lineage_group_budget = *budget;
    auto tpl = load_prompt(services, "evaluate_on_instance");
    if (!tpl.is_ok()) return tpl.status();
    return std::unique_ptr<Selector>(
        new SeparatingInstances(o, services.client, services.executor, std::move(*tpl)));
  }
  if (method == "wma" || method == "rwma" || method == "naive_vote") {
    auto experts = config.get_string("select.wma.experts");
    if (!experts.is_ok()) return experts.status();
    if (*experts != "generator" && *experts != "profile")
      return invalid_input("config key \"select.wma.experts\": expected generator or profile");
    auto weights = services.weights;
    if (!weights) {
      auto eps = configured_epsilon(config);
      if (!eps.is_ok()) return eps.status();
      weights = std::make_shared<WeightStore>(*eps);
    }
    VoteKind kind = method == "wma" ? VoteKind::kWma : method == "rwma" ? VoteKind::kRwma : VoteKind::kNaive;
    return std::unique_ptr<Selector>(new ExpertVote(kind, *experts == "profile", std::move(weights)));
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
