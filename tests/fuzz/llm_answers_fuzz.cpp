// libFuzzer target for the parsers of model answers: the answer reader (llm/answer.h: reasoning
// split, SQL extraction, tolerant JSON, pairwise winner, synthetic examples), the
// separating-instance answer rows, the keyword list and the column-filter answer (context).
// Built by tests/fuzz/run_fuzz.sh, not by CMake.
// Properties: no parser crashes; an extracted SQL holds no Markdown fence ("```"); a parsed
// answer table compares equal to itself.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "nl2sql/context/column_filter.h"
#include "context/llm_calls.h"
#include "nl2sql/llm/answer.h"
#include "nl2sql/select/separating_instance.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  auto ex = nl2sql::llm::extract_sql(text);
  if (ex && ex->sql.find("```") != std::string::npos) {
    std::fprintf(stderr, "extracted SQL still holds a fence:\n%s\n", ex->sql.c_str());
    std::abort();
  }
  (void)nl2sql::llm::looks_like_sql(text);
  (void)nl2sql::llm::split_reasoning(text);
  (void)nl2sql::llm::read_json(text);
  (void)nl2sql::llm::read_pairwise_winner(text);
  (void)nl2sql::llm::read_examples(text);
  auto rows = nl2sql::select::parse_answer_rows(text);
  if (rows.is_ok() && !nl2sql::select::answers_match(*rows, *rows)) {
    std::fprintf(stderr, "a parsed answer does not match itself\n");
    std::abort();
  }
  (void)nl2sql::context::parse_keyword_answer(text, "fuzz");
  static const std::vector<std::string> one = {"album.price"};
  static const std::vector<std::string> many = {"album.price", "album.title", "artist.name"};
  (void)nl2sql::context::parse_column_filter_answer(text, one, "fuzz");
  (void)nl2sql::context::parse_column_filter_answer(text, many, "fuzz");
  return 0;
}
