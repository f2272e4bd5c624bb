// Query-plan demonstrations, built by the tool itself: (question, SQL) pairs from a train split
// (or a JSONL file) whose database is available are planned with EXPLAIN QUERY PLAN through the
// read-only executor and written out as the QP chain of thought — plan steps, then conditions
// and the delivered columns — followed by the SQL. Pairs are chosen to cover different shapes
// (joins, grouping, ordering with LIMIT, nesting, plain filters). Built once when the QP
// generator is configured; the result is immutable.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "nl2sql/core/status.h"
#include "nl2sql/data/dataset.h"
#include "nl2sql/db/executor.h"

namespace nl2sql::generate {

struct QpDemo {
  std::string question, evidence, sql, db_id;
  std::string plan_text;  // QueryPlanText::text()
};

struct QpDemoSource {
  std::optional<data::DatasetSpec> dataset;  // a train split whose databases are present
  std::filesystem::path jsonl;               // or lines of {"question","sql","db_path"[,"evidence"]}
  size_t count = 3;                          // demonstrations wanted
  size_t scan_limit = 10000;                 // pairs read at most
  bool empty() const { return !dataset && jsonl.empty(); }
  std::string describe() const;              // "DIR (split)" or the JSONL path, for logs
};

// A (question, SQL) pair of the demonstration source, in file order.
struct DemoPair {
  std::string question_id;  // the dataset's id, or "line N" of the JSONL
  std::string question, evidence, sql, db_id;
  std::filesystem::path db_path;
};

// The source's pairs whose database is present, at most scan_limit, in file order.
Result<std::vector<DemoPair>> read_demo_pairs(const QpDemoSource& source);

// One pair's QP demonstration (EXPLAIN QUERY PLAN through the read-only executor); fails when
// the query does not plan.
Result<QpDemo> plan_demo(const DemoPair& pair, const db::Executor& executor);

// The fixed choice (demos.choose = "fixed"): the first pairs that plan, covering different
// query shapes; the same demonstrations for every question.
Result<std::vector<QpDemo>> build_qp_demos(const QpDemoSource& source, const db::Executor& executor);

// The demonstrations as prompt text ("Example 1 …").
std::string format_qp_demos(const std::vector<QpDemo>& demos);

}  // namespace nl2sql::generate
