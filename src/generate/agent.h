// The orchestrator generator `agent` (AgentNLQ-style). Per question it compiles a task ledger
// once — the model turns the (enriched) schema, the evidence and the optional per-database
// business rules into a compact JSON fact sheet: sub-questions in dependency order, required
// tables, join paths, filters, group-bys, measures. Then, per sample:
//  - fast loop: the SQL writer answers from the fact sheet; each attempt is checked by our
//    parser, executed read-only and judged by the result heuristics (result_check.h) — no issue
//    accepts, an issue retries;
//  - slow loop: after agent.fast_attempts failures the writer gets the full schema, dialect
//    notes and a scratchpad (the observations of every execution so far and its own previous
//    notes), until agent.max_attempts attempts in all; then the best attempt (fewest, mildest
//    issues; the later on a tie) is the best-effort answer.
// After each failure the conversation is replaced by one structured message (compress_history):
// the question, every prior attempt with its outcome, the latest error in full and an
// instruction not to repeat failed strategies; the question is re-appended at the end of every
// prompt. When the rendered schema exceeds agent.max_schema_tokens, only the columns that best
// match the question are kept (agent_steps.h; with agent.embeddings_profile, embeddings join the
// scores and the embeddings call is traced as stage agent.schema_embed).
//
// Every model call is in the candidate's `calls` (stages agent.ledger, agent.fast, agent.slow; the
// ledger on the first sample's candidate only, since samples share it) and every step is a line
// of the candidate's reasoning ("[step k] …"). The generator is immutable after construction;
// generate() may run on many threads at once.
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "nl2sql/core/config.h"
#include "nl2sql/core/status.h"
#include "agent_steps.h"
#include "nl2sql/generate/generator.h"

namespace nl2sql::generate {

struct AgentOptions {
  int64_t fast_attempts = 2;
  int64_t max_attempts = 4;
  int64_t max_schema_tokens = 8000;     // <= 0: no budget
  std::filesystem::path rules_dir;      // <rules_dir>/<db_id>.md|.txt; empty: none
  std::string embeddings_profile;       // ranks columns for the schema budget; empty: none
  AttemptLimits limits;
};

// Reads agent.* (errors name the key).
Result<AgentOptions> load_agent_options(const core::Config& config);

// One attempt as the compressed history keeps it.
struct AttemptRecord {
  int64_t attempt = 0;   // 1-based
  std::string loop;      // fast | slow
  std::string sql;       // "" when nothing was extracted
  std::string outcome;   // outcome_text()
  std::string error;     // the execution error or the heuristics' findings in full
};

// The one message that replaces the history after a failure.
std::string compress_history(const std::string& question, const std::vector<AttemptRecord>& attempts);

Result<std::unique_ptr<Generator>> make_agent_generator(AgenticSpec spec, AgentOptions options, llm::Client* client,
                                                        const db::Executor* executor,
                                                        const llm::PromptLibrary& prompts);

}  // namespace nl2sql::generate
