// The naive selection of the unofficial AlphaSQL implementation, the second baseline of the
// separating-instance paper (§Baselines, prompt in its Appendix C): the model is shown the
// question, the hint, the schema and one representative per result, and names the SQL that is
// the first to satisfy a five-point checklist (the first one when none does). The paper asks
// three times and takes the majority, as for its own method.
//
// As the paper's script does it:
// - representatives: candidates with a valid result (a row holding a non-NULL value), grouped
//   by result with rows compared as sets of values and NULL-only rows dropped (the paper's
//   answer comparison, ResultEquality::kRelaxed), largest group first, equal sizes in order of
//   first appearance; a single group is the pick without a call;
// - the prompt shows the whole schema (prompts/select_naive.txt, the checklist in our words);
// - the answer is a JSON object whose "sql" names the choice; the votes' mode wins, equal counts
//   going to the SQL voted first (Python's statistics.mode); no usable vote: the first listed.
// Where the paper is silent or we differ, and why:
// - the representative of a group is the shared tie-break (generator order, shortest SQL, pool
//   order) instead of the fastest query: execution time is not reproducible;
// - the model may write back SQL that is none of the listed queries (the paper's script then
//   evaluated what it wrote); a selector must pick a candidate, so an answer is matched to a
//   listed query with whitespace collapsed and a trailing semicolon dropped, and an answer that
//   matches none is no vote (counted in the explanation as "unmatched");
// - no valid result at all: every successful execution is grouped (the paper dropped such tasks);
//   nothing executed: the best-ranked candidate with SQL;
// - the asks are sampled at `temperature` (the paper's 0.7) with seeds of their own; at
//   temperature 0 the model is asked once.
#include <algorithm>
#include <cctype>

#include "nl2sql/context/schema_render.h"
#include "nl2sql/llm/answer.h"
#include "selector_parts.h"

namespace nl2sql::select::detail {
namespace {

using json = nlohmann::json;

// SQL compared as the model may copy it back: runs of whitespace as one space, no trailing ';'.
std::string sql_for_match(const std::string& sql) {
  std::string out;
  bool space = false;
  for (char ch : sql) {
    if (std::isspace(static_cast<unsigned char>(ch))) {
      space = !out.empty();
      continue;
    }
    if (space) out += ' ';
    space = false;
    out += ch;
  }
  while (!out.empty() && (out.back() == ';' || out.back() == ' ')) out.pop_back();
  return out;
}

class AlphaSqlNaive : public Selector {
 public:
  AlphaSqlNaive(NaiveOptions o, llm::Client* client, llm::PromptTemplate tpl)
      : o_(o), client_(client), tpl_(std::move(tpl)) {}
  std::string name() const override { return "alphasql_naive"; }
  SelectorTraits traits() const override { return {.calls_model = true, .model_role = "select", .uses_seed = true}; }

  Result<Selection> select(const SelectionInput& in) const override {
    NL2SQL_RETURN_IF_ERROR(check_input(in));
    Selection s;
    s.selector = name();
    bool fallback = false;
    auto g = first_nonempty_groups(in, ResultEquality::kRelaxed, has_non_null_row, fallback);
    if (g.groups.empty()) {
      s.chosen = first_ranked(in);
      s.explanation = {{"listed", json::array()}, {"note", "no candidate executed"}};
      return s;
    }
    std::stable_sort(g.groups.begin(), g.groups.end(),
                     [](const auto& a, const auto& b) { return a.size() > b.size(); });
    std::vector<int> listed;
    for (const auto& members : g.groups)
      listed.push_back(*std::min_element(members.begin(), members.end(), [&](int a, int b) {
        return candidate_rank(in.candidates, a, in.generator_order) <
               candidate_rank(in.candidates, b, in.generator_order);
      }));
    json listed_ids = json::array();
    for (int p : listed) listed_ids.push_back(in.candidates[static_cast<size_t>(p)].id);
    s.chosen = listed.front();
    if (listed.size() == 1) {
      s.explanation = {{"listed", listed_ids}, {"note", "one result: no call"}};
      return s;
    }
    std::string listing;
    std::vector<std::string> sqls;
    for (size_t k = 0; k < listed.size(); ++k) {
      const auto& c = in.candidates[static_cast<size_t>(listed[k])];
      sqls.push_back(c.sql);
      listing += "Candidate " + std::to_string(k + 1) + ":\n```sql\n" + c.sql + "\n```\n\n";
    }
    std::string schema = "(schema not available)";
    if (in.schema) {
      context::RenderOptions ro;
      ro.examples = 0;
      schema = context::render_schema(*in.schema, ro);
    }
    const int64_t asks = o_.temperature == 0 ? 1 : o_.asks;
    std::vector<int> votes;  // positions in `listed`, in the order the answers came
    json answers = json::array();
    int64_t unmatched = 0;
    std::vector<Ask> to_ask;  // the samples: independent, asked together
    for (int64_t k = 0; k < asks; ++k) {
      auto req = base_request(in, llm::CallTask::kChoose, k);
      req.tag.generator = name();
      req.tag.candidates = sqls;
      req.temperature = o_.temperature;
      if (asks > 1) req.seed = ask_seed(in, name(), k);
      to_ask.push_back({{{"question", in.question->question},
                         {"evidence", in.question->evidence.empty() ? "(none)" : in.question->evidence},
                         {"schema", schema},
                         {"candidates", listing}},
                        std::move(req)});
    }
    const auto texts = ask_all({client_, &tpl_, "select", in.ask_memo.get()}, std::move(to_ask), s.calls);
    for (const auto& text : texts) {
      if (!text.is_ok()) {
        answers.push_back({{"error", text.status().message()}});
        continue;
      }
      auto j = llm::read_json(*text, {llm::JsonShape::kObject, "sql"});
      if (!j.is_ok() || !(*j)["sql"].is_string()) {
        client_->accounting().record_parse_failure("select", qid(in), "choose");
        answers.push_back(
            {{"error", j.is_ok() ? "\"sql\" is not a string" : j.status().message()}});
        continue;
      }
      const std::string said = sql_for_match((*j)["sql"].get<std::string>());
      int at = -1;
      for (size_t p = 0; p < sqls.size() && at < 0; ++p)
        if (sql_for_match(sqls[p]) == said) at = static_cast<int>(p);
      if (at < 0) {
        ++unmatched;
        answers.push_back({{"unmatched", (*j)["sql"]}});
        continue;
      }
      votes.push_back(at);
      answers.push_back(in.candidates[static_cast<size_t>(listed[static_cast<size_t>(at)])].id);
    }
    // The mode; equal counts: the one voted first. No vote: the first listed.
    int pick = 0;
    size_t best_count = 0;
    for (int v : votes) {
      const auto count = static_cast<size_t>(std::count(votes.begin(), votes.end(), v));
      if (count > best_count) {
        best_count = count;
        pick = v;
      }
    }
    s.chosen = listed[static_cast<size_t>(pick)];
    s.explanation = {{"listed", listed_ids},
                     {"answers", answers},
                     {"unmatched", unmatched},
                     {"valid_results_only", !fallback},
                     {"decided_by", votes.empty() ? "no usable vote: the first listed" : "votes"}};
    return s;
  }

 private:
  NaiveOptions o_;
  llm::Client* client_;
  llm::PromptTemplate tpl_;
};

}  // namespace

std::unique_ptr<Selector> make_alphasql_naive(NaiveOptions o, llm::Client* client,
                                              llm::PromptTemplate tpl) {
  return std::make_unique<AlphaSqlNaive>(o, client, std::move(tpl));
}

}  // namespace nl2sql::select::detail
