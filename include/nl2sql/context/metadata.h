// Metadata enrichment of one database (AgentNLQ's offline metadata step): per column statistics
// (rows, nulls, distinct values, min/max, min/max/average length, most frequent values, the
// storage classes seen), primary keys and foreign keys — the declared ones, plus foreign keys
// inferred as inclusion dependencies where none are declared — and optional LLM-written column
// descriptions for databases that ship none.
//
// FK inference: a candidate pair (from.column -> to.column, different tables) needs
//   - key-ness on the referenced side: a declared single-column primary key, or a column whose
//     non-null values are all distinct (and that has no NULLs);
//   - the same storage class on both sides (integers with integers, text with text);
//   - a name score (0..1, see fk_name_score) of at least min_name_score: "district_id" ->
//     district.district_id scores 1, "school" -> school.school_id scores high, "rating" -> id low.
// Each candidate is then verified with one SQL query through db::Executor (read-only): the share
// of the referencing column's distinct non-null values found in the referenced column
// (coverage). Pairs with coverage >= min_coverage and at least min_distinct distinct values are
// reported with their evidence (coverage, both distinct counts, name score). `infer_fks`:
// "auto" infers only when the database declares no foreign key at all, "always" for every column
// not already the source of a declared one, "never" not at all.
//
// Cache: `<index_dir>/<db_id>.meta.json`, recording the database fingerprint and every option
// that changes the content (MetadataOptions::key()); a file built from other bytes or other
// options is rebuilt, never used. LLM descriptions are stored in the same file (keyed by
// "table.column", with the prompt hash) and survive as long as the statistics do.
//
// A DatabaseMetadata is a plain value: immutable once built, safe to read from many threads.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "nl2sql/core/status.h"
#include "nl2sql/data/dataset.h"
#include "nl2sql/llm/trace.h"
#include "nl2sql/llm/prompt_template.h"

namespace nl2sql::db {
class Executor;
}
namespace nl2sql::llm {
class Client;
}

namespace nl2sql::context {

struct MetadataOptions {
  size_t top_values = 5;          // most frequent values kept per column (0: none)
  std::string infer_fks = "auto";  // auto | always | never
  double min_coverage = 0.95;     // share of distinct referencing values found in the key
  double min_name_score = 0.5;
  size_t min_distinct = 2;        // referencing columns with fewer distinct values are ignored
  double query_timeout_s = 120;   // per statistics / verification query
  std::string key() const;
  Status validate() const;
};

struct ColumnStats {
  std::string table, column;
  int64_t rows = 0, nulls = 0, distinct = 0;
  int64_t text_values = 0, integer_values = 0, real_values = 0, blob_values = 0;
  std::string min, max;  // display text (cut to 60 characters); "" when all NULL
  int64_t min_length = 0, max_length = 0;
  double avg_length = 0;
  std::vector<std::pair<std::string, int64_t>> top_values;  // value, count; most frequent first
  bool unique() const { return rows > 0 && nulls == 0 && distinct == rows; }
  // "integer" | "real" | "text" | "blob" | "mixed" | "null": the storage class of the values.
  std::string storage_class() const;
};

struct InferredForeignKey {
  std::string from_table, from_column, to_table, to_column;
  double coverage = 0;              // matched / from_distinct
  int64_t from_distinct = 0, matched = 0, to_distinct = 0;
  double name_score = 0;
  std::string evidence() const;     // "coverage 100.0% (45/45 distinct values), key has 50, name 0.92"
};

struct ColumnDescription {
  std::string text;
  std::string template_hash;
  std::string profile;
  bool simulated = false;
};

struct DatabaseMetadata {
  std::string db_id, fingerprint, options_key;
  std::map<std::string, int64_t> table_rows;                 // by table name
  std::vector<ColumnStats> columns;                           // schema order
  std::map<std::string, std::vector<std::string>> primary_keys;  // declared, by table
  std::map<std::string, std::string> key_candidates;          // table -> unique column, when no PK
  std::vector<data::ForeignKey> declared_fks;
  std::vector<InferredForeignKey> inferred_fks;
  std::map<std::string, ColumnDescription> descriptions;      // "table.column" (LLM-written)
  double build_seconds = 0;

  const ColumnStats* find(const std::string& table, const std::string& column) const;
  nlohmann::json to_json() const;
  static Result<DatabaseMetadata> from_json(const nlohmann::json& j, const std::string& label);
};

// 0..1: how much the referencing column's name reads as a reference to to_table.to_column.
double fk_name_score(const std::string& from_column, const std::string& to_table,
                     const std::string& to_column);

Result<DatabaseMetadata> build_metadata(const std::string& db_id, const std::filesystem::path& db_path,
                                        const data::Schema& schema, const MetadataOptions& options,
                                        const db::Executor& executor);

std::filesystem::path metadata_file(const std::filesystem::path& index_dir, const std::string& db_id);

// Loads `<index_dir>/<db_id>.meta.json` when fresh, else builds and saves it. `action` (optional)
// receives "fresh" or "built: <why>".
Result<DatabaseMetadata> open_metadata(const std::string& db_id, const std::filesystem::path& db_path,
                                       const data::Schema& schema, const MetadataOptions& options,
                                       const std::filesystem::path& index_dir, bool force,
                                       const db::Executor& executor, std::string* action = nullptr);
Status save_metadata(const DatabaseMetadata& meta, const std::filesystem::path& index_dir);

// LLM descriptions (prompts/describe_column.txt, role "describe") for every column that has no
// description in `schema` and none in `meta` written with this prompt. One call per column;
// failures are returned in `errors` (the column stays undescribed). Returns the number written.
// The sim provider has no task for this: with a sim profile the call fails and is reported.
size_t describe_columns(DatabaseMetadata& meta, const data::Schema& schema, llm::Client& client,
                        const llm::PromptTemplate& prompt, std::vector<std::string>& errors,
                        std::vector<llm::LlmCallTrace>* calls = nullptr);

}  // namespace nl2sql::context
