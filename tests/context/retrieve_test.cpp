// Keyword extraction and retrieval on the bundled mini BIRD set (library and `nl2sql retrieve`).
#include <algorithm>
#include <fstream>

#include <nlohmann/json.hpp>

#include <gtest/gtest.h>

#include "nl2sql/context/retrieve.h"
#include "nl2sql/context/value_index.h"
#include "nl2sql/db/executor.h"
#include "support/test_env.h"

namespace nl2sql::context {
namespace {
namespace fs = std::filesystem;

bool has_keyword(const std::vector<Keyword>& ks, const std::string& text, const std::string& source = "") {
  return std::any_of(ks.begin(), ks.end(), [&](const Keyword& k) {
    return k.text == text && (source.empty() || k.source == source);
  });
}

TEST(Keywords, HeuristicSources) {
  auto ks = extract_keywords("How many albums did \"Night Flight\" sell in 2023 at Hradec Králové or Songs of Prague?",
                             "east Bohemia refers to region = 'east Bohemia'; SME refers to segment LIKE '%SME%'");
  EXPECT_TRUE(has_keyword(ks, "east Bohemia", "evidence"));
  EXPECT_TRUE(has_keyword(ks, "SME", "evidence"));  // LIKE wildcards stripped
  EXPECT_TRUE(has_keyword(ks, "Night Flight", "quoted"));
  EXPECT_TRUE(has_keyword(ks, "Hradec Králové", "capitalized"));
  EXPECT_TRUE(has_keyword(ks, "Songs of Prague", "capitalized"));
  EXPECT_TRUE(has_keyword(ks, "2023", "number"));
  EXPECT_TRUE(has_keyword(ks, "albums", "ngram"));
  EXPECT_FALSE(has_keyword(ks, "How"));
  EXPECT_FALSE(has_keyword(ks, "did"));
  EXPECT_FALSE(has_keyword(ks, "many albums"));  // starts with a stop word
  // Deduplicated by normalized text: "east Bohemia" appears in question n-grams too.
  auto again = extract_keywords("east Bohemia EAST BOHEMIA", "");
  EXPECT_EQ(std::count_if(again.begin(), again.end(), [](const Keyword& k) { return k.text == "east Bohemia" || k.text == "EAST BOHEMIA"; }), 1);
  // An apostrophe inside a word is not a quote.
  auto apos = extract_keywords("What is the school's name in 'north Moravia'?", "");
  EXPECT_TRUE(has_keyword(apos, "north Moravia", "quoted"));
  EXPECT_TRUE(has_keyword(apos, "school's"));
  auto curly = extract_keywords("Whose last name is \u2018Smith\u2019 or \u201CNovak\u201D?", "");
  EXPECT_TRUE(has_keyword(curly, "Smith", "quoted"));
  EXPECT_TRUE(has_keyword(curly, "Novak", "quoted"));
  EXPECT_FALSE(has_keyword(curly, "\u2018Smith\u2019"));
}

class MiniRetrieve : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = testing::build_mini_bird(dir_ / "mini");
    data::DatasetSpec spec;
    spec.benchmark = data::Benchmark::kBird;
    spec.data_dir = root_;
    auto ds = data::load_dataset(spec);
    ASSERT_TRUE(ds.is_ok()) << ds.status().message();
    ds_ = std::move(*ds);
  }
  ValueIndex index_of(const std::string& db_id) {
    IndexOptions o;
    o.index_dir = dir_ / "index";
    o.threads = 2;
    auto idx = open_index(db_id, ds_.db_paths.at(db_id), ds_.schemas.at(db_id), o, ex_);
    EXPECT_TRUE(idx.is_ok()) << idx.status().message();
    return std::move(*idx);
  }
  Retrieval run(const std::string& qid, bool exhaustive = false) {
    const auto* q = ds_.find_question(qid);
    EXPECT_NE(q, nullptr);
    RetrievalOptions o;
    o.exhaustive = exhaustive;
    return retrieve(index_of(q->db_id), ds_.schemas.at(q->db_id), q->question, q->evidence, o);
  }
  testing::TempDir dir_;
  fs::path root_;
  data::Dataset ds_;
  db::Executor ex_;
};

