// AlphaSQL's consistency score, the first baseline of the separating-instance paper (§Baselines):
// candidates are grouped by their result on the database and the group with the highest score
// (its share of the grouped candidates) wins; its first candidate is the pick.
//
// As AlphaSQL's selection script does it:
// - results compare as sets of rows, each row an ordered tuple (ResultEquality::kExact);
// - only "valid" results are grouped: at least one row holding a non-NULL value; when no
//   candidate has one, every successful execution is grouped instead (empty results included);
// - a group is represented by its first member in pool order;
// - nothing executed: no pick (AlphaSQL answers "ERROR"), chosen = -1.
// Where we differ, and why: AlphaSQL breaks equal scores by measured execution time (faster
// first), then by first appearance. Wall-clock time differs between runs and is not kept when a
// result comes from the execution cache, so a rerun could pick differently; equal scores are
// broken by first appearance in the pool alone, which is what AlphaSQL's stable sort does when
// the times are equal. No model call; the seed plays no part.
#include "selector_parts.h"

namespace nl2sql::select::detail {
namespace {

using json = nlohmann::json;

class AlphaSqlConsistency : public Selector {
 public:
  std::string name() const override { return "alphasql_consistency"; }
  SelectorTraits traits() const override { return {}; }
  Result<Selection> select(const SelectionInput& in) const override {
    NL2SQL_RETURN_IF_ERROR(check_input(in));
    Selection s;
    s.selector = name();
    bool fallback = false;
    auto g = first_nonempty_groups(in, ResultEquality::kExact, has_non_null_row, fallback);
    size_t best = 0;
    for (size_t k = 1; k < g.groups.size(); ++k)
      if (g.groups[k].size() > g.groups[best].size()) best = k;  // ties: the first seen stays
    s.chosen = g.groups.empty() ? -1 : g.groups[best].front();
    json groups = json::array();
    for (const auto& members : g.groups) {
      json ids = json::array();
      for (int m : members) ids.push_back(in.candidates[static_cast<size_t>(m)].id);
      groups.push_back(
          {{"members", ids},
           {"score", static_cast<double>(members.size()) / static_cast<double>(g.total)}});
    }
    s.explanation = {{"groups", groups}, {"grouped", g.total}, {"valid_results_only", !fallback}};
    if (g.groups.empty()) s.explanation["note"] = "no candidate executed: no pick";
    return s;
  }
};

}  // namespace

std::unique_ptr<Selector> make_alphasql_consistency() {
  return std::make_unique<AlphaSqlConsistency>();
}

}  // namespace nl2sql::select::detail
