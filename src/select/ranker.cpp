// The ranker: one listwise ask over the cluster representatives.

#include "prompt_parts.h"
#include "selector_parts.h"

namespace nl2sql::select::detail {
namespace {

using json = nlohmann::json;

class Ranker : public Selector {
 public:
  Ranker(bool reps_only, llm::Client* client, llm::PromptTemplate tpl)
      : reps_only_(reps_only), client_(client), tpl_(std::move(tpl)) {}
  std::string name() const override { return "ranker"; }
  SelectorTraits traits() const override { return {.calls_model = true, .model_role = "rank", .uses_seed = true}; }

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
                 detail::result_preview(*c.result) + "\n";
    }
    auto req = base_request(in, llm::CallTask::kRank, 0);
    req.tag.generator = "ranker";
    req.tag.candidates = sqls;
    auto text = ask_model({client_, &tpl_, "rank", in.ask_memo.get()},
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

}  // namespace

std::unique_ptr<Selector> make_ranker(bool representatives_only, llm::Client* client, llm::PromptTemplate tpl) {
  return std::make_unique<Ranker>(representatives_only, client, std::move(tpl));
}

}  // namespace nl2sql::select::detail
