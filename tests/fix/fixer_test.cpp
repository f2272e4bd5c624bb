// The fixer loop against the in-process fake OpenAI server: a syntax error fixed in round 2
// (after a round that only reached a schema error), a persistent failure kept after 3 rounds and
// marked, non-queries rejected without execution or model calls, and the per-class hints
// (closest names, ambiguous columns, stored values for an empty result's literals).
#include <atomic>
#include <mutex>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "support/fake_client.h"
#include "support/fake_openai_server.h"
#include "nl2sql/context/value_index.h"
#include "nl2sql/feedback/feedback.h"
#include "nl2sql/fix/fixer.h"
#include "nl2sql/llm/client.h"
#include "support/test_env.h"

namespace nl2sql::fix {
namespace {

using llm::testing::completion_body;
using llm::testing::FakeOpenAiServer;
using llm::testing::FakeReply;

std::unique_ptr<llm::Client> client_for(const std::string& base_url) {
  return llm::testing::client_from(llm::testing::one_profile_settings(base_url, "fake-model", 10));
}

// The user message of a chat request body.
std::string user_prompt(const httplib::Request& req) {
  auto j = nlohmann::json::parse(req.body);
  return j["messages"].back()["content"].get<std::string>();
}

class FixerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = testing::build_mini_bird(dir_ / "mini");
    data::DatasetSpec spec;
    spec.data_dir = root_;
    auto ds = data::load_dataset(spec);
    ASSERT_TRUE(ds.is_ok()) << ds.status().message();
    ds_ = std::move(*ds);
    q_ = ds_.find_question("1");
    ASSERT_NE(q_, nullptr);
  }
  FixInput input() {
    FixInput in;
    in.question = q_;
    in.schema = &ds_.schemas.at(q_->db_id);
    in.db_path = ds_.db_paths.at(q_->db_id);
    in.executor = &ex_;
    return in;
  }
  Fixer fixer(llm::Client* client, const std::string& overrides = "{}") {
    core::Config config(nlohmann::json::parse(overrides));
    auto f = Fixer::create(config, client, llm::PromptLibrary::bundled());
    EXPECT_TRUE(f.is_ok()) << f.status().message();
    return std::move(*f);
  }
  static generate::Candidate candidate(const std::string& sql) {
    generate::Candidate c;
    c.id = "dc#0";
    c.generator = "dc";
    c.sql = sql;
    c.original_sql = sql;
    return c;
  }
  testing::TempDir dir_;
  std::filesystem::path root_;
  data::Dataset ds_;
  const data::Question* q_ = nullptr;
  db::Executor ex_;
};

TEST_F(FixerTest, SyntaxErrorFixedInRoundTwo) {
  std::mutex mu;
  std::vector<std::string> prompts;
  FakeOpenAiServer server([&](const httplib::Request& req, int64_t seq) {
    std::lock_guard lock(mu);
    prompts.push_back(user_prompt(req));
    // Round 1 repairs the syntax but misspells a column; round 2 gets it right.
    const char* sql = seq == 0 ? "SELECT nme FROM school WHERE is_charter = 1" : "SELECT name FROM school WHERE is_charter = 1";
    return FakeReply(200, completion_body(std::string("Fixed.\n```sql\n") + sql + "\n```"));
  });
  auto client = client_for(server.base_url());
  auto f = fixer(client.get());
  auto c = candidate("SELECT name FORM school WHERE is_charter = 1");
  ASSERT_TRUE(f.fix(c, input()).is_ok());
  ASSERT_EQ(c.fix_rounds.size(), 2u);
  EXPECT_EQ(c.fix_rounds[0].failure_class, "syntax_error");
  EXPECT_EQ(c.fix_rounds[1].failure_class, "no_such_column");
  EXPECT_NE(c.fix_rounds[1].feedback.find("school.name"), std::string::npos) << c.fix_rounds[1].feedback;
  EXPECT_EQ(c.fix_rounds[1].sql_after, "SELECT name FROM school WHERE is_charter = 1");
  EXPECT_TRUE(c.fix_rounds[1].execution_after.ok());
  EXPECT_FALSE(c.still_failing);
  EXPECT_EQ(c.sql, "SELECT name FROM school WHERE is_charter = 1");
  EXPECT_EQ(c.original_sql, "SELECT name FORM school WHERE is_charter = 1");
  EXPECT_TRUE(c.execution.ok());
  EXPECT_GT(c.execution.rows, 0u);
  EXPECT_EQ(c.fix_rounds[0].call.template_name, "fix_sql");
  EXPECT_FALSE(c.fix_rounds[0].call.template_hash.empty());
  EXPECT_EQ(c.fix_rounds[0].call.prompt_tokens, 10);
  ASSERT_EQ(prompts.size(), 2u);
  // The prompts carry the failed SQL and its error.
  EXPECT_NE(prompts[0].find("SELECT name FORM school"), std::string::npos);
  EXPECT_NE(prompts[0].find("syntax error"), std::string::npos);
  EXPECT_NE(prompts[1].find("no such column: nme"), std::string::npos);
}

