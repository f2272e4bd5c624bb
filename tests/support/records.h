// Test helper: a run's final records as they are written (JSON), for tests that check the
// written layout rather than the typed record.
#pragma once

#include <vector>

#include <nlohmann/json.hpp>

#include "nl2sql/run/run_data.h"

namespace nl2sql::testing {

inline std::vector<nlohmann::json> written_records(const run::RunData& run) {
  std::vector<nlohmann::json> out;
  for (const auto& r : run.records) out.push_back(run::to_json(r));
  return out;
}

}  // namespace nl2sql::testing
