// The orchestrator generator `agent` against the fake OpenAI server with scripted multi-turn
// conversations (accept on the first try; escalation to the slow loop; the compressed history
// keeping the first and the latest feedback; best effort when the budget runs out; the schema
// budget), the result heuristics, its configuration errors, and an end-to-end run with the
// offline `sim` provider on the bundled mini set (simulated answers: this checks machinery).
#include <algorithm>
#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "generate/agentic_fixture.h"
#include "support/fake_openai_server.h"
#include "nl2sql/context/retrieve.h"
#include "nl2sql/context/value_index.h"
#include "nl2sql/run/run_data.h"
#include "generate/agent.h"
#include "generate/agent_steps.h"
#include "nl2sql/context/metadata.h"
#include "nl2sql/generate/generator.h"
#include "generate/result_check.h"
#include "nl2sql/llm/client.h"
#include "nl2sql/llm/prompt_template.h"
#include "support/records.h"
#include "support/test_env.h"

namespace nl2sql::generate {
namespace {
namespace fs = std::filesystem;
using nlohmann::json;
using llm::testing::completion_body;
using llm::testing::FakeOpenAiServer;
using llm::testing::FakeReply;

const char* kLedger = "Fact sheet:\n```json\n{\"required_tables\": [\"school\", \"district\"], \"filters\": "
                      "[\"district.region = 'east Bohemia'\"]}\n```";
const char* kGood = "SELECT COUNT(*) FROM school AS T1 INNER JOIN district AS T2 ON T1.district_id = "
                    "T2.district_id WHERE T2.region = 'east Bohemia'";

std::string sql_answer(const std::string& sql) { return "Plan: count the schools.\n```sql\n" + sql + "\n```"; }

struct AgentGenerator {
  static constexpr const char* kName = "agent";
};
class Agent : public agentic_testing::AgenticFixture<AgentGenerator> {};
using agentic_testing::scripted;

TEST_F(Agent, AcceptsOnTheFirstTry) {
  FakeOpenAiServer server(scripted({kLedger, sql_answer(kGood)}));
  Candidate c = run_one(server);
  EXPECT_EQ(server.requests(), 2);
  EXPECT_EQ(c.id, "agent#0");
  EXPECT_EQ(c.generator, "agent");
  EXPECT_EQ(c.sql, kGood);
  EXPECT_TRUE(c.extraction_ok);
  EXPECT_EQ(stages(c), (std::vector<std::string>{"agent.ledger", "agent.fast"}));
  EXPECT_EQ(c.calls[0].template_name, "agent_ledger");
  // The fact sheet reaches the SQL writer as parsed JSON, and the question closes the prompt.
  EXPECT_NE(c.calls[1].prompt.find("\"required_tables\""), std::string::npos);
  EXPECT_NE(c.calls[1].prompt.find("(no previous attempts)"), std::string::npos);
  const std::string& q = ds_->find_question("0")->question;
  EXPECT_EQ(c.calls[1].prompt.rfind(q), c.calls[1].prompt.size() - q.size() - 1);
  EXPECT_NE(c.reasoning.find("accept"), std::string::npos);
  EXPECT_EQ(c.reasoning.find("escalate"), std::string::npos);
  EXPECT_EQ(c.tokens(), 2 * 120);
}

TEST_F(Agent, EscalatesToTheSlowLoopAfterFastFailures) {
  FakeOpenAiServer server(scripted({kLedger, sql_answer("SELECT COUNT(*) FROM schools"),
                                    sql_answer("SELECT COUNT(*) FROM school WHERE region = 'east Bohemia'"),
                                    sql_answer(kGood)}));
  Candidate c = run_one(server, json{{"fast_attempts", 2}, {"max_attempts", 4}});
  EXPECT_EQ(server.requests(), 4);
  EXPECT_EQ(stages(c), (std::vector<std::string>{"agent.ledger", "agent.fast", "agent.fast", "agent.slow"}));
  EXPECT_EQ(c.sql, kGood);
  const std::string& slow = c.calls[3].prompt;
  EXPECT_EQ(c.calls[3].template_name, "agent_slow");
  // The slow writer sees the full schema, the dialect notes and a scratchpad of both failures.
  EXPECT_NE(slow.find("CREATE TABLE"), std::string::npos);
  EXPECT_NE(slow.find("SQLite dialect notes"), std::string::npos);
  EXPECT_NE(slow.find("- attempt 1: SELECT COUNT(*) FROM schools"), std::string::npos);
  EXPECT_NE(slow.find("no such table: schools"), std::string::npos);
  EXPECT_NE(slow.find("no such column: region"), std::string::npos);
  // The fast prompts never carry the schema.
  EXPECT_EQ(c.calls[1].prompt.find("CREATE TABLE"), std::string::npos);
  EXPECT_NE(c.reasoning.find("escalate"), std::string::npos);
  EXPECT_NE(c.reasoning.find("accept"), std::string::npos);
}

TEST_F(Agent, CompressedHistoryKeepsTheFirstAndTheLatestFeedback) {
  FakeOpenAiServer server(scripted({kLedger, sql_answer("SELECT nope_first FROM school"),
                                    sql_answer("SELECT nope_second FROM school"),
                                    sql_answer("SELECT nope_third FROM school"),
                                    sql_answer("SELECT name FROM school WHERE name = 'no such school'")}));
  Candidate c = run_one(server, json{{"fast_attempts", 2}, {"max_attempts", 4}});
  ASSERT_EQ(c.calls.size(), 5u);
  // The second prompt holds one compressed message about attempt 1 …
  const std::string& second = c.calls[2].prompt;
  EXPECT_NE(second.find("Earlier attempts at this question (1)"), std::string::npos);
  EXPECT_NE(second.find("no such column: nope_first"), std::string::npos);
  EXPECT_NE(second.find("Do not repeat a failed strategy"), std::string::npos);
  // … and the last one every attempt, the first feedback and the latest error in full.
  const std::string& last = c.calls[4].prompt;
  EXPECT_NE(last.find("Earlier attempts at this question (3)"), std::string::npos);
  EXPECT_NE(last.find("no such column: nope_first"), std::string::npos);
  EXPECT_NE(last.find("no such column: nope_second"), std::string::npos);
  size_t latest = last.find("Latest error in full:\nno such column: nope_third");
  EXPECT_NE(latest, std::string::npos);
  // The history replaces the conversation: each earlier attempt appears once, in order.
  EXPECT_LT(last.find("nope_first"), last.find("nope_second"));
  EXPECT_EQ(last.find("Attempt 1 ("), last.rfind("Attempt 1 ("));
  // The question is restated at the very end.
  const std::string& q = ds_->find_question("0")->question;
  EXPECT_EQ(last.rfind(q), last.size() - q.size() - 1);
  // Budget spent: the best attempt (an empty result beats three errors) is the answer.
  EXPECT_EQ(c.sql, "SELECT name FROM school WHERE name = 'no such school'");
  EXPECT_NE(c.reasoning.find("best effort"), std::string::npos);
  EXPECT_EQ(server.requests(), 5);
}

TEST_F(Agent, CompressHistoryDirectly) {
  std::vector<AttemptRecord> a = {{1, "fast", "SELECT a FROM t", "error: no such column: a", "no such column: a"},
                                  {2, "fast", "", "no SQL could be extracted (no fence)", "no SQL"},
                                  {3, "slow", "SELECT b FROM t", "0 rows; empty_result: …", "empty_result: none"}};
  std::string h = compress_history("How many?", a);
  EXPECT_EQ(h.rfind("Question: How many?", 0), 0u);
  EXPECT_NE(h.find("Attempt 1 (fast loop)"), std::string::npos);
  EXPECT_NE(h.find("error: no such column: a"), std::string::npos);
  EXPECT_NE(h.find("(no SQL could be extracted)"), std::string::npos);
  EXPECT_NE(h.find("Attempt 3 (slow loop)"), std::string::npos);
  EXPECT_NE(h.find("Latest error in full:\nempty_result: none"), std::string::npos);
}

TEST_F(Agent, SchemaBudgetKeepsColumnsMatchingTheQuestion) {
  FakeOpenAiServer server(scripted({kLedger, sql_answer(kGood)}));
  Candidate wide = run_one(server);
  Candidate narrow = run_one(server, json{{"max_schema_tokens", 60}});
  EXPECT_LT(narrow.calls[0].prompt.size(), wide.calls[0].prompt.size());
  EXPECT_NE(narrow.reasoning.find("schema over budget"), std::string::npos);
  EXPECT_EQ(wide.reasoning.find("schema over budget"), std::string::npos);
  // A column the question never points at is cut; the one it names ("region") stays.
  EXPECT_NE(wide.calls[0].prompt.find("avg_reading"), std::string::npos);
  EXPECT_EQ(narrow.calls[0].prompt.find("avg_reading"), std::string::npos);
  EXPECT_NE(narrow.calls[0].prompt.find("region TEXT"), std::string::npos) << narrow.calls[0].prompt;
}

// Over the agentic schema budget, the metadata's statistics are cut before any column: a budget
// the schema fits without them keeps every column (and says so); a smaller one then cuts columns.
TEST_F(Agent, SchemaBudgetCutsTheMetadataStatisticsBeforeColumns) {
  GenerationInput in = input_for("0");
  auto meta = context::build_metadata(in.schema->db_id, in.db_path, *in.schema, context::MetadataOptions{}, *ex_);
  ASSERT_TRUE(meta.is_ok()) << meta.status().message();
  in.metadata = &*meta;
  context::RenderOptions o;
  o.examples = 0;
  const std::string full = render_schema_within(in, o, {});
  context::RenderOptions no_stats = o;
  no_stats.stats = false;
  const std::string lighter = context::render_schema(in.schema_sources(), no_stats);
  ASSERT_NE(full.find(" rows, "), std::string::npos) << full;
  ASSERT_LT(lighter.size(), full.size());
  std::string note;
  SchemaBudget fits;
  fits.max_tokens = static_cast<int64_t>((lighter.size() + 3) / 4);
  EXPECT_EQ(render_schema_within(in, o, fits, &note), lighter);
  EXPECT_NE(note.find("column statistics left out"), std::string::npos) << note;
  EXPECT_NE(lighter.find("avg_reading"), std::string::npos);
  SchemaBudget tight;
  tight.max_tokens = 60;
  const std::string cut = render_schema_within(in, o, tight, &note);
  EXPECT_EQ(cut.find(" rows, "), std::string::npos) << cut;
  EXPECT_EQ(cut.find("avg_reading"), std::string::npos) << cut;
  EXPECT_NE(note.find("columns best matching the question"), std::string::npos) << note;
  EXPECT_NE(note.find("column statistics left out"), std::string::npos) << note;
}

// With agent.embeddings_profile the question and every column are embedded once; a column the
// words of the question never name survives the cut when its embedding is closest.
TEST_F(Agent, SchemaBudgetUsesEmbeddingsWhenConfigured) {
  FakeOpenAiServer server([](const httplib::Request& req, int64_t) {
    if (req.path == "/v1/embeddings") {
      auto inputs = json::parse(req.body)["input"];
      json data = json::array();
      for (size_t i = 0; i < inputs.size(); ++i) {
        const std::string text = inputs[i].get<std::string>();
        const bool close = i == 0 || text.rfind("score.avg_reading", 0) == 0;
        data.push_back({{"index", i}, {"embedding", close ? json{1.0, 0.0} : json{0.0, 1.0}}});
      }
      return FakeReply(200, json{{"data", data}, {"usage", {{"prompt_tokens", 40}, {"total_tokens", 40}}}}.dump());
    }
    const bool ledger = req.body.find("Write the fact sheet as one JSON object") != std::string::npos;
    return FakeReply(200, completion_body(ledger ? kLedger : sql_answer(kGood)));
  });
  Candidate c = run_one(server, json{{"max_schema_tokens", 60}, {"embeddings_profile", "fake"}});
  ASSERT_GE(c.calls.size(), 3u);
  EXPECT_EQ(c.calls[0].stage, "agent.schema_embed");
  EXPECT_TRUE(c.calls[0].error.empty()) << c.calls[0].error;
  EXPECT_EQ(c.calls[0].prompt_tokens, 40);
  EXPECT_EQ(c.calls[1].stage, "agent.ledger");
  EXPECT_NE(c.calls[1].prompt.find("avg_reading"), std::string::npos);
  EXPECT_NE(c.reasoning.find("embeddings joined the scores"), std::string::npos);
}

TEST_F(Agent, BusinessRulesReachTheLedger) {
  const fs::path rules = dir_->path() / "rules";
  fs::create_directories(rules);
  {
    std::ofstream out(rules / "regional_schools.md");
    out << "A school counts as 'in a region' through its district.\n";
  }
  FakeOpenAiServer server(scripted({kLedger, sql_answer(kGood)}));
  Candidate with = run_one(server, json{{"rules_dir", rules.string()}});
  EXPECT_NE(with.calls[0].prompt.find("counts as 'in a region' through its district"), std::string::npos);
  FakeOpenAiServer again(scripted({kLedger, sql_answer(kGood)}));
  Candidate without = run_one(again);
  EXPECT_NE(without.calls[0].prompt.find("this database (house definitions that override common sense):\n(none)"),
            std::string::npos);
}

TEST_F(Agent, ConfigErrorsNameTheKey) {
  auto client = llm::Client::from_config(core::Config(json{{"llm", fake_llm("http://127.0.0.1:9/v1")}}));
  ASSERT_TRUE(client.is_ok());
  auto err = [&](json agent) {
    core::Config config(json{{"agent", agent}, {"generate", {{"generators", json::parse(R"([{"name": "agent"}])")}}}});
    auto g = make_generators(config, client->get(), ex_, llm::PromptLibrary::bundled());
    return g.is_ok() ? std::string() : g.status().message();
  };
  EXPECT_NE(err(json{{"max_attempts", 0}}).find("agent.max_attempts"), std::string::npos);
  EXPECT_NE(err(json{{"fast_attempts", 5}, {"max_attempts", 4}}).find("agent.fast_attempts"), std::string::npos);
  EXPECT_NE(err(json{{"timeout_s", "soon"}}).find("agent.timeout_s"), std::string::npos);
  EXPECT_EQ(err(json::object()), "");
}

// The shipped pooled config runs through the CLI with sim: agent, recap and the CHASE generators'
// candidates share one pool and the same selectors (SIMULATED answers).
TEST_F(Agent, AgenticChaseConfigPoolsEveryGeneratorThroughTheCli) {
  const fs::path configs = testing::fixtures_dir().parent_path().parent_path() / "configs";
  const fs::path out = dir_->path() / "cli-run";
  auto q = [](const fs::path& p) { return "'" + p.string() + "'"; };
  auto r = testing::run_nl2sql(
      "run --config " + q(configs / "agentic_chase.json") + " --benchmark bird --data " + q(root_) +
      " --questions 0-2 --out " + q(out) + " --index-dir " + q(dir_->path() / "index") + " --progress off" +
      " --set 'llm.models={\"sim\":{\"provider\":\"sim\"}}' --set llm.default_profile=sim --set llm.cache.mode=off" +
      " --set 'generate.generators=[{\"name\":\"dc\",\"samples\":2},{\"name\":\"agent\",\"samples\":2},"
      "{\"name\":\"recap\"}]'");
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("SIMULATED"), std::string::npos) << r.out;
  auto data = run::load_run(out);
  ASSERT_TRUE(data.is_ok()) << data.status().message();
  ASSERT_EQ(data->records.size(), 3u);
  for (const auto& rec : testing::written_records(*data)) {
    std::map<std::string, int> per_generator;
    for (const auto& c : rec["candidates"]) ++per_generator[c.value("generator", "")];
    EXPECT_EQ(per_generator["dc"], 2) << rec.dump();
    EXPECT_EQ(per_generator["agent"], 2);
    EXPECT_EQ(per_generator["recap"], 1);
    EXPECT_TRUE(rec["selections"].contains("tournament"));
  }
}

TEST(ResultCheck, HeuristicsNameWhatTheySee) {
  db::ExecutionResult r;
  r.result.columns = {"name", "extra"};
  r.result.rows = {{db::Value::text("a"), db::Value::null()},
                   {db::Value::text("a"), db::Value::null()},
                   {db::Value::text("b"), db::Value::null()}};
  auto s = summarize_result(r, 2);
  EXPECT_EQ(s.rows, 3u);
  EXPECT_EQ(s.duplicate_rows, 1u);
  EXPECT_EQ(s.null_counts, (std::vector<size_t>{0, 3}));
  EXPECT_EQ(s.first_rows.size(), 2u);
  auto issues = check_result(s, "How many schools are there?");
  std::vector<std::string> kinds;
  for (const auto& i : issues) kinds.push_back(i.kind);
  EXPECT_EQ(kinds, (std::vector<std::string>{"duplicate_rows", "null_column"}));  // 3 rows ≤ 5: no row_count
  ResultCheckOptions tight;
  tight.single_answer_max_rows = 1;
  EXPECT_EQ(check_result(s, "How many schools are there?", tight).front().kind, "row_count");
  EXPECT_TRUE(check_result(s, "List the schools.", tight).size() == 2u);  // a list may be long
  EXPECT_FALSE(expects_single_answer("For each region, how many schools are there?"));
  EXPECT_TRUE(expects_single_answer("Which district has the largest population?"));
  EXPECT_NE(render_summary(s).find("extra (3 NULL)"), std::string::npos);

  db::ExecutionResult empty;
  empty.result.columns = {"x"};
  EXPECT_EQ(check_result(summarize_result(empty), "q").front().kind, "empty_result");
  db::ExecutionResult bad;
  bad.status = db::ExecStatus::kError;
  bad.error = "no such table: t";
  auto e = check_result(summarize_result(bad), "q");
  ASSERT_EQ(e.size(), 1u);
  EXPECT_EQ(e.front().kind, "error");
  EXPECT_GT(issue_weight(e), issue_weight(check_result(summarize_result(empty), "q")));
}

// With the sim provider the whole loop runs offline on every mini question (SIMULATED answers).
TEST_F(Agent, SimRunsEndToEndOnTheMiniSet) {
  json sim = json::parse(R"({"models": {"sim": {"provider": "sim"}}, "default_profile": "sim",
                             "cache": {"mode": "off"}, "sim": {"seed": 3}})");
  auto run = make(sim, json{{"fast_attempts", 2}, {"max_attempts", 4}},
                  json::parse(R"([{"name": "agent", "samples": 2}])"));
  ASSERT_EQ(run.generators.size(), 1u);
  size_t with_sql = 0, slow = 0, total = 0;
  for (const auto& q : ds_->questions) {
    auto cands = run.generators.front()->generate(input_for(q.question_id));
    ASSERT_TRUE(cands.is_ok()) << q.question_id << ": " << cands.status().message();
    ASSERT_EQ(cands->size(), 2u);
    EXPECT_EQ(cands->at(0).calls.front().stage, "agent.ledger");
    EXPECT_NE(cands->at(1).calls.front().stage, "agent.ledger");  // the ledger is shared, traced once
    for (const auto& c : *cands) {
      ++total;
      with_sql += !c.sql.empty();
      for (const auto& call : c.calls) {
        EXPECT_EQ(call.provider, "sim");
        EXPECT_TRUE(call.error.empty()) << call.error;
        slow += call.stage == "agent.slow";
      }
      EXPECT_LE(c.calls.size(), 5u);  // ledger + at most max_attempts writers
    }
    // The sim fact sheet is derived from gold: it names gold's tables.
    auto sheet = cands->at(0).calls.front().response;
    EXPECT_NE(sheet.find("\"required_tables\""), std::string::npos);
  }
  EXPECT_EQ(total, ds_->questions.size() * 2);
  EXPECT_EQ(with_sql, total);
  // Deterministic: the same seed gives the same SQL.
  auto again = run.generators.front()->generate(input_for("3"));
  auto first = run.generators.front()->generate(input_for("3"));
  ASSERT_TRUE(again.is_ok() && first.is_ok());
  EXPECT_EQ(again->at(0).sql, first->at(0).sql);
  EXPECT_EQ(again->at(1).reasoning, first->at(1).reasoning);
  (void)slow;
}

}  // namespace
}  // namespace nl2sql::generate
