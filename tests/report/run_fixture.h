// Test helper: the hand-made run in tests/fixtures/runs/mini (manifest.json + records.jsonl,
// eight questions of the bundled mini BIRD set, simulated) loaded into a run store.
#pragma once

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "nl2sql/core/files.h"
#include "nl2sql/run/question_record.h"
#include "nl2sql/run/run_store.h"
#include "support/test_env.h"

namespace nl2sql::testing {

inline nlohmann::json fixture_manifest() {
  auto m = core::read_json_file(fixtures_dir() / "runs" / "mini" / "manifest.json");
  EXPECT_TRUE(m.is_ok()) << m.status().to_string();
  return m.is_ok() ? *m : nlohmann::json::object();
}

inline std::vector<nlohmann::json> fixture_records() {
  std::vector<nlohmann::json> out;
  std::ifstream in(fixtures_dir() / "runs" / "mini" / "records.jsonl");
  std::string line;
  while (std::getline(in, line))
    if (!line.empty()) out.push_back(nlohmann::json::parse(line));
  EXPECT_EQ(out.size(), 8u);
  return out;
}

// A record as a reader gets it (the test fails when it does not read).
inline run::QuestionRecord typed(const nlohmann::json& record) {
  auto r = run::record_from_json(record);
  EXPECT_TRUE(r.is_ok()) << r.status().to_string();
  return r.is_ok() ? *r : run::QuestionRecord{};
}

inline std::vector<run::QuestionRecord> typed(const std::vector<nlohmann::json>& records) {
  std::vector<run::QuestionRecord> out;
  for (const auto& r : records) out.push_back(typed(r));
  return out;
}

// Writes a run store at `dir` holding `records` (final rows plus a "generate" row each, as the
// pipeline would) and `manifest`.
inline void write_run(const std::filesystem::path& dir, const nlohmann::json& manifest,
                      const std::vector<nlohmann::json>& records) {
  auto store = run::RunStore::open(dir, true);
  ASSERT_TRUE(store.is_ok()) << store.status().to_string();
  for (const auto& r : records) {
    std::string id = r["question_id"].get<std::string>();
    int64_t idx = r["index"].get<int64_t>();
    ASSERT_TRUE((*store)->put_stage(id, idx, "generate", run::kStageDone, {{"candidates", r["candidates"]}}).is_ok());
    ASSERT_TRUE((*store)->put_stage(id, idx, "final", r["status"] == "ok" ? run::kStageDone : run::kStageError, r).is_ok());
  }
  ASSERT_TRUE((*store)->save_manifest(manifest).is_ok());
  ASSERT_TRUE((*store)->save_resolved_config({{"run", {{"seed", 7}}}, {"report", {{"title", "mini fixture"}}}}).is_ok());
}

inline void write_fixture_run(const std::filesystem::path& dir) {
  write_run(dir, fixture_manifest(), fixture_records());
}

// Shard i of n of the fixture run: every n-th record, as --shard I/N takes them.
inline void write_shard_run(const std::filesystem::path& dir, size_t i, size_t n) {
  auto records = fixture_records();
  nlohmann::json manifest = fixture_manifest();
  std::vector<nlohmann::json> mine;
  nlohmann::json ids = nlohmann::json::array();
  for (size_t k = 0; k < records.size(); ++k)
    if (k % n == i) {
      mine.push_back(records[k]);
      ids.push_back(records[k]["question_id"]);
    }
  manifest["question_ids"] = ids;
  manifest["shard"] = {{"index", i}, {"count", n}};
  write_run(dir, manifest, mine);
}

}  // namespace nl2sql::testing
