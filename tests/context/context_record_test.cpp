// The context stage's record: what a QuestionContext keeps reads back to the same bytes and the
// same retrieval; a key it does not write (a renamed one) and wrong types are refused, named.
#include "nl2sql/context/context_record.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "nl2sql/context/question_context.h"

namespace nl2sql::context {
namespace {

using nlohmann::json;

QuestionContext full_context() {
  QuestionContext c;
  c.question_id = "12";
  c.db_id = "bank";
  c.retrieval.keywords = {{"east Bohemia", "quoted"}, {"accounts", "llm"}};
  c.retrieval.values = {{"district", "a3", "east Bohemia", 0.93, "east Bohemia", 7}};
  c.retrieval.columns = {{"account", "frequency", 0.85, "monthly", "description"}};
  c.selected_columns = {"account.frequency", "district.a3"};
  llm::LlmCallTrace call;
  call.stage = "keywords";
  call.template_name = "extract_keywords";
  call.prompt = "Question: …";
  call.response = "[\"accounts\"]";
  call.prompt_tokens = 40;
  call.cached_tokens = 8;
  call.temperature = 0.0;
  c.calls = {call};
  c.errors = {"embeddings: HTTP 500 (edit-distance ranking kept)"};
  return c;
}

TEST(ContextRecord, WritesWhatItReadsAndGivesTheRetrievalBack) {
  ContextRecord r = full_context().record();
  r.latency_s = 0.25;
  const json j = to_json(r);
  auto back = context_record_from_json(j, "question 12, context");
  ASSERT_TRUE(back.is_ok()) << back.status().to_string();
  EXPECT_EQ(to_json(*back).dump(), j.dump());
  const Retrieval retrieval = back->retrieval();
  ASSERT_EQ(retrieval.keywords.size(), 2u);
  EXPECT_EQ(retrieval.keywords[1].source, "llm");
  ASSERT_EQ(retrieval.values.size(), 1u);
  EXPECT_EQ(retrieval.values[0].keyword, "east Bohemia");
  EXPECT_DOUBLE_EQ(retrieval.values[0].score, 0.93);
  ASSERT_EQ(retrieval.columns.size(), 1u);
  EXPECT_EQ(retrieval.columns[0].via, "description");
  EXPECT_EQ(back->selected_columns.count("district.a3"), 1u);
  ASSERT_EQ(back->calls.size(), 1u);
  EXPECT_EQ(back->calls[0].cached_tokens, 8);
  EXPECT_EQ(back->latency_s, 0.25);
  // The context's own JSON is the record's (no latency until the pipeline measures it).
  EXPECT_EQ(full_context().to_json().dump(), to_json(full_context().record()).dump());
  EXPECT_FALSE(full_context().to_json().contains("latency_s"));
}

TEST(ContextRecord, RenamedKeysAndWrongTypesAreRefusedNamed) {
  json j = to_json(full_context().record());
  json renamed = j;
  renamed["values"][0]["matched_keyword"] = renamed["values"][0]["keyword"];
  renamed["values"][0].erase("keyword");
  auto bad = context_record_from_json(renamed, "question 12, context");
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.status().message().find("\"matched_keyword\""), std::string::npos) << bad.status().message();
  EXPECT_NE(bad.status().message().find("question 12"), std::string::npos) << bad.status().message();

  json top = j;
  top["retrieved"] = json::array();
  EXPECT_FALSE(context_record_from_json(top, "c").is_ok());

  json wrong = j;
  wrong["keywords"] = "east Bohemia";
  auto w = context_record_from_json(wrong, "c");
  ASSERT_FALSE(w.is_ok());
  EXPECT_NE(w.status().message().find("\"keywords\""), std::string::npos) << w.status().message();

  json call = j;
  call["calls"][0]["prompt_tokens"] = "forty";
  EXPECT_FALSE(context_record_from_json(call, "c").is_ok());
}

}  // namespace
}  // namespace nl2sql::context
