// The run's manifest: what makes two runs comparable (dataset fingerprint, result-relevant
// config hash, prompt hashes, models, questions), written to the run folder and compared on
// resume. Private to the pipeline layer.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "nl2sql/core/status.h"
#include "nl2sql/data/dataset.h"
#include "shared.h"

namespace nl2sql::pipeline {

// Every prompt template's hash, by name (a changed prompt changes results).
Result<nlohmann::json> prompt_hashes(const std::filesystem::path& dir);

nlohmann::json make_manifest(const Shared& s, const data::Dataset& ds, const std::string& fingerprint,
                             const std::vector<size_t>& picked, const nlohmann::json& prompts, bool simulated,
                             const std::vector<std::string>& used_profiles);

}  // namespace nl2sql::pipeline
