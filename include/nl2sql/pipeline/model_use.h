// Which model roles and profiles a config will call, read from the config alone (before any
// stage runs): the preflight checks exactly these, and a run is labelled simulated only when
// one of them is a sim profile — a sim profile that is merely defined changes nothing.
#pragma once

#include <string>
#include <vector>

#include "nl2sql/core/config.h"
#include "nl2sql/core/status.h"

namespace nl2sql::pipeline {

struct ModelUse {
  std::vector<std::string> roles;     // llm roles the stages will call (resolved via llm.roles)
  std::vector<std::string> profiles;  // profiles named directly (generator profiles, fix.profile)
};

// `selectors`: the selector methods the run uses (run.selectors plus the primary one).
Result<ModelUse> model_use(const core::Config& config, const std::vector<std::string>& selectors);

// The selector methods a config runs (run.selectors, run.primary_selector or select.method).
std::vector<std::string> configured_selectors(const core::Config& config);

}  // namespace nl2sql::pipeline
