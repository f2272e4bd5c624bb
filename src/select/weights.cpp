// Expert weights for WMA / RWMA and the pool bounds.
#include "nl2sql/select/weights.h"

#include <algorithm>
#include <cmath>

#include "nl2sql/core/files.h"

namespace nl2sql::select {

double optimal_epsilon(size_t experts, double expected_best_mistakes) {
  if (experts < 2 || expected_best_mistakes <= 0) return 0.5;
  double e = std::sqrt(std::log(static_cast<double>(experts)) / expected_best_mistakes);
  return std::clamp(e, 0.01, 0.5);
}

WeightStore::WeightStore(const WeightStore& other) {
  std::lock_guard<std::mutex> lock(other.mu_);
  epsilon_ = other.epsilon_;
  weights_ = other.weights_;
  trajectory_ = other.trajectory_;
}

WeightStore& WeightStore::operator=(const WeightStore& other) {
  if (this == &other) return *this;
  std::scoped_lock lock(mu_, other.mu_);
  epsilon_ = other.epsilon_;
  weights_ = other.weights_;
  trajectory_ = other.trajectory_;
  return *this;
}

double WeightStore::weight(const std::string& expert) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = weights_.find(expert);
  return it == weights_.end() ? 1.0 : it->second;
}

std::map<std::string, double> WeightStore::snapshot() const {
  std::lock_guard<std::mutex> lock(mu_);
  return weights_;
}

void WeightStore::update(const std::map<std::string, bool>& expert_correct,
                         const std::string& question_id) {
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [expert, correct] : expert_correct) {
    auto [it, fresh] = weights_.emplace(expert, 1.0);
    if (!correct) it->second *= (1.0 - epsilon_);
  }
  trajectory_.push_back({question_id, expert_correct, weights_});
}

std::vector<WeightStep> WeightStore::trajectory() const {
  std::lock_guard<std::mutex> lock(mu_);
  return trajectory_;
}

nlohmann::json WeightStore::to_json() const {
  std::lock_guard<std::mutex> lock(mu_);
  nlohmann::json steps = nlohmann::json::array();
  for (const auto& s : trajectory_)
    steps.push_back({{"question_id", s.question_id}, {"correct", s.correct}, {"weights", s.weights}});
  return {{"epsilon", epsilon_}, {"weights", weights_}, {"trajectory", steps}};
}

Result<WeightStore> WeightStore::from_json(const nlohmann::json& j, const std::string& label) {
  try {
    if (!j.is_object() || !j.contains("epsilon") || !j.at("epsilon").is_number())
      return invalid_input(label + ": expected an object with a numeric \"epsilon\"");
    WeightStore store(j.at("epsilon").get<double>());
    if (j.contains("weights")) store.weights_ = j.at("weights").get<std::map<std::string, double>>();
    if (j.contains("trajectory"))
      for (const auto& s : j.at("trajectory"))
        store.trajectory_.push_back({s.value("question_id", std::string()),
                                     s.value("correct", std::map<std::string, bool>()),
                                     s.value("weights", std::map<std::string, double>())});
    return store;
  } catch (const nlohmann::json::exception& e) {
    return invalid_input(label + ": " + e.what());
  }
}

Status WeightStore::save(const std::filesystem::path& path) const {
  return core::write_file_atomic(path, to_json().dump(2) + "\n");
}

Result<WeightStore> WeightStore::load(const std::filesystem::path& path, double epsilon) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return WeightStore(epsilon);
  auto text = core::read_file(path);
  if (!text.is_ok()) return text.status();
  nlohmann::json j = nlohmann::json::parse(*text, nullptr, false);
  if (j.is_discarded()) return invalid_input(path.string() + ": not JSON");
  return from_json(j, path.string());
}

bool oracle_bound(const std::vector<bool>& matches) {
  return std::any_of(matches.begin(), matches.end(), [](bool m) { return m; });
}

bool adversarial_bound(const std::vector<bool>& matches) {
  return !matches.empty() && std::all_of(matches.begin(), matches.end(), [](bool m) { return m; });
}

}  // namespace nl2sql::select
