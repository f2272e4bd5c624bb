#include "nl2sql/core/config_schema.h"

#include <fstream>

#include <gtest/gtest.h>

#include "support/test_env.h"

namespace nl2sql::core {
namespace {

using nlohmann::json;

ConfigSchema sample_schema() {
  ConfigSchema s;
  json frag = {
      {"generate.generators", {{"type", "array"}, {"doc", "Generators to run."}}},
      {"generate.generators[].name", {{"type", "string"}, {"enum", {"baseline", "dc", "qp", "os"}}, {"doc", "Generator."}}},
      {"generate.generators[].samples", {{"type", "integer"}, {"min", 1}, {"default", 1}, {"doc", "Candidates."}}},
      {"llm.models.*.temperature", {{"type", "number"}, {"min", 0}, {"max", 2}, {"doc", "Temperature."}}},
      {"llm.models.*.model", {{"type", "string"}, {"doc", "Model."}}},
      {"llm.sim.p_correct_by", {{"type", "object"}, {"doc", "Opaque map."}}},
      {"run.max_cost_usd", {{"type", "number"}, {"nullable", true}, {"doc", "Cap."}}},
      {"run.seed", {{"type", "integer"}, {"doc", "Seed."}}},
  };
  Status st = s.add_fragment("sample", frag);
  EXPECT_TRUE(st.is_ok()) << st.to_string();
  return s;
}

TEST(ConfigSchema, AcceptsValidConfigWithWildcardsArraysAndExtends) {
  auto s = sample_schema();
  json cfg = json::parse(R"({"extends": "base.json",
    "generate": {"generators": [{"name": "dc", "samples": 7}, {"name": "os"}]},
    "llm": {"models": {"qwen": {"model": "Q", "temperature": 0.5}}, "sim": {"p_correct_by": {"x": 1}}},
    "run": {"max_cost_usd": null, "seed": 3.0}})");
  EXPECT_TRUE(s.validate(cfg).empty()) << s.validate(cfg)[0];
}

TEST(ConfigSchema, ReportsEveryProblemWithKeyAndAllowedValues) {
  auto s = sample_schema();
  json cfg = json::parse(R"({
    "generate": {"generators": [{"name": "dcx", "samples": 0}, {"nme": "os"}]},
    "llm": {"models": {"qwen": {"model": 3, "temprature": 0.5}}},
    "run": {"seed": 1.5, "sed": 2}})");
  auto errors = s.validate(cfg);
  ASSERT_EQ(errors.size(), 7u);
  auto has = [&](const std::string& needle) {
    for (const auto& e : errors)
      if (e.find(needle) != std::string::npos) return true;
    return false;
  };
  EXPECT_TRUE(has("\"generate.generators[0].name\": \"dcx\" is not one of \"baseline\", \"dc\", \"qp\", \"os\""));
  EXPECT_TRUE(has("\"generate.generators[0].samples\": 0 is out of range (allowed: >= 1)"));
  EXPECT_TRUE(has("unknown config key \"generate.generators[1].nme\" (closest known key: \"generate.generators[].name\")"));
  EXPECT_TRUE(has("\"llm.models.qwen.model\": expected string, got integer 3"));
  EXPECT_TRUE(has("unknown config key \"llm.models.qwen.temprature\" (closest known key: \"llm.models.qwen.temperature\")"));
  EXPECT_TRUE(has("\"run.seed\": expected integer, got number 1.5"));
  EXPECT_TRUE(has("unknown config key \"run.sed\" (closest known key: \"run.seed\")"));

  Config c(cfg);
  Status st = s.check(c);
  EXPECT_EQ(st.code(), ErrorCode::kInvalidInput);
  EXPECT_NE(st.message().find("7 config problems"), std::string::npos);
}

