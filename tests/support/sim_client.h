// A model client for tests whose config may define simulated profiles: the simulator is
// attached and given `dataset`'s gold (as `nl2sql` commands and the pipeline do).
#pragma once

#include <memory>

#include "nl2sql/core/config.h"
#include "nl2sql/data/dataset.h"
#include "nl2sql/llm/client.h"
#include "nl2sql/sim/simulator.h"

namespace nl2sql::testing {

inline Result<std::unique_ptr<llm::Client>> client_with_sim(const core::Config& config,
                                                            const data::Dataset* dataset = nullptr,
                                                            llm::ClientOptions options = {}) {
  auto simulator = sim::attach_if_simulated(options, config, dataset);
  if (!simulator) return simulator.status();
  return llm::Client::from_config(config, options);
}

}  // namespace nl2sql::testing
