// ValueIndex: skip rules, LSH candidate recall on synthetic data, persistence and staleness.
#include <cstring>
#include <fstream>
#include <map>
#include <random>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "context/band_keys.h"
#include "context/short_keys.h"
#include "nl2sql/context/retrieve.h"
#include "nl2sql/context/text_match.h"
#include "nl2sql/context/value_index.h"
#include "nl2sql/core/files.h"
#include "nl2sql/core/hash.h"
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

// Short values: a table of short words (3 to 8 letters, capitalized) beside longer names.
std::string short_fixture_sql(std::vector<std::string>* words, size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::string sql = "CREATE TABLE hero (hero_id INTEGER PRIMARY KEY, name TEXT, colour TEXT);\n";
  sql += "INSERT INTO hero VALUES (0, 'Reginald Barclay the Third', 'Blue');\n";
  if (words) words->push_back("Blue");
  for (size_t i = 1; i <= n; ++i) {
    std::string w = random_word(rng, 3 + rng() % 6);
    w[0] = static_cast<char>(w[0] - 32);
    if (words) words->push_back(w);
    std::string name = random_word(rng, 6 + rng() % 5) + " " + random_word(rng, 7 + rng() % 5);
    sql += fmt::format("INSERT INTO hero VALUES ({}, '{}', '{}');\n", i, name, w);
  }
  return sql;
}

// Every one-edit typo of `w` (lowercase ASCII): each deletion, a substitution at each position,
// an insertion of 'q' at each position, each adjacent transposition of two different letters.
std::vector<std::string> one_edit_typos(const std::string& w) {
  std::vector<std::string> out;
  for (size_t i = 0; i < w.size(); ++i) {
    out.push_back(w.substr(0, i) + w.substr(i + 1));
    std::string sub = w;
    sub[i] = static_cast<char>('a' + (sub[i] - 'a' + 1) % 26);
    out.push_back(sub);
    if (i + 1 < w.size() && w[i] != w[i + 1]) {
      std::string tr = w;
      std::swap(tr[i], tr[i + 1]);
      out.push_back(tr);
    }
  }
  for (size_t i = 0; i <= w.size(); ++i) out.push_back(w.substr(0, i) + "q" + w.substr(i));
  return out;
}

TEST(ShortValueIndex, EveryOneEditTypoOfAShortValueIsACandidate) {
  testing::TempDir dir;
  const fs::path db = dir / "heroes.sqlite";
  std::vector<std::string> words;
  testing::build_database(db, short_fixture_sql(&words, 300, 7));
  db::Executor ex;
  auto idx = ValueIndex::build("heroes", db, schema_of(db), IndexParams{}, ex, 2);
  ASSERT_TRUE(idx.is_ok()) << idx.status().message();
  EXPECT_GT(idx->short_entries(), 300u);
  size_t typos = 0, short_missed = 0, lsh_found = 0;
  for (const auto& w : words) {
    const int64_t id = idx->find_exact("hero", "colour", w);
    ASSERT_GE(id, 0) << w;
    const auto target = static_cast<uint32_t>(id);
    for (const auto& t : one_edit_typos(normalize_text(w))) {
      ++typos;
      const auto q = normalize_code_points(t);
      const auto s = idx->short_candidates(q);
      const auto all = idx->candidates(q);
      const auto lsh = idx->lsh_candidates(q);
      const bool in_short = std::binary_search(s.begin(), s.end(), target);
      short_missed += !in_short;
      if (!in_short) ADD_FAILURE() << "'" << t << "' does not find '" << w << "'";
      EXPECT_TRUE(std::binary_search(all.begin(), all.end(), target)) << t;
      lsh_found += std::binary_search(lsh.begin(), lsh.end(), target);
    }
  }
  EXPECT_GT(typos, 5000u);
  EXPECT_EQ(short_missed, 0u);
  // The LSH bands alone miss a large share of these (what the short-value index is for).
  EXPECT_LT(static_cast<double>(lsh_found) / static_cast<double>(typos), 0.8);

  // Hand-picked: "Blue" asked as "bcue" (substitution), "Bleu" (transposition), "Blu"
  // (deletion), "Bluue" (insertion), in any case.
  const auto blue = static_cast<uint32_t>(idx->find_exact("hero", "colour", "Blue"));
  for (const char* t : {"bcue", "Bleu", "Blu", "BLUUE", "blue"}) {
    auto c = idx->candidates(normalize_code_points(t));
    EXPECT_TRUE(std::binary_search(c.begin(), c.end(), blue)) << t;
  }
  // Two edits away is not a one-edit neighbour; a long query is never looked up.
  const auto two = idx->short_candidates(normalize_code_points("bcuu"));
  EXPECT_FALSE(std::binary_search(two.begin(), two.end(), blue));
  EXPECT_TRUE(idx->short_candidates(normalize_code_points("blueeeeeeeee")).empty());

  // short_length 0: no table, nothing from it.
  IndexParams off;
  off.short_length = 0;
  auto none = ValueIndex::build("heroes", db, schema_of(db), off, ex, 1);
  ASSERT_TRUE(none.is_ok()) << none.status().message();
  EXPECT_EQ(none->short_entries(), 0u);
  EXPECT_TRUE(none->short_candidates(normalize_code_points("bcue")).empty());
  EXPECT_NE(none->params_key(), idx->params_key());
}