TEST(ConfigSchema, UnknownKeyOfTypo) {
  auto s = sample_schema();
  auto errors = s.validate(json::parse(R"({"run": {"sed": 2}, "gen": 1})"));
  ASSERT_EQ(errors.size(), 2u);
  EXPECT_EQ(errors[0], "unknown config key \"gen\" (closest known key: \"run.seed\")");
  EXPECT_EQ(errors[1], "unknown config key \"run.sed\" (closest known key: \"run.seed\")");
  // An implicit parent given a scalar.
  auto e2 = s.validate(json::parse(R"({"llm": 5})"));
  ASSERT_EQ(e2.size(), 1u);
  EXPECT_NE(e2[0].find("\"llm\": expected an object"), std::string::npos);
}

TEST(ConfigSchema, FragmentErrorsNameFileAndKey) {
  ConfigSchema s;
  EXPECT_NE(s.add_fragment("f", {{"a.b", {{"type", "string"}}}}).message().find("f: key \"a.b\": \"doc\""), std::string::npos);
  EXPECT_NE(s.add_fragment("f", {{"a.b", {{"type", "text"}, {"doc", "x"}}}}).message().find("\"type\" must be"), std::string::npos);
  EXPECT_NE(s.add_fragment("f", {{"a.b", {{"type", "string"}, {"doc", "x"}, {"dflt", 1}}}}).message().find("unknown spec field \"dflt\""), std::string::npos);
  ASSERT_TRUE(s.add_fragment("f", {{"a.b", {{"type", "string"}, {"doc", "x"}}}}).is_ok());
  EXPECT_NE(s.add_fragment("g", {{"a.b", {{"type", "string"}, {"doc", "x"}}}}).message().find("already documented in fragment \"f\""), std::string::npos);
}

TEST(ConfigSchema, MarkdownTableListsEveryKey) {
  auto s = sample_schema();
  std::string md = s.markdown_table();
  for (const auto& k : s.keys()) EXPECT_NE(md.find("`" + k.pattern + "`"), std::string::npos) << k.pattern;
  EXPECT_NE(md.find("| `generate.generators[].name` | string |  | `baseline`, `dc`, `qp`, `os` | Generator. |"), std::string::npos) << md;
  EXPECT_NE(md.find("0 … 2"), std::string::npos);
}

TEST(ConfigSchema, ShippedFragmentsLoadAndDocumentTheLlmAndRunKeys) {
  auto s = ConfigSchema::load_dir(default_schema_dir());
  ASSERT_TRUE(s.is_ok()) << s.status().to_string();
  for (const char* k : {"llm.models.*.base_url", "llm.roles.generate", "llm.cache.mode", "llm.sim.p_sel",
                        "run.seed", "run.selectors[]", "run.curve_points", "eval.metrics", "report.html"})
    EXPECT_NE(s->find(k), nullptr) << k;
  // The example llm block of docs/models-and-cache.md is valid.
  json cfg = json::parse(R"({"llm": {"models": {"qwen": {"base_url": "http://127.0.0.1:8000/v1",
      "model": "Q", "api_key_env": "K", "temperature": 0.0, "top_p": 1.0, "max_tokens": 1024,
      "max_in_flight": 32, "rpm": 0, "tpm": 0, "timeout_s": 120}, "offline": {"provider": "sim"}},
      "default_profile": "qwen", "roles": {"generate": "qwen", "judge": "offline"}, "max_in_flight": 64,
      "retry": {"max_attempts": 5, "base_delay_s": 1.0, "max_delay_s": 60},
      "cache": {"mode": "replay", "path": "x.sqlite"},
      "sim": {"seed": 0, "p_correct": 0.6, "p_correct_by": {"query_plan/challenging": 0.3}}},
      "run": {"seed": 7, "selectors": ["tournament", "self_consistency"], "curve_points": [1, 3]}})");
  auto errors = s->validate(cfg);
  EXPECT_TRUE(errors.empty()) << errors[0];
  errors = s->validate(json::parse(R"({"llm": {"cache": {"mode": "rw"}, "roles": {"generat": "x"}}})"));
  ASSERT_EQ(errors.size(), 2u);
  EXPECT_NE(errors[0].find("\"read-write\", \"read-only\", \"off\", \"replay\""), std::string::npos);
  EXPECT_NE(errors[1].find("closest known key: \"llm.roles.generate\""), std::string::npos);
}

}  // namespace
}  // namespace nl2sql::core
