// ReCAP's retrievers (generate/recap_retrievers.h): the SQLite syntax reference's entries for
// the functions a text names (and no others; call-only triggers need a parenthesis), the
// reference's format errors, and the column documentation a text is given, on the mini set.
#include <gtest/gtest.h>

#include "generate/recap_retrievers.h"
#include "nl2sql/llm/prompt_template.h"
#include "support/test_env.h"

namespace nl2sql::generate {
namespace {

std::vector<std::string> titles(const SyntaxReference& ref, const std::string& text) {
  std::vector<std::string> out;
  for (const auto* e : ref.named_in(text)) out.push_back(e->title);
  return out;
}

TEST(RecapRetrievers, SyntaxEntriesForTheFunctionsATextNames) {
  auto ref = SyntaxReference::load(llm::bundled_prompts_dir() / "sqlite_syntax.md");
  ASSERT_TRUE(ref.is_ok()) << ref.status().message();
  EXPECT_GE(ref->entries().size(), 12u);
  EXPECT_EQ(titles(*ref, "1. Keep rows where STRFTIME('%Y', opened) = '2000'\n2. Take SUBSTR(name, 1, 3)"),
            (std::vector<std::string>{"strftime", "substr"}));
  // "date" as a word is not a call of date(); "the order date" names no function.
  EXPECT_TRUE(titles(*ref, "Sort by the order date and return the names").empty());
  EXPECT_EQ(titles(*ref, "Compare date (opened, '+1 day') with julianday(x)"),
            (std::vector<std::string>{"date, time, datetime", "julianday"}));
  // A longer identifier holding a trigger does not count.
  EXPECT_TRUE(titles(*ref, "Read castle_name and instrument").empty());
  const std::string text = ref->render_for("use IIF and CAST");
  EXPECT_EQ(text.rfind("### cast\nCAST(expr AS type)", 0), 0u) << text;
  EXPECT_NE(text.find("### iif and case\n"), std::string::npos);
  EXPECT_EQ(text.find("### strftime"), std::string::npos);
  EXPECT_EQ(ref->render_for("nothing here"), "");
}

TEST(RecapRetrievers, ReferenceFormatErrorsNameTheLine) {
  auto bad = SyntaxReference::parse("# comment\n## strftime without triggers\ntext\n", "ref.md");
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.status().message().find("ref.md:2"), std::string::npos);
  auto stray = SyntaxReference::parse("stray text\n## a | a\n", "ref.md");
  ASSERT_FALSE(stray.is_ok());
  EXPECT_NE(stray.status().message().find("ref.md:1"), std::string::npos);
  auto ok = SyntaxReference::parse("# c\n## A title | One, two(\nbody line\n\n## b | b\nx", "ref.md");
  ASSERT_TRUE(ok.is_ok()) << ok.status().message();
  ASSERT_EQ(ok->entries().size(), 2u);
  EXPECT_EQ(ok->entries()[0].triggers, (std::vector<std::string>{"one", "two("}));
  EXPECT_EQ(ok->entries()[0].body, "body line");
}

TEST(RecapRetrievers, ColumnKnowledgeOfTheColumnsATextNames) {
  testing::TempDir dir;
  data::DatasetSpec spec;
  spec.data_dir = testing::build_mini_bird(dir.path() / "mini");
  auto ds = data::load_dataset(spec);
  ASSERT_TRUE(ds.is_ok()) << ds.status().message();
  const data::Schema& s = ds->schemas.at("regional_schools");
  EXPECT_EQ(column_knowledge(s, "How many schools are in the east Bohemia region?", nullptr, 12),
            "- district.region (text): the region the district belongs to. Values: stored with a lower-case "
            "direction word, e.g. \"east Bohemia\"\n");
  // "name" is a column of district and of school: only the tables the text names count.
  EXPECT_EQ(column_knowledge(s, "Return the name of the school (charter school only).", nullptr, 12),
            "- school.name (text): the name of the school.\n"
            "- school.is_charter (integer): whether the school is a charter school. Values: 1: charter school 0: "
            "public school\n");
  EXPECT_EQ(column_knowledge(s, "Return the name of the school (charter school only).", nullptr, 1),
            "- school.name (text): the name of the school.\n");
  EXPECT_EQ(column_knowledge(s, "nothing that names a column", nullptr, 12), "");
}

}  // namespace
}  // namespace nl2sql::generate
