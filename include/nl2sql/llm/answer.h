// The one reader of model answers. Every stage that parses what a model wrote — SQL from a
// generator or the fixer, a JSON object from a critic, a ranking, a pairwise winner, synthetic
// examples — goes through these functions, so an answer shape is handled the same way
// everywhere and a fix lands once.
//
// Reasoning first: split_reasoning() separates what a reasoning model thought from what it
// answered — <think>/<thinking>/<reasoning> blocks anywhere, the text before a lone </think>
// (DeepSeek-R1, QwQ and Qwen3-thinking chat templates put the opening tag in the prompt, so the
// answer starts mid-thought), and gpt-oss harmony channels (analysis is reasoning, final is the
// answer). Reasoning is returned for traces but never parsed: a draft written while thinking is
// not the answer. Every reader below splits first.
//
// Then the answer is read as a careful human would: the block after the last "Final SQL" /
// "Final answer" heading or inside <FINAL_ANSWER>/<answer> tags wins over earlier drafts; a query
// ends at its first top-level `;` (what follows is kept in `trailing`, never executed); bare SQL
// stops at the first line of prose; JSON is the last balanced object or array, repaired for the
// slips models make (trailing commas, single quotes, Python literals, // comments).
//
// Failures are values: each reader returns a Result whose error says why nothing could be read,
// and callers count the failure with Accounting::record_parse_failure. Depends only on the
// standard library, nlohmann/json and core/status.h. Pure functions; thread-safe.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "nl2sql/core/status.h"

namespace nl2sql::llm {

struct SplitAnswer {
  std::string answer;     // the text with every reasoning part removed (not trimmed)
  std::string reasoning;  // the removed parts, in order, separated by blank lines (trimmed)
};

// Reasoning and answer of one model answer (see the header paragraph). An unclosed opening tag
// makes everything after it reasoning; harmony text without a final channel has no answer.
SplitAnswer split_reasoning(std::string_view text);

// Everything a model thought for one choice, for traces: the server's separate reasoning field
// (reasoning_content / reasoning; "" when none) followed by what split_reasoning removes from
// the content.
std::string answer_reasoning(std::string_view server_reasoning, std::string_view content);

struct ExtractedSql {
  std::string sql;        // trimmed, cut at the first top-level ';'
  std::string reasoning;  // the model's reasoning plus the answer text before the chosen SQL
  // How it was found: tag | final_fence | marker | fence_sql | fence | fence_unclosed | bare |
  // json (a {"SQL": …} answer) | inline_code (a `SELECT …` span).
  std::string source;
  std::string trailing;   // what followed the first top-level ';' (another statement, prose)
};

// Order of preference: the last <FINAL_ANSWER>/<answer> tag holding SQL; else the SQL right
// after the last "Final SQL"/"Final answer"/"Final query" heading (inline, inline backticks, or
// the first fenced block after it); else the last fenced block tagged sql/sqlite; else the last
// untagged fenced block that reads as SQL; else the text after the last "SQL:"/"SQL query:"/
// "Answer:" marker; else the last paragraph starting with SELECT or WITH, up to its first prose
// line; else the SQL value of a JSON answer ({"SQL": …}, {"sql": …}, {"query": …}); else the
// last inline `…` span that reads as a query. An error (kInvalidInput) saying why when there is
// none: an empty answer, only reasoning, fenced blocks without SQL, no SQL at all.
Result<ExtractedSql> extract_sql(std::string_view response);

// The model's reasoning as extract_sql reads it: its reasoning and the answer text before the
// chosen SQL — or, when no SQL can be read, before the end (what a trace keeps of an answer that
// held no query).
std::string sql_reasoning(std::string_view response);

// True when `text` (after whitespace and comments) begins with a SQL statement keyword.
bool looks_like_sql(std::string_view text);

// What read_json should accept.
enum class JsonShape { kAny, kObject, kArray };
struct JsonWant {
  JsonShape shape = JsonShape::kAny;
  std::string required_key;  // non-empty: an object holding this key (implies kObject)
};

// The last balanced JSON value in the answer (fenced or bare, prose around it) that matches
// `want`, repaired when strict parsing fails. An error saying why when there is none.
Result<nlohmann::json> read_json(std::string_view answer, const JsonWant& want = {});

// "A" or "B": from the last JSON object with a "winner" key ("A", "Candidate A", "Query B",
// "first", "second", 1, 2 …), else from a closing line such as "Winner: B", "**B**",
// "Answer: Candidate B". An error when neither is present.
Result<std::string> read_pairwise_winner(std::string_view answer);

struct SyntheticExample {
  std::string question, sql;
};

// (question, SQL) pairs: labelled lines ("Question:"/"Input:"/"Q:" then "SQL:"/"Output:"/
// "Query:", plain, bold, numbered "1." or under "Example 1:" headings; the SQL inline, on the
// next lines or fenced) or a JSON list of {question|input, sql|output|query} objects (bare or
// under an "examples" key). Pairs whose SQL cannot be read are skipped; an error when no pair
// could be read.
Result<std::vector<SyntheticExample>> read_examples(std::string_view answer);

}  // namespace nl2sql::llm