TEST_F(FixerTest, PersistentFailureKeptAfterThreeRoundsAndMarked) {
  // Three different answers, each still failing.
  std::atomic<int> calls{0};
  FakeOpenAiServer server([&](const httplib::Request&, int64_t seq) {
    ++calls;
    const char* table = seq == 0 ? "schoo" : seq == 1 ? "scholl" : "schol";
    return FakeReply(200, completion_body(std::string("Still this:\n```sql\nSELECT name FROM ") + table + "\n```"));
  });
  auto client = client_for(server.base_url());
  auto f = fixer(client.get());
  auto c = candidate("SELECT name FROM schol");
  ASSERT_TRUE(f.fix(c, input()).is_ok());
  EXPECT_EQ(calls.load(), 3);
  ASSERT_EQ(c.fix_rounds.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(c.fix_rounds[i].round, static_cast<int>(i + 1));
    EXPECT_EQ(c.fix_rounds[i].failure_class, "no_such_table");
    EXPECT_NE(c.fix_rounds[i].feedback.find("Closest tables in the schema: school"), std::string::npos)
        << c.fix_rounds[i].feedback;
  }
  EXPECT_TRUE(c.still_failing);
  EXPECT_EQ(c.sql, "SELECT name FROM schol");
  EXPECT_EQ(c.execution.status, db::ExecStatus::kError);
}

TEST_F(FixerTest, AnUnchangedAnswerEndsTheCandidatesFixing) {
  // The model answers the query it was asked to repair: the next round would send the same
  // request again, word for word, so fixing ends after one round.
  std::atomic<int> calls{0};
  FakeOpenAiServer server([&](const httplib::Request&, int64_t) {
    ++calls;
    return FakeReply(200, completion_body("Looks right to me:\n```sql\nSELECT name FROM schol\n```"));
  });
  auto client = client_for(server.base_url());
  auto f = fixer(client.get());
  auto c = candidate("SELECT name FROM schol");
  ASSERT_TRUE(f.fix(c, input()).is_ok());
  EXPECT_EQ(calls.load(), 1);
  ASSERT_EQ(c.fix_rounds.size(), 1u);
  EXPECT_EQ(c.fix_rounds[0].sql_after, c.fix_rounds[0].sql_before);
  EXPECT_TRUE(c.still_failing);
}

TEST_F(FixerTest, TheSameQueryRespacedEndsTheCandidatesFixingToo) {
  // Round 1 repairs the table name but the answer is still refused (a missing column); round
  // 2's answer is round 2's query laid out again (other blanks, a line break): the same query,
  // the same failure, so there is no third round. Without the blank-insensitive comparison
  // the loop would run all three rounds.
  std::atomic<int> calls{0};
  FakeOpenAiServer server([&](const httplib::Request&, int64_t seq) {
    ++calls;
    const char* sql = seq == 0 ? "SELECT nme FROM school" : "SELECT  nme\n  FROM   school";
    return FakeReply(200, completion_body(std::string("```sql\n") + sql + "\n```"));
  });
  auto client = client_for(server.base_url());
  auto f = fixer(client.get());
  auto c = candidate("SELECT nme FROM schol");
  ASSERT_TRUE(f.fix(c, input()).is_ok());
  EXPECT_EQ(calls.load(), 2);
  ASSERT_EQ(c.fix_rounds.size(), 2u);
  EXPECT_EQ(c.fix_rounds[0].failure_class, "no_such_table");
  EXPECT_EQ(c.fix_rounds[1].failure_class, "no_such_column");
  EXPECT_EQ(c.fix_rounds[1].sql_before, "SELECT nme FROM school");
  EXPECT_EQ(c.fix_rounds[1].sql_after, "SELECT  nme\n  FROM   school");
  EXPECT_TRUE(c.still_failing);
  EXPECT_EQ(c.execution.status, db::ExecStatus::kError);
}

