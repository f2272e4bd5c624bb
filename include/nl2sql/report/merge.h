// Merging run stores: the shards of one run (`--shard I/N`, e.g. Slurm array tasks or
// Kubernetes indexed jobs) or several partial runs of the same config on the same data become
// one run folder with one report.
//
// Refused, with a message naming the run and what differs: inputs whose manifests disagree on
// config_hash, dataset_fingerprint, benchmark or split (the runs would not be comparable), and
// questions present in several inputs whose final records disagree (status, prediction or
// verdicts). An agreeing overlap keeps the first input's rows. The output store must not hold
// rows already. Thread-compatible: call from one thread.
#pragma once

#include <filesystem>
#include <vector>

#include <nlohmann/json.hpp>

#include "nl2sql/core/status.h"

namespace nl2sql::report {

struct MergeSummary {
  size_t inputs = 0;
  size_t questions = 0;       // distinct questions in the merged store
  size_t rows = 0;            // stage rows written
  size_t overlapping = 0;     // questions present in more than one input (all agreeing)
  nlohmann::json manifest;    // the merged manifest
};

Result<MergeSummary> merge_runs(const std::vector<std::filesystem::path>& inputs,
                                const std::filesystem::path& out_dir);

}  // namespace nl2sql::report
