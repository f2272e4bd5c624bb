// Test helper: a selector's explanation, read into its family's struct (select/explanation.h),
// writes back the same bytes — so a selector that starts writing a key its family does not
// declare fails here, not in a run folder.
#pragma once

#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "nl2sql/select/explanation.h"

namespace nl2sql::testing {

inline void expect_explanation_round_trips(const nlohmann::json& written, const std::string& selector) {
  auto typed = select::explanation_from_json(written, selector, "selection \"" + selector + "\"");
  ASSERT_TRUE(typed.is_ok()) << typed.status().to_string() << "\n" << written.dump(1);
  EXPECT_EQ(select::to_json(*typed).dump(), written.dump()) << selector;
}

}  // namespace nl2sql::testing
