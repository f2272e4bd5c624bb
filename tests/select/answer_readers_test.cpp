// The selectors' readers of model answers over reasoning-bearing answers: the ranker takes the
// last ranking outside the reasoning (not the draft), the pairwise judge the final winner.
#include <gtest/gtest.h>

#include "nl2sql/llm/answer.h"
#include "select/prompt_parts.h"

namespace nl2sql::select::detail {
namespace {

TEST(ReadRanking, TakesTheLastRankingNotTheDraft) {
  auto r = read_ranking("First pass: {\"ranking\": [0, 1, 2]}\nCandidate 2 handles NULLs.\n```json\n{\"ranking\": [2, 0, 1]}\n```", 3);
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  EXPECT_EQ(*r, (std::vector<int64_t>{2, 0, 1}));
  auto thought = read_ranking("<think>{\"ranking\": [1, 0]}</think>\n{\"ranking\": [0, 1]}", 2);
  ASSERT_TRUE(thought.is_ok());
  EXPECT_EQ(*thought, (std::vector<int64_t>{0, 1}));
  auto lone = read_ranking("{\"ranking\": [1, 0]}\n</think>\n{'ranking': [0, 1, 1, 7,]}", 2);
  ASSERT_TRUE(lone.is_ok()) << lone.status().message();
  EXPECT_EQ(*lone, (std::vector<int64_t>{0, 1}));  // repeats and out-of-range numbers dropped
  EXPECT_FALSE(read_ranking("<think>{\"ranking\": [1, 0]}</think>They are equal.", 2).is_ok());
  EXPECT_FALSE(read_ranking("{\"ranking\": [5]}", 2).is_ok());
}

TEST(ReadPairwise, TheTrainingFormatReadsBack) {
  EXPECT_EQ(*llm::read_pairwise_winner(pairwise_answer("B", "B keeps the filter.")), "B");
  EXPECT_EQ(*llm::read_pairwise_winner("<think>" + pairwise_answer("A", "draft") + "</think>" +
                                       pairwise_answer("B", "final")), "B");
}

}  // namespace
}  // namespace nl2sql::select::detail