TEST_F(MiniRetrieve, EastBohemiaIsFoundInRegion) {
  auto r = run("0");
  ASSERT_FALSE(r.values.empty());
  EXPECT_EQ(r.values[0].table, "district");
  EXPECT_EQ(r.values[0].column, "region");
  EXPECT_EQ(r.values[0].value, "east Bohemia");
  EXPECT_DOUBLE_EQ(r.values[0].score, 1.0);
  // "region" in the question matches the column by name.
  ASSERT_FALSE(r.columns.empty());
  EXPECT_TRUE(std::any_of(r.columns.begin(), r.columns.end(), [](const ColumnMatch& c) {
    return c.table == "district" && c.column == "region" && c.via == "name";
  }));
}

TEST_F(MiniRetrieve, ValuesFromTheQuestionAlone) {
  // Neither question quotes its value and one has no evidence: n-grams and capitalised spans.
  auto songs = run("14");
  ASSERT_FALSE(songs.values.empty());
  EXPECT_EQ(songs.values[0].value, "Songs of Prague");
  EXPECT_EQ(songs.values[0].column, "title");
  auto nordlys = run("11");
  ASSERT_FALSE(nordlys.values.empty());
  EXPECT_EQ(nordlys.values[0].value, "Nordlys");
  EXPECT_EQ(nordlys.values[0].table, "artist");
  // A typo and a missing accent still meet the stored value.
  auto idx = index_of("music_store");
  RetrievalOptions o;
  auto r = retrieve(idx, ds_.schemas.at("music_store"), "Albums by Marta Kubisova or Nordlyss?", "", o);
  auto has = [&](const std::string& v) {
    return std::any_of(r.values.begin(), r.values.end(), [&](const ValueMatch& m) { return m.value == v; });
  };
  EXPECT_TRUE(has("Marta Kubišová"));
  EXPECT_TRUE(has("Nordlys"));
}

TEST_F(MiniRetrieve, LshFindsWhatExhaustiveFindsWithHighScores) {
  // LSH may miss weak matches (Jaccard below its ~0.3 threshold) but not strong ones, and it
  // never returns anything the exhaustive scan would not.
  size_t strong = 0;
  for (const auto& q : ds_.questions) {
    auto a = run(q.question_id, false), b = run(q.question_id, true);
    for (const auto& v : b.values) {
      if (v.score < 0.8) continue;
      ++strong;
      EXPECT_TRUE(std::any_of(a.values.begin(), a.values.end(), [&](const ValueMatch& m) {
        return m.value_id == v.value_id;
      })) << q.question_id << ": " << v.value;
    }
    for (const auto& v : a.values)
      EXPECT_TRUE(std::any_of(b.values.begin(), b.values.end(), [&](const ValueMatch& m) {
        return m.value_id == v.value_id && m.score == v.score;
      }) || b.values.size() == RetrievalOptions{}.max_values) << q.question_id << ": " << v.value;
    EXPECT_LT(a.candidates_scored, b.candidates_scored);
  }
  EXPECT_GE(strong, 8u);
}

