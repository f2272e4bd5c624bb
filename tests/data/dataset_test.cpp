#include "nl2sql/data/dataset.h"

#include <fstream>

#include <gtest/gtest.h>

#include "support/test_env.h"

namespace nl2sql::data {
namespace {
namespace fs = std::filesystem;

void write(const fs::path& p, const std::string& s) {
  fs::create_directories(p.parent_path());
  std::ofstream(p, std::ios::binary) << s;
}

TEST(Csv, QuotedFieldsNewlinesAndCrlf) {
  auto rows = parse_csv("a,b,c\r\n1,\"x, y\",\"multi\r\nline \"\"q\"\"\"\r\n2,,\n", "f.csv");
  ASSERT_TRUE(rows.is_ok()) << rows.status().message();
  ASSERT_EQ(rows->size(), 3u);
  EXPECT_EQ((*rows)[1][1], "x, y");
  EXPECT_EQ((*rows)[1][2], "multi\nline \"q\"");
  EXPECT_EQ((*rows)[2], (std::vector<std::string>{"2", "", ""}));
  auto bad = parse_csv("a,b\n1,\"never closed\n", "bad.csv");
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.status().message().find("bad.csv:2"), std::string::npos) << bad.status().message();
}

TEST(MiniBird, LoadsQuestionsSchemasAndDescriptionsInEveryEncoding) {
  testing::TempDir dir;
  auto root = testing::build_mini_bird(dir / "mini");
  DatasetSpec spec;
  spec.benchmark = Benchmark::kBird;
  spec.data_dir = root;
  auto ds = load_dataset(spec);
  ASSERT_TRUE(ds.is_ok()) << ds.status().message();
  EXPECT_EQ(ds->questions.size(), 21u);
  EXPECT_TRUE(ds->skipped.empty());
  EXPECT_EQ(ds->schemas.size(), 2u);
  const Schema& s = ds->schemas.at("regional_schools");
  const Table* district = s.find_table("district");
  ASSERT_NE(district, nullptr);
  // CRLF file, doubled quotes inside a quoted field
  EXPECT_EQ(district->columns[2].value_description,
            "stored with a lower-case direction word, e.g. \"east Bohemia\"");
  // UTF-8 with BOM: the first header is still recognised, multi-line value description kept
  const Table* school = s.find_table("SCHOOL");
  ASSERT_NE(school, nullptr);
  EXPECT_EQ(school->columns[0].description, "unique id of the school");
  EXPECT_EQ(school->columns[5].value_description, "1: charter school\n0: public school");
  // Latin-1: decoded to UTF-8
  EXPECT_EQ(s.find_table("score")->columns[3].description,
            "average math score (acad\xC3\xA9mie scale)");
  // keys from tables.json
  ASSERT_FALSE(s.foreign_keys.empty());
  EXPECT_EQ(s.find_table("score")->primary_key, (std::vector<std::string>{"school_id", "year"}));
  auto fp1 = ds->fingerprint();
  ASSERT_TRUE(fp1.is_ok());
  EXPECT_EQ(fp1->size(), 32u);
}

TEST(MiniBird, MissingDatabaseSkipsItsQuestionsOnly) {
  testing::TempDir dir;
  auto root = testing::build_mini_bird(dir / "mini");
  fs::remove(root / "dev_databases" / "music_store" / "music_store.sqlite");
  DatasetSpec spec;
  spec.data_dir = root;
  auto ds = load_dataset(spec);
  ASSERT_TRUE(ds.is_ok());
  EXPECT_EQ(ds->questions.size(), 11u);
  EXPECT_EQ(ds->skipped.size(), 10u);
  EXPECT_NE(ds->skipped[0].reason.find("music_store.sqlite"), std::string::npos);
}

TEST(Loaders, MalformedJsonNamesFileAndLine) {
  testing::TempDir dir;
  write(dir / "bird" / "dev.json", "[\n {\"question_id\": 0, \"db_id\": \"x\",\n  \"SQL\": \"SELECT 1\" ,,}\n]");
  DatasetSpec spec;
  spec.data_dir = dir / "bird";
  auto ds = load_dataset(spec);
  ASSERT_FALSE(ds.is_ok());
  EXPECT_EQ(ds.status().code(), ErrorCode::kInvalidInput);
  EXPECT_NE(ds.status().message().find("dev.json:3:"), std::string::npos) << ds.status().message();
}

TEST(Loaders, MissingFieldNamesTheQuestion) {
  testing::TempDir dir;
  write(dir / "bird" / "dev.json", R"([{"question_id": 0, "db_id": "x", "SQL": "SELECT 1"},
    {"question_id": 1, "db_id": "x"}])");
  DatasetSpec spec;
  spec.data_dir = dir / "bird";
  auto ds = load_dataset(spec);
  ASSERT_FALSE(ds.is_ok());
  EXPECT_NE(ds.status().message().find("question #1"), std::string::npos);
  EXPECT_NE(ds.status().message().find("\"SQL\""), std::string::npos);
}

