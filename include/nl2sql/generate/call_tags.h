// The CallTag of a generation call about `task` (llm/call_tag.h: what the call is for, never
// gold), shared by the generators, the agents and the fixer.
#pragma once

#include <cstdint>
#include <string>

#include "nl2sql/data/dataset.h"
#include "nl2sql/llm/call_tag.h"

namespace nl2sql::generate {

llm::CallTag generation_tag(const data::Task& task, const std::string& generator, int64_t sample_index);

}  // namespace nl2sql::generate
