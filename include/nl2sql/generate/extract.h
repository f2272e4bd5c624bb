// SQL extraction: the final SQL query of a model's free-text answer, and the reasoning before
// it. Models answer in many shapes — fenced blocks with or without a language tag, several
// blocks (drafts, then the final one), "Final SQL:" lines, bare SQL, a <think> section, a fence
// never closed — and the extractor must pick the query the model settled on without ever
// dropping a failure silently: when nothing that looks like SQL is found the result says why.
// Pure function; thread-safe.
#pragma once

#include <string>
#include <string_view>

namespace nl2sql::generate {

struct ExtractedSql {
  std::string sql;        // trimmed, trailing semicolons removed; "" when !ok
  std::string reasoning;  // the answer text before the chosen SQL (trimmed)
  bool ok = false;
  std::string error;      // why nothing was extracted (when !ok)
  std::string source;     // how it was found: fence_sql | fence | fence_unclosed | marker | bare
};

// Order of preference: the last fenced block tagged sql/sqlite; else the last untagged fenced
// block that reads as SQL; else the text after the last "Final SQL:"/"SQL:"/"Answer:" marker;
// else the last paragraph starting with SELECT or WITH. Text inside <think>…</think> counts
// as reasoning only.
ExtractedSql extract_sql(std::string_view response);

// True when `text` (after whitespace and comments) begins with a SQL statement keyword.
bool looks_like_sql(std::string_view text);

}  // namespace nl2sql::generate
