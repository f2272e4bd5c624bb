// The model client of a command: the config's profiles, plus the offline simulator when a
// profile is simulated (it reads gold from `dataset`, when the command has one; keyword and
// description calls need none).
#pragma once

#include <memory>

#include "nl2sql/core/config.h"
#include "nl2sql/core/status.h"
#include "nl2sql/data/dataset.h"
#include "nl2sql/llm/client.h"
#include "nl2sql/sim/simulator.h"

namespace nl2sql::cli {

inline Result<std::unique_ptr<llm::Client>> make_model_client(const core::Config& config,
                                                              const data::Dataset* dataset = nullptr) {
  llm::ClientOptions options;
  auto simulator = sim::attach_if_simulated(options, config, dataset);
  if (!simulator) return simulator.status();
  return llm::Client::from_config(config, options);
}

}  // namespace nl2sql::cli
