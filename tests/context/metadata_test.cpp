// Metadata enrichment on a fixture database built here: statistics, FK inference (no declared
// FK; one true inclusion dependency, one decoy with low coverage, one accidental inclusion the
// name rules out), the cache (fresh / stale), rendering with stats and inferred FKs, LLM
// descriptions through the fake server, and `nl2sql metadata` / `nl2sql schema`.
#include <algorithm>

#include <gtest/gtest.h>

#include "support/fake_openai_server.h"
#include "nl2sql/context/metadata.h"
#include "nl2sql/context/schema_render.h"
#include "nl2sql/db/executor.h"
#include "nl2sql/llm/client.h"
#include "support/test_env.h"

namespace nl2sql::context {
namespace {
namespace fs = std::filesystem;

// district 1..10; branch 1..30; client: district_id in 1..10 (true FK), branch_code mostly
// outside branch (decoy: 2 of 10 distinct values found), rating 1..5 (included in every id range
// by accident; its name points nowhere).
std::string fixture_sql(int extra_clients = 0) {
  std::string sql =
      "CREATE TABLE district (district_id INTEGER PRIMARY KEY, name TEXT NOT NULL);\n"
      "CREATE TABLE branch (branch_code INTEGER PRIMARY KEY, city TEXT);\n"
      "CREATE TABLE client (client_id INTEGER PRIMARY KEY, district_id INTEGER, branch_code INTEGER, "
      "rating INTEGER, nickname TEXT);\n";
  for (int i = 1; i <= 10; ++i) sql += "INSERT INTO district VALUES (" + std::to_string(i) + ", 'District " + std::to_string(i) + "');\n";
  for (int i = 1; i <= 30; ++i) sql += "INSERT INTO branch VALUES (" + std::to_string(i) + ", 'City " + std::to_string(i % 7) + "');\n";
  const int branch_codes[] = {1, 2, 41, 42, 43, 44, 45, 46, 47, 48};
  for (int i = 1; i <= 40 + extra_clients; ++i)
    sql += "INSERT INTO client VALUES (" + std::to_string(i) + ", " + std::to_string(1 + i % 10) + ", " +
           std::to_string(branch_codes[i % 10]) + ", " + std::to_string(1 + i % 5) + ", " +
           (i % 4 == 0 ? std::string("NULL") : "'nick" + std::to_string(i % 3) + "'") + ");\n";
  return sql;
}

Result<data::Schema> schema_of(const fs::path& db) { return data::read_schema_from_database(db, "bank"); }

class Metadata : public ::testing::Test {
 protected:
  void SetUp() override {
    db_ = dir_ / "bank.sqlite";
    testing::build_database(db_, fixture_sql());
    auto s = schema_of(db_);
    ASSERT_TRUE(s.is_ok()) << s.status().message();
    schema_ = std::move(*s);
    ASSERT_TRUE(schema_.foreign_keys.empty());
  }
  testing::TempDir dir_;
  fs::path db_;
  data::Schema schema_;
  db::Executor ex_;
};

TEST_F(Metadata, ColumnStatistics) {
  auto m = build_metadata("bank", db_, schema_, MetadataOptions{}, ex_);
  ASSERT_TRUE(m.is_ok()) << m.status().message();
  EXPECT_EQ(m->table_rows.at("client"), 40);
  const auto* nick = m->find("client", "nickname");
  ASSERT_NE(nick, nullptr);
  EXPECT_EQ(nick->nulls, 10);
  EXPECT_EQ(nick->distinct, 3);
  EXPECT_EQ(nick->storage_class(), "text");
  EXPECT_EQ(nick->min, "nick0");
  EXPECT_EQ(nick->max, "nick2");
  EXPECT_EQ(nick->min_length, 5);
  ASSERT_EQ(nick->top_values.size(), 3u);
  int64_t counted = 0;
  for (const auto& [v, n] : nick->top_values) counted += n;
  EXPECT_EQ(counted, 30);
  const auto* rating = m->find("client", "rating");
  ASSERT_NE(rating, nullptr);
  EXPECT_EQ(rating->storage_class(), "integer");
  EXPECT_EQ(rating->min, "1");
  EXPECT_EQ(rating->max, "5");
  EXPECT_TRUE(m->find("client", "client_id")->unique());
  EXPECT_TRUE(m->find("client", "client_id")->top_values.empty());  // every count would be 1
  EXPECT_EQ(m->primary_keys.at("district"), std::vector<std::string>{"district_id"});
}

TEST_F(Metadata, InfersTheInclusionDependencyNotTheDecoys) {
  auto m = build_metadata("bank", db_, schema_, MetadataOptions{}, ex_);
  ASSERT_TRUE(m.is_ok()) << m.status().message();
  ASSERT_EQ(m->inferred_fks.size(), 1u) << m->to_json().dump(1);
  const auto& f = m->inferred_fks[0];
  EXPECT_EQ(f.from_table, "client");
  EXPECT_EQ(f.from_column, "district_id");
  EXPECT_EQ(f.to_table, "district");
  EXPECT_EQ(f.to_column, "district_id");
  EXPECT_DOUBLE_EQ(f.coverage, 1.0);
  EXPECT_EQ(f.from_distinct, 10);
  EXPECT_EQ(f.matched, 10);
  EXPECT_EQ(f.to_distinct, 10);
  EXPECT_DOUBLE_EQ(f.name_score, 1.0);
  EXPECT_NE(f.evidence().find("coverage 100.0% (10/10"), std::string::npos) << f.evidence();
  // The decoy was tested and failed on coverage: with the bar at 20% it is reported.
  MetadataOptions low;
  low.min_coverage = 0.2;
  auto l = build_metadata("bank", db_, schema_, low, ex_);
  ASSERT_TRUE(l.is_ok());
  auto decoy = std::find_if(l->inferred_fks.begin(), l->inferred_fks.end(),
                            [](const InferredForeignKey& x) { return x.from_column == "branch_code"; });
  ASSERT_NE(decoy, l->inferred_fks.end());
  EXPECT_DOUBLE_EQ(decoy->coverage, 0.2);
  EXPECT_EQ(decoy->to_table, "branch");
  // rating (1..5) is included in district_id and branch_code, but its name points to neither.
  EXPECT_FALSE(std::any_of(l->inferred_fks.begin(), l->inferred_fks.end(),
                           [](const InferredForeignKey& x) { return x.from_column == "rating"; }));
  MetadataOptions never;
  never.infer_fks = "never";
  EXPECT_TRUE(build_metadata("bank", db_, schema_, never, ex_)->inferred_fks.empty());
  EXPECT_GT(fk_name_score("district_id", "district", "district_id"), 0.99);
  EXPECT_GT(fk_name_score("school", "schools", "school_id"), 0.99);
  EXPECT_LT(fk_name_score("rating", "district", "district_id"), 0.5);
}

TEST_F(Metadata, DeclaredForeignKeysTurnInferenceOffInAutoMode) {
  data::Schema declared = schema_;
  declared.foreign_keys.push_back({"client", "branch_code", "branch", "branch_code"});
  auto m = build_metadata("bank", db_, declared, MetadataOptions{}, ex_);
  ASSERT_TRUE(m.is_ok());
  EXPECT_TRUE(m->inferred_fks.empty());
  EXPECT_EQ(m->declared_fks.size(), 1u);
  MetadataOptions always;
  always.infer_fks = "always";
  auto a = build_metadata("bank", db_, declared, always, ex_);
  ASSERT_EQ(a->inferred_fks.size(), 1u);
  EXPECT_EQ(a->inferred_fks[0].from_column, "district_id");
}

TEST_F(Metadata, CachedPerFingerprintAndOptions) {
  const fs::path idx = dir_ / "index";
  std::string action;
  auto a = open_metadata("bank", db_, schema_, MetadataOptions{}, idx, false, ex_, &action);
  ASSERT_TRUE(a.is_ok()) << a.status().message();
  EXPECT_EQ(action, "built: missing");
  EXPECT_TRUE(fs::exists(idx / "bank.meta.json"));
  auto b = open_metadata("bank", db_, schema_, MetadataOptions{}, idx, false, ex_, &action);
  ASSERT_TRUE(b.is_ok());
  EXPECT_EQ(action, "fresh");
  EXPECT_EQ(b->to_json(), a->to_json());
  MetadataOptions other;
  other.top_values = 2;
  ASSERT_TRUE(open_metadata("bank", db_, schema_, other, idx, false, ex_, &action).is_ok());
  EXPECT_EQ(action, "built: stale: other options");
  // Other bytes: rebuilt with the new row count.
  fs::remove(db_);
  testing::build_database(db_, fixture_sql(5));
  db::Executor fresh;
  auto c = open_metadata("bank", db_, schema_, other, idx, false, fresh, &action);
  ASSERT_TRUE(c.is_ok());
  EXPECT_EQ(action, "built: stale: the database changed");
  EXPECT_EQ(c->table_rows.at("client"), 45);
}

TEST_F(Metadata, RenderedWithStatsAndInferredForeignKeys) {
  auto m = build_metadata("bank", db_, schema_, MetadataOptions{}, ex_);
  ASSERT_TRUE(m.is_ok());
  RenderOptions o;
  o.examples = 0;
  o.stats = false;
  o.inferred_fks = false;
  std::string plain = render_schema(schema_, o, nullptr, nullptr, &*m);
  EXPECT_EQ(plain.find("FOREIGN KEY"), std::string::npos);
  EXPECT_EQ(plain.find("distinct"), std::string::npos);
  o.stats = true;
  o.inferred_fks = true;
  std::string text = render_schema(schema_, o, nullptr, nullptr, &*m);
  EXPECT_NE(text.find("FOREIGN KEY (district_id) REFERENCES district(district_id) -- inferred: coverage 100.0%"),
            std::string::npos) << text;
  EXPECT_NE(text.find("nickname TEXT, -- 40 rows, 10 NULL, 3 distinct, length 5..5 (avg 5.0), most frequent: 'nick"),
            std::string::npos) << text;
  EXPECT_NE(text.find("rating INTEGER, -- 40 rows, 5 distinct, range 1..5"), std::string::npos) << text;
  // A subset keeps the inferred join keys too.
  o.columns = {"client.nickname", "district.name"};
  std::string sub = render_schema(schema_, o, nullptr, nullptr, &*m);
  EXPECT_NE(sub.find("  district_id INTEGER"), std::string::npos) << sub;
  EXPECT_EQ(sub.find("rating"), std::string::npos) << sub;
}

// What every prompt renders from a SchemaSources with metadata: statistics and inferred keys
// by default (RenderOptions::stats / inferred_fks are on), and the prompt-budget ladder's first
// rung cuts the statistics while the inferred keys stay; without metadata the rendering is the
// plain one.
TEST_F(Metadata, PromptSchemaCarriesTheMetadataAndTheLadderCutsStatisticsFirst) {
  auto m = build_metadata("bank", db_, schema_, MetadataOptions{}, ex_);
  ASSERT_TRUE(m.is_ok());
  RenderOptions o;
  o.examples = 0;
  const std::string plain = render_schema(SchemaSources{&schema_, nullptr, nullptr, nullptr}, o);
  EXPECT_EQ(plain, render_schema(schema_, o));
  EXPECT_EQ(plain.find("inferred"), std::string::npos);
  const std::string full = render_schema(SchemaSources{&schema_, nullptr, nullptr, &*m}, o);
  const std::string fk = "FOREIGN KEY (district_id) REFERENCES district(district_id) -- inferred: coverage 100.0%";
  EXPECT_NE(full.find(fk), std::string::npos) << full;
  EXPECT_NE(full.find("rating INTEGER, -- 40 rows, 5 distinct, range 1..5"), std::string::npos) << full;
  const RenderOptions rung1 = options_at_rung(o, 1, {});
  EXPECT_FALSE(rung1.stats);
  EXPECT_TRUE(rung1.inferred_fks);
  const std::string lighter = render_schema(SchemaSources{&schema_, nullptr, nullptr, &*m}, rung1);
  EXPECT_NE(lighter.find(fk), std::string::npos) << lighter;
  EXPECT_EQ(lighter.find(" rows, "), std::string::npos) << lighter;  // statistics open with the row count
  EXPECT_LT(lighter.size(), full.size());
  EXPECT_GT(lighter.size(), plain.size());  // the inferred key's line
}

TEST_F(Metadata, LlmDescriptionsAreCachedAndRendered) {
  llm::testing::FakeOpenAiServer server([](const httplib::Request& req, int64_t) {
    auto body = nlohmann::json::parse(req.body);
    std::string prompt = body["messages"][0]["content"];
    std::string col = prompt.substr(prompt.find("Column: ") + 8);
    col = col.substr(0, col.find('\n'));
    if (col == "rating") return llm::testing::FakeReply{500, "{}"};
    return llm::testing::FakeReply{200, llm::testing::completion_body("Holds the " + col + ".\n")};
  });
  llm::LlmSettings s;
  llm::ModelProfile p;
  p.name = "main";
  p.base_url = server.base_url();
  p.model = "fake";
  p.api_key_env = "";
  s.profiles["main"] = p;
  s.default_profile = "main";
  s.retry.max_attempts = 1;
  s.cache.mode = llm::CacheMode::kOff;
  auto client = llm::Client::create(s);
  ASSERT_TRUE(client.is_ok());
  auto prompt = llm::PromptTemplate::load_named(llm::bundled_prompts_dir(), "describe_column");
  ASSERT_TRUE(prompt.is_ok()) << prompt.status().message();
  auto m = build_metadata("bank", db_, schema_, MetadataOptions{}, ex_);
  ASSERT_TRUE(m.is_ok());
  std::vector<std::string> errors;
  std::vector<llm::LlmCallTrace> calls;
  size_t columns = 0;
  for (const auto& t : schema_.tables) columns += t.columns.size();
  size_t n = describe_columns(*m, schema_, **client, *prompt, errors, &calls);
  EXPECT_EQ(n, columns - 1);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_NE(errors[0].find("client.rating"), std::string::npos);
  EXPECT_EQ(calls.size(), columns);
  EXPECT_EQ(m->descriptions.at("client.nickname").text, "Holds the nickname.");
  // Only the missing one is asked again.
  errors.clear();
  int64_t before = server.requests();
  describe_columns(*m, schema_, **client, *prompt, errors);
  EXPECT_EQ(server.requests() - before, 1);
  // Round trip through the cache file keeps them.
  ASSERT_TRUE(save_metadata(*m, dir_ / "index").is_ok());
  std::string action;
  auto loaded = open_metadata("bank", db_, schema_, MetadataOptions{}, dir_ / "index", false, ex_, &action);
  ASSERT_TRUE(loaded.is_ok());
  EXPECT_EQ(action, "fresh");
  EXPECT_EQ(loaded->descriptions.size(), columns - 1);
  RenderOptions o;
  o.examples = 0;
  std::string text = render_schema(schema_, o, nullptr, nullptr, &*loaded);
  EXPECT_NE(text.find("nickname TEXT, -- (generated) Holds the nickname."), std::string::npos) << text;
}

}  // namespace
}  // namespace nl2sql::context
