// DeepEye-SQL's consistency-aware (confidence-aware) selection, the third baseline of the
// separating-instance paper (§Baselines):
// 1. Candidates with a non-empty result are grouped by result (rows as ordered tuples, the
//    result a set of rows: ResultEquality::kExact); when none has rows, every successful
//    execution is grouped. A group's confidence is its share of the grouped candidates; it is
//    represented by its first member in pool order. Groups are ranked by confidence, and the
//    `top_k` first (DeepEye-SQL's filter_top_k_sql, 2) are kept.
// 2. One group: its representative. Shortcut: when the first group's confidence is at least
//    `threshold` (DeepEye-SQL's 0.6), its representative, without a call.
// 3. Otherwise every pair (i < j) of kept groups is adjudicated by the model `votes` times with
//    the unbalanced prompt (prompts/select_deepeye_pair.txt): A is the more confident query and
//    is the default unless B is clearly better. W[i][j] is the share of usable votes that chose
//    i over j; a candidate's score is (Σ_j W[i][j] / top_k) × (its confidence / the kept groups'
//    total confidence); the highest score wins, equal scores going to the more confident group.
// 4. Nothing executed: the first candidate with SQL in pool order (DeepEye-SQL's fallback).
// Where DeepEye-SQL is silent or we differ, and why:
// - equal confidences are ordered by first appearance instead of by measured execution time
//   (wall-clock time is not reproducible and not kept for cached results);
// - votes: 3, as the paper applies its three-sample majority to the baselines (DeepEye-SQL
//   samples 5); sampled at `temperature` (0.7) with seeds of their own, once at temperature 0;
// - a vote the reader cannot use is left out of W's mean (DeepEye-SQL re-asks until it has its
//   budget); a pair without any usable vote scores ½ to each side;
// - the answer is a JSON {"winner": "A"|"B"} (DeepEye-SQL reads <result>A</result>), so the
//   project's pairwise reader (llm::read_pairwise_winner) reads it;
// - the prompt's schema is the tables and columns the two queries read, where DeepEye-SQL shows
//   the schema its linking kept.
// Scores are compared with a relative tolerance of 1e-12, so products equal in exact arithmetic
// (2/3 · 1/3 against 1/3 · 2/3) tie as they should.
#include <algorithm>
#include <cmath>

#include "nl2sql/llm/answer.h"
#include "prompt_parts.h"
#include "selector_parts.h"

namespace nl2sql::select::detail {
namespace {

using json = nlohmann::json;

class DeepEyeSelection : public Selector {
 public:
  DeepEyeSelection(DeepEyeOptions o, llm::Client* client, llm::PromptTemplate tpl)
      : o_(o), client_(client), tpl_(std::move(tpl)) {}
  std::string name() const override { return "deepeye_selection"; }
  SelectorTraits traits() const override { return {.calls_model = true, .model_role = "select", .uses_seed = true}; }

  Result<Selection> select(const SelectionInput& in) const override {
    NL2SQL_RETURN_IF_ERROR(check_input(in));
    Selection s;
    s.selector = name();
    bool fallback = false;
    auto g = first_nonempty_groups(
        in, ResultEquality::kExact, [](const db::ExecutionResult& r) { return r.row_count() > 0; },
        fallback);
    if (g.groups.empty()) {
      s.chosen = -1;
      for (size_t i = 0; i < in.candidates.size() && s.chosen < 0; ++i)
        if (!in.candidates[i].sql.empty()) s.chosen = static_cast<int>(i);
      s.explanation = {{"note", "no candidate executed: the first candidate"}};
      return s;
    }
    std::stable_sort(g.groups.begin(), g.groups.end(),
                     [](const auto& a, const auto& b) { return a.size() > b.size(); });
    const size_t k = std::min(g.groups.size(), static_cast<size_t>(std::max<int64_t>(1, o_.top_k)));
    std::vector<int> top;
    std::vector<double> confidence;
    json kept = json::array();
    for (size_t i = 0; i < k; ++i) {
      top.push_back(g.groups[i].front());
      confidence.push_back(static_cast<double>(g.groups[i].size()) / static_cast<double>(g.total));
      kept.push_back({{"candidate", in.candidates[static_cast<size_t>(top.back())].id},
                      {"confidence", confidence.back()}});
    }
    s.chosen = top.front();
    s.explanation = {
        {"kept", kept}, {"groups", g.groups.size()}, {"non_empty_results_only", !fallback}};
    if (k == 1) {
      s.explanation["decided_by"] = "one group";
      return s;
    }
    if (confidence.front() >= o_.threshold) {
      s.explanation["decided_by"] = "shortcut";
      return s;
    }
    decide_pairwise(in, top, confidence, s);
    return s;
  }

 private:
  using WinMatrix = std::vector<std::vector<double>>;

