// ReCAP's two retrievers (ReCAPAgent-SQL, Table 1 and §3.3.2), both deterministic here.
//
// External knowledge: the documentation of the columns a text talks about — the question
// before planning (the planner's prompt), the approved plan afterwards (the SQL writer's and the
// refiner's) — from the benchmark's column descriptions (BIRD database_description: meaning,
// value description, data format). The question's evidence, BIRD's own external knowledge, is
// already in every recap prompt. A column is relevant when the text names it as a whole
// identifier or names its display name, or when value retrieval matched it. The paper retrieves
// snippets of a document corpus by dense vectors; a benchmark's documents are these
// descriptions, and they are looked up by name.
//
// Syntax: entries of an SQLite syntax reference (prompts/sqlite_syntax.md) for the functions
// the plan (or the query under repair) names. In the paper the model is first asked whether it
// needs syntax help; here an entry is inserted when one of its trigger words occurs, which costs
// no call and never adds an entry for a function the plan does not name.
//
// Immutable after loading; thread-safe.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "nl2sql/context/retrieve.h"
#include "nl2sql/core/status.h"
#include "nl2sql/data/dataset.h"

namespace nl2sql::generate {

// The documentation of the columns `text` talks about, one "- table.column: …" line each, at
// most `max_columns`; "" when none has a description.
std::string column_knowledge(const data::Schema& schema, const std::string& text, const context::Retrieval* retrieval,
                             size_t max_columns);

struct SyntaxEntry {
  std::string title;
  std::vector<std::string> triggers;  // lower case; a trailing "(" requires a call
  std::string body;
};

class SyntaxReference {
 public:
  // "## title | trigger, trigger" headings, each followed by its text (see the file's header).
  static Result<SyntaxReference> parse(const std::string& text, const std::string& where);
  static Result<SyntaxReference> load(const std::filesystem::path& file);

  const std::vector<SyntaxEntry>& entries() const { return entries_; }
  // The entries whose triggers occur in `text`, in file order.
  std::vector<const SyntaxEntry*> named_in(const std::string& text) const;
  // Those entries as prompt text ("" when none).
  std::string render_for(const std::string& text) const;

 private:
  std::vector<SyntaxEntry> entries_;
};

}  // namespace nl2sql::generate
