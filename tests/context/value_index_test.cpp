// ValueIndex: skip rules, LSH candidate recall on synthetic data, persistence and staleness.
#include <fstream>
#include <random>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "nl2sql/context/text_match.h"
#include "nl2sql/context/value_index.h"
#include "nl2sql/db/executor.h"
#include "support/test_env.h"

namespace nl2sql::context {
namespace {
namespace fs = std::filesystem;

std::string random_word(std::mt19937_64& rng, size_t len) {
  std::string s;
  for (size_t i = 0; i < len; ++i) s.push_back(static_cast<char>('a' + rng() % 26));
  return s;
}

// A database with one column of each kind the skip rules decide about.
std::string fixture_sql(std::vector<std::string>* names, size_t n_names, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::string sql =
      "CREATE TABLE person (person_id INTEGER PRIMARY KEY, code TEXT, name TEXT, homepage TEXT, "
      "bio TEXT, age INTEGER, mixed, blank TEXT, CustomerID TEXT);\n";
  for (size_t i = 0; i < n_names; ++i) {
    std::string name = random_word(rng, 5 + rng() % 4) + " " + random_word(rng, 6 + rng() % 4);
    if (names) names->push_back(name);
    std::string bio(400, 'x');
    sql += fmt::format(
        "INSERT INTO person VALUES ({}, 'C{}', '{}', 'https://example.org/{}', '{}', {}, {}, NULL, 'K{}');\n",
        i + 1, i % 7, name, i, bio, 20 + i % 50, i % 10 == 0 ? "'text'" : std::to_string(i), i);
  }
  return sql;
}

data::Schema schema_of(const fs::path& db) {
  auto s = data::read_schema_from_database(db, "people");
  EXPECT_TRUE(s.is_ok()) << s.status().message();
  return *s;
}

TEST(ColumnRules, IdentifierNames) {
  for (const char* n : {"id", "ID", "person_id", "CustomerID", "districtId", "Person Id"})
    EXPECT_TRUE(is_identifier_name(n)) << n;
  for (const char* n : {"paid", "valid", "name", "region", "kid", "i"}) EXPECT_FALSE(is_identifier_name(n)) << n;
}

TEST(ValueIndex, SkipRulesAreAppliedAndReported) {
  testing::TempDir dir;
  const fs::path db = dir / "people.sqlite";
  testing::build_database(db, fixture_sql(nullptr, 300, 1));
  db::Executor ex;
  auto idx = ValueIndex::build("people", db, schema_of(db), IndexParams{}, ex, 2);
  ASSERT_TRUE(idx.is_ok()) << idx.status().message();
  std::map<std::string, std::string> skipped;
  for (const auto& s : idx->skipped()) skipped[s.column] = s.reason;
  EXPECT_EQ(skipped["person_id"], "identifier name");
  EXPECT_EQ(skipped["CustomerID"], "identifier name");
  EXPECT_NE(skipped["homepage"].find("URLs"), std::string::npos) << skipped["homepage"];
  EXPECT_NE(skipped["bio"].find("long free text"), std::string::npos) << skipped["bio"];
  EXPECT_NE(skipped["age"].find("not text"), std::string::npos) << skipped["age"];
  EXPECT_NE(skipped["mixed"].find("not text"), std::string::npos) << skipped["mixed"];
  EXPECT_EQ(skipped["blank"], "empty");
  ASSERT_EQ(idx->columns().size(), 2u);  // code, name
  EXPECT_EQ(idx->columns()[0].column, "code");
  EXPECT_EQ(idx->columns()[0].count, 7u);
  EXPECT_EQ(idx->columns()[1].count, 300u);
  EXPECT_EQ(idx->size(), 307u);
  EXPECT_GE(idx->find_exact("PERSON", "Code", "C3"), 0);
  EXPECT_LT(idx->find_exact("person", "code", "c3"), 0);

  // Huge cardinality: with max_distinct below the column's distinct count, it is skipped.
  IndexParams p;
  p.skip.max_distinct = 100;
  auto small = ValueIndex::build("people", db, schema_of(db), p, ex, 1);
  ASSERT_TRUE(small.is_ok());
  bool name_skipped = false;
  for (const auto& s : small->skipped())
    if (s.column == "name") name_skipped = s.reason == "more than 100 distinct values";
  EXPECT_TRUE(name_skipped);
}

// LSH recall on synthetic data: a value with one character changed (Jaccard of padded 3-grams
// ~0.5-0.6) must come back as a candidate almost always; unrelated random strings bring back few.
TEST(ValueIndex, LshCandidateRecallOnSyntheticData) {
  testing::TempDir dir;
  const fs::path db = dir / "people.sqlite";
  std::vector<std::string> names;
  testing::build_database(db, fixture_sql(&names, 2000, 2));
  db::Executor ex;
  auto idx = ValueIndex::build("people", db, schema_of(db), IndexParams{}, ex, 2);
  ASSERT_TRUE(idx.is_ok()) << idx.status().message();
  std::mt19937_64 rng(3);
  size_t found = 0, exact_found = 0, noise = 0;
  const size_t trials = 500;
  for (size_t t = 0; t < trials; ++t) {
    const std::string& name = names[rng() % names.size()];
    std::string typo = name;
    size_t pos = rng() % typo.size();
    if (typo[pos] == ' ') pos = 0;
    typo[pos] = static_cast<char>('a' + (typo[pos] - 'a' + 1 + rng() % 25) % 26);
    auto id = idx->find_exact("person", "name", name);
    ASSERT_GE(id, 0);
    auto exact = idx->candidates(normalize_code_points(name));
    exact_found += std::binary_search(exact.begin(), exact.end(), static_cast<uint32_t>(id));
    auto c = idx->candidates(normalize_code_points(typo));
    found += std::binary_search(c.begin(), c.end(), static_cast<uint32_t>(id));
    noise += idx->candidates(normalize_code_points(random_word(rng, 7) + " " + random_word(rng, 8))).size();
  }
  EXPECT_EQ(exact_found, trials);
  EXPECT_GE(static_cast<double>(found) / trials, 0.95);
  EXPECT_LT(static_cast<double>(noise) / trials, 0.02 * static_cast<double>(idx->size()));
}

TEST(ValueIndex, PersistenceRoundTripAndStaleDetection) {
  testing::TempDir dir;
  const fs::path db = dir / "people" / "people.sqlite";
  fs::create_directories(db.parent_path());
  std::vector<std::string> names;
  testing::build_database(db, fixture_sql(&names, 200, 4));
  const data::Schema schema = schema_of(db);
  db::Executor ex;
  IndexOptions opts;
  opts.index_dir = dir / "index";
  opts.threads = 2;

  IndexStatus st;
  auto built = open_index("people", db, schema, opts, ex, &st);
  ASSERT_TRUE(built.is_ok()) << built.status().message();
  EXPECT_EQ(st.action, "built: missing");
  const fs::path file = index_file(opts.index_dir, "people");
  EXPECT_EQ(st.file, file);
  ASSERT_TRUE(fs::exists(file));

  auto loaded = open_index("people", db, schema, opts, ex, &st);
  ASSERT_TRUE(loaded.is_ok()) << loaded.status().message();
  EXPECT_EQ(st.action, "fresh");
  ASSERT_EQ(loaded->size(), built->size());
  EXPECT_EQ(loaded->fingerprint(), built->fingerprint());
  EXPECT_EQ(loaded->skipped().size(), built->skipped().size());
  for (uint32_t id = 0; id < built->size(); ++id) {
    ASSERT_EQ(loaded->value(id), built->value(id));
    ASSERT_EQ(loaded->normalized(id), built->normalized(id));
    ASSERT_EQ(loaded->column_of(id).column, built->column_of(id).column);
  }
  for (size_t i = 0; i < 20; ++i) {
    auto q = normalize_code_points(names[i * 7]);
    EXPECT_EQ(loaded->candidates(q), built->candidates(q));
  }

  // Other parameters: stale.
  IndexOptions other = opts;
  other.params.bands = 32;
  other.params.rows = 4;
  ASSERT_TRUE(open_index("people", db, schema, other, ex, &st).is_ok());
  EXPECT_EQ(st.action, "built: stale: other parameters");
  ASSERT_TRUE(open_index("people", db, schema, opts, ex, &st).is_ok());
  EXPECT_EQ(st.action, "built: stale: other parameters");

  // The database changed: stale, rebuilt, and the new value is found.
  fs::remove(db);
  testing::build_database(db, fixture_sql(nullptr, 200, 5) + "INSERT INTO person (name) VALUES ('Zebra Crossing');\n");
  // A fresh executor: `ex` still holds a connection to the replaced file's old inode (the
  // executor's contract is that databases do not change while it runs).
  db::Executor ex2;
  auto rebuilt = open_index("people", db, schema, opts, ex2, &st);
  ASSERT_TRUE(rebuilt.is_ok());
  EXPECT_EQ(st.action, "built: stale: the database changed");
  EXPECT_GE(rebuilt->find_exact("person", "name", "Zebra Crossing"), 0);
  EXPECT_LT(rebuilt->find_exact("person", "name", names[0]), 0);

  // A corrupted file is never used.
  {
    std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(200);
    f.put('\x7f');
  }
  EXPECT_FALSE(ValueIndex::load(file).is_ok());
  ASSERT_TRUE(open_index("people", db, schema, opts, ex, &st).is_ok());
  EXPECT_EQ(st.action.rfind("built: ", 0), 0u) << st.action;
  EXPECT_NE(st.action.find("checksum"), std::string::npos) << st.action;

  // --force rebuilds a fresh index.
  opts.force = true;
  ASSERT_TRUE(open_index("people", db, schema, opts, ex, &st).is_ok());
  EXPECT_EQ(st.action, "built: forced");
}

TEST(ValueIndex, ParamsValidation) {
  IndexParams p;
  EXPECT_TRUE(p.validate().is_ok());
  p.bands = 64;
  p.rows = 3;
  EXPECT_FALSE(p.validate().is_ok());
  EXPECT_NE(p.validate().message().find("bands"), std::string::npos);
}

}  // namespace
}  // namespace nl2sql::context