// Retrieval through the index finds every one-edit typo of a short value that the exhaustive
// scan finds, at the same rank or better, on questions that also carry unrelated keywords.
TEST(ShortValueIndex, IndexRetrievalFindsWhatExhaustiveFinds) {
  testing::TempDir dir;
  const fs::path db = dir / "heroes.sqlite";
  std::vector<std::string> words;
  testing::build_database(db, short_fixture_sql(&words, 400, 8));
  db::Executor ex;
  auto idx = ValueIndex::build("heroes", db, schema_of(db), IndexParams{}, ex, 2);
  ASSERT_TRUE(idx.is_ok()) << idx.status().message();
  const data::Schema schema = schema_of(db);
  std::mt19937_64 rng(9);
  size_t exhaustive_hits = 0, index_hits = 0, lsh_only_hits = 0;
  for (size_t c = 0; c < 300; ++c) {
    const std::string& w = words[rng() % words.size()];
    auto typos = one_edit_typos(normalize_text(w));
    std::string typo = typos[rng() % typos.size()];
    const std::string question = "Which heroes have the colour " + typo + " in the comics?";
    RetrievalOptions ro;
    ro.max_values = 10;
    ro.match_columns = false;
    auto rank = [&](const Retrieval& r) {
      for (size_t i = 0; i < r.values.size(); ++i)
        if (r.values[i].value == w && r.values[i].column == "colour") return i;
      return size_t{100};
    };
    ro.exhaustive = true;
    const size_t re = rank(retrieve(*idx, schema, question, "", ro));
    ro.exhaustive = false;
    const size_t ri = rank(retrieve(*idx, schema, question, "", ro));
    ro.short_values = false;
    const size_t rl = rank(retrieve(*idx, schema, question, "", ro));
    exhaustive_hits += re < 10;
    index_hits += ri < 10;
    lsh_only_hits += rl < 10;
    if (re < 10) {
      EXPECT_LE(ri, re) << "'" << typo << "' for '" << w << "'";
    }
  }
  EXPECT_GT(exhaustive_hits, 200u);
  EXPECT_EQ(index_hits, exhaustive_hits);
  EXPECT_LT(lsh_only_hits, exhaustive_hits);
}

// Candidates as their definition says, computed from every value without the tables: a value is
// an LSH candidate when any band key of its signature equals the query's, a short-value
// candidate when it has at most short_length code points, the query at most short_length + 1,
// and their deletion keys meet. Every value's keys are computed once.
class CandidateDefinition {
 public:
  explicit CandidateDefinition(const ValueIndex& idx)
      : p_(idx.params()), hasher_(p_.num_perm, p_.seed), bands_(idx.size()), deletions_(idx.size()) {
    for (uint32_t id = 0; id < idx.size(); ++id) {
      const auto v = idx.normalized(id);
      bands_[id] = keys_of(v);
      if (v.size() <= static_cast<size_t>(p_.short_length)) detail::short_keys(v, deletions_[id]);
    }
  }
  std::vector<uint32_t> keys_of(std::u32string_view s) const {
    auto sig = hasher_.signature(char_ngram_hashes(s, p_.ngram));
    std::vector<uint32_t> k(static_cast<size_t>(p_.bands));
    detail::band_keys(sig.data(), p_.bands, p_.rows, k.data());
    return k;
  }
  std::vector<uint32_t> candidates(std::u32string_view q, bool lsh, bool shorts) const {
    std::vector<uint32_t> out;
    if (q.empty()) return out;
    const auto qk = keys_of(q);
    std::vector<uint32_t> qs;
    const bool short_query = shorts && p_.short_length > 0 && q.size() <= static_cast<size_t>(p_.short_length) + 1;
    if (short_query) detail::short_keys(q, qs);
    for (uint32_t id = 0; id < bands_.size(); ++id) {
      bool hit = false;
      for (size_t b = 0; lsh && b < qk.size() && !hit; ++b) hit = bands_[id][b] == qk[b];
      for (uint32_t k : deletions_[id]) hit = hit || (short_query && std::binary_search(qs.begin(), qs.end(), k));
      if (hit) out.push_back(id);
    }
    return out;
  }
  const std::vector<std::vector<uint32_t>>& bands() const { return bands_; }

