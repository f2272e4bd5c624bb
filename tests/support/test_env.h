// Test helpers shared by every stage's tests: where the benchmark data is (NL2SQL_DATA; tests
// that need it skip with a visible message when it is unset), scratch directories, fixture
// databases built from SQL scripts, and running the nl2sql binary.
#pragma once

#include <filesystem>
#include <optional>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace nl2sql::testing {

// The shared data folder, or nullopt when NL2SQL_DATA is unset or missing.
std::optional<std::filesystem::path> data_dir();

// Skips the current test, visibly, when NL2SQL_DATA is unset.
#define NL2SQL_REQUIRE_DATA(var)                                                        \
  auto var##_opt = ::nl2sql::testing::data_dir();                                       \
  if (!var##_opt) GTEST_SKIP() << "NL2SQL_DATA is not set: skipping data test";         \
  const std::filesystem::path var = *var##_opt

std::filesystem::path fixtures_dir();

// A fresh empty directory, removed when the object dies.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path operator/(const std::string& name) const { return path_ / name; }

 private:
  std::filesystem::path path_;
};

// Builds a SQLite database at `db_path` by running the SQL script (read-write; test use only).
void build_database(const std::filesystem::path& db_path, const std::string& sql_script);

// Builds the bundled mini BIRD-format dataset (tests/fixtures/mini_bird) under `root`:
// root/dev.json, root/dev_tables.json, root/dev_databases/<db>/<db>.sqlite + descriptions.
std::filesystem::path build_mini_bird(const std::filesystem::path& root);

// The JSON document in `path` (throws on a missing file or bad JSON: the test fails there).
nlohmann::json read_json_file(const std::filesystem::path& path);

struct CommandResult {
  int exit_code = -1;
  std::string out;  // stdout
  std::string err;  // stderr
};
// Runs the nl2sql binary with the given argument string (shell-quoted by the caller).
CommandResult run_nl2sql(const std::string& args);

}  // namespace nl2sql::testing
