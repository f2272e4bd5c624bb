// Generators: each turns one question plus its context into N candidates. A Generator is
// configured once (prompt templates loaded, options read from config) and is then immutable:
// generate() may run for many questions at once on different threads. Model calls go through
// llm::Client; SQL runs only through db::Executor (generators that execute SQL — the query-plan
// demonstrations, the synthetic-example checks — use the read-only executor they are given).
//
// The pipeline owns the order: context → generators → fixer → selection. Generators do not
// execute their candidates for the fixer; the pipeline does that (fix/ owns the loop).
#pragma once

#include <filesystem>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "nl2sql/context/metadata.h"
#include "nl2sql/context/retrieve.h"
#include "nl2sql/context/schema_render.h"
#include "nl2sql/context/value_index.h"
#include "nl2sql/core/config.h"
#include "nl2sql/core/hash.h"
#include "nl2sql/core/status.h"
#include "nl2sql/data/dataset.h"
#include "nl2sql/db/executor.h"
#include "nl2sql/generate/candidate.h"
#include "nl2sql/generate/pool_file.h"
#include "nl2sql/llm/prompt_library.h"

namespace nl2sql::llm {
class Client;
}

namespace nl2sql::generate {

// GenerationInput::schema_seed for a database of a run: one per (run seed, database), below.
inline uint64_t schema_seed(uint64_t run_seed, const std::string& db_id) {
  return core::stage_seed(run_seed, db_id, "schema-shuffle");
}

struct GenerationInput {
  const data::Task* question = nullptr;  // never gold: see data::Task
  const data::Schema* schema = nullptr;
  std::filesystem::path db_path;
  const context::ValueIndex* index = nullptr;      // examples in the rendered schema; may be null
  const context::Retrieval* retrieval = nullptr;   // matched values/columns; may be null
  std::set<std::string> selected_columns;          // "table.column" from column filtering; may be empty
  uint64_t seed = 0;                               // derived from (run seed, question id, "generate")
  // Derived from (run seed, database id, "schema-shuffle"): the schema orders of shuffled samples
  // (sample k of a generator) are the same for every question of one database, so their prompts
  // share a long prefix a provider's prefix cache can serve; the samples of one question still
  // differ from each other, which is what the shuffle is for.
  uint64_t schema_seed = 0;
  // Statistics, inferred keys and written descriptions for every rendered schema
  // (context.metadata.enabled); null when off.
  const context::DatabaseMetadata* metadata = nullptr;
  // The question's shared executions (the pipeline's execution memo: each distinct query runs
  // once per question, its result shared with the fixer, the judge and the selectors). When
  // set, a generator that checks SQL of its own (the online synthetic examples) runs it through
  // this, so an example that is also a candidate costs one execution; when empty, it runs the
  // query through its executor.
  std::function<std::shared_ptr<const db::ExecutionResult>(const std::string& sql)> execute;

  // What every prompt of this question renders its schema from (context::render_schema).
  context::SchemaSources schema_sources() const {
    return {schema, index, retrieval ? &retrieval->values : nullptr, metadata};
  }
};

class Generator {
 public:
  virtual ~Generator() = default;
  virtual std::string name() const = 0;
  // Candidates in sample order. A failed model call or an unextractable answer still yields a
  // candidate (extraction_ok=false, the error recorded); only a cancelled client or a
  // configuration error returns a non-OK status.
  virtual Result<std::vector<Candidate>> generate(const GenerationInput& input) const = 0;
  // The candidate pool file a "file" generator serves (its coverage of the dataset goes into the
  // run's report, its hash into the resume check); null for generators that write SQL.
  virtual const CandidatePoolFile* pool_file() const { return nullptr; }
};

// The generators listed under config key `generate.generators` (in order), each built with its
// own options (samples, temperature, shuffle, profile/role …). dc and qp choose their
// demonstrations per question from the train split of `run_dataset` (the dataset being run)
// unless their `demos` key names a source; without either they use the fixed demonstrations.
// Templates come from `prompts` (bundled, or a prompts folder's overrides); an item's `template`
// key names another file standing in for the generator's main template (generator_template_role).
Result<std::vector<std::unique_ptr<Generator>>> make_generators(
    const core::Config& config, llm::Client* client, const db::Executor* executor,
    const llm::PromptLibrary& prompts, const data::DatasetSpec* run_dataset = nullptr);

// The template a generator item's `template` key replaces ("generate_baseline" for baseline …);
// an error for agent and recap, which have several.
Result<std::string> generator_template_role(const std::string& kind);

}  // namespace nl2sql::generate
