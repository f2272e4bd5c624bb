// The answer reader against the answer-shape corpus (tests/fixtures/answer_shapes.json): how
// DeepSeek-R1/QwQ/Qwen3 (a lone </think> when the template opened the reasoning), gpt-oss
// harmony channels, vLLM/Ollama/llama.cpp servers and CHASE/CHESS-style prompts hand answers
// back, each case with the SQL, JSON, winner or examples a careful reader takes from it — or
// null when nothing is readable, which must come back as a failure with a reason.
#include <fstream>
#include <set>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "nl2sql/llm/answer.h"

namespace nl2sql::llm {
namespace {

using nlohmann::json;

json load_corpus() {
  std::ifstream in(std::string(NL2SQL_FIXTURES_DIR) + "/answer_shapes.json");
  EXPECT_TRUE(in.good()) << "tests/fixtures/answer_shapes.json not found";
  if (!in.good()) return json::object();
  return json::parse(in);
}

const json& corpus() {
  static const json c = load_corpus();
  return c;
}

JsonWant want_of(const json& c) {
  JsonWant w;
  const std::string shape = c.value("want", "any");
  w.shape = shape == "object" ? JsonShape::kObject : shape == "array" ? JsonShape::kArray : JsonShape::kAny;
  w.required_key = c.value("key", "");
  return w;
}

TEST(AnswerShapes, CorpusIsLargeAndCoversEveryReader) {
  ASSERT_TRUE(corpus().contains("cases"));
  const auto& cases = corpus()["cases"];
  EXPECT_GE(cases.size(), 40u);
  std::set<std::string> kinds, names;
  for (const auto& c : cases) {
    kinds.insert(c["kind"].get<std::string>());
    EXPECT_TRUE(names.insert(c["name"].get<std::string>()).second) << "duplicate case " << c["name"];
  }
  EXPECT_EQ(kinds, (std::set<std::string>{"sql", "json", "winner", "examples", "split"}));
}

TEST(AnswerShapes, Corpus) {
  for (const auto& c : corpus().value("cases", json::array())) {
    const std::string name = c["name"], kind = c["kind"], answer = c["answer"];
    SCOPED_TRACE(kind + " case " + name);
    if (kind == "sql") {
      auto r = extract_sql(answer);
      if (c["sql"].is_null()) {
        EXPECT_FALSE(r.is_ok()) << "extracted: " << r->sql;
        if (!r.is_ok()) { EXPECT_FALSE(r.status().message().empty()); }
      } else {
        ASSERT_TRUE(r.is_ok()) << r.status().message();
        EXPECT_EQ(r->sql, c["sql"].get<std::string>());
        if (c.contains("trailing")) { EXPECT_EQ(r->trailing, c["trailing"].get<std::string>()); }
        if (c.contains("source")) { EXPECT_EQ(r->source, c["source"].get<std::string>()); }
      }
      if (c.contains("reasoning_has")) {
        const std::string reasoning = r.is_ok() ? r->reasoning : sql_reasoning(answer);
        EXPECT_NE(reasoning.find(c["reasoning_has"].get<std::string>()), std::string::npos) << reasoning;
      }
    } else if (kind == "json") {
      auto r = read_json(answer, want_of(c));
      if (c["json"].is_null()) {
        EXPECT_FALSE(r.is_ok()) << "read: " << r->dump();
        if (!r.is_ok()) { EXPECT_FALSE(r.status().message().empty()); }
      } else {
        ASSERT_TRUE(r.is_ok()) << r.status().message();
        EXPECT_EQ(*r, c["json"]);
      }
    } else if (kind == "winner") {
      auto r = read_pairwise_winner(answer);
      if (c["winner"].is_null()) {
        EXPECT_FALSE(r.is_ok()) << "read: " << *r;
        if (!r.is_ok()) { EXPECT_FALSE(r.status().message().empty()); }
      } else {
        ASSERT_TRUE(r.is_ok()) << r.status().message();
        EXPECT_EQ(*r, c["winner"].get<std::string>());
      }
    } else if (kind == "examples") {
      auto r = read_examples(answer);
      json got = json::array();
      if (r.is_ok())
        for (const auto& e : *r) got.push_back({e.question, e.sql});
      EXPECT_EQ(got, c["examples"]);
    } else if (kind == "split") {
      auto r = split_reasoning(answer);
      EXPECT_NE(r.answer.find(c["answer_has"].get<std::string>()), std::string::npos) << r.answer;
      EXPECT_NE(r.reasoning.find(c["reasoning_has"].get<std::string>()), std::string::npos) << r.reasoning;
      EXPECT_EQ(r.answer.find(c["answer_lacks"].get<std::string>()), std::string::npos) << r.answer;
    } else {
      ADD_FAILURE() << "unknown kind " << kind;
    }
  }
}

// The reasoning a reader drops is returned, and the answer text is left exactly as written.
TEST(SplitReasoning, KeepsReasoningAndAnswerVerbatim) {
  auto r = split_reasoning("<think>\nstep one\n</think>\n\nSELECT 1");
  EXPECT_EQ(r.reasoning, "step one");
  EXPECT_EQ(r.answer, "\n\nSELECT 1");
  auto plain = split_reasoning("no reasoning here");
  EXPECT_EQ(plain.answer, "no reasoning here");
  EXPECT_TRUE(plain.reasoning.empty());
}

// A reasoning block after a lone closing tag: both parts are reasoning.
TEST(SplitReasoning, LoneCloseThenBlock) {
  auto r = split_reasoning("one</think>two<think>three</think>four");
  EXPECT_EQ(r.answer, "twofour");
  EXPECT_NE(r.reasoning.find("one"), std::string::npos);
  EXPECT_NE(r.reasoning.find("three"), std::string::npos);
}

TEST(ReadJson, ShapesAreRespected) {
  const std::string both = "{\"a\": 1} and [1, 2]";
  EXPECT_EQ(*read_json(both), json::parse("[1, 2]"));
  EXPECT_EQ(*read_json(both, {JsonShape::kObject, ""}), json::parse("{\"a\": 1}"));
  auto missing = read_json(both, {JsonShape::kObject, "b"});
  ASSERT_FALSE(missing.is_ok());
  EXPECT_NE(missing.status().message().find("\"b\""), std::string::npos) << missing.status().message();
}

// Pathological input stays fast and never throws.
TEST(ReadJson, AdversarialInputIsBounded) {
  std::string deep(20000, '[');
  EXPECT_FALSE(read_json(deep).is_ok());
  std::string many;
  for (int i = 0; i < 5000; ++i) many += "[x] ";
  EXPECT_FALSE(read_json(many).is_ok());
  (void)extract_sql(deep + "SELECT 1;" + many);
  (void)read_examples(many);
  (void)read_pairwise_winner(many);
}

TEST(ExtractSql, TrailingIsEmptyForACleanQuery) {
  auto r = extract_sql("```sql\nSELECT a FROM t;\n```");
  ASSERT_TRUE(r.is_ok());
  EXPECT_EQ(r->sql, "SELECT a FROM t");
  EXPECT_EQ(r->trailing, "");
}

}  // namespace
}  // namespace nl2sql::llm
