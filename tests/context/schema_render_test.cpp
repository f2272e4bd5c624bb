// Schema rendering: a golden rendering of the mini set's regional_schools database (types, keys,
// BIRD descriptions, examples, retrieved values), shuffling and column subsets.
#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#include "nl2sql/context/schema_render.h"
#include "nl2sql/core/files.h"
#include "nl2sql/db/executor.h"
#include "support/test_env.h"

namespace nl2sql::context {
namespace {
namespace fs = std::filesystem;

std::vector<std::string> sorted_lines(const std::string& s) {
  std::vector<std::string> out;
  std::istringstream in(s);
  for (std::string line; std::getline(in, line);) {
    if (!line.empty() && line.back() == ',') line.pop_back();
    out.push_back(line);
  }
  std::sort(out.begin(), out.end());
  return out;
}

class SchemaRender : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = testing::build_mini_bird(dir_ / "mini");
    data::DatasetSpec spec;
    spec.data_dir = root_;
    auto ds = data::load_dataset(spec);
    ASSERT_TRUE(ds.is_ok()) << ds.status().message();
    ds_ = std::move(*ds);
    IndexOptions o;
    o.index_dir = dir_ / "index";
    auto idx = open_index("regional_schools", ds_.db_paths.at("regional_schools"),
                          ds_.schemas.at("regional_schools"), o, ex_);
    ASSERT_TRUE(idx.is_ok()) << idx.status().message();
    index_ = std::move(*idx);
  }
  const data::Schema& schema() { return ds_.schemas.at("regional_schools"); }
  testing::TempDir dir_;
  fs::path root_;
  data::Dataset ds_;
  db::Executor ex_;
  ValueIndex index_;
};

TEST_F(SchemaRender, GoldenWithDescriptionsExamplesAndRetrievedValues) {
  const auto* q = ds_.find_question("0");
  ASSERT_NE(q, nullptr);
  auto r = retrieve(index_, schema(), q->question, q->evidence);
  RenderOptions o;
  o.examples = 2;
  std::string text = render_schema(schema(), o, &index_, &r.values);
  const fs::path golden = testing::fixtures_dir().parent_path() / "context" / "golden" / "regional_schools_schema.sql";
  if (std::getenv("NL2SQL_UPDATE_GOLDEN")) {
    ASSERT_TRUE(core::write_file_atomic(golden, text).is_ok());
  }
  auto want = core::read_file(golden);
  ASSERT_TRUE(want.is_ok()) << want.status().message() << " (NL2SQL_UPDATE_GOLDEN=1 writes it)";
  EXPECT_EQ(text, *want);
  // The same text runs as DDL once the comments are stripped: it is valid SQL.
  testing::build_database(dir_ / "ddl.sqlite", text);
}

TEST_F(SchemaRender, ShuffleIsSeededAndKeepsContent) {
  RenderOptions plain;
  plain.examples = 0;
  RenderOptions a = plain, b = plain;
  a.shuffle_seed = 1;
  b.shuffle_seed = 2;
  std::string base = render_schema(schema(), plain), s1 = render_schema(schema(), a),
              s1again = render_schema(schema(), a), s2 = render_schema(schema(), b);
  EXPECT_EQ(s1, s1again);
  EXPECT_TRUE(s1 != base || s2 != base);
  EXPECT_NE(s1, s2);
  EXPECT_EQ(sorted_lines(s1), sorted_lines(base));
  EXPECT_EQ(sorted_lines(s2), sorted_lines(base));
}

TEST_F(SchemaRender, ColumnSubsetKeepsJoinKeys) {
  RenderOptions o;
  o.descriptions = false;
  o.examples = 0;
  o.columns = {"School.Name", "score.avg_math"};
  std::string text = render_schema(schema(), o);
  EXPECT_EQ(text.find("CREATE TABLE district"), std::string::npos) << text;
  EXPECT_NE(text.find("  name TEXT"), std::string::npos) << text;
  EXPECT_NE(text.find("  school_id INTEGER"), std::string::npos) << text;     // PK of school
  EXPECT_NE(text.find("  avg_math REAL"), std::string::npos) << text;
  EXPECT_NE(text.find("FOREIGN KEY (school_id) REFERENCES school(school_id)"), std::string::npos) << text;
  EXPECT_EQ(text.find("kind"), std::string::npos) << text;
  EXPECT_EQ(text.find("avg_reading"), std::string::npos) << text;
  EXPECT_EQ(text.find("district_id"), std::string::npos) << text;  // FK to a dropped table
}

}  // namespace
}  // namespace nl2sql::context

namespace nl2sql::context {
namespace {

// A code list longer than the old 200-character cut: kept whole at the ladder's first rung,
// shortened only from rung 2, examples gone from rung 1, the column filter's columns from rung 3.
TEST(SchemaLadder, RungsLightenTheSchemaOneStepAtATime) {
  data::Schema schema;
  data::Table t;
  t.name = "trans";
  data::Column id;
  id.name = "trans_id";
  id.type = "INTEGER";
  data::Column k;
  k.name = "k_symbol";
  k.type = "TEXT";
  k.description = "characterization of the transaction";
  k.value_description = std::string("\"POJISTNE\" stands for insurrance payment; \"SLUZBY\" stands for payment for statement; ") +
                        "\"UROK\" stands for interest credited; \"SANKC. UROK\" sanction interest if negative balance; " +
                        "\"SIPO\" stands for household; \"DUCHOD\" stands for old-age pension; \"UVER\" stands for loan payment";
  data::Column amount;
  amount.name = "amount";
  amount.type = "INTEGER";
  t.columns = {id, k, amount};
  t.primary_key = {"trans_id"};
  schema.tables.push_back(t);
  ASSERT_GT(k.value_description.size(), 200u);

  const std::set<std::string> filtered = {"trans.k_symbol"};
  RenderOptions base;
  std::string full = render_schema(schema, options_at_rung(base, 0, filtered));
  EXPECT_NE(full.find("\"UVER\" stands for loan payment"), std::string::npos) << full;
  std::string shortened = render_schema(schema, options_at_rung(base, 2, filtered));
  EXPECT_EQ(shortened.find("\"UVER\" stands for loan payment"), std::string::npos) << shortened;
  EXPECT_NE(shortened.find("…"), std::string::npos);
  EXPECT_LT(shortened.size(), full.size());
  EXPECT_EQ(options_at_rung(base, 1, filtered).examples, 0u);
  EXPECT_TRUE(options_at_rung(base, 2, filtered).columns.empty());
  std::string narrowed = render_schema(schema, options_at_rung(base, 3, filtered));
  EXPECT_EQ(narrowed.find("amount"), std::string::npos) << narrowed;
  EXPECT_NE(narrowed.find("trans_id"), std::string::npos) << "keys stay";
  EXPECT_STREQ(schema_rung_name(3), "filtered_columns");
}

}  // namespace
}  // namespace nl2sql::context
