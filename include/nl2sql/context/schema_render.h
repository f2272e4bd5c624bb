// Schema rendering: a database as `CREATE TABLE` statements for prompts, with each column's type,
// the primary and foreign keys, and as an inline comment per column its BIRD description and
// value description and a few example values (from the ValueIndex). The values retrieval matched
// for the question follow the last table, as a comment block ("-- Stored values resembling words
// of the question:" then "--   table.column matches question: 'v', …"): the tables are then the
// same text for every question of a database, a prefix a provider's cache can serve.
//
// Options let generators vary the rendering: drop descriptions or examples, shuffle table and
// column order with a seed (diversity across candidates; same seed, same text), and restrict to
// a column subset — the key columns needed to join the kept tables (primary keys and both ends
// of foreign keys between kept tables) are always kept.
//
// With a DatabaseMetadata (context/metadata.h): `stats` adds each column's statistics to its
// comment (rows, NULLs, distinct count, range, lengths for text, most frequent values);
// `inferred_fks` renders inferred foreign keys as FOREIGN KEY lines with their evidence as the
// comment (and uses them to keep join keys); LLM-written descriptions fill in for columns that
// have none, marked "(generated)". Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "nl2sql/context/retrieve.h"
#include "nl2sql/context/value_index.h"
#include "nl2sql/data/dataset.h"

namespace nl2sql::context {

struct RenderOptions {
  bool descriptions = true;              // description and value description comments
  size_t examples = 3;                   // example values per indexed column (0: none)
  // Longer descriptions are cut with "…" (0: never). Whole by default: a value description is
  // often a code list the query needs (financial trans.k_symbol); the prompt-budget ladder
  // shortens them only when a prompt would not fit the model's context.
  size_t max_comment_chars = 0;
  std::optional<uint64_t> shuffle_seed;  // shuffle tables and columns (keys stay first)
  // "table.column" (case-insensitive); empty: every column. Keys to join are always kept.
  std::set<std::string> columns;
  // Used only when a DatabaseMetadata is given: on by default, so every prompt rendered from a
  // SchemaSources with metadata carries it; `nl2sql schema` sets them from its flags.
  bool stats = true;         // column statistics from the metadata
  bool inferred_fks = true;  // inferred foreign keys from the metadata
};

struct DatabaseMetadata;

// The prompt-budget ladder: when a prompt would exceed the model's context, its schema is
// rendered again one rung lighter at a time — 1 without example values and without the
// metadata's column statistics (the first thing cut; inferred foreign keys and written
// descriptions stay, as declared keys and descriptions do), 2 with value
// descriptions shortened, 3 restricted to the column filter's columns (when it chose any) —
// and generators add a last rung, the schema cut to the budget by relevance. Rungs are
// cumulative; rung 0 is the options as given.
inline constexpr int kSchemaLadderRungs = 4;  // 0 … 3 here
const char* schema_rung_name(int rung);
RenderOptions options_at_rung(RenderOptions options, int rung,
                              const std::set<std::string>& filtered_columns);

// `index` (examples), `retrieved` (matched values) and `metadata` are optional.
std::string render_schema(const data::Schema& schema, const RenderOptions& options,
                          const ValueIndex* index = nullptr,
                          const std::vector<ValueMatch>* retrieved = nullptr,
                          const DatabaseMetadata* metadata = nullptr);

// What a prompt's schema is rendered from. Every stage that puts a schema in a prompt (the
// generators, the agents, the fixer, the selectors and the selector's training data) renders it
// through this, so one question's sources give every stage the same enrichment: the metadata
// (context.metadata.enabled; null when off) adds statistics, inferred foreign keys marked
// "inferred" and written descriptions, and without it the text is what it was before metadata.
struct SchemaSources {
  const data::Schema* schema = nullptr;
  const ValueIndex* index = nullptr;                // example values; may be null
  const std::vector<ValueMatch>* values = nullptr;  // values retrieval matched; may be null
  const DatabaseMetadata* metadata = nullptr;       // may be null
};
std::string render_schema(const SchemaSources& sources, const RenderOptions& options);

// The statistics comment of one column ("120 rows, 3 NULL, 45 distinct, …").
struct ColumnStats;
std::string stats_comment(const ColumnStats& stats);

}  // namespace nl2sql::context
