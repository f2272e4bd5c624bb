// Metadata in prompts (issue 21, item 2), checked on a whole run against a fake endpoint: with
// context.metadata.enabled every prompt that renders a schema — the column filter, dc, qp, os,
// agent, recap, the fixer, the tournament, the ranker and the separating-instance duels — carries
// the metadata (column statistics, inferred foreign keys marked "inferred:", written
// descriptions marked "(generated)"); with it off none does. And `nl2sql selector-data` over the
// run exports pair prompts byte-identical to ones the tournament sent.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <sstream>

#include "nl2sql/core/config.h"
#include "nl2sql/core/files.h"
#include "nl2sql/data/dataset.h"
#include "nl2sql/pipeline/pipeline.h"
#include "nl2sql/run/run_data.h"
#include "support/fake_openai_server.h"
#include "support/mini_run.h"
#include "support/records.h"
#include "support/test_env.h"

namespace nl2sql::pipeline {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using llm::testing::FakeOpenAiServer;
using llm::testing::FakeReply;

// Every call trace of a written record (context, candidates with their fix rounds, selections).
void collect_calls(const json& j, std::vector<json>& out) {
  if (j.is_object()) {
    if (j.contains("prompt") && j.contains("template") && j.contains("stage")) {
      out.push_back(j);
      return;
    }
    for (const auto& [k, v] : j.items()) collect_calls(v, out);
  } else if (j.is_array()) {
    for (const auto& v : j) collect_calls(v, out);
  }
}

class MetadataPrompts : public ::testing::Test {
 protected:
  void SetUp() override {
    setenv("NL2SQL_METADATA_TEST_KEY", "sk-test-7c1d9e2f4a6b0d83", 1);
    data_ = testing::build_mini_bird(dir_ / "mini");
    // No declared foreign keys, so the metadata infers them (infer_fks auto).
    auto tables = testing::read_json_file(data_ / "dev_tables.json");
    for (auto& db : tables) db["foreign_keys"] = json::array();
    ASSERT_TRUE(core::write_file_atomic(data_ / "dev_tables.json", tables.dump()).is_ok());
    // school.is_charter without a description, so the model writes one (context.metadata.describe).
    const fs::path csv = data_ / "dev_databases" / "regional_schools" / "database_description" / "school.csv";
    auto text = core::read_file(csv);
    ASSERT_TRUE(text.is_ok());
    const size_t row = text->find("is_charter,");
    ASSERT_NE(row, std::string::npos);
    ASSERT_TRUE(core::write_file_atomic(csv, text->substr(0, row)).is_ok());
    data::DatasetSpec spec;
    spec.data_dir = data_;
    auto ds = data::load_dataset(spec);
    ASSERT_TRUE(ds.is_ok()) << ds.status().message();
    ds_ = std::move(*ds);
    ASSERT_TRUE(ds_.schemas.at("regional_schools").foreign_keys.empty());
  }

  // A server answering each role in kind: a one-sentence description for the describe prompt;
  // for the rest a reply every reader finds its part in, whose SQL is the question's gold, a wrong
  // query or a broken one (so there are pairs to judge and failures to fix).
  std::unique_ptr<FakeOpenAiServer> server() {
    return std::make_unique<FakeOpenAiServer>([this](const httplib::Request& req, int64_t seq) {
      const json body = json::parse(req.body);
      std::string user;
      for (const auto& m : body["messages"])
        if (m["role"] == "user") user = m["content"];
      {
        std::lock_guard lock(mu_);
        prompts_.push_back(user);
      }
      if (user.find("Column: ") != std::string::npos)
        return FakeReply(200, llm::testing::completion_body("Records a property of the row."));
      std::string sql = seq % 3 == 0 ? "SELECT name FROM district" : seq % 3 == 1 ? "SELECT nme FROM district" : "";
      if (sql.empty())
        for (const auto& q : ds_.questions)
          if (user.find(q.question) != std::string::npos) sql = q.gold_sql;
      if (sql.empty()) sql = "SELECT count(*) FROM school";
      return FakeReply(200, llm::testing::completion_body(
                                "Answer: A\n```json\n{\"keywords\": [\"school\"], \"relevant\": true, \"ranking\": [0, 1]}\n```\n"
                                "```text\n3\n```\n```sql\n" + sql + "\n```"));
    });
  }

  core::Config config(const std::string& base_url, bool metadata) {
    core::Config c(json::parse(R"({
      "llm": {"models": {"fake": {"base_url": "", "model": "fake-coder", "api_key_env": "NL2SQL_METADATA_TEST_KEY"}},
              "default_profile": "fake", "cache": {"mode": "off"},
              "retry": {"max_attempts": 1, "base_delay_s": 0.01, "max_delay_s": 0.01}},
      "context": {"column_filter": {"enabled": true}},
      "generate": {"generators": [{"name": "dc"}, {"name": "qp"}, {"name": "os"}, {"name": "agent"}, {"name": "recap"}]},
      "fix": {"enabled": true, "max_rounds": 1},
      "select": {"method": "tournament"},
      "run": {"selectors": ["tournament", "ranker", "separating_instances"], "primary_selector": "tournament",
              "threads": 2}
    })"));
    c.set("llm.models.fake.base_url", base_url);
    c.set("context.metadata.enabled", metadata);
    c.set("context.metadata.describe", metadata);
    return c;
  }

