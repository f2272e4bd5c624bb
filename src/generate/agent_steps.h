// Steps shared by the agentic generators (agent, recap): running one SQL attempt through the
// read-only executor with our parser's check and the result heuristics, reading a JSON object
// out of a model's answer, fitting the rendered schema into a token budget by keeping the
// columns that best match the question, the optional per-database business-rules file, and —
// for the offline `sim` provider only — whether an attempt's result equals gold's (what the
// sim critics and validator are told; real providers never trigger the gold query).
// Everything here is a pure function or a per-question value; thread-safe.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "nl2sql/context/schema_render.h"
#include "nl2sql/db/executor.h"
#include "nl2sql/generate/generator.h"
#include "result_check.h"

namespace nl2sql::llm {
class Client;
}

namespace nl2sql::generate {

// The options of one generate.generators[] item that the agentic generators use.
struct AgenticSpec {
  std::string kind;   // agent | recap
  std::string label;  // candidate id prefix
  int64_t samples = 1;
  std::optional<double> temperature;
  std::string role = "generate";
  std::vector<std::string> profiles;  // cycled over samples
  bool descriptions = true;
  int64_t examples = 3;
  std::string profile_for(int64_t sample) const {
    return profiles.empty() ? "" : profiles[static_cast<size_t>(sample) % profiles.size()];
  }
};

// One SQL attempt after extraction, parsing and execution.
struct AttemptOutcome {
  std::string sql;                  // "" when nothing could be extracted
  std::string extraction_error;
  std::string parse_error;          // our parser's complaint; "" when it parses
  db::ExecutionResult result;       // status kRejected with a reason when never run
  ResultSummary summary;
  std::vector<ResultIssue> issues;  // empty: accepted by the heuristics
  bool executed() const { return !sql.empty() && result.status != db::ExecStatus::kRejected; }
};

struct AttemptLimits {
  double timeout_s = 10;
  size_t row_cap = 10000;
  size_t preview_rows = 5;
  ResultCheckOptions checks;
};

// Extracts the SQL of `answer`, checks it with our parser, executes it read-only and applies the
// heuristics. A parser complaint on SQL that SQLite runs is kept as a note, not an issue (our
// grammar is narrower than SQLite's).
AttemptOutcome run_attempt(const std::string& answer, const std::string& question, const db::Executor* executor,
                           const std::filesystem::path& db_path, const AttemptLimits& limits);

// The outcome in one line: "error: no such column: x", "3 rows; duplicate_rows: …", "accepted (1 row)".
std::string outcome_text(const AttemptOutcome& outcome);

// The last JSON object of the answer (llm::read_json: reasoning stripped, fenced or bare,
// repaired); nullopt when there is none. Callers count a nullopt as a parse failure.
std::optional<nlohmann::json> parse_json_answer(const std::string& text);

// Rough token count of prompt text (4 characters a token), for the schema budget.
int64_t approx_tokens(const std::string& text);

// How a schema over budget is cut. With an embeddings profile, the question and every column
// ("table.column: description") are embedded in one call and the cosine similarity joins the
// scores; a failed call leaves the other scores (the failure is in the note and the trace).
struct SchemaBudget {
  int64_t max_tokens = 0;            // <= 0: no budget
  llm::Client* client = nullptr;     // for embeddings; may be null
  std::string embeddings_profile;    // llm.models.<profile> serving /embeddings; empty: none
  std::string stage;                 // trace and accounting tag of the embeddings call
};

// The agentic generators' schema budget: `configured` (agent/recap.max_schema_tokens; <= 0 none),
// capped at half the prompt budget of the role's profile when its context window is known
// (llm.models.*.context_tokens): the rest of an agent prompt is history and feedback.
int64_t schema_budget_for(const llm::Client& client, const std::string& role, int64_t configured);

// The schema rendered with `options`; when it exceeds the budget, re-rendered with only the
// columns that best match the question (retrieval column and value scores, the column filter's
// selection, keyword overlap of names and descriptions, embeddings when configured), shrinking
// until it fits. `note` says what was cut; an embeddings call is appended to `calls`.
std::string render_schema_within(const GenerationInput& in, context::RenderOptions options,
                                 const SchemaBudget& budget, std::string* note = nullptr,
                                 std::vector<LlmCallTrace>* calls = nullptr);

// <dir>/<db_id>.md, else .txt; "(none)" when dir is empty or neither file exists.
std::string load_business_rules(const std::filesystem::path& dir, const std::string& db_id);

// A model call of an agentic generator recorded as a step of the candidate's reasoning log.
std::string step_line(int64_t step, const std::string& what, const std::string& detail);

}  // namespace nl2sql::generate
