// The pairwise tournament (CHASE-SQL Algorithm 3): both orders, same result a win without a call.
#include <algorithm>
#include <map>
#include <set>
#include <utility>

#include "nl2sql/llm/answer.h"
#include "prompt_parts.h"
#include "selector_parts.h"

namespace nl2sql::select::detail {
namespace {

using json = nlohmann::json;
using Scores = std::map<int, double>;

// Every candidate of every cluster in cluster order (members by candidate rank), or the
// clusters' representatives only.
std::vector<int> tournament_players(const PoolClusters& pc, const SelectionInput& in, bool representatives_only) {
  std::vector<int> players;
  for (const auto& c : pc.clusters) {
    if (representatives_only) players.push_back(c.representative);
    else {
      std::vector<int> m = c.members;
      std::sort(m.begin(), m.end(), [&](int a, int b) {
        return candidate_rank(in.candidates, a, in.generator_order) <
               candidate_rank(in.candidates, b, in.generator_order);
      });
      players.insert(players.end(), m.begin(), m.end());
    }
  }
  return players;
}

// Highest score; ties: consistency (cluster order), then the candidate rank. -1 without players.
int best_player(const std::vector<int>& players, Scores& score, const PoolClusters& pc, const SelectionInput& in) {
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
  return best;
}

// One pair of players and how its verdict is had.
struct Planned {
  enum Kind { kEqual, kReused, kModel } kind = kEqual;
  int i = 0, j = 0;
  size_t ask = 0;  // kModel: the first of its one or two asks ((i, j), then (j, i))
};

// The duels do not depend on each other: every pair is planned in order, the model's comparisons
// then go out together (each waits for its own model slot), and the verdicts are tallied in the
// planned order, so decisions and scores are those of one duel after another.
struct TournamentPlan {
  std::vector<Planned> pairs;
  std::vector<Ask> asks;
  std::set<std::pair<std::string, std::string>> planned_sql;  // ordered SQL pairs asked by this plan
  int64_t model_pairs = 0, skipped = 0, reused = 0;
};

class Tournament : public Selector {
 public:
  Tournament(TournamentOptions o, llm::Client* client, llm::PromptTemplate tpl)
      : o_(o), client_(client), tpl_(std::move(tpl)) {}
  std::string name() const override { return "tournament"; }
  SelectorTraits traits() const override { return {.calls_model = true, .model_role = "select", .uses_seed = true}; }

  Result<Selection> select(const SelectionInput& in) const override {
    NL2SQL_RETURN_IF_ERROR(check_input(in));
    Selection s;
    s.selector = name();
    auto pc = cluster_pool(in.candidates, ResultEquality::kRelaxed, in.generator_order);
    const std::vector<int> players = tournament_players(pc, in, o_.representatives_only);
    Scores score;
    for (int p : players) score[p] = 0;
    // Candidates with the same SQL make the same prompt: each ordered pair of SQL texts is asked
    // once and its verdict serves every pair of candidates that repeats it (and, through
    // in.pair_verdicts, the question's other selections), so no identical request is sent twice.
    const std::shared_ptr<PairVerdicts> asked =
        in.pair_verdicts ? in.pair_verdicts : std::make_shared<PairVerdicts>();
    TournamentPlan plan = plan_pairs(in, pc, players, *asked);
    const std::vector<Result<std::string>> texts =
        ask_all(ModelAsk{client_, &tpl_, "select"}, std::move(plan.asks), s.calls);
    // Verdicts read in the planned order: a pair that repeats an earlier pair's SQL comes after
    // it in the plan, so its verdict is in `asked` by the time it is read.
    json decisions = json::array();
    for (const Planned& pl : plan.pairs) {
      if (pl.kind == Planned::kEqual) {
        const auto& ci = in.candidates[static_cast<size_t>(pl.i)];
        const auto& cj = in.candidates[static_cast<size_t>(pl.j)];
        score[pl.i] += 1;  // equal results: the first of the pair wins, no model call
        decisions.push_back({{"a", ci.id}, {"b", cj.id}, {"winner", ci.id}, {"by", "equal_results"}});
      } else if (pl.kind == Planned::kReused) {
        tally_reused(in, pl, *asked, score, decisions);
      } else {
        tally_model(in, pl, texts, *asked, score, decisions);
      }
    }
    const int best = best_player(players, score, pc, in);
    s.chosen = best >= 0 ? best : first_ranked(in);
    json scores = json::object();
    for (int p : players) scores[in.candidates[static_cast<size_t>(p)].id] = score[p];
    s.explanation = {{"scores", scores}, {"decisions", decisions}, {"model_pairs", plan.model_pairs},
                     {"pairs_answered_by_same_sql", plan.reused}, {"pairs_over_cap", plan.skipped}, {"clusters", clusters_json(pc, in)}};
    return s;
  }

