// Bad files get clear errors. Seeded, deterministic mutations (truncation, byte flips, invalid
// UTF-8, wrong types, missing fields, out-of-range indices, huge numbers, deep nesting) of the
// dataset JSON, tables.json, description CSVs, prediction files (BIRD JSON, JSONL, plain SQL),
// config files and cached entries (result cache, LLM response cache) are fed to the CLI
// (`nl2sql eval`, `nl2sql schema`, `nl2sql config check`, `nl2sql run`). For every case: no
// crash (no signal, no abort), the exit code is 0 (a harmless mutation, or a cache entry
// treated as a miss) or 2, and an exit 2 names the file; a JSON file that does not parse is
// always exit 2 with a line:column position. The tally is printed.
#include <sqlite3.h>

#include <cstdlib>
#include <fstream>
#include <functional>
#include <iostream>
#include <random>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "nl2sql/core/files.h"
#include "nl2sql/core/hash.h"
#include "nl2sql/llm/response_cache.h"
#include "support/test_env.h"

namespace nl2sql {
namespace {
namespace fs = std::filesystem;
using nlohmann::json;

std::string quote(const fs::path& p) { return "'" + p.string() + "'"; }

std::string slurp(const fs::path& p) {
  auto r = core::read_file(p);
  return r ? *r : std::string();
}
void spit(const fs::path& p, const std::string& s) { std::ofstream(p, std::ios::binary | std::ios::trunc) << s; }

// One mutation of a file's text. `rng` is seeded from the case name.
using Mutation = std::function<std::string(const std::string&, std::mt19937_64&)>;

std::string truncate(const std::string& s, std::mt19937_64& rng) {
  return s.substr(0, s.empty() ? 0 : rng() % s.size());
}
std::string flip_bytes(const std::string& s, std::mt19937_64& rng) {
  std::string out = s;
  for (int i = 0; i < 4 && !out.empty(); ++i) out[rng() % out.size()] ^= static_cast<char>(1u << (rng() % 8));
  return out;
}
std::string invalid_utf8(const std::string& s, std::mt19937_64& rng) {
  std::string out = s;
  // Inside a string value when possible (right after a quote), else anywhere.
  size_t at = out.empty() ? 0 : rng() % out.size();
  size_t q = out.find('"', at);
  if (q != std::string::npos) at = q + 1;
  out.insert(std::min(at, out.size()), "\xff\xfe\xc3\x28\xed\xa0\x80");
  return out;
}
std::string deep_nesting(size_t depth) { return std::string(depth, '[') + std::string(depth, ']'); }

struct Outcome {
  size_t cases = 0, rejected = 0, accepted = 0, crashes = 0;
};
std::map<std::string, Outcome>& tally() {
  static std::map<std::string, Outcome> t;
  return t;
}

class MalformedFiles : public ::testing::Test {
 protected:
  static void TearDownTestSuite() {
    std::cout << "[malformed files] kind: cases / exit 2 / exit 0 / crashes\n";
    for (const auto& [k, o] : tally())
      std::cout << "[malformed files]   " << k << ": " << o.cases << " / " << o.rejected << " / "
                << o.accepted << " / " << o.crashes << "\n";
  }
  void SetUp() override {
    root_ = testing::build_mini_bird(dir_ / "mini");
    questions_ = *core::read_json_file(root_ / "dev.json");
    spit(dir_ / "pred.jsonl", json{{"question_id", "0"}, {"sql", questions_[0]["SQL"]}}.dump() + "\n");
  }
  std::string eval_args(const fs::path& pred, const std::string& format = "jsonl") const {
    return "eval --benchmark bird --data " + quote(root_) + " --no-cache --threads 1 --pred-format " +
           format + " --pred " + quote(pred) + " --out " + quote(dir_ / "out");
  }
  // Runs `args` and checks the contract; `must_fail`: the mutation certainly breaks the file.
  // `position`: a JSON file that does not parse must report line:column.
  void check(const std::string& kind, const std::string& name, const fs::path& file,
             const std::string& args, bool must_fail, bool position = false) {
    SCOPED_TRACE(kind + " / " + name);
    auto r = testing::run_nl2sql(args);
    auto& o = tally()[kind];
    ++o.cases;
    std::string all = r.out + r.err;
    bool crashed = r.exit_code < 0 || r.exit_code >= 128 || all.find("AddressSanitizer") != std::string::npos ||
                   all.find("runtime error:") != std::string::npos || all.find("terminate called") != std::string::npos;
    if (crashed) ++o.crashes;
    EXPECT_FALSE(crashed) << "exit " << r.exit_code << "\n" << all.substr(0, 2000);
    EXPECT_TRUE(r.exit_code == 0 || r.exit_code == 2) << "exit " << r.exit_code << "\n" << all.substr(0, 2000);
    if (must_fail) {
      EXPECT_EQ(r.exit_code, 2) << all.substr(0, 2000);
    }
    if (r.exit_code == 2) {
      ++o.rejected;
      EXPECT_NE(all.find(file.filename().string()), std::string::npos)
          << "the message must name " << file.filename() << ":\n" << all.substr(0, 2000);
      if (position) {
        std::string p = file.filename().string() + ":";
        auto at = all.find(p);
        bool has_pos = at != std::string::npos && at + p.size() < all.size() &&
                       std::isdigit(static_cast<unsigned char>(all[at + p.size()]));
        EXPECT_TRUE(has_pos) << "no line:column after the file name:\n" << all.substr(0, 2000);
      }
    } else if (r.exit_code == 0) {
      ++o.accepted;
    }
  }
  // Applies each seeded text mutation to `file`, runs `args`, restores the file.
  void text_mutations(const std::string& kind, const fs::path& file, const std::string& args, bool is_json,
                      int seeds = 4) {
    const std::string original = slurp(file);
    const std::vector<std::pair<std::string, Mutation>> muts = {
        {"truncate", truncate}, {"flip_bytes", flip_bytes}, {"invalid_utf8", invalid_utf8}};
    for (const auto& [mname, m] : muts) {
      for (int seed = 0; seed < seeds; ++seed) {
        std::string name = mname + "#" + std::to_string(seed);
        std::mt19937_64 rng(core::xxh64(kind + "/" + name));
        std::string text = m(original, rng);
        spit(file, text);
        bool parses = !is_json || json::accept(text, /*ignore_comments=*/true);
        check(kind, name, file, args, is_json && !parses, is_json && !parses);
      }
    }
    for (const auto& [name, text] : std::vector<std::pair<std::string, std::string>>{
             {"empty", ""}, {"binary", std::string("\x00\x01\x02\xff\x7f", 5)}, {"bom_only", "\xef\xbb\xbf"}}) {
      spit(file, text);
      check(kind, name, file, args, is_json, false);
    }
    spit(file, original);
  }
  // Structured mutations: `edit` changes the parsed JSON; the file gets the dump.
  void json_mutation(const std::string& kind, const std::string& name, const fs::path& file,
                     const std::string& args, const std::function<void(json&)>& edit, bool must_fail) {
    const std::string original = slurp(file);
    json j = json::parse(original, nullptr, true, true);
    edit(j);
    spit(file, j.dump());
    check(kind, name, file, args, must_fail);
    spit(file, original);
  }

