// Spider test-suite text preprocessing, applied to SQL text before execution. The result-set
// equalities the evaluators apply live in db/result_compare.h. Pure functions, thread-safe.
#pragma once

#include <cstddef>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace nl2sql::eval {

// Spider test-suite text preprocessing.
std::string spider_postprocess(std::string_view sql);   // "> =" → ">=" etc.
std::string remove_distinct(std::string_view sql);      // drops every DISTINCT keyword token
std::string replace_cur_year(std::string_view sql);     // YEAR(CURDATE()) → 2020
bool spider_order_matters(std::string_view gold_sql);   // "order by" in lower-cased text

// Statements as both official scripts see them (they run SQL through Python's sqlite3).
// Where the first statement ends: just past its first ';' outside strings, quoted names and
// comments; the end of the text when it has none.
size_t first_statement_end(std::string_view sql);
// Python's sqlite3 executes a text only when what follows its first statement is whitespace
// and comments ("You can only execute one statement at a time"): `q;` and `q; -- note` run,
// `q;;`, `q; SELECT 1` and `q; prose` do not. The official BIRD script inherits this rule; the
// test-suite evaluator does too when it keeps DISTINCT.
bool python_runs_as_one_statement(std::string_view sql);
// Whether the text holds no statement at all: only whitespace, comments and ';'.
bool holds_no_statement(std::string_view sql);
// The first statement, as the test-suite evaluator keeps it when it removes DISTINCT (it re-joins
// the tokens of sqlparse's first statement): `q; \end{code} …` is scored as `q;`.
std::string first_statement(std::string_view sql);

// --plug_value (Spider test-suite): a query's value slots — string literals in single or double
// quotes and numbers, found on its space-joined tokens as the official evaluator finds them — and
// the query re-joined with every slot filled.
struct ValueSlots {
  std::vector<std::string> words;  // lower-cased; a slot holds kValueSlot
  size_t slots = 0;
  std::set<std::string> values;    // the slots' texts as written (quotes included)
};
inline constexpr const char* kValueSlot = "\x01value";
ValueSlots value_slots(std::string_view sql);
// The predictions the official evaluator tries after the prediction itself: every way of
// filling the prediction's slots with gold's values (all of them when the prediction has no
// slot: its re-joined text once). At most `limit`; *truncated says whether more existed.
std::vector<std::string> plugged_predictions(std::string_view gold, std::string_view pred, size_t limit,
                                             bool* truncated = nullptr);

}  // namespace nl2sql::eval