  // Step 3: every pair of kept groups adjudicated `votes` times; the highest score wins.
  void decide_pairwise(const SelectionInput& in, const std::vector<int>& top, const std::vector<double>& confidence,
                       Selection& s) const {
    const size_t k = top.size();
    const int64_t votes = o_.temperature == 0 ? 1 : o_.votes;
    // Every pair's votes are independent of each other: asked together, counted in pair order.
    const auto texts = ask_all({client_, &tpl_, "select", in.ask_memo.get()}, pair_asks(in, top, votes), s.calls);
    WinMatrix win(k, std::vector<double>(k, 0.0));
    json pairs = count_votes(in, top, votes, texts, win);
    double total_confidence = 0;
    for (double c : confidence) total_confidence += c;
    std::vector<double> score(k, 0.0);
    size_t best = 0;
    json scores = json::object();
    for (size_t i = 0; i < k; ++i) {
      double row = 0;
      for (size_t j = 0; j < k; ++j) row += win[i][j];
      score[i] = row / static_cast<double>(k) * (confidence[i] / total_confidence);
      scores[in.candidates[static_cast<size_t>(top[i])].id] = score[i];
      if (score[i] > score[best] &&
          std::fabs(score[i] - score[best]) > 1e-12 * std::max(score[i], score[best]))
        best = i;
    }
    s.chosen = top[best];
    s.explanation["decided_by"] = "pairwise";
    s.explanation["pairs"] = pairs;
    s.explanation["scores"] = scores;
  }

  // The votes of every pair (i < j) of kept groups' representatives, in pair order.
  std::vector<Ask> pair_asks(const SelectionInput& in, const std::vector<int>& top, int64_t votes) const {
    const size_t k = top.size();
    std::vector<Ask> to_ask;
    int64_t pair_index = 0;
    for (size_t i = 0; i < k; ++i) {
      for (size_t j = i + 1; j < k; ++j, ++pair_index) {
        const auto& a = in.candidates[static_cast<size_t>(top[i])];
        const auto& b = in.candidates[static_cast<size_t>(top[j])];
        const std::string schema = schema_for(in, schemas_, {a.sql, b.sql});
        for (int64_t v = 0; v < votes; ++v) {
          auto req = base_request(in, llm::CallTask::kSelectPair, pair_index * votes + v);
          req.tag.generator = name();
          req.tag.candidates = {a.sql, b.sql};
          req.temperature = o_.temperature;
          if (votes > 1) req.seed = ask_seed(in, name(), pair_index * votes + v);
          to_ask.push_back({detail::pairwise_values(in.question->question, in.question->evidence, schema, a.sql,
                                                    detail::result_preview(*a.result), b.sql,
                                                    detail::result_preview(*b.result)),
                            std::move(req)});
        }
      }
    }
    return to_ask;
  }

  // W from the model's answers (a pair without a usable vote: ½ each way); the pairs' trace.
  json count_votes(const SelectionInput& in, const std::vector<int>& top, int64_t votes,
                   const std::vector<Result<std::string>>& texts, WinMatrix& win) const {
    const size_t k = top.size();
    json pairs = json::array();
    size_t next_text = 0;
    for (size_t i = 0; i < k; ++i) {
      for (size_t j = i + 1; j < k; ++j) {
        const auto& a = in.candidates[static_cast<size_t>(top[i])];
        const auto& b = in.candidates[static_cast<size_t>(top[j])];
        int64_t for_a = 0, for_b = 0;
        json said = json::array();
        for (int64_t v = 0; v < votes; ++v) {
          const auto& text = texts[next_text++];
          if (!text.is_ok()) {
            said.push_back({{"error", text.status().message()}});
            continue;
          }
          auto w = llm::read_pairwise_winner(*text);
          if (!w.is_ok()) {
            client_->accounting().record_parse_failure("select", qid(in), "pairwise");
            said.push_back({{"error", w.status().message()}});
            continue;
          }
          (*w == "A" ? for_a : for_b) += 1;
          said.push_back(*w);
        }
        const int64_t usable = for_a + for_b;
        win[i][j] = usable ? static_cast<double>(for_a) / static_cast<double>(usable) : 0.5;
        win[j][i] = usable ? static_cast<double>(for_b) / static_cast<double>(usable) : 0.5;
        pairs.push_back({{"a", a.id}, {"b", b.id}, {"votes", said}, {"a_win_rate", win[i][j]}});
      }
    }
    return pairs;
  }

 private:
  DeepEyeOptions o_;
  llm::Client* client_;
  llm::PromptTemplate tpl_;
  SchemaCache schemas_;
};

}  // namespace

std::unique_ptr<Selector> make_deepeye_selection(DeepEyeOptions o, llm::Client* client,
                                                 llm::PromptTemplate tpl) {
  return std::make_unique<DeepEyeSelection>(o, client, std::move(tpl));
}

}  // namespace nl2sql::select::detail
