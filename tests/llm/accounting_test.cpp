// Accounting of parse failures: an answer of a successful call that no reader could use is
// counted per run, per question and per stage (with the reader when one stage asks several
// things), apart from failed calls, and survives UsageTotals::add and to_json.
#include <gtest/gtest.h>

#include "nl2sql/llm/accounting.h"

namespace nl2sql::llm {
namespace {

TEST(Accounting, ParseFailuresAreCountedApartFromFailedCalls) {
  Accounting a;
  UsageTotals call;
  call.calls = 1;
  a.record("select", "q1", call);
  a.record_parse_failure("select", "q1", "rank");
  a.record_parse_failure("fix", "q1");
  a.record_parse_failure("fix", "q2");
  const UsageTotals t = a.total();
  EXPECT_EQ(t.calls, 1);
  EXPECT_EQ(t.errors, 0);
  EXPECT_EQ(t.parse_failures, 3);
  EXPECT_EQ(t.parse_failures_by_stage.at("select:rank"), 1);
  EXPECT_EQ(t.parse_failures_by_stage.at("fix"), 2);
  EXPECT_EQ(a.question("q1").parse_failures, 2);
  EXPECT_EQ(a.question("q2").parse_failures_by_stage.at("fix"), 1);
  // The stage bucket is the call's stage: no new stage appears for the reader.
  EXPECT_EQ(a.by_stage().count("select:rank"), 0u);
  EXPECT_EQ(a.by_stage().at("select").parse_failures, 1);
  const auto j = a.to_json();
  EXPECT_EQ(j["total"]["parse_failures"], 3);
  EXPECT_EQ(j["by_stage"]["fix"]["parse_failures_by_stage"]["fix"], 2);
}

}  // namespace
}  // namespace nl2sql::llm
