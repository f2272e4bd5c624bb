// Hand-built candidate pools for the selector tests: result sets, values, candidates, a
// question with its selection input, and a client of a fake model server.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "nl2sql/data/dataset.h"
#include "nl2sql/db/executor.h"
#include <gtest/gtest.h>

#include "nl2sql/llm/client.h"
#include "nl2sql/select/selector.h"
#include "support/fake_client.h"
#include "support/fake_openai_server.h"

namespace nl2sql::select::testing {

inline db::ResultSet rs(std::vector<db::Row> rows, size_t cols = 1) {
  db::ResultSet r;
  for (size_t c = 0; c < cols; ++c) r.columns.push_back("c" + std::to_string(c));
  r.rows = std::move(rows);
  return r;
}
inline db::Value I(int64_t v) { return db::Value::integer(v); }
inline db::Value T(const std::string& s) { return db::Value::text(s); }
inline db::Value N() { return db::Value::null(); }

// A candidate of generator `gen` (profile "p_<gen>"); no result: not executable.
inline PoolCandidate cand(std::string id, std::string gen, std::string sql, std::optional<db::ResultSet> r) {
  PoolCandidate c;
  c.id = std::move(id);
  c.generator = std::move(gen);
  c.profile = "p_" + c.generator;
  c.sql = std::move(sql);
  if (r) {
    db::ExecutionResult e;
    e.result = std::move(*r);
    c.result = std::make_shared<const db::ExecutionResult>(std::move(e));
  }
  return c;
}

// A question "Which value?" and its selection input (generators dc, qp, os in that order).
struct Pool {
  data::Question question;
  SelectionInput input;
  explicit Pool(std::string question_id = "q7", uint64_t seed = 0) {
    question.question_id = std::move(question_id);
    question.question = "Which value?";
    input.question = &question;
    input.generator_order = {"dc", "qp", "os"};
    input.seed = seed;
  }
};

// A client with one profile, "main", served by `server`: no retries, no cache.
inline std::unique_ptr<llm::Client> fake_client(const llm::testing::FakeOpenAiServer& server) {
  return llm::testing::client_from(llm::testing::one_profile_settings(server.base_url()));
}

}  // namespace nl2sql::select::testing
