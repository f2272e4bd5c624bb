// The run's manifest: what makes two runs comparable (dataset fingerprint, result-relevant
// config hash, the prompt templates used, models, questions), written to the run folder and
// compared on resume. Private to the pipeline layer.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "nl2sql/core/status.h"
#include "nl2sql/data/dataset.h"
#include "nl2sql/llm/prompt_library.h"
#include "shared.h"

namespace nl2sql::pipeline {

// The templates a run used, for the manifest's "templates": [{name, file, source, hash}] (a
// changed prompt changes results). `file` is written only when a `template` key chose it.
nlohmann::json templates_json(const std::vector<llm::TemplateUse>& used);

nlohmann::json make_manifest(const Shared& s, const data::Dataset& ds, const std::string& fingerprint,
                             const std::vector<size_t>& picked, const nlohmann::json& prompts, bool simulated,
                             const std::vector<std::string>& used_profiles);

}  // namespace nl2sql::pipeline
