// The ReCAP generator `recap` (ReCAPAgent-SQL-style plan → critique → act → refine → validate).
// Per sample:
//  0. retrievers (recap_retrievers.h): the documentation of the columns the question mentions
//     goes into the planner's prompt; after planning, that of the columns the plan uses and the
//     SQLite syntax entries for the functions the plan names go into the writer's and the
//     refiner's prompts (recap.knowledge, recap.syntax);
//  1. planner: a JSON step plan and the expected result columns;
//  2. plan critic: approves or lists issues; the planner revises, up to recap.plan_revisions times;
//  3. action: SQL written for the approved (or last) plan;
//  4. SQL critic (recap.sql_critique): reviews the SQL against the plan and question; a
//     rejection sends the SQL with the critic's issues to the refiner;
//  5. the SQL runs read-only; an error or an empty result goes to the refiner with the error
//     class of fix/'s taxonomy (syntax_error, no_such_table, no_such_column, ambiguous_column,
//     type_mismatch, timeout, empty_result …) and the fixer's targeted hint for that class;
//     schema errors also trigger schema linking — the refiner then sees the complete tables the
//     query touches and the tables holding the names closest to the unknown one;
//  6. validator: reads the result summary (columns, NULL counts, row count, first rows) against
//     the question and answers {valid_result, columns_not_needed, result_empty, suggest_fix};
//     a rejection goes back to the refiner with its suggestion;
// looping until the validator accepts or recap.max_steps model calls are spent; then the last
// SQL that executed with rows (else the last SQL) is the best-effort answer.
//
// Every call is in the candidate's `calls` (stages recap.plan, recap.plan_critique, recap.act,
// recap.sql_critique, recap.refine, recap.validate) and every step a "[step k] …" line of its
// reasoning. Immutable after construction; generate() may run on many threads at once.
#pragma once

#include <filesystem>
#include <memory>
#include <string>

#include "nl2sql/core/config.h"
#include "nl2sql/core/status.h"
#include "agent_steps.h"
#include "nl2sql/generate/generator.h"

namespace nl2sql::generate {

struct RecapOptions {
  int64_t max_steps = 12;        // model calls per sample, planning included
  int64_t plan_revisions = 3;    // planner revisions after plan-critic rejections
  bool sql_critique = true;
  int64_t max_schema_tokens = 8000;  // <= 0: no budget
  std::string embeddings_profile;    // ranks columns for the schema budget; empty: none
  bool knowledge = true;             // external-knowledge retriever (column documentation)
  bool syntax = true;                // syntax retriever (prompts/sqlite_syntax.md)
  AttemptLimits limits;
};

// Reads recap.* (errors name the key).
Result<RecapOptions> load_recap_options(const core::Config& config);

// The verdict of the validator's JSON; a malformed answer is read as valid (the loop cannot
// act on it) with `parsed` false.
struct Validation {
  bool parsed = false;
  bool valid_result = true;
  std::vector<std::string> columns_not_needed;
  bool result_empty = false;
  std::string suggest_fix;
};
Validation parse_validation(const std::string& answer);

Result<std::unique_ptr<Generator>> make_recap_generator(AgenticSpec spec, RecapOptions options, llm::Client* client,
                                                        const db::Executor* executor,
                                                        const llm::PromptLibrary& prompts);

}  // namespace nl2sql::generate
