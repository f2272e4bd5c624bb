// Self-consistency: the representative of the largest result cluster.
#include "selector_parts.h"

namespace nl2sql::select::detail {
namespace {

using json = nlohmann::json;

class SelfConsistency : public Selector {
 public:
  explicit SelfConsistency(ResultEquality eq) : eq_(eq) {}
  std::string name() const override { return "self_consistency"; }
  SelectorTraits traits() const override { return {}; }
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

}  // namespace

std::unique_ptr<Selector> make_self_consistency(ResultEquality eq) { return std::make_unique<SelfConsistency>(eq); }

}  // namespace nl2sql::select::detail
