// Candidate pools read from files (generate/pool_file.h): the four layouts, their errors with
// file, line and key, and how a file covers a dataset.
#include <gtest/gtest.h>

#include <fstream>

#include "nl2sql/generate/pool_file.h"
#include "support/test_env.h"

namespace nl2sql::generate {
namespace {

namespace fs = std::filesystem;

class PoolFile : public ::testing::Test {
 protected:
  fs::path write(const std::string& name, const std::string& text) {
    const fs::path p = dir_ / name;
    std::ofstream(p) << text;
    return p;
  }
  static data::Task task(const std::string& id, size_t index) {
    data::Task t;
    t.question_id = id;
    t.index = index;
    return t;
  }
  Status error_of(const std::string& text, const std::string& name = "pool.json") {
    auto r = CandidatePoolFile::read(write(name, text));
    EXPECT_FALSE(r.is_ok()) << text;
    return r.is_ok() ? Status::ok() : r.status();
  }
  testing::TempDir dir_;
};

TEST_F(PoolFile, APublishedPoolKeepsEachQuestionsOrder) {
  auto f = CandidatePoolFile::read(write("pool.json", R"({"7": ["SELECT 1", " SELECT 2 "], "8": ["SELECT 3"]})"));
  ASSERT_TRUE(f.is_ok()) << f.status().message();
  EXPECT_EQ(f->layout(), "pool");
  const auto& c = f->candidates_for(task("7", 0));
  ASSERT_EQ(c.size(), 2u);
  EXPECT_EQ(c[0].sql, "SELECT 1");
  EXPECT_EQ(c[1].sql, "SELECT 2");  // trimmed
  EXPECT_EQ(c[1].position, 2);
  EXPECT_TRUE(f->candidates_for(task("9", 0)).empty());
  EXPECT_FALSE(f->hash().empty());
}

TEST_F(PoolFile, JsonLinesKeepTheirLineTheirGeneratorAndReasoning) {
  auto f = CandidatePoolFile::read(write("pool.jsonl",
                                         "{\"question_id\": 7, \"sql\": \"SELECT 1\", \"generator\": \"gpt\"}\n"
                                         "\n"
                                         "{\"question_id\": \"7\", \"sql\": \"SELECT 2\", \"reasoning\": \"why\"}\n"
                                         "{\"question_id\": \"8\", \"sql\": \"SELECT 3\"}\n"));
  ASSERT_TRUE(f.is_ok()) << f.status().message();
  EXPECT_EQ(f->layout(), "jsonl");
  const auto& c = f->candidates_for(task("7", 0));
  ASSERT_EQ(c.size(), 2u);
  EXPECT_EQ(c[0].generator, "gpt");
  EXPECT_EQ(c[0].position, 1);
  EXPECT_EQ(c[1].position, 3);
  EXPECT_EQ(c[1].reasoning, "why");
  // A one-line JSONL file is a JSON object too: read as JSON lines, not as a pool.
  auto one = CandidatePoolFile::read(write("one.jsonl", "{\"question_id\": \"8\", \"sql\": \"SELECT 3\"}\n"));
  ASSERT_TRUE(one.is_ok()) << one.status().message();
  EXPECT_EQ(one->layout(), "jsonl");
}

TEST_F(PoolFile, PredictionFilesGiveOneCandidateByQuestionPosition) {
  auto bird = CandidatePoolFile::read(
      write("predict_dev.json", R"({"0": "SELECT a\t----- bird -----\tdb", "2": "SELECT c\t----- bird -----\tdb"})"));
  ASSERT_TRUE(bird.is_ok()) << bird.status().message();
  EXPECT_EQ(bird->layout(), "bird");
  ASSERT_EQ(bird->candidates_for(task("1003", 2)).size(), 1u);  // by position, whatever the id
  EXPECT_EQ(bird->candidates_for(task("1003", 2))[0].sql, "SELECT c");
  auto spider = CandidatePoolFile::read(write("pred.sql", "SELECT a\n\nSELECT c\tdb\n"));
  ASSERT_TRUE(spider.is_ok()) << spider.status().message();
  EXPECT_EQ(spider->layout(), "spider");
  EXPECT_TRUE(spider->candidates_for(task("1", 1)).empty());  // an empty line: nothing
  ASSERT_EQ(spider->candidates_for(task("2", 2)).size(), 1u);
  EXPECT_EQ(spider->candidates_for(task("2", 2))[0].sql, "SELECT c");
  EXPECT_EQ(spider->candidates_for(task("2", 2))[0].position, 3);
}

TEST_F(PoolFile, BadInputNamesFileLineAndKey) {
  auto has = [](const Status& st, const std::string& what) {
    return st.message().find(what) != std::string::npos;
  };
  Status st = error_of(R"({"7": ["SELECT 1", 3]})");
  EXPECT_TRUE(has(st, "pool.json") && has(st, "key \"7\", item 2") && has(st, "expected a SQL string")) << st.message();
  st = error_of(R"({"7": []})");
  EXPECT_TRUE(has(st, "key \"7\"") && has(st, "empty list")) << st.message();
  st = error_of(R"({"7": ["SELECT 1"], "8": "SELECT 2"})");
  EXPECT_TRUE(has(st, "lists and others strings")) << st.message();
  st = error_of("{\"question_id\": 1, \"sql\": \"SELECT 1\"}\n{\"question_id\": 2, \"sql\": 5}\n", "p.jsonl");
  EXPECT_TRUE(has(st, "p.jsonl:2") && has(st, "\"sql\" must be a string")) << st.message();
  st = error_of("{\"question_id\": 1, \"sql\": \"SELECT 1\"}\n{\"sql\": \"SELECT 2\"}\n", "p.jsonl");
  EXPECT_TRUE(has(st, "p.jsonl:2") && has(st, "\"question_id\" is missing")) << st.message();
  st = error_of("{\"question_id\": 1, \"sql\": \"SELECT 1\"}\n{\"question_id\": 2, \n", "p.jsonl");
  EXPECT_TRUE(has(st, "p.jsonl:2")) << st.message();
  st = error_of(R"({"first": "SELECT 1"})");
  EXPECT_TRUE(has(st, "key \"first\" is not a question position")) << st.message();
  st = error_of("[\"SELECT 1\"]");
  EXPECT_TRUE(has(st, "JSON list")) << st.message();
  st = error_of("  \n");
  EXPECT_TRUE(has(st, "empty")) << st.message();
  auto missing = CandidatePoolFile::read(dir_ / "absent.json");
  ASSERT_FALSE(missing.is_ok());
  EXPECT_TRUE(has(missing.status(), "absent.json")) << missing.status().message();
}

TEST_F(PoolFile, CoverageCountsUnknownIdsAndMissingQuestions) {
  auto f = CandidatePoolFile::read(write("pool.json", R"({"7": ["SELECT 1", "SELECT 2"], "x": ["SELECT 9"]})"));
  ASSERT_TRUE(f.is_ok());
  auto c = f->coverage({task("7", 0), task("8", 1)});
  EXPECT_EQ(c.candidates, 2u);
  EXPECT_EQ(c.questions, 1u);
  EXPECT_EQ(c.missing_ids, std::vector<std::string>{"8"});
  EXPECT_EQ(c.unknown_ids, std::vector<std::string>{"x"});
}

}  // namespace
}  // namespace nl2sql::generate