  testing::TempDir dir_;
  fs::path root_;
  json questions_;
};

TEST_F(MalformedFiles, DatasetQuestionFile) {
  auto f = root_ / "dev.json";
  auto args = eval_args(dir_ / "pred.jsonl");
  text_mutations("dataset dev.json", f, args, true);
  const std::string k = "dataset dev.json";
  json_mutation(k, "object_not_array", f, args, [](json& j) { j = json{{"questions", j}}; }, true);
  json_mutation(k, "missing_db_id", f, args, [](json& j) { j[3].erase("db_id"); }, true);
  json_mutation(k, "missing_question", f, args, [](json& j) { j[4].erase("question"); }, false);
  json_mutation(k, "db_id_number", f, args, [](json& j) { j[2]["db_id"] = 5; }, false);
  json_mutation(k, "question_array", f, args, [](json& j) { j[2]["question"] = json::array({1, 2}); }, true);
  json_mutation(k, "sql_object", f, args, [](json& j) { j[1]["SQL"] = json{{"a", 1}}; }, true);
  json_mutation(k, "unknown_db", f, args, [](json& j) { j[5]["db_id"] = "no_such_db"; }, false);
  json_mutation(k, "element_string", f, args, [](json& j) { j[6] = "hello"; }, true);
  json_mutation(k, "huge_question_id", f, args, [](json& j) { j[0]["question_id"] = 1e300; }, false);
  json_mutation(k, "negative_question_id", f, args, [](json& j) { j[0]["question_id"] = -7; }, false);
  json_mutation(k, "duplicate_question_id", f, args, [](json& j) { j[1]["question_id"] = j[0]["question_id"]; }, false);
  json_mutation(k, "deep_evidence", f, args, [](json& j) { j[0]["evidence"] = json::parse(deep_nesting(400)); }, false);
  json_mutation(k, "huge_difficulty", f, args, [](json& j) { j[0]["difficulty"] = std::string(1 << 20, 'x'); }, false);
  // Deep nesting beyond any parser's comfort: text, not a json value.
  spit(f, "[" + deep_nesting(100000) + "]");
  check(k, "deep_nesting_100k", f, args, true);
  spit(f, "[{\"question_id\": 1e999999}]");
  check(k, "number_overflow", f, args, true, true);
}

TEST_F(MalformedFiles, TablesJson) {
  auto f = root_ / "dev_tables.json";
  auto args = eval_args(dir_ / "pred.jsonl");
  const std::string k = "dataset dev_tables.json";
  text_mutations(k, f, args, true);
  json_mutation(k, "column_table_index_out_of_range", f, args,
                [](json& j) { j[0]["column_names_original"][1][0] = 99; }, false);
  json_mutation(k, "column_table_index_negative", f, args,
                [](json& j) { j[0]["column_names_original"][2][0] = -5; }, false);
  json_mutation(k, "primary_key_out_of_range", f, args, [](json& j) { j[0]["primary_keys"][0] = 100000; }, false);
  json_mutation(k, "primary_key_string", f, args, [](json& j) { j[0]["primary_keys"][0] = "x"; }, false);
  json_mutation(k, "composite_primary_key_bad", f, args,
                [](json& j) { j[0]["primary_keys"][0] = json::array({1, 99999, -3}); }, false);
  json_mutation(k, "foreign_key_out_of_range", f, args, [](json& j) { j[0]["foreign_keys"][0] = {77777, -1}; }, false);
  json_mutation(k, "foreign_key_not_pair", f, args, [](json& j) { j[0]["foreign_keys"][0] = json::array({5}); }, false);
  json_mutation(k, "column_names_not_array", f, args, [](json& j) { j[0]["column_names_original"] = "x"; }, false);
  json_mutation(k, "column_entry_short", f, args, [](json& j) { j[0]["column_names_original"][3] = json::array({0}); }, false);
  json_mutation(k, "column_types_short", f, args, [](json& j) { j[0]["column_types"] = json::array(); }, false);
  json_mutation(k, "table_names_missing", f, args, [](json& j) { j[0].erase("table_names_original"); }, false);
  json_mutation(k, "db_id_missing", f, args, [](json& j) { j[1].erase("db_id"); }, false);
  json_mutation(k, "huge_index", f, args, [](json& j) { j[0]["column_names_original"][1][0] = 9.9e300; }, false);
}

TEST_F(MalformedFiles, DescriptionCsvs) {
  auto f = root_ / "dev_databases" / "music_store" / "database_description" / "album.csv";
  const std::string k = "description csv";
  auto eval = eval_args(dir_ / "pred.jsonl");
  auto schema = "schema --benchmark bird --data " + quote(root_) + " --db music_store";
  text_mutations(k, f, eval, false, 3);
  text_mutations(k, f, schema, false, 3);
  const std::string original = slurp(f);
  for (const auto& [name, text] : std::vector<std::pair<std::string, std::string>>{
           {"unbalanced_quote", "original_column_name,column_name\n\"album_id,album id\nprice,\"price"},
           {"extra_columns", original + "price,price,a,b,c,d,e,f,g,h\n"},
           {"no_header", "album_id\n"},
           {"huge_field", "original_column_name,column_description\nprice," + std::string(2 << 20, 'p') + "\n"},
           {"nul_bytes", std::string("original_column_name,column_description\nprice,a\0b\n", 45)},
           {"crlf_and_bom", "\xef\xbb\xbforiginal_column_name,column_description\r\nprice,cost\r\n"},
           {"unknown_column", "original_column_name,column_description\nno_such_column,x\n"}}) {
    spit(f, text);
    check(k, name, f, eval, false);
    check(k, name, f, schema, false);
  }
  spit(f, original);
}

TEST_F(MalformedFiles, PredictionFiles) {
  // BIRD JSON: {"<position>": "SQL\t----- bird -----\tdb_id"}.
  json bird = json::object();
  for (size_t i = 0; i < questions_.size(); ++i)
    bird[std::to_string(i)] = questions_[i]["SQL"].get<std::string>() + "\t----- bird -----\t" +
                              questions_[i]["db_id"].get<std::string>();
  auto bf = dir_ / "predict_dev.json";
  spit(bf, bird.dump(1));
  auto bargs = eval_args(bf, "bird");
  text_mutations("predictions bird json", bf, bargs, true);
  const std::string k = "predictions bird json";
  json_mutation(k, "array_not_object", bf, bargs, [](json& j) { j = json::array({j}); }, true);
  json_mutation(k, "value_number", bf, bargs, [](json& j) { j["3"] = 42; }, false);
  json_mutation(k, "value_null", bf, bargs, [](json& j) { j["4"] = nullptr; }, false);
  json_mutation(k, "key_not_a_number", bf, bargs, [](json& j) { j["abc"] = "SELECT 1"; }, false);
  json_mutation(k, "key_huge", bf, bargs, [](json& j) { j["99999999999999999999999"] = "SELECT 1"; }, false);
  json_mutation(k, "key_negative", bf, bargs, [](json& j) { j["-1"] = "SELECT 1"; }, false);
  json_mutation(k, "no_separator", bf, bargs, [](json& j) { j["0"] = "SELECT 1"; }, false);
  json_mutation(k, "deep_value", bf, bargs, [](json& j) { j["0"] = json::parse(deep_nesting(300)); }, false);

  // JSONL.
  auto lf = dir_ / "pred.jsonl";
  std::string lines;
  for (size_t i = 0; i < questions_.size(); ++i)
    lines += json{{"question_id", questions_[i]["question_id"]}, {"sql", questions_[i]["SQL"]}}.dump() + "\n";
  spit(lf, lines);
  auto largs = eval_args(lf, "jsonl");
  text_mutations("predictions jsonl", lf, largs, false);
  const std::string kl = "predictions jsonl";
  for (const auto& [name, extra] : std::vector<std::pair<std::string, std::string>>{
           {"bad_line", "{not json\n"},
           {"missing_sql", "{\"question_id\": \"1\"}\n"},
           {"sql_number", "{\"question_id\": \"1\", \"sql\": 5}\n"},
           {"id_object", "{\"question_id\": {}, \"sql\": \"SELECT 1\"}\n"},
           {"line_array", "[1, 2, 3]\n"},
           {"deep_line", deep_nesting(5000) + "\n"},
           {"huge_number_id", "{\"question_id\": 1e999, \"sql\": \"SELECT 1\"}\n"}}) {
    spit(lf, lines + extra);
    check(kl, name, lf, largs, false);
  }
  spit(lf, lines);

  // Plain SQL, one per line (Spider format).
  auto sf = dir_ / "pred.sql";
  std::string sql;
  for (const auto& q : questions_) sql += q["SQL"].get<std::string>() + "\n";
  spit(sf, sql);
  auto sargs = eval_args(sf, "spider");
  text_mutations("predictions plain sql", sf, sargs, false);
  for (const auto& [name, text] : std::vector<std::pair<std::string, std::string>>{
           {"too_many_lines", sql + sql},
           {"huge_line", std::string(4 << 20, 'S') + "\n"},
           {"only_newlines", std::string(1000, '\n')},
           {"nul_bytes", std::string("SELECT 1\0; DROP TABLE album\n", 29)}}) {
    spit(sf, text);
    check("predictions plain sql", name, sf, sargs, false);
  }
}

TEST_F(MalformedFiles, ConfigFiles) {
  auto cf = dir_ / "config.json";
  const std::string good = R"({"run": {"seed": 1, "threads": 2}, "llm": {"cache": {"mode": "off"}}})";
  spit(cf, good);
  auto check_args = "config check --config " + quote(cf);
  const std::string k = "config";
  text_mutations(k, cf, check_args, true);
  for (const auto& [name, text, must_fail] : std::vector<std::tuple<std::string, std::string, bool>>{
           {"wrong_type", R"({"run": {"seed": "x"}})", true},
           {"unknown_key", R"({"run": {"sede": 1}})", true},
           {"huge_number", R"({"run": {"seed": 1e400}})", true},
           {"huge_integer", R"({"run": {"threads": 99999999999999999999999999}})", true},
           {"negative_threads", R"({"run": {"threads": -4}})", true},
           {"top_level_array", "[1, 2]", true},
           {"deep_nesting", "{\"run\": " + deep_nesting(20000) + "}", true},
           {"extends_missing", R"({"extends": "no_such_base.json"})", true},
           {"extends_self", R"({"extends": "config.json"})", true},
           {"extends_number", R"({"extends": 7})", true},
           {"set_path_into_scalar", R"({"run": 3})", true}}) {
    spit(cf, text);
    check(k, name, cf, check_args, must_fail);
  }
  // `nl2sql run` reads the same file first: a broken config stops it before any work.
  auto data = root_;
  for (const auto& [name, text] : std::vector<std::pair<std::string, std::string>>{
           {"run_truncated", good.substr(0, 20)}, {"run_wrong_type", R"({"run": {"threads": "many"}})"},
           {"run_deep", "{\"generate\": " + deep_nesting(20000) + "}"}}) {
    spit(cf, text);
    check(k, name, cf,
          "run --config " + quote(cf) + " --benchmark bird --data " + quote(data) + " --out " +
              quote(dir_ / "run") + " --index-dir " + quote(dir_ / "index") + " --progress off",
          true);
  }
}

// Rewrites every row's payload column of `table` in the SQLite file with `payload`.
void corrupt_rows(const fs::path& db, const std::string& table, const std::string& column,
                  const std::string& payload) {
  sqlite3* h = nullptr;
  ASSERT_EQ(sqlite3_open(db.c_str(), &h), SQLITE_OK);
  sqlite3_stmt* st = nullptr;
  std::string sql = "UPDATE " + table + " SET " + column + " = ?";
  ASSERT_EQ(sqlite3_prepare_v2(h, sql.c_str(), -1, &st, nullptr), SQLITE_OK) << sqlite3_errmsg(h);
  sqlite3_bind_blob(st, 1, payload.data(), static_cast<int>(payload.size()), SQLITE_TRANSIENT);
  EXPECT_EQ(sqlite3_step(st), SQLITE_DONE) << sqlite3_errmsg(h);
  sqlite3_finalize(st);
  sqlite3_close(h);
}

TEST_F(MalformedFiles, CachedEntries) {
  // Result cache: fill it with a full eval, corrupt every stored result, evaluate again. A bad
  // entry is either a miss (re-executed: same scores) or a clear error naming the cache file.
  auto bird_pred = dir_ / "gold.jsonl";
  std::string lines;
  for (const auto& q : questions_) lines += json{{"question_id", q["question_id"]}, {"sql", q["SQL"]}}.dump() + "\n";
  spit(bird_pred, lines);
  auto cache = dir_ / "cache";
  std::string args = "eval --benchmark bird --data " + quote(root_) + " --cache-dir " + quote(cache) +
                     " --threads 1 --pred-format jsonl --pred " + quote(bird_pred) + " --out " + quote(dir_ / "out");
  auto first = testing::run_nl2sql(args);
  ASSERT_EQ(first.exit_code, 0) << first.err;
  auto cache_file = cache / "results.sqlite";
  ASSERT_TRUE(fs::exists(cache_file));
  auto ex = [&]() { return (*core::read_json_file(dir_ / "out" / "eval.json"))["summary"]["metrics"]["bird"]["overall"]["ex"]; };
  json baseline = ex();
  // A well-formed header (format 2, status ok, no error, no columns) claiming 2^62 rows: a
  // decoder that trusts the count allocates rows forever.
  auto u64 = [](uint64_t v) { return std::string(reinterpret_cast<const char*>(&v), 8); };
  std::string zero_columns = u64(2) + std::string(2, '\0') + u64(0) + u64(0) + u64(0) + u64(0) + u64(1ull << 62);
  for (const auto& [name, payload] : std::vector<std::pair<std::string, std::string>>{
           {"zero_columns_many_rows", zero_columns},
           {"garbage", "\x01\x02garbage\xff"}, {"empty", ""}, {"truncated_json", "{\"columns\": [\"a\""},
           {"wrong_shape", "{\"columns\": 5, \"rows\": \"x\"}"}, {"deep", deep_nesting(50000)}}) {
    corrupt_rows(cache_file, "results", "value", payload);
    auto r = testing::run_nl2sql(args);
    std::string all = r.out + r.err;
    auto& o = tally()["result cache entries"];
    ++o.cases;
    EXPECT_TRUE(r.exit_code == 0 || r.exit_code == 2) << name << ": exit " << r.exit_code << "\n" << all.substr(0, 2000);
    if (r.exit_code == 0) {
      ++o.accepted;
      EXPECT_EQ(ex(), baseline) << name << ": a corrupt cache entry changed the scores";
    } else if (r.exit_code == 2) {
      ++o.rejected;
      EXPECT_NE(all.find("results.sqlite"), std::string::npos) << all.substr(0, 2000);
    } else {
      ++o.crashes;
    }
  }
  // A cache file that is not a database at all.
  spit(cache_file, "this is not a database");
  check("result cache file", "not_sqlite", cache_file, args, false);
}

TEST_F(MalformedFiles, CachedModelAnswers) {
  // LLM response cache: a stored answer whose payload is corrupted is an error status for that
  // lookup (the call is then made or fails with a reason), never an exception or a crash.
  // (The sim provider does not use the cache, so this is checked on the cache itself.)
  auto file = dir_ / "llm_cache.sqlite";
  auto cache = llm::ResponseCache::open(file, /*read_only=*/false);
  ASSERT_TRUE(cache.is_ok()) << cache.status().message();
  llm::ChatResponse answer;
  answer.choices = {"```sql\nSELECT 1\n```"};
  answer.finish_reasons = {"stop"};
  ASSERT_TRUE((*cache)->store("k1", "main", "m", "{}", answer).is_ok());
  auto ok = (*cache)->lookup("k1");
  ASSERT_TRUE(ok.is_ok() && ok->has_value());
  cache->reset();
  for (const auto& [name, payload] : std::vector<std::pair<std::string, std::string>>{
           {"not_json", "\x01garbage"}, {"empty", ""}, {"no_choices", "{\"usage\": {}}"},
           {"choice_number", "{\"choices\": [5]}"},
           {"usage_string", "{\"choices\": [\"x\"], \"usage\": {\"prompt_tokens\": \"many\"}}"},
           {"usage_huge", "{\"choices\": [\"x\"], \"usage\": {\"completion_tokens\": 1e300}}"},
           {"finish_object", "{\"choices\": [\"x\"], \"finish_reasons\": {\"a\": 1}}"},
           {"deep", deep_nesting(50000)}}) {
    SCOPED_TRACE(name);
    corrupt_rows(file, "responses", "response", payload);
    auto reopened = llm::ResponseCache::open(file, /*read_only=*/true);
    ASSERT_TRUE(reopened.is_ok()) << reopened.status().message();
    auto& o = tally()["llm response cache entries"];
    ++o.cases;
    Result<std::optional<llm::ChatResponse>> r = std::optional<llm::ChatResponse>();
    EXPECT_NO_THROW(r = (*reopened)->lookup("k1"));
    if (!r.is_ok()) {
      ++o.rejected;
      EXPECT_NE(r.status().message().find("k1"), std::string::npos) << r.status().message();
    } else {
      ++o.accepted;  // a readable answer (tokens defaulted): the choice text is intact
      ASSERT_TRUE(r->has_value());
      EXPECT_EQ((**r).choices, std::vector<std::string>{"x"});
      EXPECT_GE((**r).usage.prompt_tokens, 0);
      EXPECT_GE((**r).usage.completion_tokens, 0);
    }
  }
}

}  // namespace
}  // namespace nl2sql