TEST_F(MiniRetrieve, CliPrintsKeywordsValuesAndColumns) {
  const std::string common = "--benchmark bird --data '" + root_.string() + "' --index-dir '" +
                             (dir_ / "cli_index").string() + "'";
  auto idx = testing::run_nl2sql("index " + common);
  ASSERT_EQ(idx.exit_code, 0) << idx.err;
  EXPECT_NE(idx.out.find("2 databases (2 built, 0 fresh)"), std::string::npos) << idx.out;
  EXPECT_NE(idx.out.find("identifier name"), std::string::npos) << idx.out;
  EXPECT_NE(idx.out.find("peak RSS"), std::string::npos);
  auto again = testing::run_nl2sql("index " + common + " --db music_store");
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_NE(again.out.find("1 databases (0 built, 1 fresh)"), std::string::npos) << again.out;

  auto r = testing::run_nl2sql("retrieve " + common + " --question-id 0");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("\"east Bohemia\"[evidence]"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("district.region = 'east Bohemia' (1.000"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("matched columns"), std::string::npos);
  EXPECT_NE(r.out.find("district.region (1.000, name"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(", fresh ("), std::string::npos) << r.out;
  // The index opening is timed apart from the question's context (issue 22).
  EXPECT_NE(r.out.find("), opened in "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("ms without the index opening"), std::string::npos) << r.out;
  auto rj = testing::run_nl2sql("retrieve " + common + " --question-id 0 --json");
  ASSERT_EQ(rj.exit_code, 0) << rj.err;
  auto timed = nlohmann::json::parse(rj.out);
  ASSERT_TRUE(timed.contains("timings_ms")) << rj.out;
  EXPECT_GE(timed["timings_ms"]["index_load"].get<double>(), 0.0);
  EXPECT_GE(timed["timings_ms"]["context"].get<double>(), 0.0);
  EXPECT_EQ(timed["index"]["action"], "fresh");
  EXPECT_GT(timed["index"]["values"].get<size_t>(), 0u);

  // With a config naming a (simulated) model: model keywords merged and attributed, column
  // filtering, the calls labelled simulated.
  const fs::path cfg = dir_ / "sim.json";
  {
    std::ofstream f(cfg);
    f << R"({"llm": {"models": {"sim": {"provider": "sim"}}, "cache": {"mode": "off"}},
             "context": {"keywords": {"llm": true}, "column_filter": {"enabled": true}}})";
  }
  auto withllm = testing::run_nl2sql("retrieve " + common + " --question-id 0 --config '" + cfg.string() + "'");
  ASSERT_EQ(withllm.exit_code, 0) << withllm.err;
  EXPECT_NE(withllm.out.find("model keywords: "), std::string::npos) << withllm.out;
  EXPECT_NE(withllm.out.find("also found by the heuristic: "), std::string::npos) << withllm.out;
  EXPECT_NE(withllm.out.find("selected columns ("), std::string::npos) << withllm.out;
  EXPECT_NE(withllm.out.find("simulated: gold-derived answers"), std::string::npos) << withllm.out;
  EXPECT_NE(withllm.out.find("district.region = 'east Bohemia' (1.000"), std::string::npos) << withllm.out;
  auto js = testing::run_nl2sql("retrieve " + common + " --question-id 0 --json --config '" + cfg.string() + "'");
  ASSERT_EQ(js.exit_code, 0) << js.err;
  auto j = nlohmann::json::parse(js.out);
  EXPECT_EQ(j["keywords"][0]["source"], "evidence");
  EXPECT_GT(j["calls"].size(), 1u);
  auto badcfg = testing::run_nl2sql("retrieve " + common + " --question-id 0 --set context.keywords.llm=maybe");
  EXPECT_EQ(badcfg.exit_code, 2);

  // The index's parameters are the run's context.index.* keys: an index built with --ngram 4 is
  // the one a config with context.index.ngram=4 finds fresh.
  const std::string other = "--benchmark bird --data '" + root_.string() + "' --index-dir '" +
                            (dir_ / "ngram4").string() + "'";
  auto four = testing::run_nl2sql("index " + other + " --db regional_schools --ngram 4");
  ASSERT_EQ(four.exit_code, 0) << four.err;
  auto fresh = testing::run_nl2sql("retrieve " + other + " --question-id 0 --set context.index.ngram=4");
  ASSERT_EQ(fresh.exit_code, 0) << fresh.err;
  EXPECT_NE(fresh.out.find(", fresh ("), std::string::npos) << fresh.out;
  EXPECT_EQ(testing::run_nl2sql("index " + other + " --ngram 0").exit_code, 2);  // validated as the key

  auto bad = testing::run_nl2sql("retrieve " + common + " --question-id 999");
  EXPECT_EQ(bad.exit_code, 2);
  auto bad_db = testing::run_nl2sql("index " + common + " --db nope");
  EXPECT_EQ(bad_db.exit_code, 2);
}

}  // namespace
}  // namespace nl2sql::context