TEST_F(FixerTest, MaxRoundsFromConfig) {
  std::atomic<int> calls{0};
  FakeOpenAiServer server([&](const httplib::Request&, int64_t) {
    ++calls;
    return FakeReply(200, completion_body("```sql\nSELECT name FROM schol\n```"));
  });
  auto client = client_for(server.base_url());
  auto f = fixer(client.get(), R"({"fix": {"max_rounds": 1}})");
  auto c = candidate("SELECT name FROM schol");
  ASSERT_TRUE(f.fix(c, input()).is_ok());
  EXPECT_EQ(calls.load(), 1);
  EXPECT_EQ(c.fix_rounds.size(), 1u);
  EXPECT_TRUE(c.still_failing);
}

TEST_F(FixerTest, NonQueriesAreRejectedNeverExecutedNorFixed) {
  std::atomic<int> calls{0};
  FakeOpenAiServer server([&](const httplib::Request&, int64_t) {
    ++calls;
    return FakeReply(200, completion_body("```sql\nSELECT 1\n```"));
  });
  auto client = client_for(server.base_url());
  auto f = fixer(client.get());
  for (const char* sql : {"DELETE FROM school", "DROP TABLE school", "SELECT 1; DELETE FROM school"}) {
    SCOPED_TRACE(sql);
    auto c = candidate(sql);
    ASSERT_TRUE(f.fix(c, input()).is_ok());
    EXPECT_TRUE(c.rejected);
    EXPECT_EQ(c.rejection.rfind("rejected: not read-only", 0), 0u) << c.rejection;
    EXPECT_FALSE(c.execution.executed);
    EXPECT_TRUE(c.fix_rounds.empty());
  }
  EXPECT_EQ(calls.load(), 0);
  // The database still has its rows.
  auto r = ex_.run(input().db_path, "SELECT COUNT(*) FROM school");
  ASSERT_TRUE(r.ok());
  EXPECT_GT(r.result.rows[0][0].i, 0);
}

TEST_F(FixerTest, DisabledFixerOnlyExecutesAndMarks) {
  std::atomic<int> calls{0};
  FakeOpenAiServer server([&](const httplib::Request&, int64_t) {
    ++calls;
    return FakeReply(200, completion_body("```sql\nSELECT 1\n```"));
  });
  auto client = client_for(server.base_url());
  auto f = fixer(client.get(), R"({"fix": {"enabled": false}})");
  auto bad = candidate("SELECT name FROM schol");
  ASSERT_TRUE(f.fix(bad, input()).is_ok());
  EXPECT_TRUE(bad.still_failing);
  EXPECT_TRUE(bad.fix_rounds.empty());
  auto good = candidate("SELECT name FROM school WHERE is_charter = 1");
  ASSERT_TRUE(f.fix(good, input()).is_ok());
  EXPECT_FALSE(good.still_failing);
  EXPECT_TRUE(good.execution.ok());
  EXPECT_NE(good.execution.preview.find("name"), std::string::npos);
  EXPECT_EQ(calls.load(), 0);
}

TEST_F(FixerTest, UnknownConfigKeyIsNamed) {
  core::Config config(nlohmann::json::parse(R"({"fix": {"max_round": 2}})"));
  auto f = Fixer::create(config, nullptr, llm::PromptLibrary::bundled());
  ASSERT_FALSE(f.is_ok());
  EXPECT_NE(f.status().message().find("fix.max_round"), std::string::npos);
}

TEST_F(FixerTest, EmptyResultHintListsStoredValuesForLiterals) {
  context::IndexOptions o;
  o.index_dir = dir_ / "index";
  const auto& schema = ds_.schemas.at("regional_schools");
  auto idx = context::open_index("regional_schools", ds_.db_paths.at("regional_schools"), schema, o, ex_);
  ASSERT_TRUE(idx.is_ok()) << idx.status().message();
  FixInput in = input();
  in.index = &*idx;
  auto c = candidate("SELECT name FROM district WHERE region = 'East Bohemia'");
  execute_candidate(c, ex_, in.db_path);
  ASSERT_TRUE(c.execution.ok());
  ASSERT_EQ(feedback::classify_failure(c.execution), "empty_result");
  std::string hint = feedback::failure_hint("empty_result", c.execution, c.sql, {in.schema, in.index, 3});
  EXPECT_NE(hint.find("'East Bohemia': district.region = 'east Bohemia'"), std::string::npos) << hint;
}

