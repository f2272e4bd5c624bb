// RunStore: the durable state of one run folder (`runs/NAME/run.sqlite`). Per question and
// pipeline stage one row (question_id, idx, stage, status, payload JSON, updated_at); a `meta`
// table (key → JSON) holds the manifest and anything else the pipeline needs to resume.
// The final record is a run::QuestionRecord (nl2sql/run/question_record.h); the folder layout is
// described in nl2sql/run/run_data.h.
//
// Durability: SQLite in WAL mode with synchronous=FULL; every put is one transaction, so a
// kill -9 or a power cut loses at most the rows in flight and never leaves a half-written row
// (tests/run/run_store_test.cpp kills a writer process at random points). A row is
// replaced, not appended, when a stage is redone.
//
// Thread-safety: one connection per RunStore guarded by a mutex; every method may be called
// from many threads. Two processes may open the same folder (SQLite's locking, busy timeout
// 10 s), but one writer per run is the intended use.
#pragma once

#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "nl2sql/core/status.h"

struct sqlite3;

namespace nl2sql::run {

// Conventional statuses; the store accepts any string.
inline constexpr const char* kStageDone = "done";
inline constexpr const char* kStageError = "error";
// The stage whose payload is the final question record.
inline constexpr const char* kFinalStage = "final";

struct StageRow {
  std::string question_id;
  int64_t index = 0;  // position of the question in the question file
  std::string stage;
  std::string status;
  nlohmann::json payload;
  double updated_at = 0;  // seconds since the Unix epoch
};

class RunStore {
 public:
  static constexpr const char* kFileName = "run.sqlite";

  // Opens `dir/run.sqlite`; with `create`, makes the folder and the file when missing.
  // Without it, a missing store is kNotFound naming the path.
  static Result<std::unique_ptr<RunStore>> open(const std::filesystem::path& dir, bool create);
  ~RunStore();
  RunStore(const RunStore&) = delete;
  RunStore& operator=(const RunStore&) = delete;

  const std::filesystem::path& dir() const { return dir_; }

  // Inserts or replaces the (question_id, stage) row, atomically and durably.
  Status put_stage(const std::string& question_id, int64_t index, const std::string& stage,
                   const std::string& status, const nlohmann::json& payload);
  // Several rows in one transaction (all or none), e.g. when merging stores.
  Status put_rows(const std::vector<StageRow>& rows);

  // The payload of a stage, nullopt when the row does not exist.
  Result<std::optional<nlohmann::json>> get_stage(const std::string& question_id,
                                                  const std::string& stage) const;
  Result<std::optional<StageRow>> get_row(const std::string& question_id, const std::string& stage) const;
  // stage → status of every row recorded for the question.
  Result<std::map<std::string, std::string>> stages_done(const std::string& question_id) const;
  // Payloads of every "final" row, ordered by index (then question id).
  Result<std::vector<nlohmann::json>> final_records() const;
  // Every row, ordered by index, question id, stage.
  Result<std::vector<StageRow>> all_rows() const;
  // Question ids with any row, ordered by index.
  Result<std::vector<std::string>> question_ids() const;

  Status set_meta(const std::string& key, const nlohmann::json& value);
  Result<std::optional<nlohmann::json>> get_meta(const std::string& key) const;

  // The manifest goes to meta "manifest" and to `manifest.json` beside the store; the resolved
  // config to `config.resolved.json` (both written atomically).
  Status save_manifest(const nlohmann::json& manifest);
  Result<nlohmann::json> manifest() const;  // kNotFound when none was saved
  Status save_resolved_config(const nlohmann::json& config);

  // SQLite's integrity check ("ok" or the problems found).
  Result<std::string> integrity_check() const;

 private:
  RunStore(std::filesystem::path dir, sqlite3* db) : dir_(std::move(dir)), db_(db) {}
  Status exec(const char* sql) const;

  std::filesystem::path dir_;
  mutable std::mutex mu_;  // guards db_
  sqlite3* db_;
};

}  // namespace nl2sql::run