 private:
  IndexParams p_;
  MinHasher hasher_;
  std::vector<std::vector<uint32_t>> bands_, deletions_;
};

// The lookups (one pread per key's run of blocks, distinct ids gathered through a bit set) return
// exactly the candidates the definition gives, on random queries: values, their one-edit typos,
// words and prefixes, and keys that hundreds of near-copies share (runs of several blocks).
TEST(ValueIndex, CandidatesEqualTheirDefinitionOnRandomQueries) {
  testing::TempDir dir;
  const fs::path db = dir / "heroes.sqlite";
  std::vector<std::string> words;
  std::string sql = short_fixture_sql(&words, 300, 11);
  // 600 near-copies of two names (as the scaled BIRD copies are): their band keys repeat far more
  // often than the 128 entries of a block.
  sql += "CREATE TABLE copy (copy_id INTEGER PRIMARY KEY, title TEXT);\n";
  for (int i = 0; i < 600; ++i)
    sql += fmt::format("INSERT INTO copy VALUES ({}, '{} {}');\n", i, i % 2 ? "Spider-Man" : "Captain Marvel", i / 2);
  testing::build_database(db, "BEGIN;\n" + sql + "COMMIT;\n");  // one transaction: one sync, not 900
  db::Executor ex;
  auto idx = ValueIndex::build("heroes", db, schema_of(db), IndexParams{}, ex, 2);
  ASSERT_TRUE(idx.is_ok()) << idx.status().message();
  ASSERT_GT(idx->size(), 1200u);
  std::mt19937_64 rng(12);
  std::vector<std::string> queries = {"spider man", "Spider-Man 17", "captain marvel", "Capt Marvel 2", "x", "", "bleu"};
  for (int i = 0; i < 300; ++i) {
    const std::string v(idx->value(static_cast<uint32_t>(rng() % idx->size())));
    switch (i % 4) {
      case 0: queries.push_back(v); break;
      case 1: queries.push_back(v.substr(0, 1 + rng() % v.size())); break;
      case 2: queries.push_back(random_word(rng, 2 + rng() % 9)); break;
      default: {
        auto t = one_edit_typos(normalize_text(v.substr(0, std::min<size_t>(v.size(), 9))));
        if (!t.empty()) queries.push_back(t[rng() % t.size()]);
      }
    }
  }
  const CandidateDefinition definition(*idx);
  // Some band key is shared by more values than two blocks hold: its run spans several blocks.
  {
    std::map<std::pair<size_t, uint32_t>, size_t> per_key;
    for (const auto& keys : definition.bands())
      for (size_t b = 0; b < keys.size(); ++b) ++per_key[{b, keys[b]}];
    size_t most = 0;
    for (const auto& [key, n] : per_key) most = std::max(most, n);
    EXPECT_GT(most, 256u);
  }
  size_t big = 0;
  for (const auto& text : queries) {
    const auto q = normalize_code_points(text);
    const auto lsh = idx->lsh_candidates(q), sh = idx->short_candidates(q), all = idx->candidates(q);
    ASSERT_EQ(lsh, definition.candidates(q, true, false)) << "'" << text << "'";
    ASSERT_EQ(sh, definition.candidates(q, false, true)) << "'" << text << "'";
    ASSERT_EQ(all, definition.candidates(q, true, true)) << "'" << text << "'";
    big += lsh.size() > 128;
  }
  EXPECT_GT(big, 2u);  // some keys did span more than a block
}

