// SQLite-dialect lexer and recursive-descent parser for the SELECT side of SQL.
//
// parse() turns one SQL statement into a Statement (see ast.h). A SELECT / VALUES / WITH query
// becomes a full tree; any other statement (INSERT, UPDATE, DELETE, CREATE, DROP, PRAGMA,
// ATTACH, EXPLAIN, BEGIN, …) becomes a kNotQuery node rather than an error. Malformed input is
// an expected failure: the Result carries a message with line, column, the expected tokens and
// an excerpt with a caret, and the same facts are available structured in ParseError. Input of
// any size or shape ends in bounded time: nesting deeper than ParseOptions::max_depth is an
// error, never a stack overflow. One trailing ';' (and comments) is allowed; a second statement
// is an error. Pure functions, safe to call from any number of threads.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "nl2sql/core/status.h"
#include "nl2sql/sql/ast.h"

namespace nl2sql::sql {

enum class TokenKind : uint8_t {
  kEnd, kWord, kQuotedIdent, kString, kBlob, kNumber, kParam, kOperator, kError
};

struct Token {
  TokenKind kind = TokenKind::kEnd;
  std::string_view text;  // the token's source text
  SourcePos pos;
  std::string value;      // decoded: identifier name, string contents, blob hex; else text
  char quote = 0;         // kQuotedIdent: '"', '`' or '['
};

// Splits `sql` into tokens, skipping whitespace and comments; the last token is kEnd. An
// unterminated string, quoted identifier or comment, or a stray character, yields one kError
// token (value = the reason) followed by kEnd.
std::vector<Token> tokenize(std::string_view sql);

struct ParseOptions {
  int max_depth = 256;  // nesting of expressions and subqueries
};

struct ParseError {
  SourcePos pos;
  std::string message;                // "expected one of …, found …"
  std::vector<std::string> expected;  // tokens that would have been accepted there
  std::string excerpt;                // the offending line with a caret under the position
};

// Parses one statement. On failure the Status (kInvalidInput) message is
// "line L, column C: <message>\n<excerpt>", and *error (when given) is filled.
Result<Statement> parse(std::string_view sql, const ParseOptions& options = {},
                        ParseError* error = nullptr);

// Convenience: parses and requires a query (kNotQuery is an error naming the keyword).
Result<Statement> parse_query(std::string_view sql, const ParseOptions& options = {});

// True for words that cannot be bare identifiers or implicit aliases in our grammar; the
// printer quotes identifiers spelled like these.
bool is_reserved_word(std::string_view upper_word);

}  // namespace nl2sql::sql