 private:
  // Every pair of players in order: equal results, a verdict known (asked before or planned
  // here), over the cap (skipped), or the model's one or two asks.
  TournamentPlan plan_pairs(const SelectionInput& in, const PoolClusters& pc, const std::vector<int>& players,
                            const PairVerdicts& asked) const {
    TournamentPlan plan;
    auto will_know = [&](const std::string& a, const std::string& b) {
      return asked.find(a, b).has_value() || plan.planned_sql.count({a, b}) > 0;
    };
    for (size_t x = 0; x < players.size(); ++x) {
      for (size_t y = x + 1; y < players.size(); ++y) {
        const int i = players[x], j = players[y];
        const auto& ci = in.candidates[static_cast<size_t>(i)];
        const auto& cj = in.candidates[static_cast<size_t>(j)];
        if (pc.cluster_of[static_cast<size_t>(i)] == pc.cluster_of[static_cast<size_t>(j)]) {
          plan.pairs.push_back({Planned::kEqual, i, j});
          continue;
        }
        if (o_.max_pairs > 0 && plan.model_pairs >= o_.max_pairs) {
          ++plan.skipped;
          continue;
        }
        if (will_know(ci.sql, cj.sql) && (!o_.both_orders || will_know(cj.sql, ci.sql))) {
          ++plan.reused;
          plan.pairs.push_back({Planned::kReused, i, j});
          continue;
        }
        const int64_t pair_index = plan.model_pairs++;
        const auto sql_schema = in.schema ? schemas_.get(in.db_path) : nullptr;
        plan.pairs.push_back({Planned::kModel, i, j, plan.asks.size()});
        for (int order = 0; order < (o_.both_orders ? 2 : 1); ++order) {
          const auto& ca = order == 0 ? ci : cj;
          const auto& cb = order == 0 ? cj : ci;
          plan.asks.push_back(pair_ask(in, ca, cb, sql_schema.get(), pair_index * 2 + order));
          plan.planned_sql.insert({ca.sql, cb.sql});
        }
      }
    }
    return plan;
  }

  // The model's comparison of `ca` (shown as A) against `cb` (B).
  Ask pair_ask(const SelectionInput& in, const PoolCandidate& ca, const PoolCandidate& cb, const sql::Schema* sql_schema,
               int64_t sample) const {
    Ask k;
    k.request = base_request(in, llm::CallTask::kSelectPair, sample);
    k.request.tag.generator = "tournament";
    k.request.tag.candidates = {ca.sql, cb.sql};
    detail::PairPrompt pair;
    pair.question = in.question->question;
    pair.evidence = in.question->evidence;
    pair.schema = in.schema;
    pair.sql_schema = sql_schema;
    pair.metadata = in.metadata;
    pair.sql_a = ca.sql;
    pair.result_a = &ca.result->result;
    pair.total_a = ca.result->row_count();
    pair.sql_b = cb.sql;
    pair.result_b = &cb.result->result;
    pair.total_b = cb.result->row_count();
    k.values = detail::pair_prompt_values(pair);
    return k;
  }

  // A pair whose SQL texts were compared before: the stored verdicts, in both orders.
  void tally_reused(const SelectionInput& in, const Planned& pl, const PairVerdicts& asked, Scores& score,
                    json& decisions) const {
    for (int order = 0; order < (o_.both_orders ? 2 : 1); ++order) {
      const int a = order == 0 ? pl.i : pl.j, b = order == 0 ? pl.j : pl.i;
      const auto& ca = in.candidates[static_cast<size_t>(a)];
      const auto& cb = in.candidates[static_cast<size_t>(b)];
      const std::string side = asked.find(ca.sql, cb.sql).value_or("");
      json d = {{"a", ca.id}, {"b", cb.id}, {"by", "same_sql_pair_asked"}};
      if (!side.empty()) {
        const int winner = side == "A" ? a : b;
        score[winner] += 1;
        d["winner"] = in.candidates[static_cast<size_t>(winner)].id;
      }
      decisions.push_back(std::move(d));
    }
  }

  // A pair the model compared: its answers read, scored and stored for the pairs that repeat it.
  void tally_model(const SelectionInput& in, const Planned& pl, const std::vector<Result<std::string>>& texts,
                   PairVerdicts& asked, Scores& score, json& decisions) const {
    for (int order = 0; order < (o_.both_orders ? 2 : 1); ++order) {
      const auto& text = texts[pl.ask + static_cast<size_t>(order)];
      const int a = order == 0 ? pl.i : pl.j, b = order == 0 ? pl.j : pl.i;
      const auto& ca = in.candidates[static_cast<size_t>(a)];
      const auto& cb = in.candidates[static_cast<size_t>(b)];
      std::string side;
      json d = {{"a", ca.id}, {"b", cb.id}, {"by", "model"}};
      if (!text.is_ok()) {
        d["error"] = text.status().message();
      } else if (auto w = llm::read_pairwise_winner(*text)) {
        const int winner = *w == "A" ? a : b;
        side = *w == "A" ? "A" : "B";
        score[winner] += 1;
        d["winner"] = in.candidates[static_cast<size_t>(winner)].id;
      } else {
        d["error"] = w.status().message();
        client_->accounting().record_parse_failure("select", qid(in), "pairwise");
      }
      asked.put(ca.sql, cb.sql, side);
      decisions.push_back(std::move(d));
    }
  }

 private:
  TournamentOptions o_;
  llm::Client* client_;
  llm::PromptTemplate tpl_;
  SchemaCache schemas_;
};

}  // namespace

std::unique_ptr<Selector> make_tournament(TournamentOptions o, llm::Client* client, llm::PromptTemplate tpl) {
  return std::make_unique<Tournament>(o, client, std::move(tpl));
}

}  // namespace nl2sql::select::detail