// The file: a loaded index keeps its tables in the file and answers exactly as the built one; save()
// writes the same bytes back; a truncated file or one of the previous format version is refused
// with a message saying so, and open_index rebuilds it.
TEST(ValueIndexFile, TablesStayInTheFileSaveAndRefusedFiles) {
  testing::TempDir dir;
  const fs::path db = dir / "heroes" / "heroes.sqlite";
  fs::create_directories(db.parent_path());
  std::vector<std::string> words;
  testing::build_database(db, short_fixture_sql(&words, 200, 10));
  const data::Schema schema = schema_of(db);
  db::Executor ex;
  IndexOptions opts;
  opts.index_dir = dir / "index";
  opts.threads = 2;
  IndexStatus st;
  auto built = open_index("heroes", db, schema, opts, ex, &st);
  ASSERT_TRUE(built.is_ok()) << built.status().message();
  const fs::path file = index_file(opts.index_dir, "heroes");
  auto loaded = ValueIndex::load(file);
  ASSERT_TRUE(loaded.is_ok()) << loaded.status().message();
  ASSERT_EQ(loaded->size(), built->size());
  // The tables stay in the file: memory holds the values and a 256th of the tables.
  const size_t file_bytes = fs::file_size(file);
  EXPECT_LT(loaded->memory_bytes(), file_bytes / 2) << loaded->memory_bytes() << " of " << file_bytes;
  EXPECT_GT(loaded->memory_bytes(), built->size() * 2 * 8);  // the two offset arrays at least
  EXPECT_EQ(loaded->short_entries(), built->short_entries());
  for (const auto& w : words) {
    for (const auto& t : {w, one_edit_typos(normalize_text(w))[1]}) {
      auto q = normalize_code_points(t);
      ASSERT_EQ(loaded->candidates(q), built->candidates(q)) << t;
    }
  }
  for (uint32_t id = 0; id < built->size(); ++id) {
    ASSERT_EQ(loaded->value(id), built->value(id));
    ASSERT_EQ(loaded->normalized(id), normalize_code_points(built->value(id)));
    ASSERT_EQ(&loaded->column_of(id) - loaded->columns().data(), &built->column_of(id) - built->columns().data());
  }
  // A copy shares the open file and outlives the original.
  ValueIndex copy;
  {
    auto again = ValueIndex::load(file);
    ASSERT_TRUE(again.is_ok());
    copy = *again;
  }
  EXPECT_EQ(copy.value(5), built->value(5));

  const fs::path saved = dir / "saved.vidx";
  ASSERT_TRUE(loaded->save(saved).is_ok());
  EXPECT_EQ(*core::read_file(saved), *core::read_file(file));

  auto bytes = *core::read_file(file);
  // Truncated: refused, then rebuilt.
  {
    std::ofstream(file, std::ios::binary | std::ios::trunc) << bytes.substr(0, bytes.size() / 2);
  }
  auto half = ValueIndex::load(file);
  ASSERT_FALSE(half.is_ok());
  EXPECT_NE(half.status().message().find("truncated"), std::string::npos) << half.status().message();
  ASSERT_TRUE(open_index("heroes", db, schema, opts, ex, &st).is_ok());
  EXPECT_NE(st.action.find("built: "), std::string::npos) << st.action;
  EXPECT_NE(st.action.find("truncated"), std::string::npos) << st.action;

  // The previous format (version 2) is detected by its version word and rebuilt.
  bytes = *core::read_file(file);
  bytes[8] = 2;
  bytes[9] = bytes[10] = bytes[11] = 0;
  { std::ofstream(file, std::ios::binary | std::ios::trunc) << bytes; }
  auto old = ValueIndex::load(file);
  ASSERT_FALSE(old.is_ok());
  EXPECT_NE(old.status().message().find("format version 2, this binary reads version 3"), std::string::npos)
      << old.status().message();
  ASSERT_TRUE(open_index("heroes", db, schema, opts, ex, &st).is_ok());
  EXPECT_NE(st.action.find("format version 2"), std::string::npos) << st.action;
  EXPECT_TRUE(ValueIndex::load(file).is_ok());
  // Each rebuild replaced the file: the old one renamed aside and removed, nothing left beside it.
  std::vector<std::string> left;
  for (const auto& e : fs::directory_iterator(opts.index_dir)) left.push_back(e.path().filename().string());
  EXPECT_EQ(left, std::vector<std::string>{"heroes.vidx"});

  // A file that is not an index at all.
  { std::ofstream(file, std::ios::binary | std::ios::trunc) << "not an index, not at all"; }
  auto junk = ValueIndex::load(file);
  ASSERT_FALSE(junk.is_ok());
  EXPECT_NE(junk.status().message().find("bad magic"), std::string::npos) << junk.status().message();
  EXPECT_EQ(ValueIndex::load(dir / "missing.vidx").status().code(), ErrorCode::kNotFound);
}

// An index file taken apart by its documented layout (format 3): the prologue, then sections of
// (u64 length, bytes, zero padding to 8), then the XXH3 over the sections' XXH3s.
struct ParsedIndexFile {
  uint32_t version = 0;
  std::vector<std::string> sections;
  uint64_t checksum = 0;
};

