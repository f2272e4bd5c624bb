// The SimContext for a generation call about `question` (read by the sim provider only).
#pragma once

#include <cstdint>
#include <string>

#include "nl2sql/data/dataset.h"
#include "nl2sql/llm/sim_context.h"

namespace nl2sql::generate {

llm::SimContext sim_generate_context(const data::Question& question, const std::string& generator,
                                     int64_t sample_index);

}  // namespace nl2sql::generate
