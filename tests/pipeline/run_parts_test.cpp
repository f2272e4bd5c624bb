// The units of pipeline::run that hold logic of their own (run_parts.h): the scheduling rank of a
// waiting model request, and the carrying of spend no stored record holds into the run usage.
#include <gtest/gtest.h>

#include "nl2sql/run/run_data.h"
#include "nl2sql/run/run_store.h"
#include "pipeline/run_parts.h"
#include "support/test_env.h"

namespace nl2sql::pipeline {
namespace {

using nlohmann::json;

TEST(SlotRank, OlderQuestionsFirstWithAHeadStartForLongerChains) {
  // Same stage: run order decides.
  EXPECT_LT(slot_rank(3, "generate"), slot_rank(4, "generate"));
  // A younger question's keywords (six dependent calls after them) go before an older
  // question's last selection call, within the head start (4 positions per step).
  EXPECT_LT(slot_rank(10, "keywords"), slot_rank(0, "select"));
  // … but not past an older question by more than the head start of the steps between them.
  EXPECT_GT(slot_rank(30, "keywords"), slot_rank(0, "select"));
  // Fix rounds have two calls after them, generation three (a stage not named counts as generation).
  EXPECT_EQ(slot_rank(5, "fix") - slot_rank(5, "dc"), 4);
  EXPECT_EQ(slot_rank(5, "os_examples_general"), slot_rank(5, "generate") - 4);
}


run::QuestionRecord record_with(const std::string& id, std::map<std::string, run::StageUsage> usage) {
  run::QuestionRecord r;
  r.question_id = id;
  r.usage = std::move(usage);
  return r;
}

int64_t run_calls(run::RunStore& store, const std::string& stage) {
  auto meta = store.get_meta(run::kRunUsageKey);
  if (!meta.is_ok() || !*meta || !(**meta).contains(stage)) return 0;
  return (**meta)[stage].value("calls", int64_t{0});
}

TEST(UsageCarry, CarriesWhatNoRecordHoldsAndSettlesTheProvisionalPart) {
  testing::TempDir dir;
  auto store = run::RunStore::open(dir.path(), true);
  ASSERT_TRUE(store.is_ok()) << store.status().message();
  UsageCarry carry(**store);
  run::StageUsage gen{.calls = 4, .prompt_tokens = 400, .completion_tokens = 40, .cost_usd = 0.5};
  run::StageUsage sel{.calls = 2, .prompt_tokens = 100, .completion_tokens = 10, .cost_usd = 0.1};
  run::StageUsage curves{.calls = 1, .prompt_tokens = 50, .completion_tokens = 5};
  // An interrupted question: generation came from an earlier run's store (counted there), its
  // selection ran now and was stored (provisional), its curves (the select stage too) likewise.
  auto rec = record_with("q1", {{"generate", gen}, {"select", sel}, {"curves", curves}});
  carry.carry(rec, [](const std::string& st) { return st == "generate"; },
              [](const std::string& st) { return st == "select"; });
  EXPECT_EQ(run_calls(**store, "generate"), 0);
  EXPECT_EQ(run_calls(**store, "select"), 2);
  EXPECT_EQ(run_calls(**store, "curves"), 1);  // kept under the record's own stage name
  auto marks = (**store).get_meta(run::kProvisionalUsageKey);
  ASSERT_TRUE(marks.is_ok() && *marks);
  EXPECT_EQ((**marks)["q1"]["select"]["calls"], 2);
  EXPECT_EQ((**marks)["q1"]["curves"]["calls"], 1);
  // The question finishes later: its record counts those stages; the run usage gives them back.
  carry.settle("q1");
  EXPECT_EQ(run_calls(**store, "select"), 0);
  EXPECT_EQ(run_calls(**store, "curves"), 0);
  marks = (**store).get_meta(run::kProvisionalUsageKey);
  ASSERT_TRUE(marks.is_ok() && *marks);
  EXPECT_FALSE((**marks).contains("q1"));
  // Settling a question with nothing provisional changes nothing.
  carry.settle("q2");
  EXPECT_EQ(run_calls(**store, "select"), 0);
}

}  // namespace
}  // namespace nl2sql::pipeline