ParsedIndexFile parse_index_file(const std::string& bytes) {
  ParsedIndexFile f;
  EXPECT_EQ(bytes.substr(0, 8), std::string("NL2VIDX\0", 8));
  std::memcpy(&f.version, bytes.data() + 8, 4);
  size_t pos = 16;
  while (pos + 8 < bytes.size()) {
    uint64_t len = 0;
    std::memcpy(&len, bytes.data() + pos, 8);
    f.sections.push_back(bytes.substr(pos + 8, len));
    const size_t padded = (len + 7) / 8 * 8;
    EXPECT_EQ(bytes.substr(pos + 8 + len, padded - len), std::string(padded - len, '\0'));
    pos += 8 + padded;
  }
  EXPECT_EQ(pos + 8, bytes.size());
  std::memcpy(&f.checksum, bytes.data() + pos, 8);
  return f;
}

// The inverse, with the checksum recomputed: a file that checks out whatever its sections say.
std::string assemble_index_file(uint32_t version, const std::vector<std::string>& sections) {
  std::string out("NL2VIDX\0", 8);
  out.append(reinterpret_cast<const char*>(&version), 4);
  out.append(4, '\0');
  std::vector<uint64_t> sums;
  for (const auto& s : sections) {
    const uint64_t len = s.size();
    out.append(reinterpret_cast<const char*>(&len), 8);
    out += s;
    out.append((len + 7) / 8 * 8 - len, '\0');
    sums.push_back(core::xxh64(s));
  }
  const uint64_t sum = core::xxh64({reinterpret_cast<const char*>(sums.data()), sums.size() * 8});
  out.append(reinterpret_cast<const char*>(&sum), 8);
  return out;
}

template <class T>
std::vector<T> words_of(const std::string& s) {
  std::vector<T> v(s.size() / sizeof(T));
  std::memcpy(v.data(), s.data(), v.size() * sizeof(T));
  return v;
}

// Format 3 by hand on three values: the stored and the normalized values as UTF-8 with their byte
// offsets, each band table the sorted (key << 32 | id) of the three values' band keys, the short
// table their deletion keys, the lookup section each table's filter word (three or thirteen
// entries: 64 slots, one word; the slot of a key is its top 6 bits) and directory (one block:
// the first entry's key), and the checksum over the sections' XXH3s.
TEST(ValueIndexFile, FormatThreeLayoutByHand) {
  testing::TempDir dir;
  const fs::path db = dir / "colours.sqlite";
  testing::build_database(db, "CREATE TABLE paint (name TEXT);\n"
                              "INSERT INTO paint VALUES ('Blue'), ('Bleu'), ('\xCE\xA9" "a'), ('Blue');\n");
  auto schema = data::read_schema_from_database(db, "colours");
  ASSERT_TRUE(schema.is_ok());
  db::Executor ex;
  const fs::path file = dir / "colours.vidx";
  auto idx = ValueIndex::build("colours", db, *schema, IndexParams{}, ex, 1, file);
  ASSERT_TRUE(idx.is_ok()) << idx.status().message();
  ASSERT_EQ(idx->size(), 3u);
  const std::string bytes = *core::read_file(file);
  const ParsedIndexFile f = parse_index_file(bytes);
  EXPECT_EQ(f.version, 3u);
  const size_t bands = 42;
  ASSERT_EQ(f.sections.size(), 7 + bands);
  EXPECT_EQ(f.sections[1], "BlueBleu\xCE\xA9" "a");  // capital omega: two bytes
  EXPECT_EQ(words_of<uint64_t>(f.sections[2]), (std::vector<uint64_t>{0, 4, 8, 11}));  // bytes
  EXPECT_EQ(words_of<uint64_t>(f.sections[3]), (std::vector<uint64_t>{0, 4, 8, 10}));  // code points
  EXPECT_EQ(f.sections[4], "bluebleu\xCF\x89" "a");  // lowered: small omega

  const std::u32string norm[3] = {U"blue", U"bleu", U"\u03C9a"};
  const CandidateDefinition definition(*idx);
  std::vector<std::vector<uint64_t>> tables;
  for (size_t b = 0; b < bands; ++b) {
    std::vector<uint64_t> want;
    for (uint32_t id = 0; id < 3; ++id) want.push_back((uint64_t{definition.keys_of(norm[id])[b]} << 32) | id);
    std::sort(want.begin(), want.end());
    ASSERT_EQ(words_of<uint64_t>(f.sections[5 + b]), want) << "band " << b;
    tables.push_back(want);
  }
  // Deletion keys: blue, lue, bue, ble, blu (5); bleu, leu, beu, blu, ble (5); omega-a, a, omega (3).
  std::vector<uint64_t> shorts;
  std::vector<uint32_t> keys;
  for (uint32_t id = 0; id < 3; ++id) {
    detail::short_keys(norm[id], keys);
    for (uint32_t k : keys) shorts.push_back((uint64_t{k} << 32) | id);
  }
  std::sort(shorts.begin(), shorts.end());
  ASSERT_EQ(shorts.size(), 13u);
  EXPECT_EQ(words_of<uint64_t>(f.sections[5 + bands]), shorts);
  tables.push_back(shorts);

  const std::string& lookup = f.sections[6 + bands];
  ASSERT_EQ(lookup.size(), 43u * 8 + 43u * 4);
  const auto filter_words = words_of<uint64_t>(lookup.substr(0, 43 * 8));
  const auto directory = words_of<uint32_t>(lookup.substr(43 * 8));
  for (size_t t = 0; t < tables.size(); ++t) {
    uint64_t word = 0;
    for (uint64_t e : tables[t]) word |= uint64_t{1} << (e >> 32 >> 26);
    EXPECT_EQ(filter_words[t], word) << "table " << t;
    EXPECT_EQ(directory[t], static_cast<uint32_t>(tables[t][0] >> 32)) << "table " << t;
  }
  std::vector<uint64_t> sums;
  for (const auto& sec : f.sections) sums.push_back(core::xxh64(sec));
  EXPECT_EQ(f.checksum, core::xxh64({reinterpret_cast<const char*>(sums.data()), sums.size() * 8}));
  // The layout understood entirely: reassembled, the same bytes.
  EXPECT_EQ(assemble_index_file(3, f.sections), bytes);

  // Loaded: the normalized values decoded back to code points, the same candidates.
  auto loaded = ValueIndex::load(file);
  ASSERT_TRUE(loaded.is_ok()) << loaded.status().message();
  for (uint32_t id = 0; id < 3; ++id) EXPECT_EQ(loaded->normalized(id), norm[id]);
  EXPECT_EQ(loaded->candidates(U"blu"), (std::vector<uint32_t>{0, 1}));  // one edit from both
  EXPECT_EQ(loaded->candidates(U"a"), (std::vector<uint32_t>{2}));
  EXPECT_EQ(loaded->short_entries(), 13u);
}