TEST(FixerHints, ClassifyFailure) {
  feedback::ExecutionSummary e;
  e.executed = true;
  e.status = db::ExecStatus::kError;
  auto cls = [&](const std::string& msg) {
    e.error = msg;
    return feedback::classify_failure(e);
  };
  EXPECT_EQ(cls("near \"FORM\": syntax error"), "syntax_error");
  EXPECT_EQ(cls("incomplete input"), "syntax_error");
  EXPECT_EQ(cls("unrecognized token: \"'abc\""), "syntax_error");
  EXPECT_EQ(cls("no such column: T1.nme"), "no_such_column");
  EXPECT_EQ(cls("no such table: schol"), "no_such_table");
  EXPECT_EQ(cls("ambiguous column name: name"), "ambiguous_column");
  EXPECT_EQ(cls("datatype mismatch"), "type_mismatch");
  EXPECT_EQ(cls("no such function: YEAR"), "other");
  e.status = db::ExecStatus::kTimeout;
  EXPECT_EQ(feedback::classify_failure(e), "timeout");
  e.status = db::ExecStatus::kOk;
  e.rows = 0;
  EXPECT_EQ(feedback::classify_failure(e), "empty_result");
  e.rows = 3;
  EXPECT_EQ(feedback::classify_failure(e), "");
}

TEST(FixerHints, ClosestNamesByEditDistance) {
  std::vector<std::string> names = {"school_id", "name", "district_id", "kind", "opened", "is_charter"};
  EXPECT_EQ(feedback::closest_names("nme", names, 2), (std::vector<std::string>{"name", "kind"}));
  EXPECT_EQ(feedback::closest_names("DISTRICTID", names, 1), (std::vector<std::string>{"district_id"}));
  EXPECT_EQ(feedback::closest_names("x", {}, 3), std::vector<std::string>{});
}

TEST_F(FixerTest, AmbiguousColumnHintNamesTheTables) {
  feedback::ExecutionSummary e;
  e.executed = true;
  e.status = db::ExecStatus::kError;
  e.error = "ambiguous column name: name";
  std::string hint = feedback::failure_hint("ambiguous_column", e, "", {input().schema, input().index, 3});
  EXPECT_NE(hint.find("district"), std::string::npos) << hint;
  EXPECT_NE(hint.find("school"), std::string::npos) << hint;
  EXPECT_NE(hint.find("T1.name"), std::string::npos) << hint;
}

// The schema ladder the fixer's calls climb when a prompt does not fit: rung 0 and the rungs
// before the last are never cut; the last drops descriptions and is cut to the token budget.
TEST_F(FixerTest, SchemaLadderCutsOnlyItsLastRungToTheBudget) {
  const context::SchemaSources sources{&ds_.schemas.at(q_->db_id), nullptr, nullptr, nullptr};
  const auto ladder = fix_schema_ladder(sources);
  const std::string full = context::render_schema(sources, context::RenderOptions{});
  EXPECT_EQ(ladder(0, 0), full);
  EXPECT_EQ(ladder(0, 1), full);
  EXPECT_EQ(ladder(1, 1), context::render_schema(sources, context::options_at_rung({}, 1, {})));
  context::RenderOptions last = context::options_at_rung({}, context::kSchemaLadderRungs, {});
  last.descriptions = false;
  const std::string whole = context::render_schema(sources, last);
  ASSERT_GT(whole.size(), 40u);
  EXPECT_EQ(ladder(context::kSchemaLadderRungs, 0), whole);  // no budget: not cut
  EXPECT_EQ(ladder(context::kSchemaLadderRungs, 10), whole.substr(0, 40) + "\n-- (schema cut to fit the model's context)");
  EXPECT_EQ(ladder(context::kSchemaLadderRungs, static_cast<int64_t>(whole.size())), whole);
}

}  // namespace
}  // namespace nl2sql::fix
