// The prefix share (issue 39): the longest earlier prefix of each request, in whole blocks,
// found by PrefixIndex without keeping the texts; a run's share summed per stage over every
// prompt it asked for (response-cache hits included, memo-shared answers counted where they were
// asked), and shown in the reports.
#include "nl2sql/report/prefix_share.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "nl2sql/report/run_report.h"
#include "report/run_fixture.h"

namespace nl2sql::report {
namespace {

using nlohmann::json;

TEST(PrefixIndex, FindsTheLongestEarlierPrefixInWholeBlocks) {
  PrefixIndex index(64);
  const std::string a(200, 'a');
  EXPECT_EQ(index.add(a), 0u);  // nothing earlier
  EXPECT_EQ(index.add(a), 192u);  // three whole blocks; the last 8 characters are no block
  EXPECT_EQ(index.add(std::string(130, 'a') + std::string(70, 'b')), 128u);
  EXPECT_EQ(index.add(std::string(63, 'a')), 0u);  // shorter than a block
  EXPECT_EQ(index.add("b" + a), 0u);  // a prefix, not any shared substring
  // The earlier text need not be longer: its blocks are all remembered.
  EXPECT_EQ(index.add(a + a), 192u);
  EXPECT_EQ(index.add(a + a), 384u);
}

TEST(PrefixIndex, KeepsOneHashPerDistinctBlockNotTheTexts) {
  // Requests of ~6 KB sharing a 4 KB head, as a database's prompts do: the index grows by the
  // distinct tails only, and the head is found in each.
  PrefixIndex index(64);
  const std::string head(4096, 'h');
  int64_t found = 0;
  for (int i = 0; i < 3000; ++i) {
    std::string tail = std::to_string(i) + ":" + std::string(2048, static_cast<char>('a' + i % 26));
    found += static_cast<int64_t>(index.add(head + tail));
  }
  EXPECT_EQ(found, 2999 * 4096);
  // 64 head blocks + 32 tail blocks per request (each tail starts differently).
  EXPECT_EQ(index.distinct_blocks(), 64u + 3000u * 32u);
}

// A call trace; an empty `hash` marks a response-cache hit.
json call(const std::string& system, const std::string& prompt, const std::string& hash,
          const std::string& shared_from = "") {
  json c = {{"stage", "keywords"}, {"system", system}, {"prompt", prompt}, {"prompt_tokens", 10},
            {"completion_tokens", 1}, {"cost_usd", 0.0}, {"latency_s", 0.0}, {"provider", "openai"},
            {"from_cache", hash.empty()}};
  if (!hash.empty()) c["request_hash"] = hash;
  if (!shared_from.empty()) c["shared_from"] = shared_from;
  return c;
}

TEST(PrefixShareOfARun, CountsAskedPromptsInRecordOrderPerStage) {
  const std::string sys(128, 's');
  run::RunData run;
  run.manifest = testing::fixture_manifest();
  auto record = [&](const std::string& id, int64_t index, json calls) {
    return testing::typed(json{{"question_id", id}, {"index", index}, {"db_id", "db"}, {"status", "ok"},
                               {"context", {{"calls", std::move(calls)}}},
                               {"usage", {{"context", {{"calls", 1}, {"prompt_tokens", 10}, {"completion_tokens", 1},
                                                       {"cost_usd", 0.0}, {"latency_s", 0.0}}}}}});
  };
  run.records.push_back(record("q1", 0, json::array({call(sys, std::string(64, 'x'), "h1")})));
  run.records.push_back(record("q2", 1, json::array({call(sys, std::string(64, 'y'), "h2"),
                                                     call(sys, std::string(64, 'y'), ""),      // a cache hit
                                                     call(sys, std::string(64, 'y'), "h3", "q1")})));  // shared
  const PrefixShare ps = prefix_share(run);
  // q1: nothing earlier; q2: the 128-character system prompt (two blocks) repeats q1's, and the
  // cache hit repeats q2's whole first prompt (three blocks); the shared answer is q1's.
  EXPECT_EQ(ps.total.requests, 3);
  const int64_t chars = 128 + 1 + 64;
  EXPECT_EQ(ps.total.prompt_chars, 3 * chars);
  EXPECT_EQ(ps.total.prefix_chars, 128 + 192);
  EXPECT_EQ(ps.by_stage.at("context").prefix_chars, 128 + 192);
  const double share = 320.0 / (3 * chars);
  const json rep = build_report(run, ReportOptions{});
  EXPECT_NEAR(rep["usage"]["total"]["prefix_share"].get<double>(), share, 1e-12);
  EXPECT_NEAR(rep["usage"]["stages"]["context"]["prefix_share"].get<double>(), share, 1e-12);
  EXPECT_EQ(rep["usage"]["prefix_share"]["prefix_chars"], 320);
  const std::string md = render_markdown(rep);
  EXPECT_NE(md.find(fmt::format("Prefix share: {:.1f}% of the prompt characters", 100 * share)), std::string::npos)
      << md;
}

TEST(PrefixShareOfARun, NullWhenNoPromptWasAsked) {
  run::RunData run;
  run.manifest = testing::fixture_manifest();
  run.records = testing::typed(testing::fixture_records());
  for (auto& r : run.records) {  // the same questions without their model calls
    r.context = context::ContextRecord{};
    r.candidates.clear();
    r.selections.clear();
    r.curve_calls.clear();
  }
  const json rep = build_report(run, ReportOptions{});
  EXPECT_TRUE(rep["usage"]["total"]["prefix_share"].is_null());
  EXPECT_EQ(render_markdown(rep).find("Prefix share:"), std::string::npos);
}

}  // namespace
}  // namespace nl2sql::report
