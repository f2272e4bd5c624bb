// The outside-program selector: select.external.<label> names a program (generate's
// OutsideProgram protocol) that chooses one candidate per question. Private to the select layer
// (make_selector_named builds it when a method names a label of select.external).
#pragma once

#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "nl2sql/core/config.h"
#include "nl2sql/select/selector.h"

namespace nl2sql::select {

// Its traits: it may ask the model (role select) and its pick may follow the seed.
SelectorTraits external_traits();
// The config item select.external.<label>, or null when there is none.
const nlohmann::json* external_item(const core::Config& config, const std::string& label);
Result<std::unique_ptr<Selector>> make_external_selector(const std::string& label, const core::Config& config,
                                                         const SelectorServices& services);

// The request line of a question (exposed for tests); the protocol fields are added by
// OutsideProgram::ask.
nlohmann::json selection_request(const SelectionInput& input);

}  // namespace nl2sql::select
