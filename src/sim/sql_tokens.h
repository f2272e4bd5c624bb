// The simulator's small SQL tokenizer (private to the sim layer): enough structure for robust
// text mutations of gold SQL and for the outlines plans and critiques are derived from. Not the
// product's parser (nl2sql/sql): it must survive any text, including the broken SQL it makes.
#pragma once

#include <cstddef>
#include <set>
#include <string>
#include <vector>

namespace nl2sql::sim::detail {

enum class Tok { kWord, kQuotedIdent, kString, kNumber, kPunct, kSpace };

struct Token {
  Tok kind;
  std::string text;
  int depth = 0;  // parenthesis depth at the token
};

std::vector<Token> tokenize(const std::string& sql);
std::string join(const std::vector<Token>& toks);
bool is_kw(const Token& t, const char* kw);  // `kw` upper-case
const std::set<std::string>& keywords();
// Index of the next / previous token that is not whitespace; t.size() when none.
size_t next_nonspace(const std::vector<Token>& t, size_t i);
size_t prev_nonspace(const std::vector<Token>& t, size_t i);

struct ColumnRef {
  size_t token;           // index of the column-name token
  std::string qualified;  // "T1.name" or "name"
};

// Column references: names after "alias." and bare names that are not keywords, functions,
// tables, aliases or qualifiers.
std::vector<ColumnRef> column_refs(const std::vector<Token>& t);
// Index of the first keyword `kw` at or after `from`; t.size() when none.
size_t find_kw(const std::vector<Token>& t, const char* kw, size_t from = 0);

}  // namespace nl2sql::sim::detail
