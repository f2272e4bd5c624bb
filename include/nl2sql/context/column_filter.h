// Column filtering: which columns of a database a question needs, judged by a model table by
// table (prompts/filter_columns.txt, role "column_filter"), producing the "selected columns"
// ("table.column") that the schema rendering and the online-synthetic-example generator
// (GenerationInput::selected_columns) restrict themselves to.
//
// Granularity: real models get one call per table listing all its columns and answer
// {"relevant": ["col", …]}. The offline `sim` provider only judges one column at a time
// (the simulator answers CallTask::kColumnFilter {"relevant": true|false} from the gold SQL), so when the role's
// profile is simulated the same prompt is sent once per column with a single column to judge.
// `mode` forces either ("table" | "column"); "auto" picks by provider.
//
// After the answers: tables with no relevant column are dropped; every kept table keeps its
// primary key; foreign-key columns between kept tables are kept; and when the kept tables are not
// connected through foreign keys, the shortest foreign-key paths joining them are added (bridge
// tables contribute only their key columns) — the keys needed to join are always kept. A failed
// call or unreadable answer keeps the whole table (never drop what could not be judged) and is
// reported in `errors`. When no table is relevant at all, `selected` is empty, which every
// consumer reads as "the whole schema".
//
// The requests of one question (one per table, or per column) do not depend on each other and
// go out together, on up to 64 threads (the client's limits bound what is in flight); answers are
// read back in schema order, so the result and its call traces do not depend on timing.
//
// Thread-safe when the client is: no shared state.
#pragma once

#include <set>
#include <string>
#include <vector>

#include "nl2sql/context/metadata.h"
#include "nl2sql/context/retrieve.h"
#include "nl2sql/context/value_index.h"
#include "nl2sql/core/status.h"
#include "nl2sql/data/dataset.h"
#include "nl2sql/llm/trace.h"
#include "nl2sql/llm/prompt_template.h"

namespace nl2sql::llm {
class Client;
}

namespace nl2sql::context {

struct ColumnFilterOptions {
  std::string mode = "auto";  // auto | table | column
  size_t examples = 3;        // example values per column in the table rendering
};

struct ColumnFilterResult {
  std::set<std::string> selected;   // "table.column" as in the schema; empty: whole schema
  std::set<std::string> relevant;   // what the model judged relevant
  std::set<std::string> join_keys;  // added to join the kept tables
  std::vector<std::string> dropped_tables;
  std::vector<std::string> errors;
  std::vector<llm::LlmCallTrace> calls;
  std::string mode;                 // "table" or "column", as used
};

// Relevant column names in an answer for the judged `columns`: {"relevant": [...]} (names
// matched case-insensitively, unknown names ignored) or, for one judged column,
// {"relevant": true|false}. Error when the answer holds neither.
Result<std::set<std::string>> parse_column_filter_answer(const std::string& answer,
                                                         const std::vector<std::string>& columns,
                                                         const std::string& where);

// Adds the join keys for `relevant` (see the header comment); returns the selection.
std::set<std::string> close_over_join_keys(const data::Schema& schema,
                                           const std::vector<data::ForeignKey>& foreign_keys,
                                           const std::set<std::string>& relevant,
                                           std::set<std::string>* added = nullptr,
                                           std::vector<std::string>* dropped_tables = nullptr);

// `extra_fks` (e.g. inferred ones) join tables like declared foreign keys do; `metadata` (optional)
// enriches each table's rendering as in every other prompt (context::SchemaSources). `index` and
// `retrieved` feed the table rendering's examples and matches (optional).
Result<ColumnFilterResult> filter_columns(llm::Client& client, const llm::PromptTemplate& prompt,
                                          const data::Task& question, const data::Schema& schema,
                                          const ColumnFilterOptions& options,
                                          const ValueIndex* index = nullptr,
                                          const std::vector<ValueMatch>* retrieved = nullptr,
                                          const std::vector<data::ForeignKey>& extra_fks = {},
                                          const DatabaseMetadata* metadata = nullptr);

}  // namespace nl2sql::context
