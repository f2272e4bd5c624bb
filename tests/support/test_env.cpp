#include "support/test_env.h"

#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <random>
#include <sstream>
#include <stdexcept>

namespace nl2sql::testing {

std::optional<std::filesystem::path> data_dir() {
  const char* v = std::getenv("NL2SQL_DATA");
  if (!v || !*v) return std::nullopt;
  std::filesystem::path p(v);
  if (!std::filesystem::is_directory(p)) return std::nullopt;
  return p;
}

std::filesystem::path fixtures_dir() { return NL2SQL_FIXTURES_DIR; }

TempDir::TempDir() {
  std::random_device rd;
  path_ = std::filesystem::temp_directory_path() /
          ("nl2sql_test_" + std::to_string(::getpid()) + "_" + std::to_string(rd()));
  std::filesystem::create_directories(path_);
}
TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

void build_database(const std::filesystem::path& db_path, const std::string& sql_script) {
  std::filesystem::create_directories(db_path.parent_path());
  std::filesystem::remove(db_path);
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(db_path.c_str(), &db), SQLITE_OK);
  char* err = nullptr;
  int rc = sqlite3_exec(db, sql_script.c_str(), nullptr, nullptr, &err);
  std::string msg = err ? err : "";
  sqlite3_free(err);
  sqlite3_close(db);
  ASSERT_EQ(rc, SQLITE_OK) << msg;
}

static std::string slurp(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::filesystem::path build_mini_bird(const std::filesystem::path& root) {
  const auto src = fixtures_dir() / "mini_bird";
  std::filesystem::create_directories(root);
  std::filesystem::copy(src, root,
                        std::filesystem::copy_options::recursive |
                            std::filesystem::copy_options::overwrite_existing);
  for (auto& entry : std::filesystem::directory_iterator(root / "dev_databases")) {
    if (!entry.is_directory()) continue;
    auto name = entry.path().filename().string();
    auto script = entry.path() / (name + ".sql");
    if (std::filesystem::exists(script)) {
      build_database(entry.path() / (name + ".sqlite"), slurp(script));
      std::filesystem::remove(script);
    }
  }
  return root;
}

nlohmann::json read_json_file(const std::filesystem::path& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot open " + path.string());
  return nlohmann::json::parse(in);
}

CommandResult run_nl2sql(const std::string& args) {
  TempDir tmp;
  auto out = tmp / "out.txt";
  auto err = tmp / "err.txt";
  std::string cmd = std::string("'") + NL2SQL_BINARY + "' " + args + " >'" + out.string() +
                    "' 2>'" + err.string() + "' </dev/null";
  int rc = std::system(cmd.c_str());
  CommandResult r;
  r.exit_code = WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
  r.out = slurp(out);
  r.err = slurp(err);
  return r;
}

}  // namespace nl2sql::testing