// Damaged files are refused with a message naming the file and what is wrong: cut anywhere, one
// byte changed in a table or in the lookup section, a lookup section or normalized offsets that
// disagree with the rest (the checksum recomputed, so only the consistency checks can tell).
TEST(ValueIndexFile, DamagedFilesAreRefusedNamingTheFile) {
  testing::TempDir dir;
  const fs::path db = dir / "heroes.sqlite";
  testing::build_database(db, short_fixture_sql(nullptr, 300, 4));
  db::Executor ex;
  const fs::path file = dir / "heroes.vidx";
  ASSERT_TRUE(ValueIndex::build("heroes", db, schema_of(db), IndexParams{}, ex, 2, file).is_ok());
  const std::string good = *core::read_file(file);
  const fs::path bad = dir / "damaged.vidx";
  auto refused = [&](const std::string& bytes, const std::string& why) {
    { std::ofstream(bad, std::ios::binary | std::ios::trunc) << bytes; }
    auto r = ValueIndex::load(bad);
    if (r.is_ok()) return ::testing::AssertionFailure() << "loaded, expected: " << why;
    const std::string m = r.status().message();
    if (m.find(bad.string()) == std::string::npos || m.find(why) == std::string::npos)
      return ::testing::AssertionFailure() << m << " (expected the file and '" << why << "')";
    return ::testing::AssertionSuccess();
  };
  for (size_t cut : {size_t{10}, size_t{100}, good.size() / 3, good.size() / 2, good.size() - 9, good.size() - 1})
    EXPECT_TRUE(refused(good.substr(0, cut), "truncated")) << cut;

  ParsedIndexFile f = parse_index_file(good);
  ASSERT_EQ(f.sections.size(), 49u);
  // Where a band table's bytes and the lookup section's start in the file.
  size_t pos = 16, band_at = 0, lookup_at = 0;
  for (size_t i = 0; i < f.sections.size(); ++i) {
    if (i == 5) band_at = pos + 8;
    if (i == 48) lookup_at = pos + 8;
    pos += 8 + (f.sections[i].size() + 7) / 8 * 8;
  }
  std::string flipped = good;
  flipped[band_at + 13] ^= 0x10;
  EXPECT_TRUE(refused(flipped, "checksum mismatch"));
  flipped = good;
  flipped[lookup_at + 3] ^= 0x01;
  EXPECT_TRUE(refused(flipped, "checksum mismatch"));

  auto sections = f.sections;
  sections[48].resize(sections[48].size() - 4);
  EXPECT_TRUE(refused(assemble_index_file(3, sections), "section sizes"));
  sections = f.sections;
  auto offsets = words_of<uint64_t>(sections[3]);
  offsets.back() -= 1;  // one code point fewer than the normalized values decode to
  sections[3].assign(reinterpret_cast<const char*>(offsets.data()), offsets.size() * 8);
  EXPECT_TRUE(refused(assemble_index_file(3, sections), "inconsistent sizes"));
  sections = f.sections;
  sections.pop_back();  // no lookup section: the short-value table, taken for it, has another size
  EXPECT_TRUE(refused(assemble_index_file(3, sections), "section sizes"));
  sections = f.sections;
  sections.erase(sections.begin() + 5);  // a band table missing
  EXPECT_TRUE(refused(assemble_index_file(3, sections), "section sizes"));
  EXPECT_TRUE(refused(assemble_index_file(2, f.sections), "format version 2, this binary reads version 3"));
  // Intact, reassembled: loads.
  { std::ofstream(bad, std::ios::binary | std::ios::trunc) << assemble_index_file(3, f.sections); }
  EXPECT_TRUE(ValueIndex::load(bad).is_ok());
}

