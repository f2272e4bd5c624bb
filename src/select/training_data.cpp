// Pairwise selector fine-tuning examples in the OpenAI chat JSONL format.
#include "nl2sql/select/training_data.h"

#include <algorithm>
#include <fstream>
#include <random>

#include <nlohmann/json.hpp>

#include "nl2sql/core/files.h"
#include "nl2sql/core/hash.h"
#include "nl2sql/llm/prompt_library.h"
#include "prompt_parts.h"

namespace nl2sql::select {

Result<std::vector<TrainingExample>> build_selector_training_data(
    const std::vector<TrainingQuestion>& questions, const TrainingOptions& options,
    const llm::PromptLibrary* prompts) {
  auto tpl = prompts ? prompts->load("select_pairwise") : llm::PromptLibrary::bundled().load("select_pairwise");
  if (!tpl.is_ok()) return tpl.status();
  std::vector<TrainingExample> out;
  for (const auto& q : questions) {
    std::vector<std::pair<size_t, size_t>> pairs;  // (correct, incorrect)
    for (size_t c = 0; c < q.candidates.size(); ++c) {
      const auto& good = q.candidates[c];
      if (!good.correct || good.cluster < 0) continue;
      for (size_t w = 0; w < q.candidates.size(); ++w) {
        const auto& bad = q.candidates[w];
        if (bad.correct || bad.cluster < 0 || bad.cluster == good.cluster) continue;
        pairs.emplace_back(c, w);
      }
    }
    // One pair per (correct cluster, incorrect cluster) is enough signal; keep the first
    // candidate of each cluster pair so near-duplicates do not dominate.
    std::set<std::pair<int, int>> seen;
    std::vector<std::pair<size_t, size_t>> distinct;
    for (const auto& [c, w] : pairs)
      if (seen.insert({q.candidates[c].cluster, q.candidates[w].cluster}).second) distinct.emplace_back(c, w);
    core::KeyHasher h;
    h.add(static_cast<int64_t>(options.seed)).add("selector_data").add(q.question_id);
    std::mt19937_64 rng(h.seed());
    std::shuffle(distinct.begin(), distinct.end(), rng);
    if (options.max_pairs_per_question > 0 && distinct.size() > options.max_pairs_per_question)
      distinct.resize(options.max_pairs_per_question);
    for (const auto& [c, w] : distinct) {
      const bool correct_first = (rng() & 1) == 0;
      const auto& a = q.candidates[correct_first ? c : w];
      const auto& b = q.candidates[correct_first ? w : c];
      detail::PairPrompt pair;
      pair.question = q.question;
      pair.evidence = q.evidence;
      pair.schema = q.schema;
      pair.sql_schema = q.sql_schema;
      pair.metadata = q.metadata;
      pair.sql_a = a.sql;
      pair.result_a = a.result.get();
      pair.sql_b = b.sql;
      pair.result_b = b.result.get();
      auto user = tpl->render(detail::pair_prompt_values(pair));
      if (!user.is_ok()) return user.status().with_context("question " + q.question_id);
      const std::string label = correct_first ? "A" : "B";
      const std::string reason = "Candidate " + label + " answers the question as asked; the other " +
                                 "query returns a different result.";
      nlohmann::json line = {
          {"messages",
           {{{"role", "system"}, {"content", detail::kSystemPrompt}},
            {{"role", "user"}, {"content", *user}},
            {{"role", "assistant"}, {"content", detail::pairwise_answer(label, reason)}}}}};
      out.push_back({q.question_id, label, line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)});
    }
  }
  return out;
}

Status write_training_jsonl(const std::vector<TrainingExample>& examples,
                            const std::filesystem::path& out) {
  std::string text;
  for (const auto& e : examples) text += e.jsonl + "\n";
  return core::write_file_atomic(out, text);
}

}  // namespace nl2sql::select
