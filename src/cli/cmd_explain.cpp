// nl2sql explain: SQLite's query plan of one query as a tree and as the readable steps the
// query-plan generator's demonstrations use.
#include <iostream>

#include <spdlog/spdlog.h>

#include "cli/command.h"
#include "nl2sql/db/executor.h"
#include "nl2sql/generate/query_plan.h"

namespace nl2sql::cli {
namespace {

struct ExplainArgs {
  std::string db;
  std::string sql;
};

int run_explain(const ExplainArgs& a) {
  if (!std::filesystem::exists(a.db)) {
    spdlog::error("--db {}: no such file", a.db);
    return kExitBadInput;
  }
  db::Executor executor;
  auto text = generate::explain_query(executor, a.db, a.sql);
  if (!text) {
    spdlog::error("{}", text.status().message());
    return kExitBadInput;
  }
  std::cout << text->tree << "\n" << text->text();
  return kExitOk;
}

RunFn setup_explain(CLI::App& app) {
  auto args = std::make_shared<ExplainArgs>();
  auto* cmd = app.add_subcommand("explain", "Show a query's plan (EXPLAIN QUERY PLAN) as a tree and as readable steps");
  cmd->add_option("--db", args->db, "SQLite database file")->required();
  cmd->add_option("sql", args->sql, "The query (one read-only statement)")->required();
  return [args] { return run_explain(*args); };
}

NL2SQL_REGISTER_COMMAND("explain", setup_explain);

}  // namespace
}  // namespace nl2sql::cli
