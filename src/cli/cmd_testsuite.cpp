// nl2sql testsuite build: distilled test suites for a benchmark's databases (eval/testsuite.h).
#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <iostream>
#include <memory>

#include "cli/command.h"
#include "cli/process_stats.h"
#include "cli/dataset_options.h"
#include "nl2sql/eval/testsuite.h"

namespace nl2sql::cli {
namespace {

struct TestSuiteArgs {
  DatasetOptions dataset;
  eval::SuiteOptions options;
  std::string out;
  std::string progress = "auto";
};

int run_build(TestSuiteArgs& a) {
  if (a.progress != "auto" && a.progress != "tty" && a.progress != "plain" && a.progress != "off") {
    spdlog::error("--progress: expected auto | tty | plain | off, got '{}'", a.progress);
    return kExitBadInput;
  }
  if (a.options.candidates == 0 || a.options.max_rows == 0) {
    spdlog::error("--candidates and --max-rows must be at least 1");
    return kExitBadInput;
  }
  auto ds = a.dataset.load();
  if (!ds) return kExitBadInput;
  a.options.out_dir = a.out;
  const bool tty = a.progress == "tty" || (a.progress == "auto" && isatty(STDERR_FILENO));
  const bool plain = a.progress == "plain";
  std::string last_db;
  auto progress = [&](const eval::SuiteProgress& p) {
    const bool original = p.phase == "original";
    std::string line =
        original ? fmt::format("[{}/{}] {}: gold queries and their neighbours on the original, {}/{}", p.db_index,
                               p.db_count, p.db_id, p.candidate, p.candidates)
                 : fmt::format("[{}/{}] {}: candidate {}/{}, {} kept, {}/{} neighbours still standing", p.db_index,
                               p.db_count, p.db_id, p.candidate, p.candidates, p.kept, p.standing, p.neighbours);
    if (tty) {
      std::fprintf(stderr, "\r\033[K%s", line.c_str());
      std::fflush(stderr);
    } else if (plain && (p.candidate % 10 == 0 || p.candidate == p.candidates || (!original && p.standing == 0))) {
      std::fprintf(stderr, "%s\n", line.c_str());
    }
  };
  auto t0 = std::chrono::steady_clock::now();
  auto suites = eval::build_test_suite(*ds, a.options, progress);
  if (tty) std::fprintf(stderr, "\r\033[K");
  if (!suites) {
    spdlog::error("{}", suites.status().message());
    return suites.status().code() == ErrorCode::kInvalidInput ? kExitBadInput : kExitFailure;
  }
  double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  size_t failed = 0;
  std::cout << fmt::format("{:<28} {:>7} {:>9} {:>9} {:>9} {:>8} {:>8} {:>8}\n", "database", "action", "variants",
                           "rows", "KiB", "original", "suite", "seconds");
  for (const auto& s : *suites) {
    if (s.action == "failed") {
      ++failed;
      std::cout << fmt::format("{:<28} {:>7}  {}\n", s.db_id, "failed", s.error);
      continue;
    }
    const auto& j = s.summary;
    const auto& n = j["neighbours"];
    const std::string original = n["original_coverage"].is_number()
                                     ? fmt::format("{:.1f}%", 100.0 * n["original_coverage"].get<double>())
                                     : "-";
    std::cout << fmt::format("{:<28} {:>7} {:>9} {:>9} {:>9.1f} {:>8} {:>7.1f}% {:>8.1f}\n", s.db_id, s.action,
                             j["variants"].size(), j.value("variant_rows", size_t{0}),
                             static_cast<double>(j.value("variant_bytes", uint64_t{0})) / 1024.0, original,
                             100.0 * n.value("coverage", 0.0),
                             j.contains("seconds") ? j["seconds"].value("total", 0.0) : 0.0);
  }
  auto m = eval::suite_manifest(*ds, a.options, *suites);
  const auto& t = m["total"];
  if (t["original_coverage"].is_number())
    std::cout << fmt::format(
        "{} databases: {} variants, {} rows; neighbours told apart from their gold: {} by the original alone, {} by "
        "the suite, of {} any candidate told apart (coverage {:.2f}%, original alone {:.2f}%)\n",
        suites->size(), t["variants"].get<size_t>(), t["variant_rows"].get<size_t>(),
        t["told_apart_by_original"].get<size_t>(), t["told_apart_by_suite"].get<size_t>(),
        t["told_apart_by_any_candidate"].get<size_t>(), 100.0 * t["coverage"].get<double>(),
        100.0 * t["original_coverage"].get<double>());
  else
    std::cout << fmt::format(
        "{} databases: {} variants, {} rows; neighbours told apart from their gold by the suite: {} of {} any "
        "candidate told apart (coverage {:.2f}%; the original was not checked)\n",
        suites->size(), t["variants"].get<size_t>(), t["variant_rows"].get<size_t>(),
        t["told_apart_by_suite"].get<size_t>(), t["told_apart_by_any_candidate"].get<size_t>(),
        100.0 * t["coverage"].get<double>());
  if (t.contains("held_out_coverage"))
    std::cout << fmt::format("  held-out candidates told apart {} more neighbour(s): coverage estimated at {:.2f}%\n",
                             t["told_apart_by_held_out_only"].get<size_t>(), 100.0 * t["held_out_coverage"].get<double>());
  std::cout << fmt::format("  {:.1f} s wall, peak RSS {:.1f} MB; manifest: {}\n", wall, peak_rss_mb(),
                           (a.options.out_dir / "manifest.json").string());
  std::cout << fmt::format("  use it: nl2sql eval … --metric spider-ts --test-suite {}\n", a.out);
  return failed ? kExitFailure : kExitOk;
}

RunFn setup_testsuite(CLI::App& parent) {
  auto args = std::make_shared<TestSuiteArgs>();
  auto* cmd = parent.add_subcommand("testsuite", "Distilled test suites (Zhong, Yu & Klein 2020)");
  cmd->require_subcommand(1);
  auto* build = cmd->add_subcommand(
      "build", "Generate and distil test-suite databases for each database of a benchmark (official layout)");
  args->dataset.add_to(*build);
  build->add_option("--out", args->out, "Suite folder: <out>/<db_id>/<db_id>.sqlite + variants, manifest.json")
      ->required();
  build->add_option("--db", args->options.databases, "Only these databases (repeatable)");
  build->add_option("--seed", args->options.seed, "Seed of every random choice")->capture_default_str();
  build->add_option("--candidates", args->options.candidates, "Candidate databases generated per database at most")
      ->capture_default_str();
  build->add_option("--max-databases", args->options.max_databases, "Variants kept per database at most")
      ->capture_default_str();
  build->add_option("--max-rows", args->options.max_rows, "Rows per table of a generated database: 1..N")
      ->capture_default_str();
  build->add_option("--pool-rows", args->options.pool_rows, "Rows sampled at random from each original table")
      ->capture_default_str();
  build->add_option("--lineage-rows", args->options.lineage_rows,
                    "Rows per table taken from what the gold queries read (0: none)")
      ->capture_default_str();
  build->add_option("--max-neighbours", args->options.max_neighbours, "Neighbour queries per gold query at most")
      ->capture_default_str();
  build->add_option("--timeout", args->options.query_timeout_s, "Seconds per query on a generated database")
      ->capture_default_str();
  build->add_option("--original-timeout", args->options.original_timeout_s, "Seconds per query on the original")
      ->capture_default_str();
  build->add_option("--held-out", args->options.held_out,
                    "Fresh candidates generated afterwards to estimate the neighbours the suite misses (0: none)")
      ->capture_default_str();
  build->add_flag_callback("--no-original-check", [args] { args->options.original_check = false; },
                           "Do not run the neighbour queries on the original (much faster at BIRD scale); the "
                           "original's own share of told-apart neighbours is then not reported");
  build->add_option("--threads", args->options.threads, "Worker threads (0: one per core)")->capture_default_str();
  build->add_option("--progress", args->progress, "auto | tty | plain | off")->capture_default_str();
  return [args, build]() -> int {
    if (build->parsed()) return run_build(*args);
    return kExitBadInput;
  };
}

NL2SQL_REGISTER_COMMAND("testsuite", setup_testsuite);

}  // namespace
}  // namespace nl2sql::cli
