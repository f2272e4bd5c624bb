// The execution-feedback fixer (CHASE-SQL's query fixer; SSEV's execution-guided refinement).
// A candidate is executed through db::Executor (read-only, single statement, timeout); when it
// fails — syntax or schema error, type mismatch, timeout, row cap — or returns no rows (when
// fix.on_empty_result is set), the model is asked again with the question, the schema, the
// failed SQL, the feedback and a hint for the failure class: the closest schema names (edit
// distance) for an unknown column or table, the tables sharing an ambiguous column, stored
// values resembling the query's literals (value index) for an empty result, the parser's
// position for a syntax error. Up to fix.max_rounds rounds; every round is kept in the
// candidate's trace; a candidate still failing stays in the pool with still_failing set.
// A candidate that is not a read-only query is marked "rejected: not read-only" and is neither
// executed nor fixed.
//
// Queries go through a fix::ExecutionMemo (FixInput::memo, the question's): a query already run
// for another candidate or an earlier round is not run again.
//
// A Fixer is built once from config and is immutable: fix() may run on many threads at once
// (llm::Client and db::Executor are thread-safe). Model calls use the role "fix".
#pragma once

#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "nl2sql/context/metadata.h"
#include "nl2sql/context/retrieve.h"
#include "nl2sql/context/schema_render.h"
#include "nl2sql/context/value_index.h"
#include "nl2sql/core/config.h"
#include "nl2sql/core/status.h"
#include "nl2sql/data/dataset.h"
#include "nl2sql/db/executor.h"
#include "nl2sql/fix/execution_memo.h"
#include "nl2sql/generate/candidate.h"
#include "nl2sql/llm/prompt_library.h"

namespace nl2sql::llm {
class Client;
}

namespace nl2sql::fix {

struct FixOptions {
  bool enabled = true;
  int64_t max_rounds = 3;
  bool on_empty_result = true;  // treat an empty result as a failure to fix
  // Who repairs a candidate: `profile` when set; else the profile llm.roles maps `role` to,
  // when it is mapped; else the profile that wrote the candidate, so that each expert of an
  // SSEV pool refines its own SQL (the paper's self-refinement).
  std::string role = "fix";
  std::string profile;
  bool role_mapped = false;     // llm.roles names a profile for `role`
  std::optional<double> temperature;
  size_t preview_rows = 5;
  size_t hint_names = 3;        // closest schema names offered per unknown name
  // Rows of a result kept in memory by the pipeline's executions; past them a result keeps the
  // digest of the whole answer instead (db::QueryLimits::hash_rows_after). 0: every row.
  size_t keep_rows = 100;
};

// The hash_rows_after the pipeline's executions use: keep_rows, raised to the rows any prompt
// shows (the fixer's preview_rows, the selectors' previews); 0 when keep_rows is 0.
size_t kept_rows(const FixOptions& options);

// Reads fix.* (errors name the key).
Result<FixOptions> load_fix_options(const core::Config& config);

struct FixInput {
  const data::Task* question = nullptr;
  const data::Schema* schema = nullptr;
  std::filesystem::path db_path;
  const context::ValueIndex* index = nullptr;     // empty-result hints; may be null
  const context::Retrieval* retrieval = nullptr;  // values in the rendered schema; may be null
  const db::Executor* executor = nullptr;
  uint64_t seed = 0;
  // The question's executions, shared with its other candidates and later stages; may be null
  // (each fix() then memoizes its own candidate's queries, through `executor`).
  ExecutionMemo* memo = nullptr;
  const context::DatabaseMetadata* metadata = nullptr;  // in the rendered schema; null: off
};

// Executes candidate.sql and records the outcome; marks non-queries rejected without running
// them. Candidates without SQL (extraction failed) are left unexecuted.
void execute_candidate(generate::Candidate& candidate, const db::Executor& executor,
                       const std::filesystem::path& db_path, size_t preview_rows = 5);
// The same through a question's memo: a query the memo has seen is not executed again.
void execute_candidate(generate::Candidate& candidate, ExecutionMemo& memo, size_t preview_rows = 5);
// Runs into the memo what execute_candidate would run for `candidate` (nothing for a candidate
// without SQL or with a statement that is not a query), leaving the candidate as it is: the
// pipeline starts a generator's queries while the other generators still wait for their model.
void prefetch_execution(const generate::Candidate& candidate, ExecutionMemo& memo);

// The fixer's schema ladder (llm::ModelCall::schema_at) over `sources`: rung 0 is the full
// rendering; the fixer has no column filter, so rung 3 is rung 2; from kSchemaLadderRungs on,
// no descriptions and the text cut to the budget (about 4 characters a token) with a note (the
// query's own tables come first in what the model sees through the error text).
std::function<std::string(int rung, int64_t schema_tokens)> fix_schema_ladder(const context::SchemaSources& sources);

class Fixer {
 public:
  // The prompt is `prompts`' fix_sql, or the file config key fix.template names instead.
  static Result<Fixer> create(const core::Config& config, llm::Client* client,
                              const llm::PromptLibrary& prompts);
  Fixer(FixOptions options, llm::Client* client, llm::PromptTemplate prompt);

  // Executes the candidate and runs the fix loop. Non-OK only when the client is cancelled or
  // misconfigured, or the input lacks an executor/question/schema.
  Status fix(generate::Candidate& candidate, const FixInput& input) const;

  const FixOptions& options() const { return options_; }
  // Who repairs `c` (see FixOptions): a profile name, or "" when llm.roles resolves options().role.
  std::string profile_for(const generate::Candidate& c) const {
    return !options_.profile.empty() ? options_.profile : options_.role_mapped ? std::string() : c.profile;
  }

 private:
  bool needs_fix(const feedback::ExecutionSummary& e) const;
  // One round of the fix loop (numbered `number`): the model asked to repair `c`; its answer is
  // adopted when the guardrails let it run (a refused one stays in the round's trace only).
  Result<generate::FixRound> repair_round(generate::Candidate& c, const FixInput& in, ExecutionMemo& memo,
                                          const std::function<std::string(int, int64_t)>& schema_at,
                                          int number) const;
  FixOptions options_;
  llm::Client* client_;
  llm::PromptTemplate prompt_;
};

}  // namespace nl2sql::fix
