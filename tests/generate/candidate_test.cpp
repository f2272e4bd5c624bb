// Candidate traces: to_json → candidate_from_json gives back every field and the same bytes; a
// key the trace does not write (a renamed one) and wrong types are errors naming the key.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "nl2sql/generate/candidate.h"

namespace nl2sql::generate {
namespace {

LlmCallTrace call(const std::string& stage) {
  LlmCallTrace c;
  c.stage = stage;
  c.template_name = "generate_divide_conquer";
  c.template_hash = "abc123";
  c.profile = "big";
  c.model = "m-1";
  c.provider = "openai";
  c.prompt = "Question: …";
  c.system = "sys";
  c.response = "```sql\nSELECT 1\n```";
  c.prompt_tokens = 120;
  c.completion_tokens = 30;
  c.cost_usd = 0.0015;
  c.latency_s = 1.25;
  c.from_cache = true;
  return c;
}

Candidate full_candidate() {
  Candidate c;
  c.id = "dc#3";
  c.generator = "dc";
  c.profile = "big";
  c.sample_index = 3;
  c.reasoning = "Divide: …";
  c.raw_response = "Divide: …\n```sql\nSELECT nme FROM t\n```";
  c.sql = "SELECT name FROM t";
  c.original_sql = "SELECT nme FROM t";
  c.extraction_ok = true;
  c.execution.executed = true;
  c.execution.status = db::ExecStatus::kOk;
  c.execution.rows = 2;
  c.execution.columns = 1;
  c.execution.preview = "name\nA\nB";
  c.execution.elapsed_ms = 0.5;
  FixRound r;
  r.round = 1;
  r.failure_class = "no_such_column";
  r.feedback = "Error: no such column: nme";
  r.sql_before = "SELECT nme FROM t";
  r.sql_after = "SELECT name FROM t";
  r.execution_after = c.execution;
  r.call = call("fix");
  r.call.error = "";
  c.fix_rounds.push_back(r);
  c.still_failing = false;
  c.calls.push_back(call("generate"));
  return c;
}

TEST(CandidateJson, RoundTripsEveryField) {
  Candidate c = full_candidate();
  auto j = to_json(c);
  auto back = candidate_from_json(nlohmann::json::parse(j.dump()));
  ASSERT_TRUE(back.is_ok()) << back.status().message();
  EXPECT_EQ(to_json(*back), j);
  EXPECT_EQ(back->fix_rounds.at(0).failure_class, "no_such_column");
  EXPECT_EQ(back->calls.at(0).template_hash, "abc123");
  EXPECT_TRUE(back->calls.at(0).from_cache);
  EXPECT_EQ(back->execution.preview, "name\nA\nB");
  EXPECT_EQ(back->tokens(), 300);
  EXPECT_DOUBLE_EQ(back->cost_usd(), 0.003);
  EXPECT_DOUBLE_EQ(back->llm_latency_s(), 2.5);
}

TEST(CandidateJson, FailedAndRejectedCandidatesRoundTrip) {
  Candidate c;
  c.id = "baseline#0";
  c.extraction_ok = false;
  c.extraction_error = "no SQL found";
  c.rejected = true;
  c.rejection = "rejected: not read-only (DELETE statement)";
  c.execution.status = db::ExecStatus::kTimeout;
  c.still_failing = true;
  auto back = candidate_from_json(to_json(c));
  ASSERT_TRUE(back.is_ok());
  EXPECT_FALSE(back->extraction_ok);
  EXPECT_EQ(back->rejection, c.rejection);
  EXPECT_EQ(back->execution.status, db::ExecStatus::kTimeout);
  EXPECT_TRUE(back->still_failing);
}

TEST(CandidateJson, UnknownKeysAndWrongTypesAreNamed) {
  auto j = to_json(full_candidate());
  EXPECT_EQ(to_json(*candidate_from_json(j)).dump(), j.dump());  // the same bytes back
  j["added_later"] = {1, 2};
  auto unknown = candidate_from_json(j);
  ASSERT_FALSE(unknown.is_ok());
  EXPECT_NE(unknown.status().message().find("\"added_later\""), std::string::npos) << unknown.status().message();
  j.erase("added_later");
  j["sample_index"] = "three";
  auto bad = candidate_from_json(j);
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.status().message().find("sample_index"), std::string::npos);
  auto j2 = to_json(full_candidate());
  j2["execution"]["status"] = "exploded";
  auto bad2 = candidate_from_json(j2);
  ASSERT_FALSE(bad2.is_ok());
  EXPECT_NE(bad2.status().message().find("exploded"), std::string::npos);
  // A key renamed inside a nested part (a fix round's call) is refused too, naming the key.
  auto j3 = to_json(full_candidate());
  ASSERT_FALSE(j3["fix_rounds"].empty());
  j3["fix_rounds"][0]["call"]["template_name"] = j3["fix_rounds"][0]["call"]["template"];
  j3["fix_rounds"][0]["call"].erase("template");
  auto renamed = candidate_from_json(j3);
  ASSERT_FALSE(renamed.is_ok());
  EXPECT_NE(renamed.status().message().find("\"template_name\""), std::string::npos) << renamed.status().message();
}

}  // namespace
}  // namespace nl2sql::generate
