// Semantic accuracy as AgentNLQ measures it (its §4.2 and Appendices A-B): a model of role
// `judge` reads the question and both result tables (column names included, each cut to its
// first 500 characters as the paper cuts them) and assigns one of the outcome codes RES1-RES6;
// semantic accuracy = (RES3 + RES5) / n. The prompt is prompts/judge_semantic.txt; the answer's
// {"Classification code", "Reasoning"} object is read with llm::read_json. Every call goes
// through llm::Client, so answers are cached (a rerun makes no call) and tokens and cost are
// accounted under stage "judge".
//
// Also the alignment check of the paper's Appendix B: judge-export writes a sample of judged
// questions (seeded, stratified by the judge's code) as CSV for people to label, and
// judge-import reads the labels back into accuracy, precision, recall and F1 of the judge.
// Pure functions except judge_items (thread-safe as llm::Client is).
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "nl2sql/core/status.h"
#include "nl2sql/db/executor.h"
#include "nl2sql/llm/client.h"
#include "nl2sql/llm/prompt_template.h"

namespace nl2sql::eval {

// The paper's cut: the first 500 characters (Unicode code points) of a table's text.
inline constexpr size_t kJudgeTableChars = 500;

// A result as the judge sees it: a failed execution as "Failed to execute the query: <why>",
// no rows as "None (no rows; columns: a, b)", else a list of rows with their column names,
// [{"account_id": 42, "client_id": 99}, …]; then cut to `max_chars` code points (a cut table
// ends with "…"). Column names repeat for every row, as a data frame's records do.
std::string judge_table(const db::ExecutionResult& result, size_t max_chars = kJudgeTableChars);

// The code of a judge's answer: "RES1".."RES6" from the JSON object's "Classification code"
// (also "code"; "RES 3", "res3" read as RES3), with its "Reasoning". An error (malformed answer)
// when there is no such object or the code is none of the six.
struct JudgeVerdict {
  std::string code;
  std::string reasoning;
};
Result<JudgeVerdict> read_judge_answer(const std::string& answer);

// True for the codes the paper counts as correct (RES3, RES5).
bool judge_counts_correct(const std::string& code);

struct JudgeInput {
  std::string question_id, question;
  std::string gold_table, pred_table;  // already rendered with judge_table
};

struct JudgeResult {
  std::string code;       // "" when the call failed or the answer was malformed
  std::string reasoning;
  std::string error;      // why there is no code
  bool from_cache = false;
  int64_t prompt_tokens = 0, completion_tokens = 0;
  double cost_usd = 0;
};

// One question as the judge saw it, with what the report shows beside the verdict.
struct JudgedItem {
  std::string question_id, question, gold_sql, pred_sql;
  std::string gold_table, pred_table;  // as the prompt showed them (cut)
  std::string rule_code;               // our own RES code (evaluator.h's outcome_code)
  bool ex_correct = false;             // the primary metric's verdict
  JudgeResult result;
};

// The "judge" summary: semantic accuracy (RES3 + RES5) / n with a 95% bootstrap CI (a
// malformed or failed answer counts in n, never as correct), codes, the same formula on the
// rule codes, the confusion matrix judge code × rule code, every question where the judge and
// EX disagree (both tables), tokens, cost and cached answers.
nlohmann::json judge_summary(const std::vector<JudgedItem>& items, int bootstrap_samples, uint64_t seed);

// One call per input (role `judge`, stage "judge"), on `threads` workers. Fails only on a
// cancelled client or a configuration error (unknown role/profile, template mismatch).
Result<std::vector<JudgeResult>> judge_items(llm::Client& client, const llm::PromptTemplate& prompt,
                                             const std::vector<JudgeInput>& inputs, size_t threads);

// Alignment of the judge with human labels (Appendix B): the judge says "correct" for RES3 and
// RES5; a label says correct for RES3 / RES5 / correct / yes / true / 1 and incorrect for the
// other codes / incorrect / no / false / 0.
struct Alignment {
  size_t tp = 0, fp = 0, fn = 0, tn = 0;
  size_t code_labels = 0, code_agree = 0;  // labels given as codes, and how many equal the judge's
  double accuracy() const;
  double precision() const;  // NaN without a predicted positive
  double recall() const;     // NaN without an actual positive
  double f1() const;
};
// Reads a label: +1 correct, 0 incorrect, -1 not a label (empty or unknown); `code` receives
// the RES code when the label is one.
int parse_label(const std::string& label, std::string* code);

// A field quoted for RFC 4180 CSV (doubled quotes; newlines kept inside the quotes), for the
// labelling files; they are read back with data::parse_csv.
std::string csv_escape(const std::string& field);

// A seeded sample of judged items stratified by judge code: every code present gets
// round(n × share) items, at least one, trimmed or topped up to n by largest remainder.
// `codes[i]` is item i's code; returns item indices, grouped by code, in index order.
std::vector<size_t> stratified_sample(const std::vector<std::string>& codes, size_t n, uint64_t seed);

// judge-export: from an eval.json written with the judge (its items' "judge" blocks), a seeded
// sample of `n` questions stratified by judge code (a failed or unreadable answer is the stratum
// "unparsed") as CSV with the columns question_id, question, judge_code, gold_sql, pred_sql,
// gold_table, pred_table, label (empty, for people to fill). `rows` receives the sample size.
Result<std::string> judge_sample_csv(const nlohmann::json& eval_report, size_t n, uint64_t seed, size_t* rows);

// judge-import: reads such a CSV back (columns found by header name) and compares the judge's
// codes with the labels filled in. Rows with an empty label are counted and skipped; a label
// that is none of the accepted words is an error naming its row and question.
struct LabelImport {
  Alignment alignment;
  size_t rows = 0, unlabelled = 0;
};
Result<LabelImport> read_labels(const std::string& csv, const std::string& where);

}  // namespace nl2sql::eval
