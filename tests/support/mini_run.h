// Run options for a pipeline run over the bundled mini BIRD set (testing::build_mini_bird),
// shared by the tests that run the whole pipeline against fake servers: no progress output,
// the value index in a folder of the test's own.
#pragma once

#include <filesystem>

#include "nl2sql/core/config.h"
#include "nl2sql/pipeline/pipeline.h"
#include "nl2sql/report/run_report.h"
#include "support/test_env.h"

namespace nl2sql::testing {

inline pipeline::RunOptions mini_run_options(const core::Config& config, const std::filesystem::path& data,
                                             const std::filesystem::path& out,
                                             const std::filesystem::path& index_dir) {
  pipeline::RunOptions o;
  o.config = config;
  o.dataset.benchmark = data::Benchmark::kBird;
  o.dataset.data_dir = data;
  o.out_dir = out;
  o.index_dir = index_dir;
  o.progress = pipeline::ProgressMode::kOff;
  return o;
}

// The bundled mini BIRD set built under `root` (build_mini_bird) and loaded as a run loads it.
inline Result<data::Dataset> load_mini_bird(const std::filesystem::path& root) {
  data::DatasetSpec spec;
  spec.benchmark = data::Benchmark::kBird;
  spec.data_dir = build_mini_bird(root);
  return data::load_dataset(spec);
}

// What `nl2sql run` does: the pipeline, then the reports of its run folder (when it returned).
inline Result<pipeline::RunSummary> run_and_report(const pipeline::RunOptions& options) {
  auto summary = pipeline::run(options);
  if (summary.is_ok()) {
    Status st = report::write_run_reports(options.out_dir);
    if (!st.is_ok()) return st;
  }
  return summary;
}

}  // namespace nl2sql::testing
