// Expert weights for the weighted-majority selectors (WMA / RWMA, after the SSEV method) and
// the pool bounds reported beside every selector.
//
// A WeightStore holds one weight per expert (a generator or a model profile), starting at 1.
// After each question whose gold answer is known the pipeline calls update() with which experts
// were right; every wrong expert's weight is multiplied by (1 − ε). The trajectory (weights
// after every update) is kept so the report can plot it, and the whole store round-trips
// through JSON so weights persist across runs in the run folder (save()/load()).
//
// Choosing ε: with n experts and m mistakes by the best expert, deterministic WMA makes at
// most 2(1 + ε)·m + 2·ln(n)/ε mistakes and randomized WMA at most (1 + ε)·m + ln(n)/ε in
// expectation. Both bounds are minimised at ε = sqrt(ln n / m); optimal_epsilon() computes it
// from the expected mistakes of the best expert (clamped to [0.01, 0.5]: the bounds assume
// ε ≤ 1/2).
//
// Thread-safety: every member function may be called from any thread (one mutex guards the
// state); select() of a voting selector reads a snapshot.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "nl2sql/core/status.h"

namespace nl2sql::select {

double optimal_epsilon(size_t experts, double expected_best_mistakes);

struct WeightStep {
  std::string question_id;
  std::map<std::string, bool> correct;     // the verdicts this step applied
  std::map<std::string, double> weights;  // after the step
};

class WeightStore {
 public:
  explicit WeightStore(double epsilon = 0.05) : epsilon_(epsilon) {}

  double epsilon() const { return epsilon_; }
  // Weight of an expert (1 for experts never seen).
  double weight(const std::string& expert) const;
  std::map<std::string, double> snapshot() const;
  // Multiplies the weight of every expert marked false by (1 − ε); experts marked true keep
  // theirs. Experts not seen before start at 1. Appends a trajectory step.
  void update(const std::map<std::string, bool>& expert_correct,
              const std::string& question_id = "");
  std::vector<WeightStep> trajectory() const;

  nlohmann::json to_json() const;
  static Result<WeightStore> from_json(const nlohmann::json& json, const std::string& label);
  Status save(const std::filesystem::path& path) const;
  // Missing file: a fresh store with `epsilon`. A file's own epsilon wins.
  static Result<WeightStore> load(const std::filesystem::path& path, double epsilon);

  WeightStore(const WeightStore& other);
  WeightStore& operator=(const WeightStore& other);

 private:
  mutable std::mutex mu_;
  double epsilon_;                         // guarded by mu_ (set on copy only)
  std::map<std::string, double> weights_;  // guarded by mu_
  std::vector<WeightStep> trajectory_;     // guarded by mu_
};

// Bounds of a pool from per-candidate verdicts (true: matches gold). The oracle picks a
// correct candidate whenever one exists; the adversary picks a wrong one whenever one exists
// (a pool of only correct candidates still scores). Empty pool: both false.
bool oracle_bound(const std::vector<bool>& matches);
bool adversarial_bound(const std::vector<bool>& matches);

}  // namespace nl2sql::select
