// nl2sql sql parse|format|tables|lineage|neighbours: inspect a query with the SQL front end.
#include <iostream>
#include <iterator>

#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "nl2sql/db/executor.h"
#include "nl2sql/db/result_compare.h"
#include "nl2sql/sql/analysis.h"
#include "nl2sql/sql/features.h"
#include "nl2sql/sql/lineage.h"
#include "nl2sql/sql/neighbours.h"
#include "nl2sql/sql/normalize.h"
#include "nl2sql/sql/parser.h"
#include "nl2sql/sql/printer.h"

namespace nl2sql::cli {
namespace {

struct SqlArgs {
  std::string sql;   // "-" reads standard input
  std::string db;
  bool json = false;
  bool normalize = false;
  bool lower = false;
  bool run = false;
  int64_t group_budget = 0;  // lineage: sample grouped witnesses over tables above this
  size_t max_neighbours = 200;
};

int fail(const std::string& msg, int code = kExitBadInput) {
  std::cerr << "nl2sql sql: " << msg << "\n";
  return code;
}

std::string read_sql(const SqlArgs& a) {
  if (a.sql != "-") return a.sql;
  return std::string(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
}

Result<sql::Statement> parse_arg(const SqlArgs& a) { return sql::parse(read_sql(a)); }

Result<sql::Schema> schema_arg(const SqlArgs& a) {
  if (a.db.empty()) return invalid_input("--db PATH is required");
  return db::inspect_schema(a.db);
}

int run_parse(const SqlArgs& a) {
  auto st = parse_arg(a);
  if (!st.is_ok()) return fail(st.status().message());
  nlohmann::json j;
  if (!st->is_query()) {
    j = {{"kind", "not_query"}, {"keyword", st->keyword}, {"text", st->text}};
  } else {
    const sql::Select& s = *st->select;
    auto f = sql::compute_features(s);
    auto h = sql::spider_hardness_components(s);
    j = {{"kind", "query"},
         {"sql", sql::to_sql(s)},
         {"normalized", sql::normalized_sql(s)},
         {"tags", f.tags()},
         {"tables", f.tables},
         {"joins", f.joins},
         {"subqueries", f.subqueries},
         {"max_nesting", f.max_nesting},
         {"spider_hardness", sql::spider_hardness(s)},
         {"spider_components", {h.component1, h.component2, h.others}}};
  }
  if (a.json) {
    std::cout << j.dump(2) << "\n";
    return kExitOk;
  }
  for (auto it = j.begin(); it != j.end(); ++it)
    std::cout << it.key() << ": " << (it->is_string() ? it->get<std::string>() : it->dump()) << "\n";
  return kExitOk;
}

int run_format(const SqlArgs& a) {
  auto st = parse_arg(a);
  if (!st.is_ok()) return fail(st.status().message());
  if (!st->is_query()) {
    std::cout << st->text << "\n";
    return kExitOk;
  }
  if (a.normalize) std::cout << sql::normalized_sql(*st->select) << "\n";
  else std::cout << sql::to_sql(*st, {.lower_keywords = a.lower}) << "\n";
  return kExitOk;
}

int run_tables(const SqlArgs& a) {
  auto schema = schema_arg(a);
  if (!schema.is_ok()) return fail(schema.status().message());
  auto st = parse_arg(a);
  if (!st.is_ok()) return fail(st.status().message());
  if (!st->is_query()) return fail("not a query: a " + st->keyword + " statement");
  auto refs = sql::analyze_references(*st->select, *schema);
  nlohmann::json j;
  j["tables"] = refs.tables;
  j["columns"] = nlohmann::json::array();
  for (const auto& [t, c] : refs.columns) j["columns"].push_back(t + "." + c);
  j["literals"] = nlohmann::json::array();
  for (const auto& l : refs.literals)
    j["literals"].push_back({{"column", l.column.first + "." + l.column.second}, {"op", l.op},
                             {"literal", l.literal}});
  j["unresolved"] = refs.unresolved;
  j["correlated"] = refs.correlated;
  if (a.json) {
    std::cout << j.dump(2) << "\n";
    return kExitOk;
  }
  std::cout << "tables:";
  for (const auto& t : refs.tables) std::cout << " " << t;
  std::cout << "\ncolumns:";
  for (const auto& [t, c] : refs.columns) std::cout << " " << t << "." << c;
  std::cout << "\n";
  for (const auto& l : refs.literals)
    std::cout << "literal: " << l.column.first << "." << l.column.second << " " << l.op << " "
              << l.literal << "\n";
  for (const auto& u : refs.unresolved) std::cout << "unresolved: " << u << "\n";
  return refs.unresolved.empty() ? kExitOk : kExitBadInput;
}

int run_lineage(const SqlArgs& a) {
  auto schema = schema_arg(a);
  if (!schema.is_ok()) return fail(schema.status().message());
  auto st = parse_arg(a);
  if (!st.is_ok()) return fail(st.status().message());
  if (!st->is_query()) return fail("not a query: a " + st->keyword + " statement");
  sql::LineageOptions lo;
  lo.group_budget = a.group_budget;
  db::Executor exec;
  if (a.group_budget > 0) {
    auto counts = sql::count_table_rows(*st->select, *schema, a.db, exec);
    if (!counts.is_ok()) return fail(counts.status().message(), kExitFailure);
    lo.table_rows = std::move(*counts);
  }
  auto lineage = sql::rewrite_lineage(*st->select, *schema, lo);
  if (!lineage.is_ok()) return fail(lineage.status().message());
  for (const auto& q : lineage->queries) {
    if (!q.all_rows_of.empty()) {
      std::cout << "witness: every row of " << q.all_rows_of << "\n";
      continue;
    }
    std::cout << "witness" << (q.grouped ? " (grouped)" : "") << ":";
    for (const auto& t : q.tables) std::cout << " " << t;
    std::cout << "\n  " << q.sql << "\n";
    if (q.sample_one_in > 0) std::cout << "  exact (when the sample keeps no group):\n  " << q.exact_sql << "\n";
  }
  for (const auto& f : lineage->fallbacks) std::cout << "over-approximation: " << f << "\n";
  for (const auto& f : lineage->sampled) std::cout << "sampled: " << f << "\n";
  if (lineage->exact()) std::cout << "exact: yes\n";
  if (a.run) {
    auto rows = sql::collect_lineage_rows(*lineage, a.db, exec);
    if (!rows.is_ok()) return fail(rows.status().message(), kExitFailure);
    for (const auto& [t, ids] : *rows) {
      std::cout << "rows of " << t << " (" << ids.size() << "):";
      size_t shown = 0;
      for (int64_t id : ids) {
        if (shown++ == 50) {
          std::cout << " …";
          break;
        }
        std::cout << " " << id;
      }
      std::cout << "\n";
    }
  }
  return kExitOk;
}

// The neighbour queries a test-suite build tells apart from this query (sql/neighbours.h); with
// --run, whether the database tells each one apart (answers differ, or one fails).
int run_neighbours(const SqlArgs& a) {
  auto schema = schema_arg(a);
  if (!schema.is_ok()) return fail(schema.status().message());
  auto st = parse_arg(a);
  if (!st.is_ok()) return fail(st.status().message());
  if (!st->is_query()) return fail("not a query: a " + st->keyword + " statement");
  sql::NeighbourOptions o;
  o.max_neighbours = a.max_neighbours;
  auto ns = sql::neighbour_queries(*st->select, *schema, o);
  db::Executor exec;
  db::ExecutionResult gold;
  if (a.run) {
    gold = exec.run(a.db, sql::to_sql(*st->select));
    if (!gold.ok()) return fail("the query fails on " + a.db + ": " + gold.error, kExitFailure);
  }
  const bool ordered = !st->select->order_by.empty();
  nlohmann::json out = nlohmann::json::array();
  for (const auto& n : ns) {
    nlohmann::json j = {{"kind", n.kind}, {"sql", n.sql}};
    if (a.run) {
      auto r = exec.run(a.db, n.sql);
      j["runs"] = r.ok();
      j["told_apart"] = !r.ok() || !db::spider_ts_equal(gold.result, r.result, ordered);
    }
    if (!a.json) {
      std::cout << n.kind;
      if (a.run) std::cout << (j["told_apart"].get<bool>() ? "\ttold apart" : "\tsame answer");
      std::cout << "\t" << n.sql << "\n";
    }
    out.push_back(std::move(j));
  }
  if (a.json) std::cout << out.dump(2) << "\n";
  return kExitOk;
}

RunFn setup_sql(CLI::App& parent) {
  auto args = std::make_shared<SqlArgs>();
  auto* cmd = parent.add_subcommand("sql", "Parse, format and analyze SQL (SQLite dialect)");
  cmd->require_subcommand(1);
  auto add_sql = [&](CLI::App* sub) {
    sub->add_option("sql", args->sql, "The SQL text, or - to read it from standard input")->required();
  };
  auto* parse = cmd->add_subcommand("parse", "Canonical SQL, feature tags and Spider hardness");
  add_sql(parse);
  parse->add_flag("--json", args->json, "Print JSON");
  auto* format = cmd->add_subcommand("format", "Print canonical SQL");
  add_sql(format);
  format->add_flag("--normalize", args->normalize, "Print the de-duplication normal form");
  format->add_flag("--lower", args->lower, "Lower-case keywords");
  auto* tables = cmd->add_subcommand("tables", "Tables, columns and literal comparisons read");
  add_sql(tables);
  tables->add_option("--db", args->db, "SQLite database whose schema resolves names")->required();
  tables->add_flag("--json", args->json, "Print JSON");
  auto* lineage = cmd->add_subcommand("lineage", "Witness queries for the rows a result depends on");
  add_sql(lineage);
  lineage->add_option("--db", args->db, "SQLite database")->required();
  lineage->add_flag("--run", args->run, "Run the witness queries and print the rowids");
  lineage->add_option("--group-budget", args->group_budget,
                      "Grouped witnesses over a table of more rows keep a hash sample of their groups "
                      "(as the separating-instance selector does; default 0: exact)")
      ->check(CLI::NonNegativeNumber);
  auto* neighbours = cmd->add_subcommand("neighbours", "Neighbour queries one modification away (test-suite build)");
  add_sql(neighbours);
  neighbours->add_option("--db", args->db, "SQLite database whose schema resolves columns")->required();
  neighbours->add_flag("--run", args->run, "Run each on the database: is it told apart from the query there?");
  neighbours->add_option("--max", args->max_neighbours, "At most this many (spread over the query)")->capture_default_str();
  neighbours->add_flag("--json", args->json, "Print JSON");
  return [=]() -> int {
    if (neighbours->parsed()) return run_neighbours(*args);
    if (parse->parsed()) return run_parse(*args);
    if (format->parsed()) return run_format(*args);
    if (tables->parsed()) return run_tables(*args);
    if (lineage->parsed()) return run_lineage(*args);
    return kExitBadInput;
  };
}

}  // namespace
}  // namespace nl2sql::cli

NL2SQL_REGISTER_COMMAND("sql", nl2sql::cli::setup_sql);
