// The simulator's tokenizer: lossless (join(tokenize(s)) == s, broken SQL included), depths,
// keywords and column references as the mistakes and outlines rely on.
#include "sim/sql_tokens.h"

#include <gtest/gtest.h>

namespace nl2sql::sim::detail {
namespace {

TEST(SimSqlTokens, JoinGivesBackTheTextEvenWhenItIsBroken) {
  for (const char* s : {"SELECT a, b FROM t WHERE x = 'it''s' AND y > 1.5",
                        "SELECT \"odd col\" FROM `t` WHERE (a IN (SELECT b FROM u))",
                        "SELECT COUNT(*), FROM t WHERE 'unterminated", "", "))(( ,,", "SELECT é FROM ü"})
    EXPECT_EQ(join(tokenize(s)), s) << s;
}

TEST(SimSqlTokens, KindsAndDepths) {
  auto t = tokenize("SELECT a FROM t WHERE b IN (SELECT 'x' FROM u)");
  size_t inner_select = 0, outer_select = 0;
  for (size_t i = 0; i < t.size(); ++i)
    if (is_kw(t[i], "SELECT")) (t[i].depth == 0 ? outer_select : inner_select) = i;
  EXPECT_GT(inner_select, outer_select);
  EXPECT_EQ(t[inner_select].depth, 1);
  bool saw_string = false;
  for (const auto& tok : t)
    if (tok.kind == Tok::kString) {
      EXPECT_EQ(tok.text, "'x'");
      saw_string = true;
    }
  EXPECT_TRUE(saw_string);
  EXPECT_EQ(find_kw(t, "WHERE"), find_kw(t, "WHERE", find_kw(t, "FROM")));
  EXPECT_EQ(find_kw(t, "HAVING"), t.size());
  EXPECT_EQ(t[next_nonspace(t, 0)].text, "a");
  EXPECT_EQ(prev_nonspace(t, 0), t.size());  // nothing before the first token
}

TEST(SimSqlTokens, ColumnReferencesSkipTablesAliasesAndFunctions) {
  auto t = tokenize("SELECT T1.name, COUNT(id) FROM schools AS T1 JOIN scores T2 ON T1.cds = T2.cds_code "
                    "WHERE avg_math > 560");
  std::vector<std::string> refs;
  for (const auto& r : column_refs(t)) refs.push_back(r.qualified);
  EXPECT_EQ(refs, (std::vector<std::string>{"T1.name", "id", "T1.cds", "T2.cds_code", "avg_math"}));
}

}  // namespace
}  // namespace nl2sql::sim::detail