// Normalized values of one to four UTF-8 bytes per code point (and stored bytes that are not
// UTF-8), more of them than one 64 KB read: loaded, every value's normalized form is the
// normalization of its stored text, across the pieces the section is decoded in.
TEST(ValueIndexFile, NormalizedValuesDecodeAcrossReadPieces) {
  testing::TempDir dir;
  const fs::path db = dir / "names.sqlite";
  const std::string sql =
      "CREATE TABLE names (name TEXT);\n"
      "WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < 5999)\n"
      "INSERT INTO names SELECT '\xCE\xA9mega \xC3\x91o\xC3\xB1o \xE6\x9D\xB1\xE4\xBA\xAC \xF0\x9F\x8E\xB5 ' || i FROM n;\n"
      "INSERT INTO names VALUES (CAST(x'C361FF62' AS TEXT));\n";
  testing::build_database(db, sql);
  auto schema = data::read_schema_from_database(db, "names");
  ASSERT_TRUE(schema.is_ok());
  db::Executor ex;
  const fs::path file = dir / "names.vidx";
  auto built = ValueIndex::build("names", db, *schema, IndexParams{}, ex, 2, file);
  ASSERT_TRUE(built.is_ok()) << built.status().message();
  ASSERT_EQ(built->size(), 6001u);
  const ParsedIndexFile f = parse_index_file(*core::read_file(file));
  EXPECT_GT(f.sections[4].size(), 2u * 65536);
  auto loaded = ValueIndex::load(file);
  ASSERT_TRUE(loaded.is_ok()) << loaded.status().message();
  for (uint32_t id = 0; id < loaded->size(); ++id) {
    ASSERT_EQ(loaded->value(id), built->value(id));
    ASSERT_EQ(loaded->normalized(id), normalize_code_points(loaded->value(id))) << id;
  }
  EXPECT_EQ(loaded->normalized(0).substr(0, 5), U"\u03C9mega");
}

// A large table (70,000 values, 2^17 buckets of the counting sort; near-copies share band keys,
// so runs of one key come in id order): every band table in the file is exactly the sorted
// (key << 32 | id) of the values' band keys.
TEST(ValueIndexFile, LargeBandTablesAreSortedByKeyThenId) {
  testing::TempDir dir;
  const fs::path db = dir / "many.sqlite";
  testing::build_database(db,
                          "CREATE TABLE many (name TEXT);\n"
                          "WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < 69999)\n"
                          "INSERT INTO many SELECT printf('%s %d', substr('alpha beta gamma delta', 1 + i % 17, 6), i / 17) FROM n;\n");
  auto schema = data::read_schema_from_database(db, "many");
  ASSERT_TRUE(schema.is_ok());
  db::Executor ex;
  const fs::path file = dir / "many.vidx";
  auto idx = ValueIndex::build("many", db, *schema, IndexParams{}, ex, 2, file);
  ASSERT_TRUE(idx.is_ok()) << idx.status().message();
  ASSERT_GT(idx->size(), 65536u);
  const ParsedIndexFile f = parse_index_file(*core::read_file(file));
  const CandidateDefinition definition(*idx);
  size_t longest_run = 0;
  for (size_t b = 0; b < 42; ++b) {
    std::vector<uint64_t> want(idx->size());
    for (uint32_t id = 0; id < idx->size(); ++id) want[id] = (uint64_t{definition.bands()[id][b]} << 32) | id;
    std::sort(want.begin(), want.end());
    ASSERT_EQ(words_of<uint64_t>(f.sections[5 + b]), want) << "band " << b;
    for (size_t i = 0, run = 0; i < want.size(); ++i) {
      run = i > 0 && want[i] >> 32 == want[i - 1] >> 32 ? run + 1 : 1;
      longest_run = std::max(longest_run, run);
    }
  }
  EXPECT_GT(longest_run, 64u);  // runs longer than a bucket's usual few entries
}

