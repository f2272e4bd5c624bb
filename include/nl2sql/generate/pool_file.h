// Candidate pools made elsewhere, read from a file, for a generator entry {"name": "file",
// "path": "...", "label": "..."}: another system's candidates go through fixing, every selector,
// the curves over K (K = the first K of the file's list) and evaluation as generated ones do.
// Four layouts, told apart by their content:
//   pool     a JSON object {question_id: [sql, …]} (the layout published pools use)
//   jsonl    JSON lines {"question_id", "sql", "generator"?, "reasoning"?}, one candidate each
//   bird     a BIRD predict_dev.json {"<position>": "SQL\t----- bird -----\t<db_id>"}: one each
//   spider   Spider prediction text, line i the SQL of question i: one each
// Bad input is refused naming the file, the line (or key) and what is wrong: not JSON, a
// non-string SQL, an empty list, a JSONL line without "question_id" or "sql". Nothing is
// silently dropped: ids the dataset lacks and dataset questions the file lacks are counted by
// coverage(). Immutable after reading; thread-safe to share.
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "nl2sql/core/status.h"
#include "nl2sql/data/dataset.h"

namespace nl2sql::generate {

struct PooledSql {
  std::string sql;
  std::string generator;  // the file's own label for it (JSONL "generator"); may be empty
  std::string reasoning;  // JSONL "reasoning"; may be empty
  int64_t position = 0;   // 1-based line (jsonl, spider) or place in the question's list / entry (pool, bird)
};

// How a pool file meets a dataset: what it holds, and what does not match.
struct PoolCoverage {
  size_t candidates = 0;                   // for the dataset's questions
  size_t questions = 0;                    // dataset questions with at least one candidate
  std::vector<std::string> unknown_ids;    // keys of the file no dataset question has (file order)
  std::vector<std::string> missing_ids;    // dataset questions the file has nothing for
};

class CandidatePoolFile {
 public:
  // `path` as the config gives it (relative: to the working directory).
  static Result<CandidatePoolFile> read(const std::filesystem::path& path);

  const std::string& layout() const { return layout_; }  // pool | jsonl | bird | spider
  const std::filesystem::path& path() const { return path_; }
  const std::string& hash() const { return hash_; }  // of the file's bytes (the resume check)
  // The candidates for one question, in file order: by question id (pool, jsonl) or by the
  // question's position in its question file (bird, spider). Empty when the file has none.
  const std::vector<PooledSql>& candidates_for(const data::Task& question) const;
  PoolCoverage coverage(const std::vector<data::Task>& questions) const;

 private:
  Status read_jsonl(const std::string& text);
  void add(const std::string& key, PooledSql p);  // in file order
  std::filesystem::path path_;
  std::string layout_;
  std::string hash_;
  bool by_position_ = false;
  std::map<std::string, std::vector<PooledSql>> by_id_;  // key: id, or position as text
  std::vector<std::string> keys_;                        // file order
};

}  // namespace nl2sql::generate
