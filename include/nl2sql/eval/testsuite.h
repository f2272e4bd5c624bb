// Distilled test suites (Zhong, Yu & Klein, EMNLP 2020): for each database of a benchmark, a few
// small generated databases on which a wrong query that agrees with the gold on the original
// database most likely disagrees. `nl2sql testsuite build` writes them in the official layout
// (`<out>/<db_id>/<db_id>.sqlite` = the original, plus `<db_id>_tsNN.sqlite` variants), which
// `nl2sql eval --test-suite` and the official test-suite evaluator both read.
//
// Per database, the build
//  1. takes every distinct gold query of the questions on it and its neighbour queries
//     (sql/neighbours.h), runs each neighbour on the original and keeps those that run; the
//     ones the original already tells apart from their gold need nothing more;
//  2. samples value pools from the original: rows picked at random plus the rows the gold
//     queries touch (their lineage, sql/lineage.h), every gold literal compared with a column and
//     its perturbation (sql::perturb_text, number ± 1); the pools keep the observed distribution
//     (values repeat as often as in the sample) and NULL shares;
//  3. generates candidate databases one after another (seed, database and index fix each one):
//     tables in foreign-key order, 1..max_rows rows each, a row being a sampled real row with
//     some values redrawn from the pools or perturbed, foreign keys drawn from the parent's
//     generated keys, primary keys and UNIQUE / NOT NULL / CHECK constraints kept by the schema
//     itself (a row it refuses is drawn again). A candidate on which a gold query fails or
//     returns an answer that depends on tie order (eval tie check) is rejected, so a correct
//     prediction cannot fail on the suite for that reason — unless that gold's answer already
//     depends on tie order on the original (eval flags the question there; the variants where it
//     does too are listed in the summary);
//  4. screens each candidate on the neighbours not yet told apart and keeps it when it tells
//     some apart; then distils greedily (the paper's §4): the kept candidate that tells apart the
//     most neighbours still standing goes in first, and so on, up to max_databases.
// Two queries are told apart on a database when one fails and the other runs, or their answers
// differ under the test-suite equality (order compared when the gold has ORDER BY).
//
// Resumable per database: a database whose folder holds a suite.json written with the same
// options and gold queries is kept as is; any other is rebuilt. Deterministic: the same options
// and seed give byte-identical files. The manifest (<out>/manifest.json) records options, seeds,
// coverage, sizes and times per database and in total.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "nl2sql/core/status.h"
#include "nl2sql/data/dataset.h"

namespace nl2sql::eval {

struct SuiteOptions {
  std::filesystem::path out_dir;
  std::vector<std::string> databases;  // empty: every database with questions
  uint64_t seed = 1;
  size_t candidates = 100;             // candidate databases generated per database at most
  size_t max_databases = 10;           // variants kept per database at most
  size_t max_rows = 20;                // rows per table of a generated database: 1..max_rows
  size_t pool_rows = 200;              // rows sampled from the original per table (random)
  size_t lineage_rows = 200;           // rows per table taken from the gold queries' lineage
  size_t max_neighbours = 200;         // per gold query
  double query_timeout_s = 5.0;        // per query on a generated database
  double original_timeout_s = 30.0;    // per query on the original database
  // Fresh candidates generated after the build to estimate what the suite misses: neighbours
  // they tell apart that neither the original nor the suite does (0: no estimate).
  size_t held_out = 0;
  // Run every neighbour on the original to count what it already tells apart (the baseline
  // the coverage figures compare with). Off: neighbours are only compiled there, every one is
  // screened on the candidates, and the original's share is not reported. At BIRD scale the
  // check is most of the build's time (each neighbour is a query over the whole database).
  bool original_check = true;
  size_t threads = 0;                  // 0: one per core
};

// What one database's build produced (also its suite.json).
struct DatabaseSuite {
  std::string db_id;
  std::string action;                  // "built" | "kept" (resumed) | "failed"
  std::string error;                   // when failed
  nlohmann::ordered_json summary;      // the suite.json body
};

struct SuiteProgress {
  std::string phase;  // "original" (golds done of golds) | "candidates" (candidates done)
  std::string db_id;
  size_t db_index = 0, db_count = 0;
  size_t candidate = 0, candidates = 0, kept = 0;  // in "original": golds done, golds
  size_t standing = 0, neighbours = 0;  // neighbours not yet told apart / in all
};

// Builds (or resumes) the suite of every selected database; one database that fails is reported
// and the others go on. Errors: an unknown database name, an output folder that cannot be made.
Result<std::vector<DatabaseSuite>> build_test_suite(
    const data::Dataset& ds, const SuiteOptions& options,
    const std::function<void(const SuiteProgress&)>& progress = {});

// <out>/manifest.json from the per-database results.
nlohmann::ordered_json suite_manifest(const data::Dataset& ds, const SuiteOptions& options,
                                      const std::vector<DatabaseSuite>& suites);

}  // namespace nl2sql::eval
