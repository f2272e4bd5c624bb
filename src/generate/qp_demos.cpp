// Self-built query-plan demonstrations (see qp_demos.h).
#include "qp_demos.h"

#include <algorithm>
#include <fstream>
#include <set>

#include <nlohmann/json.hpp>

#include "nl2sql/generate/query_plan.h"
#include "nl2sql/sql/parser.h"

namespace nl2sql::generate {
namespace {

// A coarse shape of the query, so the few demonstrations show different plans.
std::string shape_of(const std::string& sql_text) {
  auto st = sql::parse_query(sql_text);
  if (!st) return "";
  const sql::Select& s = *st->select;
  const sql::SelectCore& c = s.cores.front();
  std::string k;
  k += c.from && c.from->items.size() > 1 ? "J" : "-";
  k += c.group_by.empty() ? "-" : "G";
  k += s.order_by.empty() ? "-" : "O";
  k += s.cores.size() > 1 ? "C" : "-";
  // Nesting shows as a second SELECT keyword in the text.
  std::string up = sql_text;
  for (auto& ch : up) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
  k += up.find("SELECT", up.find("SELECT") + 6) != std::string::npos ? "N" : "-";
  return k;
}

}  // namespace

std::string QpDemoSource::describe() const {
  return dataset ? dataset->data_dir.string() + " (" + dataset->split + ")" : jsonl.string();
}

Result<std::vector<DemoPair>> read_demo_pairs(const QpDemoSource& source) {
  std::vector<DemoPair> pairs;
  if (source.dataset) {
    auto ds = data::load_dataset(*source.dataset);
    if (!ds) return ds.status().with_context("QP demonstrations");
    for (const auto& q : ds->questions) {
      if (pairs.size() >= source.scan_limit) break;
      auto it = ds->db_paths.find(q.db_id);
      if (it == ds->db_paths.end()) continue;
      pairs.push_back({q.question_id, q.question, q.evidence, q.gold_sql, q.db_id, it->second});
    }
    return pairs;
  }
  std::ifstream in(source.jsonl);
  if (!in) return io_error("QP demonstrations: cannot open " + source.jsonl.string());
  std::string line;
  size_t lineno = 0;
  while (std::getline(in, line) && pairs.size() < source.scan_limit) {
    ++lineno;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = source.jsonl.string() + ":" + std::to_string(lineno);
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.is_object()) return invalid_input(where + ": not a JSON object");
    if (!j.contains("question") || !j.contains("sql") || !j.contains("db_path") || !j["question"].is_string() ||
        !j["sql"].is_string() || !j["db_path"].is_string())
      return invalid_input(where + ": needs string fields question, sql and db_path");
    DemoPair p;
    p.question_id = "line " + std::to_string(lineno);
    p.question = j["question"];
    p.sql = j["sql"];
    p.db_path = j["db_path"].get<std::string>();
    if (p.db_path.is_relative()) p.db_path = source.jsonl.parent_path() / p.db_path;
    p.db_id = p.db_path.stem().string();
    if (j.contains("evidence") && j["evidence"].is_string()) p.evidence = j["evidence"];
    pairs.push_back(std::move(p));
  }
  return pairs;
}

Result<QpDemo> plan_demo(const DemoPair& p, const db::Executor& executor) {
  auto plan = explain_query(executor, p.db_path, p.sql);
  if (!plan) return plan.status();
  return QpDemo{p.question, p.evidence, p.sql, p.db_id, plan->text()};
}


Result<std::vector<QpDemo>> build_qp_demos(const QpDemoSource& source, const db::Executor& executor) {
  if (source.empty()) return invalid_input("QP demonstrations: no source configured");
  auto pairs = read_demo_pairs(source);
  if (!pairs) return pairs.status();
  std::vector<QpDemo> chosen, spare;
  std::set<std::string> shapes;
  for (const auto& p : *pairs) {
    if (chosen.size() >= source.count) break;
    std::string shape = shape_of(p.sql);
    if (shape.empty()) continue;
    const bool new_shape = !shapes.count(shape);
    if (!new_shape && spare.size() >= source.count) continue;
    auto planned = plan_demo(p, executor);
    if (!planned) continue;  // a pair whose query does not plan teaches nothing
    QpDemo d = std::move(*planned);
    if (new_shape) {
      shapes.insert(shape);
      chosen.push_back(std::move(d));
    } else {
      spare.push_back(std::move(d));
    }
  }
  for (auto& d : spare) {
    if (chosen.size() >= source.count) break;
    chosen.push_back(std::move(d));
  }
  if (chosen.empty())
    return not_found("QP demonstrations: none of " + std::to_string(pairs->size()) +
                     " (question, SQL) pairs could be planned");
  return chosen;
}

std::string format_qp_demos(const std::vector<QpDemo>& demos) {
  std::string s;
  for (size_t i = 0; i < demos.size(); ++i) {
    const auto& d = demos[i];
    s += "Example " + std::to_string(i + 1) + " (database " + d.db_id + ")\n";
    s += "Question: " + d.question + "\n";
    s += "Hint: " + (d.evidence.empty() ? std::string("(none)") : d.evidence) + "\n";
    s += "Query plan reasoning:\n" + d.plan_text;
    s += "Final SQL:\n```sql\n" + d.sql + "\n```\n";
    if (i + 1 < demos.size()) s += "\n";
  }
  return s;
}

}  // namespace nl2sql::generate
