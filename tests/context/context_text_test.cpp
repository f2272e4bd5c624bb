// One question's context as `nl2sql retrieve` shows it (context_to_text), and which settings
// make the context stage call a model.
#include <gtest/gtest.h>

#include "nl2sql/context/question_context.h"

namespace nl2sql::context {
namespace {

QuestionContext sample_context() {
  QuestionContext ctx;
  ctx.question_id = "q1";
  ctx.db_id = "d";
  ctx.retrieval.keywords = {{"Bohemia", "capitalized"}, {"east", "llm"}};
  ctx.retrieval.values = {{"district", "region", "east Bohemia", 0.875, "Bohemia", 7}};
  ctx.retrieval.columns = {{"district", "region", 0.5, "region", "name"}};
  ctx.retrieval.candidates_scored = 12;
  ctx.llm_keywords = {"bohemia", "east"};
  ctx.selected_columns = {"district.region", "district.id"};
  ctx.join_keys = {"district.id"};
  ctx.errors = {"a call failed"};
  return ctx;
}

TEST(ContextText, ShowsTheQuestionKeywordsValuesColumnsAndSelection) {
  data::Task task;
  task.question_id = "q1";
  task.db_id = "d";
  task.question = "How many in east Bohemia?";
  task.evidence = "east Bohemia is a region";
  ContextSettings settings;
  settings.llm_keywords = true;
  settings.column_filter = true;
  IndexStatus index;
  index.action = "fresh";
  index.file = "d.vidx";
  const QuestionContext ctx = sample_context();
  const std::string text = context_to_text(
      {.task = task, .context = ctx, .settings = settings, .index = index, .index_load_ms = 1.5, .context_ms = 2.25});
  EXPECT_EQ(text,
            "question q1 (d): How many in east Bohemia?\n"
            "evidence: east Bohemia is a region\n"
            "index: 0 values, fresh (d.vidx), opened in 1.50 ms\n"
            "keywords (2): \"Bohemia\"[capitalized] \"east\"[llm]\n"
            "  model keywords: 2 (1 new, 1 also found by the heuristic: bohemia)\n"
            "matched values (1, 12 edit distances, context 2.25 ms without the index opening):\n"
            "  district.region = 'east Bohemia' (0.875, keyword \"Bohemia\")\n"
            "matched columns (1):\n"
            "  district.region (0.500, name ~ \"region\")\n"
            "selected columns (2): district.id[join key] district.region\n"
            "error: a call failed\n");
}

TEST(ContextText, LeavesOutWhatTheSettingsDoNotTurnOn) {
  data::Task task;
  task.question_id = "q1";
  task.db_id = "d";
  task.question = "Q?";
  ContextSettings settings;
  IndexStatus index;
  QuestionContext ctx = sample_context();
  ctx.errors.clear();
  const std::string text = context_to_text({.task = task, .context = ctx, .settings = settings, .index = index});
  EXPECT_EQ(text.find("evidence:"), std::string::npos);
  EXPECT_EQ(text.find("model keywords"), std::string::npos);
  EXPECT_EQ(text.find("selected columns"), std::string::npos);
  EXPECT_EQ(text.find("error:"), std::string::npos);
}

TEST(ContextSettingsTest, CallsAModelWhenAModelFeatureIsOn) {
  ContextSettings s;
  EXPECT_FALSE(s.calls_a_model());
  s.metadata = true;  // statistics only: no model
  EXPECT_FALSE(s.calls_a_model());
  for (int feature = 0; feature < 4; ++feature) {
    ContextSettings on;
    if (feature == 0) on.llm_keywords = true;
    if (feature == 1) on.column_filter = true;
    if (feature == 2) on.describe = true;
    if (feature == 3) on.embeddings.profile = "emb";
    EXPECT_TRUE(on.calls_a_model()) << feature;
  }
}

}  // namespace
}  // namespace nl2sql::context
