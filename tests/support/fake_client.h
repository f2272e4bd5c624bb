// A model client for tests that talk to one fake server: one profile, "main", at the server's
// base URL, with no API key, no retries and no response cache (callers change what they need).
#pragma once

#include <memory>
#include <string>
#include <utility>

#include <gtest/gtest.h>

#include "nl2sql/llm/client.h"

namespace nl2sql::llm::testing {

inline LlmSettings one_profile_settings(const std::string& base_url, const std::string& model = "fake-model",
                                        double timeout_s = 5) {
  LlmSettings s;
  ModelProfile p;
  p.name = "main";
  p.base_url = base_url;
  p.model = model;
  p.api_key_env = "";
  p.timeout_s = timeout_s;
  s.profiles["main"] = p;
  s.default_profile = "main";
  s.retry.max_attempts = 1;
  s.cache.mode = CacheMode::kOff;
  return s;
}

inline std::unique_ptr<Client> client_from(const LlmSettings& settings) {
  auto c = Client::create(settings);
  EXPECT_TRUE(c.is_ok()) << c.status().to_string();
  return std::move(c).value();
}

}  // namespace nl2sql::llm::testing
