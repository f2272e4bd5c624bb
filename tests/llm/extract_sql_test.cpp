// SQL extraction over a corpus of realistic answer shapes, malformed ones included: each case
// names the SQL that must come out (or that extraction must fail) and what the reasoning holds.
#include <gtest/gtest.h>

#include "nl2sql/llm/answer.h"

namespace nl2sql::llm {
namespace {

struct Case {
  const char* name;
  const char* answer;
  const char* sql;               // expected SQL; nullptr: extraction must fail
  const char* reasoning_has;     // a substring the reasoning must contain ("" to skip)
  const char* source;            // expected source ("" to skip)
};

const Case kCorpus[] = {
    {"fenced_sql", "I count rows.\n```sql\nSELECT COUNT(*) FROM t\n```", "SELECT COUNT(*) FROM t", "I count rows", "fence_sql"},
    {"fenced_sql_semicolon", "```sql\nSELECT a FROM t;\n```", "SELECT a FROM t", "", "fence_sql"},
    {"several_semicolons", "```sql\nSELECT a FROM t;;  \n```", "SELECT a FROM t", "", ""},
    {"fenced_upper_tag", "```SQL\nSELECT 1\n```", "SELECT 1", "", "fence_sql"},
    {"fenced_sqlite_tag", "```sqlite\nSELECT name FROM s WHERE x = 1\n```", "SELECT name FROM s WHERE x = 1", "", "fence_sql"},
    {"fenced_no_tag", "Here it is:\n```\nSELECT b FROM u\n```\n", "SELECT b FROM u", "Here it is", "fence"},
    {"several_blocks_last_wins",
     "Draft:\n```sql\nSELECT a FROM t\n```\nBetter, with the filter:\n```sql\nSELECT a FROM t WHERE b > 2\n```",
     "SELECT a FROM t WHERE b > 2", "Better, with the filter", "fence_sql"},
    {"sql_block_then_json_block", "```sql\nSELECT a FROM t\n```\n```json\n{\"ok\": true}\n```", "SELECT a FROM t", "", "fence_sql"},
    {"tagged_preferred_over_untagged", "```sql\nSELECT x FROM y\n```\nOutput looks like:\n```\nx\n1\n```", "SELECT x FROM y", "", "fence_sql"},
    {"multiline_query",
     "```sql\nSELECT T1.name\nFROM school AS T1\nINNER JOIN district AS T2 ON T1.d = T2.d\nWHERE T2.region = 'east'\n```",
     "SELECT T1.name\nFROM school AS T1\nINNER JOIN district AS T2 ON T1.d = T2.d\nWHERE T2.region = 'east'", "", ""},
    {"crlf_lines", "Reasoning.\r\n```sql\r\nSELECT 1 FROM t\r\n```\r\n", "SELECT 1 FROM t", "Reasoning", ""},
    {"indented_fence", "Answer:\n    ```sql\n    SELECT a FROM t\n    ```", "SELECT a FROM t", "", "fence_sql"},
    {"unclosed_fence", "Thinking done.\n```sql\nSELECT a FROM t WHERE c = 'x'", "SELECT a FROM t WHERE c = 'x'", "Thinking done", "fence_unclosed"},
    {"inline_fence_one_line", "The query is ```sql SELECT 7```.", "SELECT 7", "", ""},
    {"tilde_fence", "~~~sql\nSELECT a FROM t\n~~~", "SELECT a FROM t", "", "fence_sql"},
    {"final_sql_marker", "The answer needs a count.\nFinal SQL: SELECT COUNT(*) FROM t WHERE x = 1;", "SELECT COUNT(*) FROM t WHERE x = 1",
     "The answer needs a count", "marker"},
    {"final_sql_marker_next_line", "Steps done.\nFinal SQL:\nSELECT a\nFROM t\n\nThat is all.", "SELECT a\nFROM t", "Steps done", "marker"},
    {"bold_marker", "**Final SQL:** SELECT a FROM t", "SELECT a FROM t", "", "marker"},
    {"sql_query_marker", "SQL query: SELECT name FROM s", "SELECT name FROM s", "", "marker"},
    {"marker_inline_backticks", "Final SQL: `SELECT a FROM t`", "SELECT a FROM t", "", "marker"},
    {"bare_sql_only", "SELECT a FROM t WHERE b = 1", "SELECT a FROM t WHERE b = 1", "", "bare"},
    {"bare_sql_after_text", "We need the names.\n\nSELECT name\nFROM s\nWHERE id IN (\nSELECT id FROM u)", "SELECT name\nFROM s\nWHERE id IN (\nSELECT id FROM u)",
     "We need the names", "bare"},
    {"bare_with_clause", "WITH x AS (SELECT 1 AS a) SELECT a FROM x;", "WITH x AS (SELECT 1 AS a) SELECT a FROM x", "", "bare"},
    {"lowercase_select", "```\nselect a from t\n```", "select a from t", "", "fence"},
    {"think_section", "<think>Maybe SELECT b FROM u? No.</think>\n```sql\nSELECT a FROM t\n```", "SELECT a FROM t", "Maybe SELECT b", "fence_sql"},
    {"think_then_bare", "<think>plan: count</think>SELECT COUNT(*) FROM t", "SELECT COUNT(*) FROM t", "plan: count", "bare"},
    {"comment_first", "```sql\n-- the count\nSELECT COUNT(*) FROM t\n```", "-- the count\nSELECT COUNT(*) FROM t", "", "fence_sql"},
    {"tag_repeated_in_body", "```\nsql\nSELECT a FROM t\n```", "SELECT a FROM t", "", "fence"},
    {"not_read_only_still_extracted", "```sql\nDELETE FROM t\n```", "DELETE FROM t", "", "fence_sql"},
    {"python_block_ignored_marker_used", "```python\nprint(1)\n```\nFinal SQL: SELECT a FROM t", "SELECT a FROM t", "", "marker"},
    {"unicode_literal", "```sql\nSELECT a FROM t WHERE city = 'Zürich'\n```", "SELECT a FROM t WHERE city = 'Zürich'", "", ""},
    // Malformed answers: extraction fails, with a reason.
    {"empty_answer", "", nullptr, "", ""},
    {"whitespace_only", "  \n\t ", nullptr, "", ""},
    {"refusal", "I cannot answer this question with the given schema.", nullptr, "cannot answer", ""},
    {"empty_fence", "```sql\n```", nullptr, "", ""},
    {"json_only", "```json\n{\"winner\": \"A\"}\n```", nullptr, "", ""},
    {"think_only_unclosed", "<think>Let me see, SELECT a FROM t maybe", nullptr, "SELECT a FROM t maybe", ""},
    {"semicolons_only", "```sql\n;;\n```", nullptr, "", ""},
};

TEST(ExtractSql, Corpus) {
  ASSERT_GE(std::size(kCorpus), 30u);
  for (const auto& c : kCorpus) {
    SCOPED_TRACE(c.name);
    auto r = extract_sql(c.answer);
    if (c.sql == nullptr) {
      EXPECT_FALSE(r.is_ok()) << "extracted: " << r->sql;
      if (!r.is_ok()) { EXPECT_FALSE(r.status().message().empty()); }
    } else {
      EXPECT_TRUE(r.is_ok()) << r.status().message();
      EXPECT_EQ(r.is_ok() ? r->sql : "", c.sql);
      if (*c.source) {
        EXPECT_EQ(r.is_ok() ? r->source : "", c.source);
      }
    }
    if (*c.reasoning_has) {
      const std::string reasoning = r.is_ok() ? r->reasoning : sql_reasoning(c.answer);
      EXPECT_NE(reasoning.find(c.reasoning_has), std::string::npos) << "reasoning: " << reasoning;
    }
  }
}

TEST(ExtractSql, ReasoningStopsBeforeTheChosenBlock) {
  auto r = extract_sql("First idea.\n```sql\nSELECT 1\n```\nSecond idea.\n```sql\nSELECT 2\n```\n");
  ASSERT_TRUE(r.is_ok());
  EXPECT_EQ(r->sql, "SELECT 2");
  EXPECT_NE(r->reasoning.find("First idea"), std::string::npos);
  EXPECT_NE(r->reasoning.find("Second idea"), std::string::npos);
  EXPECT_EQ(r->reasoning.find("```\n\n"), std::string::npos);
}

// Found by the llm_answers fuzz target: an unclosed ~~~ fence runs to the end of the text, past
// a ``` fence, which must not end up in the SQL.
TEST(ExtractSql, UnclosedTildeFenceStopsAtABacktickFence) {
  auto r = extract_sql("Here:\n~~~SELECT name FROM artist WHERE country = 'UK'\nnotes\n```\n");
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  EXPECT_EQ(r->sql.find("```"), std::string::npos) << r->sql;
  EXPECT_EQ(r->sql.rfind("SELECT name FROM artist WHERE country = 'UK'", 0), 0u) << r->sql;
}

TEST(ExtractSql, LooksLikeSql) {
  EXPECT_TRUE(looks_like_sql("  select 1"));
  EXPECT_TRUE(looks_like_sql("/* c */ WITH a AS (SELECT 1) SELECT * FROM a"));
  EXPECT_TRUE(looks_like_sql("(SELECT 1) UNION SELECT 2"));
  EXPECT_TRUE(looks_like_sql("INSERT INTO t VALUES (1)"));
  EXPECT_FALSE(looks_like_sql("Selection of the data"));
  EXPECT_FALSE(looks_like_sql("The answer is 3"));
  EXPECT_FALSE(looks_like_sql(""));
}

}  // namespace
}  // namespace nl2sql::llm
