// The ReCAP generator `recap` against the fake OpenAI server with scripted multi-turn
// conversations (plan-critic revision; validator rejection looping back through the refiner;
// a schema error refined with the fixer's taxonomy, its hint and schema linking; the step limit),
// the validator's verdict parsing, configuration errors, and an end-to-end run with the offline
// `sim` provider on the bundled mini set (simulated answers: this checks machinery).
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "generate/agentic_fixture.h"
#include "support/fake_openai_server.h"
#include "nl2sql/generate/generator.h"
#include "generate/recap.h"
#include "nl2sql/llm/client.h"
#include "nl2sql/llm/prompt_template.h"
#include "support/test_env.h"

namespace nl2sql::generate {
namespace {
namespace fs = std::filesystem;
using nlohmann::json;
using llm::testing::completion_body;
using llm::testing::FakeOpenAiServer;
using llm::testing::FakeReply;

const char* kPlan = "```json\n{\"steps\": [\"Read school and district\", \"Keep region = 'east Bohemia'\", "
                    "\"Count the schools\"], \"expected_columns\": [\"COUNT(*)\"]}\n```";
const char* kApprove = "```json\n{\"approved\": true, \"issues\": []}\n```";
const char* kValid = "```json\n{\"valid_result\": true, \"columns_not_needed\": [], \"result_empty\": false, "
                     "\"suggest_fix\": \"\"}\n```";
const char* kGood = "SELECT COUNT(*) FROM school AS T1 INNER JOIN district AS T2 ON T1.district_id = "
                    "T2.district_id WHERE T2.region = 'east Bohemia'";

std::string sql_answer(const std::string& sql) { return "Implements the plan.\n```sql\n" + sql + "\n```"; }

struct RecapGenerator {
  static constexpr const char* kName = "recap";
};
class Recap : public agentic_testing::AgenticFixture<RecapGenerator> {};
using agentic_testing::scripted;

TEST_F(Recap, ValidatorRejectionLoopsBackThroughTheRefiner) {
  const std::string extra = "SELECT COUNT(*), T2.name FROM school AS T1 INNER JOIN district AS T2 ON T1.district_id = "
                            "T2.district_id WHERE T2.region = 'east Bohemia'";
  FakeOpenAiServer server(scripted(
      {kPlan, kApprove, sql_answer(extra), kApprove,
       "```json\n{\"valid_result\": false, \"columns_not_needed\": [\"T2.name\"], \"result_empty\": false, "
       "\"suggest_fix\": \"Return only the count.\"}\n```",
       sql_answer(kGood), kValid}));
  Candidate c = run_one(server);
  EXPECT_EQ(stages(c), (std::vector<std::string>{"recap.plan", "recap.plan_critique", "recap.act", "recap.sql_critique",
                                                 "recap.validate", "recap.refine", "recap.validate"}));
  EXPECT_EQ(c.sql, kGood);
  EXPECT_EQ(c.generator, "recap");
  // The validator read a result summary with the plan's expected columns.
  const std::string& v = c.calls[4].prompt;
  EXPECT_NE(v.find("Columns the plan expected: COUNT(*)"), std::string::npos);
  EXPECT_NE(v.find("rows: 1"), std::string::npos);
  EXPECT_NE(v.find("columns: COUNT(*) (0 NULL), name (0 NULL)"), std::string::npos);
  // The refiner got the validator's verdict.
  const std::string& r = c.calls[5].prompt;
  EXPECT_NE(r.find("Problem (validation)"), std::string::npos);
  EXPECT_NE(r.find("Columns not needed: T2.name"), std::string::npos);
  EXPECT_NE(r.find("Return only the count."), std::string::npos);
  EXPECT_NE(c.reasoning.find("validate: invalid"), std::string::npos);
  EXPECT_NE(c.reasoning.find("validate: valid"), std::string::npos);
}

TEST_F(Recap, PlanCriticRejectionRevisesThePlan) {
  FakeOpenAiServer server(scripted({"```json\n{\"steps\": [\"Count rows of school\"], \"expected_columns\": [\"n\"]}\n```",
                                    "```json\n{\"approved\": false, \"issues\": [\"The plan never filters by region.\"]}\n```",
                                    kPlan, kApprove, sql_answer(kGood), kApprove, kValid}));
  Candidate c = run_one(server);
  EXPECT_EQ(stages(c), (std::vector<std::string>{"recap.plan", "recap.plan_critique", "recap.plan", "recap.plan_critique",
                                                 "recap.act", "recap.sql_critique", "recap.validate"}));
  EXPECT_NE(c.calls[2].prompt.find("The plan never filters by region."), std::string::npos);
  EXPECT_NE(c.calls[2].prompt.find("1. Count rows of school"), std::string::npos);
  // The writer works from the revised plan.
  EXPECT_NE(c.calls[4].prompt.find("2. Keep region = 'east Bohemia'"), std::string::npos);
  EXPECT_EQ(c.sql, kGood);
}

TEST_F(Recap, SchemaErrorIsRefinedWithTheTaxonomyHintAndLinkedSchema) {
  FakeOpenAiServer server(scripted({kPlan, kApprove, sql_answer("SELECT COUNT(*) FROM school WHERE regoin = 'east Bohemia'"),
                                    kApprove, sql_answer(kGood), kValid}));
  Candidate c = run_one(server);
  EXPECT_EQ(stages(c), (std::vector<std::string>{"recap.plan", "recap.plan_critique", "recap.act", "recap.sql_critique",
                                                 "recap.refine", "recap.validate"}));
  const std::string& r = c.calls[4].prompt;
  EXPECT_NE(r.find("Problem (no_such_column)"), std::string::npos);
  EXPECT_NE(r.find("no such column: regoin"), std::string::npos);
  EXPECT_NE(r.find("Closest columns in the schema: district.region"), std::string::npos);  // fix/'s hint
  // Schema linking: the refiner sees school (in the query) and district (holds "region") but not score.
  EXPECT_NE(r.find("CREATE TABLE school"), std::string::npos);
  EXPECT_NE(r.find("CREATE TABLE district"), std::string::npos);
  EXPECT_EQ(r.find("CREATE TABLE score"), std::string::npos);
  EXPECT_NE(c.reasoning.find("schema linking"), std::string::npos);
  EXPECT_EQ(c.sql, kGood);
}

TEST_F(Recap, SqlCriticRejectionGoesToTheRefiner) {
  FakeOpenAiServer server(scripted({kPlan, kApprove, sql_answer("SELECT COUNT(*) FROM school"),
                                    "```json\n{\"approved\": false, \"issues\": [\"The region filter is missing.\"]}\n```",
                                    sql_answer(kGood), kValid}));
  Candidate c = run_one(server);
  EXPECT_EQ(stages(c), (std::vector<std::string>{"recap.plan", "recap.plan_critique", "recap.act", "recap.sql_critique",
                                                 "recap.refine", "recap.validate"}));
  const std::string& r = c.calls[4].prompt;
  EXPECT_NE(r.find("Problem (critique)"), std::string::npos);
  EXPECT_NE(r.find("The region filter is missing."), std::string::npos);
  EXPECT_NE(r.find("SELECT COUNT(*) FROM school\n"), std::string::npos);
  EXPECT_EQ(c.sql, kGood);
}

TEST_F(Recap, StepLimitEndsTheLoopWithTheBestEffortAnswer) {
  const char* reject = "```json\n{\"valid_result\": false, \"columns_not_needed\": [], \"result_empty\": false, "
                       "\"suggest_fix\": \"Try again.\"}\n```";
  FakeOpenAiServer server(scripted({kPlan, kApprove, sql_answer(kGood), reject, sql_answer("SELECT nope FROM school"),
                                    reject}));
  Candidate c = run_one(server, json{{"max_steps", 5}, {"sql_critique", false}});
  // plan, critique, act, validate, refine: five calls, then the limit.
  EXPECT_EQ(c.calls.size(), 5u);
  EXPECT_EQ(server.requests(), 5);
  EXPECT_NE(c.reasoning.find("step limit"), std::string::npos);
  // The last SQL that executed with rows beats the failing refinement.
  EXPECT_EQ(c.sql, kGood);
}

TEST_F(Recap, TheRefinerSeesItsEarlierAttemptsAndAnUnchangedAnswerEndsTheLoop) {
  // The refiner repairs one broken query into another, is shown both earlier attempts, then
  // answers the query it was just given: asking again would only repeat the request, so the loop
  // ends there with a step of its own (8 steps would be allowed).
  const std::string first = "SELECT COUNT(*) FROM school WHERE regoin = 'east Bohemia'";
  const std::string second = "SELECT COUNT(*) FROM school WHERE regon = 'east Bohemia'";
  FakeOpenAiServer server(scripted({kPlan, kApprove, sql_answer(first), kApprove, sql_answer(second),
                                    sql_answer(second), sql_answer(kGood), kValid}));
  Candidate c = run_one(server, json{{"max_steps", 8}});
  EXPECT_EQ(stages(c), (std::vector<std::string>{"recap.plan", "recap.plan_critique", "recap.act", "recap.sql_critique",
                                                 "recap.refine", "recap.refine"}));
  EXPECT_EQ(server.requests(), 6);
  EXPECT_NE(c.calls[4].prompt.find("(none before this one)"), std::string::npos);
  // The second refinement lists the first attempt as already tried.
  const std::string& r = c.calls[5].prompt;
  const size_t earlier = r.find("Earlier attempts");
  ASSERT_NE(earlier, std::string::npos);
  EXPECT_NE(r.find(first, earlier), std::string::npos);
  EXPECT_NE(r.find("problem: no_such_column", earlier), std::string::npos);
  EXPECT_NE(c.reasoning.find("the refiner returned the same query"), std::string::npos);
  EXPECT_NE(c.calls[4].prompt, c.calls[5].prompt);
}

TEST(RecapVerdicts, ParseValidation) {
  auto v = parse_validation("ok\n```json\n{\"valid_result\": false, \"columns_not_needed\": [\"a\", \"b\"], "
                            "\"result_empty\": true, \"suggest_fix\": \"drop a\"}\n```");
  EXPECT_TRUE(v.parsed);
  EXPECT_FALSE(v.valid_result);
  EXPECT_EQ(v.columns_not_needed, (std::vector<std::string>{"a", "b"}));
  EXPECT_TRUE(v.result_empty);
  EXPECT_EQ(v.suggest_fix, "drop a");
  // A verdict drafted while thinking is not the verdict; a repaired one after it is.
  auto thought = parse_validation("<think>{\"valid_result\": true}</think>\n{'valid_result': False, 'suggest_fix': 'x',}");
  EXPECT_TRUE(thought.parsed);
  EXPECT_FALSE(thought.valid_result);
  EXPECT_EQ(thought.suggest_fix, "x");
  auto lone = parse_json_answer("{\"approved\": true}\n</think>\n```json\n{\"approved\": false}\n```");
  ASSERT_TRUE(lone.has_value());
  EXPECT_FALSE((*lone)["approved"].get<bool>());
  EXPECT_FALSE(parse_json_answer("<think>{\"approved\": true}</think>Approved.").has_value());
  auto bad = parse_validation("I think it is fine.");
  EXPECT_FALSE(bad.parsed);
  EXPECT_TRUE(bad.valid_result);
}

// ReCAPAgent-SQL's retrievers (Table 1): the planner sees the documentation of the columns the
// question mentions; the writer sees that of the columns the plan names and the SQLite
// reference entries of the functions the plan names, and no other entry.
TEST_F(Recap, RetrieversPutKnowledgeAndSyntaxIntoThePrompts) {
  const char* plan = "```json\n{\"steps\": [\"Read school\", \"Keep rows whose strftime('%Y', opened) is before "
                     "2000\", \"Count the schools\"], \"expected_columns\": [\"COUNT(*)\"]}\n```";
  const std::string good = "SELECT COUNT(*) FROM school WHERE strftime('%Y', opened) < '2000'";
  FakeOpenAiServer server(scripted({plan, kApprove, sql_answer(good), kApprove, kValid}));
  Candidate c = run_one(server);
  ASSERT_EQ(stages(c), (std::vector<std::string>{"recap.plan", "recap.plan_critique", "recap.act", "recap.sql_critique",
                                                 "recap.validate"}));
  // Question "0" names the region: its description and value description reach the planner.
  const std::string& p = c.calls[0].prompt;
  EXPECT_NE(p.find("Documentation of the columns the question mentions:\n- district.region (text): the region the "
                   "district belongs to. Values: stored with a lower-case direction word, e.g. \"east Bohemia\""),
            std::string::npos)
      << p;
  EXPECT_NE(p.find("Evidence: east Bohemia refers to region = 'east Bohemia'"), std::string::npos);
  const std::string& a = c.calls[2].prompt;
  // The plan names school.opened (and school, whose "name" column it does not name).
  EXPECT_NE(a.find("- school.opened (date): the date the school opened. Values: YYYY-MM-DD; NULL when unknown"),
            std::string::npos)
      << a;
  EXPECT_EQ(a.find("- district.region"), std::string::npos);
  EXPECT_NE(a.find("### strftime\nstrftime(format, time_value"), std::string::npos);
  EXPECT_EQ(a.find("### julianday"), std::string::npos);
  EXPECT_EQ(a.find("### substr"), std::string::npos);
  EXPECT_EQ(a.find("### date, time, datetime"), std::string::npos);
  EXPECT_NE(c.reasoning.find("syntax retriever: strftime"), std::string::npos);

  // Both retrievers off: the prompts say so.
  FakeOpenAiServer off(scripted({plan, kApprove, sql_answer(good), kApprove, kValid}));
  Candidate d = run_one(off, json{{"knowledge", false}, {"syntax", false}});
  ASSERT_GE(d.calls.size(), 3u);
  EXPECT_NE(d.calls[0].prompt.find("(not retrieved: recap.knowledge is off)"), std::string::npos);
  EXPECT_NE(d.calls[2].prompt.find("(not retrieved: recap.syntax is off)"), std::string::npos);
  EXPECT_EQ(d.calls[2].prompt.find("### strftime"), std::string::npos);
}

TEST_F(Recap, ConfigErrorsNameTheKey) {
  auto client = llm::Client::from_config(core::Config(json{{"llm", fake_llm("http://127.0.0.1:9/v1")}}));
  ASSERT_TRUE(client.is_ok());
  auto err = [&](json recap) {
    core::Config config(json{{"recap", recap}, {"generate", {{"generators", json::parse(R"([{"name": "recap"}])")}}}});
    auto g = make_generators(config, client->get(), ex_, llm::PromptLibrary::bundled());
    return g.is_ok() ? std::string() : g.status().message();
  };
  EXPECT_NE(err(json{{"max_steps", 2}}).find("recap.max_steps"), std::string::npos);
  EXPECT_NE(err(json{{"plan_revisions", 4}}).find("recap.plan_revisions"), std::string::npos);
  EXPECT_NE(err(json{{"sql_critique", 1}}).find("recap.sql_critique"), std::string::npos);
  EXPECT_EQ(err(json::object()), "");
}

// With the sim provider the whole loop runs offline on every mini question (SIMULATED answers):
// the validator accepts exactly the results equal to gold's.
TEST_F(Recap, SimRunsEndToEndOnTheMiniSet) {
  json sim = json::parse(R"({"models": {"sim": {"provider": "sim"}}, "default_profile": "sim",
                             "cache": {"mode": "off"}, "sim": {"seed": 5}})");
  auto run = make(sim, json{{"max_steps", 10}});
  ASSERT_EQ(run.generators.size(), 1u);
  db::Executor ex;
  size_t validated = 0, total = 0;
  for (const auto& q : ds_->questions) {
    auto in = input_for(q.question_id);
    auto cands = run.generators.front()->generate(in);
    ASSERT_TRUE(cands.is_ok()) << q.question_id << ": " << cands.status().message();
    ASSERT_EQ(cands->size(), 1u);
    const Candidate& c = cands->front();
    ++total;
    EXPECT_LE(c.calls.size(), 10u);
    EXPECT_EQ(c.calls.front().stage, "recap.plan");
    for (const auto& call : c.calls) {
      EXPECT_EQ(call.provider, "sim");
      EXPECT_TRUE(call.error.empty()) << call.error;
    }
    // The sim plan is derived from gold: it names gold's first table.
    EXPECT_NE(c.calls.front().response.find("\"steps\""), std::string::npos);
    const bool accepted = c.reasoning.find("validate: valid") != std::string::npos;
    validated += accepted;
    if (accepted) {
      // Accepted iff the result equals gold's: check it independently.
      auto got = ex.run(in.db_path, c.sql);
      auto want = ex.run(in.db_path, q.gold_sql);
      ASSERT_TRUE(got.ok() && want.ok()) << c.sql;
      std::multiset<std::string> a, b;
      for (const auto& row : got.result.rows) {
        std::string k;
        for (const auto& v : row) k += v.to_display() + "|";
        a.insert(k);
      }
      for (const auto& row : want.result.rows) {
        std::string k;
        for (const auto& v : row) k += v.to_display() + "|";
        b.insert(k);
      }
      EXPECT_EQ(std::set<std::string>(a.begin(), a.end()), std::set<std::string>(b.begin(), b.end())) << q.question_id;
    }
  }
  EXPECT_EQ(total, ds_->questions.size());
  EXPECT_GT(validated, total / 2);  // the loop converges on most of the (simulated) questions
}

}  // namespace
}  // namespace nl2sql::generate