  // The run's call traces by template, after a run over the first questions (regional_schools).
  std::map<std::string, std::vector<std::string>> run_prompts(const core::Config& c, const fs::path& out) {
    auto o = testing::mini_run_options(c, data_, out, dir_ / "index");
    o.filter.ranges = "0-2";
    auto summary = run(o);
    EXPECT_TRUE(summary.is_ok()) << summary.status().to_string();
    auto data = run::load_run(out);
    EXPECT_TRUE(data.is_ok()) << data.status().message();
    std::map<std::string, std::vector<std::string>> by_template;
    if (!data) return by_template;
    for (const auto& r : testing::written_records(*data)) {
      std::vector<json> calls;
      collect_calls(r, calls);
      for (const auto& call : calls)
        if (call["prompt"].get<std::string>().find("CREATE TABLE") != std::string::npos)
          by_template[call["template"].get<std::string>()].push_back(call["prompt"]);
    }
    return by_template;
  }

  testing::TempDir dir_;
  fs::path data_;
  data::Dataset ds_;
  std::mutex mu_;
  std::vector<std::string> prompts_;  // every user message the server received
};

// Markers of the metadata in a rendered schema (see context/schema_render.h).
bool has_stats(const std::string& p) { return p.find(" distinct") != std::string::npos && p.find(" rows, ") != std::string::npos; }
bool has_inferred_key(const std::string& p) {
  return p.find("FOREIGN KEY (district_id) REFERENCES district(district_id) -- inferred: coverage") !=
         std::string::npos;
}
bool has_generated_description(const std::string& p) {
  return p.find("(generated) Records a property of the row.") != std::string::npos;
}

TEST_F(MetadataPrompts, EveryPromptWithASchemaCarriesTheMetadataWhenOnAndNoneWhenOff) {
  auto on_server = server();
  auto on = run_prompts(config(on_server->base_url(), true), dir_ / "on");
  // Every stage that renders a schema did so (the fixer and the selectors included).
  for (const char* t : {"filter_columns", "generate_divide_conquer", "generate_query_plan", "generate_online_synthetic",
                        "agent_ledger", "fix_sql", "select_pairwise", "select_rank", "evaluate_on_instance"})
    EXPECT_TRUE(on.count(t)) << t << " sent no prompt with a schema";
  bool recap = false;
  for (const auto& [t, prompts] : on) recap = recap || t.rfind("recap", 0) == 0;
  EXPECT_TRUE(recap) << "no recap prompt with a schema";
  for (const auto& [t, prompts] : on) {
    SCOPED_TRACE(t);
    for (const auto& p : prompts) {
      // Statistics everywhere but in the separating-instance duels, whose schema describes the
      // instance's rows (not the database's); the column filter shows one table at a time.
      if (t != "evaluate_on_instance") {
        EXPECT_TRUE(has_stats(p)) << p;
      }
      if (t != "filter_columns" && p.find("CREATE TABLE school") != std::string::npos &&
          p.find("CREATE TABLE district") != std::string::npos) {
        EXPECT_TRUE(has_inferred_key(p)) << p;
      }
      if (p.find("  is_charter") != std::string::npos) {
        EXPECT_TRUE(has_generated_description(p)) << p;
      }
    }
  }
  // The inferred key and a written description reached the generators' prompts.
  ASSERT_FALSE(on["generate_divide_conquer"].empty());
  EXPECT_TRUE(has_inferred_key(on["generate_divide_conquer"].front()));
  EXPECT_TRUE(has_generated_description(on["generate_divide_conquer"].front()));

  auto off_server = server();
  auto off = run_prompts(config(off_server->base_url(), false), dir_ / "off");
  EXPECT_TRUE(off.count("generate_divide_conquer"));
  for (const auto& [t, prompts] : off)
    for (const auto& p : prompts) {
      EXPECT_FALSE(has_stats(p)) << t << "\n" << p;
      EXPECT_EQ(p.find("inferred"), std::string::npos) << t << "\n" << p;
      EXPECT_EQ(p.find("(generated)"), std::string::npos) << t << "\n" << p;
    }
}

// selector-data renders each pair with the tournament's function from the run's inputs: every
// exported user prompt is one the tournament sent, byte for byte, schema and metadata included.
TEST_F(MetadataPrompts, SelectorDataPromptsAreTheTournamentsOwn) {
  auto s = server();
  const fs::path out = dir_ / "run";
  auto prompts = run_prompts(config(s->base_url(), true), out);
  ASSERT_FALSE(prompts["select_pairwise"].empty());
  std::set<std::string> sent;
  {
    std::lock_guard lock(mu_);
    sent.insert(prompts_.begin(), prompts_.end());
  }
  const fs::path pairs = dir_ / "pairs.jsonl";
  auto r = testing::run_nl2sql("selector-data --run '" + out.string() + "' --data '" + data_.string() +
                               "' --index-dir '" + (dir_ / "index").string() + "' --max-pairs 0 --out '" +
                               pairs.string() + "'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto text = core::read_file(pairs);
  ASSERT_TRUE(text.is_ok());
  std::istringstream lines(*text);
  std::string line;
  size_t n = 0;
  while (std::getline(lines, line)) {
    ++n;
    const std::string user = json::parse(line)["messages"][1]["content"];
    EXPECT_NE(user.find("CREATE TABLE"), std::string::npos) << user;
    EXPECT_TRUE(has_stats(user)) << r.out << r.err << user;
    EXPECT_TRUE(sent.count(user)) << "not a prompt the tournament sent:\n" << user;
  }
  EXPECT_GT(n, 0u) << r.out;
}

}  // namespace
}  // namespace nl2sql::pipeline
