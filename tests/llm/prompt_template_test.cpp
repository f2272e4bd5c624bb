// Prompt templates: strict placeholders, hashes, the bundled keyword-extraction prompt.
#include "nl2sql/llm/prompt_template.h"

#include <gtest/gtest.h>

namespace nl2sql::llm {
namespace {

TEST(PromptTemplate, RendersEveryPlaceholder) {
  auto t = PromptTemplate::parse("t", "Schema:\n{{schema}}\nQ: {{question}} ({{question}})");
  ASSERT_TRUE(t.is_ok()) << t.status().to_string();
  EXPECT_EQ(t->placeholders(), (std::set<std::string>{"question", "schema"}));
  auto r = t->render({{"schema", "CREATE TABLE a(x)"}, {"question", "how {{many}}?"}});
  ASSERT_TRUE(r.is_ok());
  // Values are inserted verbatim, never re-expanded.
  EXPECT_EQ(*r, "Schema:\nCREATE TABLE a(x)\nQ: how {{many}}? (how {{many}}?)");
}

TEST(PromptTemplate, MissingAndUnknownValuesFailNamingThem) {
  auto t = PromptTemplate::parse("gen", "{{schema}} {{question}}").value();
  auto missing = t.render({{"schema", "s"}});
  ASSERT_FALSE(missing.is_ok());
  EXPECT_NE(missing.status().message().find("question"), std::string::npos);
  EXPECT_NE(missing.status().message().find("\"gen\""), std::string::npos);
  auto unknown = t.render({{"schema", "s"}, {"question", "q"}, {"hint", "h"}});
  ASSERT_FALSE(unknown.is_ok());
  EXPECT_NE(unknown.status().message().find("hint"), std::string::npos);
  EXPECT_EQ(unknown.status().code(), ErrorCode::kInvalidInput);
}

TEST(PromptTemplate, MalformedPlaceholderIsALoadErrorWithPosition) {
  for (const char* text : {"a {{ schema }} b", "a {{schema b", "x\n{{}}", "{{a-b}}"}) {
    auto t = PromptTemplate::parse("bad", text);
    ASSERT_FALSE(t.is_ok()) << text;
    EXPECT_NE(t.status().message().find("line"), std::string::npos) << t.status().message();
  }
  // Single braces (JSON examples in prompts) are plain text.
  auto json = PromptTemplate::parse("ok", R"(Answer {"winner": "A"} for {{q}})");
  ASSERT_TRUE(json.is_ok());
  EXPECT_EQ(*json->render({{"q", "x"}}), R"(Answer {"winner": "A"} for x)");
}

TEST(PromptTemplate, HashFollowsTheText) {
  auto a = PromptTemplate::parse("a", "Q: {{q}}").value();
  auto b = PromptTemplate::parse("b", "Q: {{q}}").value();
  auto c = PromptTemplate::parse("a", "Question: {{q}}").value();
  EXPECT_EQ(a.hash(), b.hash());
  EXPECT_NE(a.hash(), c.hash());
  EXPECT_EQ(a.hash().size(), 32u);
}

TEST(PromptTemplate, BundledKeywordPromptRenders) {
  auto t = PromptTemplate::load_named(bundled_prompts_dir(), "extract_keywords");
  ASSERT_TRUE(t.is_ok()) << t.status().to_string();
  EXPECT_EQ(t->placeholders(), (std::set<std::string>{"evidence", "question"}));
  auto r = t->render({{"question", "Which schools in 'Alameda' have more than 500 students?"},
                      {"evidence", "students refers to enrollment"}});
  ASSERT_TRUE(r.is_ok());
  EXPECT_NE(r->find("Which schools in 'Alameda'"), std::string::npos);
  EXPECT_EQ(r->find("{{"), std::string::npos);
  auto missing = PromptTemplate::load_named(bundled_prompts_dir(), "no_such_prompt");
  ASSERT_FALSE(missing.is_ok());
  EXPECT_EQ(missing.status().code(), ErrorCode::kNotFound);
}

}  // namespace
}  // namespace nl2sql::llm
