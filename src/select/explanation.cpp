// Selection explanations: the family structs' JSON, read strictly and written back as the
// selectors wrote it.
#include "nl2sql/select/explanation.h"

#include "nl2sql/core/json_read.h"

namespace nl2sql::select {
namespace {

using core::known_keys_only;
using core::read_key;
using core::read_optional;
using core::write_optional;
using nlohmann::json;

// Each element of the list `key`, read by `read_one`, into `out` when the key is present.
template <typename T, typename F>
Status read_list(const json& j, const char* key, std::optional<std::vector<T>>& out, const std::string& where,
                 F read_one) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return Status::ok();
  if (!it->is_array()) return invalid_input(where + ": key \"" + key + "\" must be a list");
  std::vector<T> list;
  for (const auto& e : *it) {
    auto one = read_one(e, where + ", " + key);
    if (!one) return one.status();
    list.push_back(std::move(*one));
  }
  out = std::move(list);
  return Status::ok();
}

template <typename T, typename F>
void write_list(json& j, const char* key, const std::optional<std::vector<T>>& list, F write_one) {
  if (!list) return;
  json out = json::array();
  for (const auto& e : *list) out.push_back(write_one(e));
  j[key] = std::move(out);
}

Result<ClusterEntry> cluster_from_json(const json& j, const std::string& where) {
  NL2SQL_RETURN_IF_ERROR(known_keys_only(j, {"members", "representative"}, where));
  ClusterEntry c;
  NL2SQL_RETURN_IF_ERROR(read_key(j, "members", c.members, where));
  NL2SQL_RETURN_IF_ERROR(read_key(j, "representative", c.representative, where));
  return c;
}
json cluster_json(const ClusterEntry& c) { return {{"members", c.members}, {"representative", c.representative}}; }

Result<AskAnswer> answer_from_json(const json& j, const std::string& where) {
  AskAnswer a;
  if (j.is_string()) {
    a.said = j.get<std::string>();
    return a;
  }
  NL2SQL_RETURN_IF_ERROR(known_keys_only(j, {"error", "unmatched"}, where));
  NL2SQL_RETURN_IF_ERROR(read_optional(j, "error", a.error, where));
  NL2SQL_RETURN_IF_ERROR(read_optional(j, "unmatched", a.unmatched, where));
  if (a.error.has_value() == a.unmatched.has_value())
    return invalid_input(where + ": an answer is a string, {\"error\"} or {\"unmatched\"}");
  return a;
}
json answer_json(const AskAnswer& a) { return to_json(a); }

// ---- votes ----

Result<VoteExplanation::Group> group_from_json(const json& j, const std::string& where) {
  NL2SQL_RETURN_IF_ERROR(known_keys_only(j, {"members", "score"}, where));
  VoteExplanation::Group g;
  NL2SQL_RETURN_IF_ERROR(read_key(j, "members", g.members, where));
  NL2SQL_RETURN_IF_ERROR(read_key(j, "score", g.score, where));
  return g;
}

Result<VoteExplanation> votes_from_json(const json& j, const std::string& w) {
  NL2SQL_RETURN_IF_ERROR(known_keys_only(
      j, {"note", "equality", "experts", "decided_by", "clusters", "executable", "chosen_cluster", "grouped",
          "unmatched", "weights", "cluster_mass", "draw", "groups", "valid_results_only", "listed", "answers"},
      w));
  VoteExplanation e;
  NL2SQL_RETURN_IF_ERROR(read_optional(j, "note", e.note, w));
  NL2SQL_RETURN_IF_ERROR(read_optional(j, "equality", e.equality, w));
  NL2SQL_RETURN_IF_ERROR(read_optional(j, "experts", e.experts, w));
  NL2SQL_RETURN_IF_ERROR(read_optional(j, "decided_by", e.decided_by, w));
  NL2SQL_RETURN_IF_ERROR(read_list(j, "clusters", e.clusters, w, cluster_from_json));
  NL2SQL_RETURN_IF_ERROR(read_optional(j, "executable", e.executable, w));
  NL2SQL_RETURN_IF_ERROR(read_optional(j, "chosen_cluster", e.chosen_cluster, w));
  NL2SQL_RETURN_IF_ERROR(read_optional(j, "grouped", e.grouped, w));
  NL2SQL_RETURN_IF_ERROR(read_optional(j, "unmatched", e.unmatched, w));
  NL2SQL_RETURN_IF_ERROR(read_optional(j, "weights", e.weights, w));
  NL2SQL_RETURN_IF_ERROR(read_optional(j, "cluster_mass", e.cluster_mass, w));
  NL2SQL_RETURN_IF_ERROR(read_optional(j, "draw", e.draw, w));
  NL2SQL_RETURN_IF_ERROR(read_list(j, "groups", e.groups, w, group_from_json));
  NL2SQL_RETURN_IF_ERROR(read_optional(j, "valid_results_only", e.valid_results_only, w));
  NL2SQL_RETURN_IF_ERROR(read_optional(j, "listed", e.listed, w));
  NL2SQL_RETURN_IF_ERROR(read_list(j, "answers", e.answers, w, answer_from_json));
  return e;
}

json votes_json(const VoteExplanation& e) {
  json j = json::object();
  write_optional(j, "note", e.note);
  write_optional(j, "equality", e.equality);
  write_optional(j, "experts", e.experts);
  write_optional(j, "decided_by", e.decided_by);
  write_list(j, "clusters", e.clusters, cluster_json);
  write_optional(j, "executable", e.executable);
  write_optional(j, "chosen_cluster", e.chosen_cluster);
  write_optional(j, "grouped", e.grouped);
  write_optional(j, "unmatched", e.unmatched);
  write_optional(j, "weights", e.weights);
  write_optional(j, "cluster_mass", e.cluster_mass);
  write_optional(j, "draw", e.draw);
  write_list(j, "groups", e.groups,
             [](const VoteExplanation::Group& g) { return json{{"members", g.members}, {"score", g.score}}; });
  write_optional(j, "valid_results_only", e.valid_results_only);
  write_optional(j, "listed", e.listed);
  write_list(j, "answers", e.answers, answer_json);
  return j;
}

// ---- duels ----

Result<PairDecision> decision_from_json(const json& j, const std::string& w) {
  NL2SQL_RETURN_IF_ERROR(known_keys_only(j, {"a", "b", "by", "winner", "error"}, w));
  PairDecision d;
  NL2SQL_RETURN_IF_ERROR(read_key(j, "a", d.a, w));
  NL2SQL_RETURN_IF_ERROR(read_key(j, "b", d.b, w));
  NL2SQL_RETURN_IF_ERROR(read_key(j, "by", d.by, w));
  NL2SQL_RETURN_IF_ERROR(read_optional(j, "winner", d.winner, w));
  NL2SQL_RETURN_IF_ERROR(read_optional(j, "error", d.error, w));
  return d;
}
json decision_json(const PairDecision& d) {
  json j = {{"a", d.a}, {"b", d.b}, {"by", d.by}};
  write_optional(j, "winner", d.winner);
  write_optional(j, "error", d.error);
  return j;
}

Result<InstanceRecord> instance_from_json(const json& j, const std::string& w) {
  NL2SQL_RETURN_IF_ERROR(known_keys_only(j, {"found", "attempts", "rows", "rows_before_shrink", "too_large_rows",
                                             "on_sample", "timed_out", "instance", "answer_a", "answer_b", "failure"},
                                         w));
  InstanceRecord r;
  NL2SQL_RETURN_IF_ERROR(read_key(j, "found", r.found, w));
  NL2SQL_RETURN_IF_ERROR(read_key(j, "attempts", r.attempts, w));
  NL2SQL_RETURN_IF_ERROR(read_optional(j, "rows", r.rows, w));
  NL2SQL_RETURN_IF_ERROR(read_optional(j, "rows_before_shrink", r.rows_before_shrink, w));
  NL2SQL_RETURN_IF_ERROR(read_optional(j, "too_large_rows", r.too_large_rows, w));
  NL2SQL_RETURN_IF_ERROR(read_optional(j, "on_sample", r.on_sample, w));
  NL2SQL_RETURN_IF_ERROR(read_optional(j, "timed_out", r.timed_out, w));
  if (auto it = j.find("instance"); it != j.end() && !it->is_null()) {
    if (!it->is_object()) return invalid_input(w + ": key \"instance\" must be an object of tables");
    r.tables = *it;
  }
  NL2SQL_RETURN_IF_ERROR(read_optional(j, "answer_a", r.answer_a, w));
  NL2SQL_RETURN_IF_ERROR(read_optional(j, "answer_b", r.answer_b, w));
  NL2SQL_RETURN_IF_ERROR(read_optional(j, "failure", r.failure, w));
  return r;
}
json instance_json(const InstanceRecord& r) {
  json j = {{"found", r.found}, {"attempts", r.attempts}};
  write_optional(j, "rows", r.rows);
  write_optional(j, "rows_before_shrink", r.rows_before_shrink);
  write_optional(j, "too_large_rows", r.too_large_rows);
  write_optional(j, "on_sample", r.on_sample);
  write_optional(j, "timed_out", r.timed_out);
  write_optional(j, "instance", r.tables);
  write_optional(j, "answer_a", r.answer_a);
  write_optional(j, "answer_b", r.answer_b);
  write_optional(j, "failure", r.failure);
  return j;
}

Result<Duel> duel_from_json(const json& j, const std::string& w) {
  NL2SQL_RETURN_IF_ERROR(known_keys_only(j, {"a", "b", "outcome", "draw", "why", "lineage", "instance",
                                             "model_answers", "majority", "gold_answer", "model_agrees_with_gold"},
                                         w));
  Duel d;
  NL2SQL_RETURN_IF_ERROR(read_key(j, "a", d.a, w));
  NL2SQL_RETURN_IF_ERROR(read_key(j, "b", d.b, w));
  NL2SQL_RETURN_IF_ERROR(read_optional(j, "outcome", d.outcome, w));
  NL2SQL_RETURN_IF_ERROR(read_optional(j, "draw", d.draw, w));
  NL2SQL_RETURN_IF_ERROR(read_optional(j, "why", d.why, w));
  if (auto it = j.find("lineage"); it != j.end() && !it->is_null()) {
    if (!it->is_object()) return invalid_input(w + ": key \"lineage\" must be an object");
    for (const auto& [side, note] : it->items()) {
      const std::string nw = w + ", lineage " + side;
      NL2SQL_RETURN_IF_ERROR(known_keys_only(note, {"over_approximated", "sampled"}, nw));
      Duel::LineageNote n;
      NL2SQL_RETURN_IF_ERROR(read_optional(note, "over_approximated", n.over_approximated, nw));
      NL2SQL_RETURN_IF_ERROR(read_optional(note, "sampled", n.sampled, nw));
      d.lineage[side] = std::move(n);
    }
  }
  if (auto it = j.find("instance"); it != j.end() && !it->is_null()) {
    auto inst = instance_from_json(*it, w + ", instance");
    if (!inst) return inst.status();
    d.instance = std::move(*inst);
  }
  NL2SQL_RETURN_IF_ERROR(read_list(j, "model_answers", d.model_answers, w, answer_from_json));
  NL2SQL_RETURN_IF_ERROR(read_optional(j, "majority", d.majority, w));
  NL2SQL_RETURN_IF_ERROR(read_optional(j, "gold_answer", d.gold_answer, w));
  NL2SQL_RETURN_IF_ERROR(read_optional(j, "model_agrees_with_gold", d.model_agrees_with_gold, w));
  return d;
}
json duel_json(const Duel& d) {
  json j = {{"a", d.a}, {"b", d.b}};
  write_optional(j, "outcome", d.outcome);
  write_optional(j, "draw", d.draw);
  write_optional(j, "why", d.why);
  if (!d.lineage.empty()) {
    json notes = json::object();
    for (const auto& [side, n] : d.lineage) {
      json note = json::object();
      write_optional(note, "over_approximated", n.over_approximated);
      write_optional(note, "sampled", n.sampled);
      notes[side] = std::move(note);
    }
    j["lineage"] = std::move(notes);
  }
  if (d.instance) j["instance"] = instance_json(*d.instance);
  write_list(j, "model_answers", d.model_answers, answer_json);
  write_optional(j, "majority", d.majority);
  write_optional(j, "gold_answer", d.gold_answer);
  write_optional(j, "model_agrees_with_gold", d.model_agrees_with_gold);
  return j;
}

Result<DuelExplanation> duels_from_json(const json& j, const std::string& w) {
  NL2SQL_RETURN_IF_ERROR(known_keys_only(j, {"scores", "decisions", "model_pairs", "pairs_answered_by_same_sql",
                                             "pairs_over_cap", "duels", "decided_by", "note", "clusters"},
                                         w));
  DuelExplanation e;
  NL2SQL_RETURN_IF_ERROR(read_optional(j, "scores", e.scores, w));
  NL2SQL_RETURN_IF_ERROR(read_list(j, "decisions", e.decisions, w, decision_from_json));
  NL2SQL_RETURN_IF_ERROR(read_optional(j, "model_pairs", e.model_pairs, w));
  NL2SQL_RETURN_IF_ERROR(read_optional(j, "pairs_answered_by_same_sql", e.pairs_answered_by_same_sql, w));
  NL2SQL_RETURN_IF_ERROR(read_optional(j, "pairs_over_cap", e.pairs_over_cap, w));
  NL2SQL_RETURN_IF_ERROR(read_list(j, "duels", e.duels, w, duel_from_json));
  NL2SQL_RETURN_IF_ERROR(read_optional(j, "decided_by", e.decided_by, w));
  NL2SQL_RETURN_IF_ERROR(read_optional(j, "note", e.note, w));
  NL2SQL_RETURN_IF_ERROR(read_list(j, "clusters", e.clusters, w, cluster_from_json));
  return e;
}
json duels_json(const DuelExplanation& e) {
  json j = json::object();
  write_optional(j, "scores", e.scores);
  write_list(j, "decisions", e.decisions, decision_json);
  write_optional(j, "model_pairs", e.model_pairs);
  write_optional(j, "pairs_answered_by_same_sql", e.pairs_answered_by_same_sql);
  write_optional(j, "pairs_over_cap", e.pairs_over_cap);
  write_list(j, "duels", e.duels, duel_json);
  write_optional(j, "decided_by", e.decided_by);
  write_optional(j, "note", e.note);
  write_list(j, "clusters", e.clusters, cluster_json);
  return j;
}

// ---- scores ----

Result<ScoreExplanation::Kept> kept_from_json(const json& j, const std::string& w) {
  NL2SQL_RETURN_IF_ERROR(known_keys_only(j, {"candidate", "confidence"}, w));
  ScoreExplanation::Kept k;
  NL2SQL_RETURN_IF_ERROR(read_key(j, "candidate", k.candidate, w));
  NL2SQL_RETURN_IF_ERROR(read_key(j, "confidence", k.confidence, w));
  return k;
}

Result<ScoreExplanation::Pair> pair_from_json(const json& j, const std::string& w) {
  NL2SQL_RETURN_IF_ERROR(known_keys_only(j, {"a", "b", "votes", "a_win_rate"}, w));
  ScoreExplanation::Pair p;
  NL2SQL_RETURN_IF_ERROR(read_key(j, "a", p.a, w));
  NL2SQL_RETURN_IF_ERROR(read_key(j, "b", p.b, w));
  std::optional<std::vector<AskAnswer>> votes;
  NL2SQL_RETURN_IF_ERROR(read_list(j, "votes", votes, w, answer_from_json));
  if (votes) p.votes = std::move(*votes);
  NL2SQL_RETURN_IF_ERROR(read_key(j, "a_win_rate", p.a_win_rate, w));
  return p;
}

Result<ScoreExplanation> scores_from_json(const json& j, const std::string& w) {
  NL2SQL_RETURN_IF_ERROR(known_keys_only(
      j, {"note", "decided_by", "kept", "groups", "non_empty_results_only", "pairs", "scores"}, w));
  ScoreExplanation e;
  NL2SQL_RETURN_IF_ERROR(read_optional(j, "note", e.note, w));
  NL2SQL_RETURN_IF_ERROR(read_optional(j, "decided_by", e.decided_by, w));
  NL2SQL_RETURN_IF_ERROR(read_list(j, "kept", e.kept, w, kept_from_json));
  NL2SQL_RETURN_IF_ERROR(read_optional(j, "groups", e.groups, w));
  NL2SQL_RETURN_IF_ERROR(read_optional(j, "non_empty_results_only", e.non_empty_results_only, w));
  NL2SQL_RETURN_IF_ERROR(read_list(j, "pairs", e.pairs, w, pair_from_json));
  NL2SQL_RETURN_IF_ERROR(read_optional(j, "scores", e.scores, w));
  return e;
}
json scores_json(const ScoreExplanation& e) {
  json j = json::object();
  write_optional(j, "note", e.note);
  write_optional(j, "decided_by", e.decided_by);
  write_list(j, "kept", e.kept, [](const ScoreExplanation::Kept& k) {
    return json{{"candidate", k.candidate}, {"confidence", k.confidence}};
  });
  write_optional(j, "groups", e.groups);
  write_optional(j, "non_empty_results_only", e.non_empty_results_only);
  write_list(j, "pairs", e.pairs, [](const ScoreExplanation::Pair& p) {
    json votes = json::array();
    for (const auto& v : p.votes) votes.push_back(answer_json(v));
    return json{{"a", p.a}, {"b", p.b}, {"votes", std::move(votes)}, {"a_win_rate", p.a_win_rate}};
  });
  write_optional(j, "scores", e.scores);
  return j;
}

// ---- rankings and outside ----

Result<RankingExplanation> ranking_from_json(const json& j, const std::string& w) {
  NL2SQL_RETURN_IF_ERROR(known_keys_only(j, {"ranking", "note", "fallback", "candidates"}, w));
  RankingExplanation e;
  NL2SQL_RETURN_IF_ERROR(read_key(j, "ranking", e.ranking, w));
  NL2SQL_RETURN_IF_ERROR(read_optional(j, "note", e.note, w));
  NL2SQL_RETURN_IF_ERROR(read_optional(j, "fallback", e.fallback, w));
  NL2SQL_RETURN_IF_ERROR(read_optional(j, "candidates", e.candidates, w));
  return e;
}
json ranking_json(const RankingExplanation& e) {
  json j = {{"ranking", e.ranking}};
  write_optional(j, "note", e.note);
  write_optional(j, "fallback", e.fallback);
  write_optional(j, "candidates", e.candidates);
  return j;
}

Result<OutsideExplanation> outside_from_json(const json& j, const std::string& w) {
  NL2SQL_RETURN_IF_ERROR(known_keys_only(j, {"program", "note", "chosen", "explanation"}, w));
  OutsideExplanation e;
  NL2SQL_RETURN_IF_ERROR(read_key(j, "program", e.program, w));
  NL2SQL_RETURN_IF_ERROR(read_optional(j, "note", e.note, w));
  NL2SQL_RETURN_IF_ERROR(read_optional(j, "chosen", e.chosen, w));
  if (auto it = j.find("explanation"); it != j.end()) e.explanation = *it;  // null kept as null
  return e;
}
json outside_json(const OutsideExplanation& e) {
  json j = {{"program", e.program}};
  write_optional(j, "note", e.note);
  write_optional(j, "chosen", e.chosen);
  if (e.explanation) j["explanation"] = *e.explanation;
  return j;
}

}  // namespace

