// The context stage's single entry point for the pipeline: ContextBuilder turns one question into
// a QuestionContext — keywords (heuristic, plus the model's when context.keywords.llm is on, each
// with its source), the retrieved values and columns (LSH + edit distance, re-ranked by
// embeddings when context.embeddings.profile is set), the selected columns from LLM column
// filtering (context.column_filter.enabled), the database metadata (context.metadata.enabled)
// and a trace of every model call made on the way.
//
// Configuration: every `context.*` key is read once by load_context_settings (documented in
// configs/schema/context.json); errors name the key. Features that need a model fail at
// create() when no client is given.
//
// Ownership and threads: the builder borrows the client and the executor (both must outlive it).
// build() may be called from many threads at once. Value indexes and metadata are opened lazily,
// once per database (a per-database mutex: two questions on one database wait for one build,
// questions on different databases build in parallel), and shared read-only afterwards through
// shared_ptr. A database whose index cannot be opened fails every build() for it with the same
// status.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "nl2sql/context/column_filter.h"
#include "nl2sql/context/context_record.h"
#include "nl2sql/context/embedding_rerank.h"
#include "nl2sql/context/metadata.h"
#include "nl2sql/context/retrieve.h"
#include "nl2sql/context/value_index.h"
#include "nl2sql/core/config.h"
#include "nl2sql/core/status.h"
#include "nl2sql/data/dataset.h"
#include "nl2sql/llm/trace.h"
#include "nl2sql/llm/prompt_library.h"

namespace nl2sql::db {
class Executor;
}
namespace nl2sql::llm {
class Client;
}

namespace nl2sql::context {

struct ContextSettings {
  IndexOptions index;                 // context.index.*, context.index_dir
  RetrievalOptions retrieval;         // context.retrieval.*
  bool llm_keywords = false;          // context.keywords.llm
  EmbeddingRerankOptions embeddings;  // context.embeddings.* (profile empty: off)
  bool column_filter = false;         // context.column_filter.enabled
  ColumnFilterOptions filter;         // context.column_filter.*
  bool metadata = false;              // context.metadata.enabled
  MetadataOptions meta;               // context.metadata.*
  bool describe = false;              // context.metadata.describe

  // Whether a feature that is on calls a model (keywords, column filter, descriptions,
  // embeddings): the builder then needs a client.
  bool calls_a_model() const { return llm_keywords || column_filter || describe || !embeddings.profile.empty(); }
};

Result<ContextSettings> load_context_settings(const core::Config& config);

struct QuestionContext {
  std::string question_id, db_id;
  uint64_t seed = 0;                       // as given to build(); for the consumers' draws
  Retrieval retrieval;                     // .keywords carry their source ("llm" for the model's)
  std::vector<std::string> llm_keywords;   // the model's list as answered (overlaps included)
  std::set<std::string> selected_columns;  // "table.column"; empty: the whole schema
  std::set<std::string> join_keys;         // added to selected_columns to keep joins possible
  std::vector<std::string> dropped_tables;
  std::shared_ptr<const ValueIndex> index;
  std::shared_ptr<const DatabaseMetadata> metadata;  // null unless context.metadata.enabled
  std::vector<llm::LlmCallTrace> calls;
  std::vector<std::string> errors;         // non-fatal: a failed call, a malformed answer

  // What a run keeps of it (context_record.h), and that as JSON.
  ContextRecord record() const;
  nlohmann::json to_json() const;
};

// A call trace as JSON (the same keys generate/'s trace format uses).
nlohmann::json call_to_json(const llm::LlmCallTrace& call);

// One question's context as `nl2sql retrieve` shows it to a person: the question, the index
// opened and when, the keywords (the model's against the heuristic's when it gave some), the
// matched values and columns, the selected columns, the model calls and the errors.
struct ContextView {
  const data::Task& task;
  const QuestionContext& context;
  const ContextSettings& settings;
  const IndexStatus& index;     // how the index was opened
  double index_load_ms = 0;     // opening it
  double context_ms = 0;        // building the context, the index already open
};
std::string context_to_text(const ContextView& view);

class ContextBuilder {
 public:
  // `client` may be null when no model feature is enabled. `index_dir` empty: context.index_dir
  // or the default index dir. `prompts` null: the bundled prompts.
  static Result<std::unique_ptr<ContextBuilder>> create(const core::Config& config, llm::Client* client,
                                                        const db::Executor& executor,
                                                        std::filesystem::path index_dir = {},
                                                        const llm::PromptLibrary* prompts = nullptr);
  static Result<std::unique_ptr<ContextBuilder>> create(ContextSettings settings, llm::Client* client,
                                                        const db::Executor& executor,
                                                        const llm::PromptLibrary* prompts = nullptr);

  Result<QuestionContext> build(const data::Task& question, const data::Schema& schema,
                                const std::filesystem::path& db_path, uint64_t seed) const;

  // The database's index, opened once per builder (open_index) and shared. `status`, when given,
  // receives open_index's status if this call opened it, else action "cached".
  Result<std::shared_ptr<const ValueIndex>> index(const std::string& db_id, const std::filesystem::path& db_path,
                                                  const data::Schema& schema, IndexStatus* status = nullptr) const;
  Result<std::shared_ptr<const DatabaseMetadata>> metadata(const std::string& db_id,
                                                           const std::filesystem::path& db_path,
                                                           const data::Schema& schema) const;
  const ContextSettings& settings() const { return settings_; }

 private:
  ContextBuilder(ContextSettings settings, llm::Client* client, const db::Executor& executor);
  struct Database {
    std::mutex mu;
    std::shared_ptr<const ValueIndex> index;       // guarded by mu
    std::optional<Status> index_error;             // guarded by mu
    std::shared_ptr<const DatabaseMetadata> meta;  // guarded by mu
    std::optional<Status> meta_error;              // guarded by mu
  };
  std::shared_ptr<Database> database(const std::string& db_id) const;

  ContextSettings settings_;
  llm::Client* client_;
  const db::Executor& executor_;
  std::optional<llm::PromptTemplate> keywords_prompt_, filter_prompt_, describe_prompt_;
  std::unique_ptr<EmbeddingReranker> reranker_;
  mutable std::mutex mu_;
  mutable std::map<std::string, std::shared_ptr<Database>> databases_;  // guarded by mu_
};

}  // namespace nl2sql::context
