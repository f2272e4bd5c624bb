// D′ itself: the in-memory database built from a schema and chosen rows (read-only, one
// statement, a deadline), the tables as the model sees them, and the answer format shown to
// and parsed from the model.
#include <gtest/gtest.h>

#include "nl2sql/db/schema_info.h"
#include "nl2sql/select/separating_instance.h"
#include "support/test_env.h"

namespace nl2sql::select {
namespace {

InstanceTables two_clients() {
  InstanceTables t;
  db::ResultSet& c = t.tables["client"];
  c.columns = {"client_id", "name"};
  c.rows = {{db::Value::integer(100), db::Value::text("Ana")}, {db::Value::integer(101), db::Value::text("Ben")}};
  return t;
}

TEST(MemoryDatabase, HoldsTheRowsAndRefusesEverythingButOneRead) {
  nl2sql::testing::TempDir tmp;
  nl2sql::testing::build_database(tmp / "d.sqlite",
                                  "CREATE TABLE client (client_id INTEGER PRIMARY KEY, name TEXT);"
                                  "CREATE TABLE loan (loan_id INTEGER PRIMARY KEY, client_id INTEGER, amount INTEGER);");
  auto schema = db::inspect_schema(tmp / "d.sqlite");
  ASSERT_TRUE(schema.is_ok()) << schema.status().message();
  auto mem = MemoryDatabase::create(*schema, two_clients());
  ASSERT_TRUE(mem.is_ok()) << mem.status().message();
  auto n = (*mem)->run("SELECT COUNT(*) FROM client");
  ASSERT_TRUE(n.is_ok()) << n.status().message();
  EXPECT_EQ(n->rows[0][0].i, 2);
  auto empty = (*mem)->run("SELECT COUNT(*) FROM loan");  // a table without chosen rows exists, empty
  ASSERT_TRUE(empty.is_ok()) << empty.status().message();
  EXPECT_EQ(empty->rows[0][0].i, 0);
  EXPECT_FALSE((*mem)->run("DELETE FROM client").is_ok());
  EXPECT_FALSE((*mem)->run("SELECT 1; DELETE FROM client").is_ok());
  EXPECT_FALSE((*mem)->run("SELECT nme FROM client").is_ok());
  // A runaway query ends at the deadline as an error, not a hang.
  auto runaway = (*mem)->run("WITH RECURSIVE r(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM r) SELECT COUNT(*) FROM r", 0.2);
  EXPECT_FALSE(runaway.is_ok());
  EXPECT_EQ((*mem)->run("SELECT COUNT(*) FROM client")->rows[0][0].i, 2);
}

// The search refills one D′ for every row set it tries: a refilled database must answer as a
// new one with the same rows would (rowids and AUTOINCREMENT counters included), a table left
// out of the new rows is empty, and the read-only guard holds after every refill — also after
// the same statement ran before the refill (statements are kept prepared).
TEST(MemoryDatabase, ARefilledDatabaseAnswersAsANewOneAndStaysReadOnly) {
  nl2sql::testing::TempDir tmp;
  nl2sql::testing::build_database(tmp / "d.sqlite",
                                  "CREATE TABLE client (client_id INTEGER PRIMARY KEY AUTOINCREMENT, name TEXT);"
                                  "CREATE TABLE note (body TEXT);"
                                  "CREATE TABLE loan (loan_id INTEGER PRIMARY KEY, client_id INTEGER, amount INTEGER);");
  auto schema = db::inspect_schema(tmp / "d.sqlite");
  ASSERT_TRUE(schema.is_ok()) << schema.status().message();
  InstanceTables first = two_clients();
  first.tables["note"].columns = {"body"};
  first.tables["note"].rows = {{db::Value::text("x")}, {db::Value::text("y")}, {db::Value::text("z")}};
  first.tables["loan"].columns = {"loan_id", "client_id", "amount"};
  first.tables["loan"].rows = {{db::Value::integer(1), db::Value::integer(100), db::Value::integer(5)}};
  InstanceTables second;
  second.tables["note"].columns = {"body"};
  second.tables["note"].rows = {{db::Value::text("w")}, {db::Value::text("v")}};
  second.tables["client"].columns = {"client_id", "name"};
  second.tables["client"].rows = {{db::Value::integer(7), db::Value::text("Cy")}};
  const std::vector<std::string> queries = {
      "SELECT rowid, body FROM note",
      "SELECT client_id, name FROM client",
      "SELECT COUNT(*) FROM loan",
      "SELECT name FROM client JOIN loan USING (client_id)",
  };
  auto refilled = MemoryDatabase::create(*schema, first);
  ASSERT_TRUE(refilled.is_ok()) << refilled.status().message();
  for (const auto& q : queries) ASSERT_TRUE((*refilled)->run(q).is_ok()) << q;
  ASSERT_TRUE((*refilled)->reload(second).is_ok());
  auto fresh = MemoryDatabase::create(*schema, second);
  ASSERT_TRUE(fresh.is_ok()) << fresh.status().message();
  for (const auto& q : queries) {
    auto r1 = (*refilled)->run(q);
    auto r2 = (*fresh)->run(q);
    ASSERT_TRUE(r1.is_ok() && r2.is_ok()) << q;
    EXPECT_EQ(r1->rows, r2->rows) << q;
  }
  EXPECT_EQ((*refilled)->run("SELECT COUNT(*) FROM loan")->rows[0][0].i, 0);
  EXPECT_EQ((*refilled)->run("SELECT rowid FROM note")->rows.front()[0].i, 1);
  // AUTOINCREMENT's counter starts again too (a new database has none).
  auto seq = (*refilled)->run("SELECT COUNT(*) FROM sqlite_sequence");
  auto fresh_seq = (*fresh)->run("SELECT COUNT(*) FROM sqlite_sequence");
  ASSERT_TRUE(seq.is_ok() && fresh_seq.is_ok());
  EXPECT_EQ(seq->rows, fresh_seq->rows);
  // Still read-only after the refill's own writes.
  EXPECT_FALSE((*refilled)->run("DELETE FROM note").is_ok());
  EXPECT_FALSE((*refilled)->run("INSERT INTO note VALUES ('q')").is_ok());
  EXPECT_FALSE((*refilled)->run("PRAGMA query_only = 0").is_ok());
  EXPECT_FALSE((*refilled)->run("ATTACH ':memory:' AS other").is_ok());
  EXPECT_EQ((*refilled)->run("SELECT COUNT(*) FROM note")->rows[0][0].i, 2);
}

TEST(InstanceTables, CountsRowsAndShowsThemToTheModel) {
  InstanceTables t = two_clients();
  EXPECT_EQ(t.rows(), 2u);
  const std::string text = t.to_prompt_text();
  EXPECT_NE(text.find("\"client\""), std::string::npos) << text;
  EXPECT_LT(text.find("Ana"), text.find("Ben")) << text;
  EXPECT_EQ(t.to_json()["client"][1]["name"], "Ben");
}

TEST(AnswerRows, RenderParseAndCompare) {
  db::ResultSet r;
  r.columns = {"name", "n"};
  r.rows = {{db::Value::text("Ana"), db::Value::integer(3)}, {db::Value::text("Ben"), db::Value::real(2.5)}};
  std::string text = render_answer_rows(r);
  EXPECT_EQ(text, "[\"Ana\",3]\n[\"Ben\",2.5]");
  auto back = parse_answer_rows("Here it is:\n```text\n" + text + "\n```\n");
  ASSERT_TRUE(back.is_ok());
  EXPECT_TRUE(answers_match(*back, r));
  // A person writes 3 as "3" and 2.5 as 2.50000001; rows in any order, as one JSON array.
  auto loose = parse_answer_rows("```json\n[[\"Ben\", 2.50000001], [\"Ana\", \"3\"]]\n```");
  ASSERT_TRUE(loose.is_ok());
  EXPECT_TRUE(answers_match(*loose, r));
  auto none = parse_answer_rows("```text\n(no rows)\n```");
  ASSERT_TRUE(none.is_ok());
  EXPECT_TRUE(none->rows.empty());
  EXPECT_FALSE(answers_match(*none, r));
  EXPECT_FALSE(parse_answer_rows("```text\nAna, 3\n```").is_ok());
  // Rows drafted while thinking are not the answer.
  auto thought = parse_answer_rows("Maybe:\n```text\n[\"Zed\", 9]\n```\n</think>\n```text\n" + text + "\n```");
  ASSERT_TRUE(thought.is_ok()) << thought.status().message();
  EXPECT_TRUE(answers_match(*thought, r));
}

}  // namespace
}  // namespace nl2sql::select