json to_json(const AskAnswer& a) {
  if (a.error) return {{"error", *a.error}};
  if (a.unmatched) return {{"unmatched", *a.unmatched}};
  return a.said;
}

ExplanationFamily explanation_family(const std::string& selector) {
  static const std::map<std::string, ExplanationFamily> kFamilies = {
      {"self_consistency", ExplanationFamily::kVotes},     {"wma", ExplanationFamily::kVotes},
      {"rwma", ExplanationFamily::kVotes},                 {"naive_vote", ExplanationFamily::kVotes},
      {"alphasql_consistency", ExplanationFamily::kVotes}, {"alphasql_naive", ExplanationFamily::kVotes},
      {"tournament", ExplanationFamily::kDuels},           {"separating_instances", ExplanationFamily::kDuels},
      {"deepeye_selection", ExplanationFamily::kScores},   {"ranker", ExplanationFamily::kRankings}};
  auto it = kFamilies.find(selector);
  return it == kFamilies.end() ? ExplanationFamily::kOutside : it->second;
}

json to_json(const Explanation& e) {
  struct Writer {
    json operator()(std::monostate) const { return nullptr; }
    json operator()(const VoteExplanation& x) const { return votes_json(x); }
    json operator()(const DuelExplanation& x) const { return duels_json(x); }
    json operator()(const ScoreExplanation& x) const { return scores_json(x); }
    json operator()(const RankingExplanation& x) const { return ranking_json(x); }
    json operator()(const OutsideExplanation& x) const { return outside_json(x); }
  };
  return std::visit(Writer{}, e);
}

Result<Explanation> explanation_from_json(const json& j, const std::string& selector, const std::string& where) {
  if (j.is_null()) return Explanation{};
  const std::string w = where + ", explanation";
  if (!j.is_object()) return invalid_input(w + " must be an object or null");
  auto wrap = [](auto r) -> Result<Explanation> {
    if (!r) return r.status();
    return Explanation{std::move(*r)};
  };
  switch (explanation_family(selector)) {
    case ExplanationFamily::kVotes: return wrap(votes_from_json(j, w));
    case ExplanationFamily::kDuels: return wrap(duels_from_json(j, w));
    case ExplanationFamily::kScores: return wrap(scores_from_json(j, w));
    case ExplanationFamily::kRankings: return wrap(ranking_from_json(j, w));
    case ExplanationFamily::kOutside: return wrap(outside_from_json(j, w));
  }
  return internal_error("unknown explanation family");
}

const std::vector<Duel>& duels_of(const Explanation& e) {
  static const std::vector<Duel> kNone;
  const auto* d = std::get_if<DuelExplanation>(&e);
  return d && d->duels ? *d->duels : kNone;
}

}  // namespace nl2sql::select