// The values of each column and their order (their ids) are SQLite's SELECT DISTINCT rows, less
// those normalizing to nothing or too long, whichever way the scan runs: a plain table (scanned
// in its stored order, repeats dropped by exact bytes), a column with an index (the DISTINCT
// reads the index: its order), a NOCASE column (the DISTINCT merges case variants, keeping the
// first); a column with more distinct values than max_distinct is skipped either way.
TEST(ValueIndex, ColumnValuesAreTheDistinctRowsInTheirOrder) {
  testing::TempDir dir;
  const fs::path db = dir / "kinds.sqlite";
  const std::string long_value(400, 'q');
  testing::build_database(db, "CREATE TABLE plain (name TEXT);\n"
                              "INSERT INTO plain VALUES ('b'), ('a'), ('b'), ('   '), ('c'), (123), (NULL), (x'0102'), "
                              "('a'), ('" + long_value + "'), ('A'), ('" + long_value + "'), ('c');\n"
                              "CREATE TABLE indexed (name TEXT);\n"
                              "INSERT INTO indexed VALUES ('z'), ('y'), ('x'), ('y'), ('w');\n"
                              "CREATE INDEX indexed_name ON indexed (name);\n"
                              "CREATE TABLE nocase (name TEXT COLLATE NOCASE);\n"
                              "INSERT INTO nocase VALUES ('Blue'), ('BLUE'), ('red'), ('blue'), ('Red');\n"
                              "CREATE TABLE capped (name TEXT);\n"
                              "WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < 49)\n"
                              "INSERT INTO capped SELECT 'v' || (i % 41) FROM n;\n");
  db::Executor ex;
  IndexParams params;
  params.skip.max_distinct = 40;
  auto idx = ValueIndex::build("kinds", db, schema_of(db), params, ex, 2, dir / "kinds.vidx");
  ASSERT_TRUE(idx.is_ok()) << idx.status().message();
  // The index column's DISTINCT is read from its index, not the table.
  auto plan = ex.explain_query_plan(db, "SELECT DISTINCT name FROM indexed WHERE typeof(name) = 'text'");
  ASSERT_TRUE(plan.ok());
  EXPECT_NE(plan.result.rows.at(0).back().s.find("INDEX"), std::string::npos) << plan.result.rows.at(0).back().s;

  std::map<std::string, std::vector<std::string>> got;
  for (uint32_t id = 0; id < idx->size(); ++id) got[idx->column_of(id).table].push_back(std::string(idx->value(id)));
  EXPECT_EQ(got["plain"], (std::vector<std::string>{"b", "a", "c", "123", "A"}));  // TEXT affinity: 123 stored as text
  EXPECT_EQ(got["indexed"], (std::vector<std::string>{"w", "x", "y", "z"}));
  EXPECT_EQ(got["nocase"], (std::vector<std::string>{"Blue", "red"}));
  EXPECT_EQ(got.count("capped"), 0u);
  for (const char* table : {"plain", "indexed", "nocase"}) {
    auto rows = ex.run(db, fmt::format("SELECT DISTINCT name FROM {} WHERE typeof(name) = 'text'", table));
    ASSERT_TRUE(rows.ok());
    std::vector<std::string> want;
    for (const auto& r : rows.result.rows)
      if (!normalize_text(r[0].s).empty() && r[0].s.size() <= 300) want.push_back(r[0].s);
    EXPECT_EQ(got[table], want) << table;
  }
  for (const auto& c : idx->columns())
    EXPECT_EQ(c.dropped_long, c.table == "plain" ? 1u : 0u) << c.table;
  bool capped_skipped = false;
  for (const auto& sk : idx->skipped())
    if (sk.table == "capped") capped_skipped = sk.reason == "more than 40 distinct values";
  EXPECT_TRUE(capped_skipped);
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
