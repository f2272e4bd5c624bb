// Selectors that are outside programs (select.external.<label>, src/select/external_selector.cpp,
// speaking generate/outside_program.h's protocol): their labels are method names wherever a
// built-in method's name is (select.method, run.selectors, run.curve_selectors), and the
// pipeline asks their traits through this overload. make_selector_named() builds them.
#pragma once

#include <string>

#include "nl2sql/core/config.h"
#include "nl2sql/select/selector.h"

namespace nl2sql::select {

// method_traits(method), where `method` may also be the label of an outside program under
// select.external.<label> (its traits: may ask role select, follows the seed).
Result<SelectorTraits> method_traits(const std::string& method, const core::Config& config);

}  // namespace nl2sql::select
