// Expert votes: weighted majority (WMA), randomized (RWMA) and naive votes over generators or profiles.
#include <map>
#include <random>

#include "selector_parts.h"

namespace nl2sql::select::detail {
namespace {

using json = nlohmann::json;

class ExpertVote : public Selector {
 public:
  ExpertVote(VoteKind kind, bool by_profile, std::shared_ptr<WeightStore> weights)
      : kind_(kind), by_profile_(by_profile), weights_(std::move(weights)) {}
  std::string name() const override {
    return kind_ == VoteKind::kWma ? "wma" : kind_ == VoteKind::kRwma ? "rwma" : "naive_vote";
  }
  SelectorTraits traits() const override {
    return {.uses_expert_weights = true, .uses_seed = kind_ == VoteKind::kRwma};  // rwma draws
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

}  // namespace

std::unique_ptr<Selector> make_expert_vote(VoteKind kind, bool by_profile, std::shared_ptr<WeightStore> weights) {
  return std::make_unique<ExpertVote>(kind, by_profile, std::move(weights));
}

}  // namespace nl2sql::select::detail
