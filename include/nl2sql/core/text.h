// Small text helpers every layer uses: ASCII case mapping (bytes ≥ 0x80 are left alone, so
// UTF-8 stays intact), whitespace trimming and squashing, SQL identifier quoting. Pure functions.
#pragma once

#include <string>
#include <string_view>

namespace nl2sql::core {

std::string lower(std::string_view s);
std::string upper(std::string_view s);
// Whether `word` occurs in `text` as a whole identifier (case-insensitive; neighbours that are
// letters, digits or '_' make it part of a longer name): "T1.county" mentions "county".
bool mentions_identifier(std::string_view text, std::string_view word);
// Runs of whitespace become one space; leading and trailing whitespace goes.
std::string squash_spaces(std::string_view s);
// Leading and trailing whitespace removed.
std::string trim(std::string_view s);
// `s` as one Markdown table cell: '|' escaped, line breaks and tabs become spaces.
std::string markdown_cell(std::string_view s);
// `name` as a double-quoted SQL identifier, inner quotes doubled: any table or column name,
// keywords and spaces included, reads back as itself in SQLite ("my ""odd"" col").
std::string quote_sql_identifier(std::string_view name);
// `text` as a single-quoted SQL string literal, inner quotes doubled: 'O''Brien'.
std::string quote_sql_string(std::string_view text);
// ASCII-case-insensitive equality (bytes >= 0x80 compared as they are).
bool iequals(std::string_view a, std::string_view b);

}  // namespace nl2sql::core
