// Explanation: why a selector chose what it chose, as a run keeps it (a selection's
// "explanation" in the stored select stage and in the question record). One struct per family of
// selectors, each field written only when its selector fills it:
//   votes     self_consistency, wma, rwma, naive_vote, alphasql_consistency, alphasql_naive —
//             result clusters or groups, the experts' weights and masses, the model's picks;
//   duels     tournament, separating_instances — pairwise decisions or separating-instance duels,
//             and the score each candidate earned in them;
//   scores    deepeye_selection — the kept groups' confidence, the pairwise votes and the scores;
//   rankings  ranker — the model's ranking of the representatives;
//   outside   a selector run by an outside program (select/external.h): its answer's explanation
//             is the program's, not ours, so it stays an opaque JSON value in a typed wrapper.
// A selector still builds its explanation as JSON (Selection::explanation);
// explanation_from_json reads it into its family's struct, refusing a key the family does not
// declare — so a selector that starts writing a new key fails its round-trip test
// (tests/select/explanation_test.cpp) until the struct and its reader know it. to_json writes it
// back byte for byte. Plain values; the functions are pure and thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "nl2sql/core/status.h"

namespace nl2sql::select {

// A result cluster: its members' ids and the one that represents it.
struct ClusterEntry {
  std::vector<std::string> members;
  std::string representative;
};

// One answer of a model asked several times: what it said (a candidate id, "A" / "B", rendered
// rows), or why it gave none — an error, or SQL that is none of the listed queries. Written as
// the string said, {"error": …} or {"unmatched": …}.
struct AskAnswer {
  std::string said;
  std::optional<std::string> error, unmatched;
};
nlohmann::json to_json(const AskAnswer& answer);

struct VoteExplanation {
  std::optional<std::string> note, equality, experts, decided_by;
  std::optional<std::vector<ClusterEntry>> clusters;
  std::optional<int64_t> executable, chosen_cluster, grouped, unmatched;
  std::optional<std::map<std::string, double>> weights;  // by expert
  std::optional<std::vector<double>> cluster_mass;       // by cluster
  std::optional<double> draw;                            // rwma's draw on the masses
  struct Group {
    std::vector<std::string> members;
    double score = 0;
  };
  std::optional<std::vector<Group>> groups;           // alphasql_consistency
  std::optional<bool> valid_results_only;
  std::optional<std::vector<std::string>> listed;     // alphasql_naive: the queries shown
  std::optional<std::vector<AskAnswer>> answers;
};

// The tournament's decision on one ordered pair.
struct PairDecision {
  std::string a, b, by;  // by: model | equal_results | same_sql_pair_asked
  std::optional<std::string> winner, error;
};

// A separating instance D′ as the duel keeps it (SeparatingInstance::to_json).
struct InstanceRecord {
  bool found = false;
  int64_t attempts = 0;
  std::optional<int64_t> rows, rows_before_shrink, too_large_rows;
  std::optional<bool> on_sample, timed_out;
  // D′'s rows by table (InstanceTables::to_json): database values of any type, shown in the
  // report and never read back, kept as written.
  std::optional<nlohmann::json> tables;
  std::optional<std::string> answer_a, answer_b, failure;
};

// One separating-instance duel between two candidates.
struct Duel {
  std::string a, b;
  std::optional<std::string> outcome, draw, why;  // outcome a | b | draw; draw: its kind
  struct LineageNote {
    std::optional<std::vector<std::string>> over_approximated, sampled;
  };
  std::map<std::string, LineageNote> lineage;  // by side ("a", "b"); written when not empty
  std::optional<InstanceRecord> instance;
  std::optional<std::vector<AskAnswer>> model_answers;
  std::optional<std::string> majority, gold_answer;
  std::optional<bool> model_agrees_with_gold;
};

struct DuelExplanation {
  std::optional<std::map<std::string, double>> scores;  // by candidate id
  std::optional<std::vector<PairDecision>> decisions;   // tournament
  std::optional<int64_t> model_pairs, pairs_answered_by_same_sql, pairs_over_cap;
  std::optional<std::vector<Duel>> duels;               // separating_instances
  std::optional<std::string> decided_by, note;
  std::optional<std::vector<ClusterEntry>> clusters;
};

struct ScoreExplanation {
  std::optional<std::string> note, decided_by;
  struct Kept {
    std::string candidate;
    double confidence = 0;
  };
  std::optional<std::vector<Kept>> kept;
  std::optional<int64_t> groups;
  std::optional<bool> non_empty_results_only;
  struct Pair {
    std::string a, b;
    std::vector<AskAnswer> votes;
    double a_win_rate = 0;
  };
  std::optional<std::vector<Pair>> pairs;
  std::optional<std::map<std::string, double>> scores;
};

struct RankingExplanation {
  std::vector<int64_t> ranking;  // positions in `candidates`, best first
  std::optional<std::string> note, fallback;
  std::optional<std::vector<std::string>> candidates;
};

// Not ours: the outside program's label and pick, and its explanation as it answered it.
struct OutsideExplanation {
  std::string program;
  std::optional<std::string> note, chosen;
  std::optional<nlohmann::json> explanation;  // the program's own, opaque (null when it gave none)
};

enum class ExplanationFamily { kVotes, kDuels, kScores, kRankings, kOutside };
// The family of a selector by its name in a run (select.method / run.selectors); a name that is
// not a built-in method is an outside selector's label.
ExplanationFamily explanation_family(const std::string& selector);

// monostate: no explanation (written as null).
using Explanation = std::variant<std::monostate, VoteExplanation, DuelExplanation, ScoreExplanation,
                                 RankingExplanation, OutsideExplanation>;

nlohmann::json to_json(const Explanation& explanation);
// `selector` picks the family; `where` names the selection in errors.
Result<Explanation> explanation_from_json(const nlohmann::json& json, const std::string& selector,
                                          const std::string& where);

// The separating-instance duels of an explanation (empty for other families).
const std::vector<Duel>& duels_of(const Explanation& explanation);

}  // namespace nl2sql::select
