// A JSONL benchmark built in a test's scratch folder: the questions written to dir/q.jsonl,
// the databases under dir/dbs/<db_id>/<db_id>.sqlite (built by the test beforehand).
#pragma once

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "nl2sql/data/dataset.h"

namespace nl2sql::testing {

// Each line of `questions` is a question object ({"question_id", "db_id", "sql", …}).
inline data::Dataset jsonl_dataset(const std::filesystem::path& dir, const std::vector<std::string>& questions) {
  {
    std::ofstream out(dir / "q.jsonl");
    for (const auto& q : questions) out << q << "\n";
  }
  data::DatasetSpec spec;
  spec.benchmark = data::Benchmark::kJsonl;
  spec.questions = dir / "q.jsonl";
  spec.db_root = dir / "dbs";
  auto ds = data::load_dataset(spec);
  EXPECT_TRUE(ds.is_ok()) << ds.status().message();
  return ds.is_ok() ? std::move(*ds) : data::Dataset{};
}

}  // namespace nl2sql::testing
