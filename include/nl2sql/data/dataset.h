// Datasets: BIRD (dev, mini-dev), Spider (dev, train, plain gold files) and a simple JSONL
// format, loaded into one in-memory shape. A Dataset owns its questions, the schema of every
// database it names (from tables.json, or read from the SQLite file when absent) and where each
// database file is. Loading never stops at one bad question: questions whose database file is
// missing are kept in `skipped` with the reason; files that cannot be read or parsed are errors
// naming the file and position. A loaded Dataset is immutable and safe to share across threads.
#pragma once

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "nl2sql/core/status.h"

namespace nl2sql::data {

enum class Benchmark { kBird, kSpider, kJsonl };
Result<Benchmark> parse_benchmark(const std::string& name);
const char* benchmark_name(Benchmark b);

// What a stage may know about a question: everything but its answer. Generators, the fixer,
// selectors and context builders take a Task, never a Question, so no stage input can hold gold.
struct Task {
  std::string question_id;  // BIRD question_id, Spider position, JSONL question_id
  size_t index = 0;         // position in the question file (BIRD predictions are keyed by it)
  std::string db_id;
  std::string question;
  std::string evidence;
};

// A benchmark question: the task and its gold answer (read by evaluation, the report and the
// simulator). task() is the gold-free copy handed to the stages.
struct Question : Task {
  std::string gold_sql;
  std::string difficulty;   // BIRD simple/moderate/challenging; Spider hardness; JSONL field
  nlohmann::json spider_sql;  // Spider's parsed "sql" field when present (null otherwise)
  Task task() const { return static_cast<const Task&>(*this); }
};

struct Column {
  std::string name;          // as in the database
  std::string display_name;  // tables.json column_names / BIRD CSV column_name
  std::string type;
  std::string description;        // BIRD column_description
  std::string value_description;  // BIRD value_description
  std::string data_format;        // BIRD data_format
};

struct Table {
  std::string name;
  std::string display_name;
  std::vector<Column> columns;
  std::vector<std::string> primary_key;
};

struct ForeignKey {
  std::string from_table, from_column, to_table, to_column;
};

struct Schema {
  std::string db_id;
  std::vector<Table> tables;
  std::vector<ForeignKey> foreign_keys;
  const Table* find_table(const std::string& name) const;  // case-insensitive
};

struct SkippedQuestion {
  std::string question_id;
  std::string db_id;
  size_t index = 0;  // position in the question file
  std::string reason;
};

struct DatasetSpec {
  Benchmark benchmark = Benchmark::kBird;
  std::filesystem::path data_dir;   // bird/spider: the benchmark folder
  std::string split = "dev";        // bird: dev | mini_dev; spider: dev | train
  std::filesystem::path questions;  // overrides the split's question file (jsonl: required)
  std::filesystem::path db_root;    // overrides where databases live (jsonl: required)
  std::filesystem::path tables;     // overrides the tables file
  bool load_descriptions = true;    // BIRD database_description/*.csv
  // A db_id is checked as text (one folder name: no separator, not "." or ".."), and its
  // <db_id>/<db_id>.sqlite is then opened wherever a symlink the user placed points. true: a
  // file whose real path is outside db_root is refused too (config key data.strict_db_root).
  bool strict_db_root = false;
};

struct Dataset {
  Benchmark benchmark = Benchmark::kBird;
  std::string split;
  std::filesystem::path questions_file;
  std::filesystem::path db_root;
  std::vector<Question> questions;         // only questions whose database is present
  std::vector<SkippedQuestion> skipped;    // questions whose database is missing
  size_t total_questions = 0;              // in the file, before skipping
  std::map<std::string, Schema> schemas;   // by db_id
  std::map<std::string, std::filesystem::path> db_paths;  // by db_id (present files only)
  // By db_id, the other database files of its folder (a distilled test suite: every file whose
  // name contains ".sqlite", as the official test-suite evaluator lists them, SQLite's -wal,
  // -shm and -journal side files excepted), sorted by name. Absent for an ordinary folder.
  std::map<std::string, std::vector<std::filesystem::path>> db_variants;
  std::vector<std::string> warnings;       // non-fatal problems (e.g. unreadable description CSV)

  const Question* find_question(const std::string& question_id) const;
  // hash of the question file + each database file used (xxh3-128 hex)
  Result<std::string> fingerprint() const;
};

Result<Dataset> load_dataset(const DatasetSpec& spec);
// A test suite's databases for `db_id` (official layout): every file under `suite_dir`/<db_id>/
// whose name contains ".sqlite", but <db_id>.sqlite (the original) and SQLite side files, sorted.
// Missing folder: none. With an empty `suite_dir`, the dataset's own variants are used instead.
Result<std::vector<std::filesystem::path>> test_suite_databases(const std::filesystem::path& suite_dir,
                                                                const std::string& db_id);
// The variants to judge spider-ts with: `suite_dir`'s (eval.test_suite) for every database of the
// dataset, or the dataset's own when `suite_dir` is empty. Errors name the folder.
Result<std::map<std::string, std::vector<std::filesystem::path>>> test_suite_variants(
    const Dataset& ds, const std::filesystem::path& suite_dir);

// Reads a Spider-format tables.json (also BIRD's dev_tables.json).
Result<std::map<std::string, Schema>> load_tables_json(const std::filesystem::path& path);
// Reads the schema of a SQLite file (tables, columns, declared types, PKs, FKs).
Result<Schema> read_schema_from_database(const std::filesystem::path& db_path,
                                         const std::string& db_id);
// Attaches BIRD description CSVs from `dir` (database_description/) to `schema`.
// Problems with single files are appended to `warnings`; never fails the load.
void attach_bird_descriptions(const std::filesystem::path& dir, Schema& schema,
                              std::vector<std::string>& warnings);

// RFC 4180 CSV (quoted fields with embedded commas, quotes and newlines; CRLF or LF).
// The text must already be decoded to UTF-8. Errors name `label` and the line.
Result<std::vector<std::vector<std::string>>> parse_csv(std::string_view text,
                                                        const std::string& label);

}  // namespace nl2sql::data