TEST(Loaders, MissingFileIsNotFound) {
  DatasetSpec spec;
  spec.data_dir = "/nonexistent/bird";
  auto ds = load_dataset(spec);
  ASSERT_FALSE(ds.is_ok());
  EXPECT_EQ(ds.status().code(), ErrorCode::kNotFound);
  EXPECT_NE(ds.status().message().find("dev.json"), std::string::npos);
}

TEST(Loaders, JsonlQuestionsAndSchemaFromTheDatabase) {
  testing::TempDir dir;
  testing::build_database(dir / "dbs" / "tiny" / "tiny.sqlite",
                          "CREATE TABLE p(id INTEGER PRIMARY KEY, name TEXT);"
                          "CREATE TABLE c(id INTEGER PRIMARY KEY, p_id INTEGER REFERENCES p(id));");
  write(dir / "q.jsonl",
        "{\"question_id\": \"a1\", \"db_id\": \"tiny\", \"sql\": \"SELECT 1\"}\n\n"
        "{\"question_id\": \"a2\", \"db_id\": \"gone\", \"sql\": \"SELECT 2\", \"difficulty\": \"hard\"}\n");
  DatasetSpec spec;
  spec.benchmark = Benchmark::kJsonl;
  spec.questions = dir / "q.jsonl";
  spec.db_root = dir / "dbs";
  auto ds = load_dataset(spec);
  ASSERT_TRUE(ds.is_ok()) << ds.status().message();
  ASSERT_EQ(ds->questions.size(), 1u);
  EXPECT_EQ(ds->questions[0].question_id, "a1");
  ASSERT_EQ(ds->skipped.size(), 1u);
  EXPECT_EQ(ds->skipped[0].question_id, "a2");
  const Schema& s = ds->schemas.at("tiny");
  ASSERT_EQ(s.foreign_keys.size(), 1u);
  EXPECT_EQ(s.foreign_keys[0].to_table, "p");
  EXPECT_EQ(s.foreign_keys[0].to_column, "id");

  write(dir / "bad.jsonl", "{\"question_id\": \"a1\", \"db_id\": \"tiny\", \"sql\": \"SELECT 1\"}\n{oops}\n");
  spec.questions = dir / "bad.jsonl";
  auto bad = load_dataset(spec);
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.status().message().find("bad.jsonl:2:"), std::string::npos) << bad.status().message();
}

TEST(Loaders, SpiderPlainGoldFile) {
  testing::TempDir dir;
  testing::build_database(dir / "database" / "d1" / "d1.sqlite", "CREATE TABLE t(x);");
  write(dir / "gold.sql", "SELECT count(*) FROM t\td1\r\nSELECT x FROM t\td1\n");
  DatasetSpec spec;
  spec.benchmark = Benchmark::kSpider;
  spec.data_dir = dir.path();
  spec.questions = dir / "gold.sql";
  auto ds = load_dataset(spec);
  ASSERT_TRUE(ds.is_ok()) << ds.status().message();
  ASSERT_EQ(ds->questions.size(), 2u);
  EXPECT_EQ(ds->questions[0].gold_sql, "SELECT count(*) FROM t");
  EXPECT_EQ(ds->questions[1].db_id, "d1");
}

}  // namespace
}  // namespace nl2sql::data
