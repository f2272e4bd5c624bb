// The offline `sim` provider: gold-derived answers with a controlled error rate. The simulator
// looks gold up itself from the dataset it is given; answers.cpp writes each task's answer,
// mistakes.cpp the SQL mistakes, outline.cpp the outlines plans and critiques come from.
#include "nl2sql/sim/simulator.h"

#include "answers.h"
#include "nl2sql/db/result_compare.h"

namespace nl2sql::sim {

using detail::Facts;
using llm::CallTask;
using llm::ChatResponse;
using llm::SimSettings;

Simulator::Simulator(SimSettings settings)
    : settings_(std::move(settings)), executor_(std::make_unique<db::Executor>()) {}

Simulator::~Simulator() = default;

void Simulator::add(const data::Question& q, const std::filesystem::path& db_path) {
  gold_[q.question_id] = Gold{q.gold_sql, q.difficulty, db_path};
}

void Simulator::add_all(const data::Dataset& ds) {
  for (const auto& q : ds.questions) {
    auto it = ds.db_paths.find(q.db_id);
    add(q, it == ds.db_paths.end() ? std::filesystem::path() : it->second);
  }
}

void Simulator::set_judge(std::function<bool(const std::string&, const std::string&)> judge) {
  judge_ = std::move(judge);
}

const Simulator::Gold* Simulator::gold_of(const std::string& question_id) const {
  auto it = gold_.find(question_id);
  return it == gold_.end() || it->second.gold_sql.empty() ? nullptr : &it->second;
}

bool Simulator::executes_like_gold(const std::string& question_id, const std::string& sql) const {
  const Gold* g = gold_of(question_id);
  if (g == nullptr || g->db_path.empty() || sql.empty()) return false;
  auto pred = executor_->run(g->db_path, sql);
  if (!pred.ok()) return false;
  std::optional<db::ExecutionResult> gold;
  {
    std::lock_guard lock(mu_);
    if (auto it = gold_results_.find(question_id); it != gold_results_.end()) gold = it->second;
  }
  if (!gold) {
    gold = executor_->run(g->db_path, g->gold_sql);
    std::lock_guard lock(mu_);
    gold_results_.emplace(question_id, *gold);
  }
  return gold->ok() && db::bird_equal(pred.result, gold->result);
}

bool Simulator::judged_correct(const std::string& question_id, const std::string& sql) const {
  if (judge_) return !sql.empty() && judge_(question_id, sql);
  return executes_like_gold(question_id, sql);
}

Result<ChatResponse> Simulator::answer(const llm::ChatRequest& request) const {
  const llm::CallTag& t = request.tag;
  Facts f;
  f.task = t.task;
  f.question_id = t.question_id;
  f.question = t.question;
  f.evidence = t.evidence;
  f.db_id = t.db_id;
  f.generator = t.generator;
  f.sample_index = t.sample_index;
  f.request_seed = request.seed;
  f.failing_sql = t.failing_sql;
  f.failure = t.failure;
  f.candidates = t.candidates;
  f.column = t.column;
  f.current_plan = t.current_plan;
  f.current_sql = t.current_sql;
  f.current_result_empty = t.current_result_empty;
  if (const Gold* g = gold_of(t.question_id)) {
    f.gold_sql = g->gold_sql;
    f.difficulty = g->difficulty;
    switch (t.task) {
      case CallTask::kSelectPair:
      case CallTask::kRank:
      case CallTask::kChoose:
        for (const auto& c : t.candidates) f.candidate_matches_gold.push_back(judged_correct(t.question_id, c));
        break;
      case CallTask::kNlEval:
        if (t.answer_on_instance) {
          auto a = t.answer_on_instance(g->gold_sql);
          if (a.is_ok()) f.gold_answer = *a;
        }
        break;
      case CallTask::kSqlCritique:
      case CallTask::kValidate:
        f.current_matches_gold = executes_like_gold(t.question_id, t.current_sql);
        break;
      default:
        break;
    }
  }
  return detail::answer_from(settings_, f, request.n);
}

std::shared_ptr<Simulator> attach(llm::ClientOptions& options, const SimSettings& settings,
                                  const data::Dataset* dataset) {
  auto sim = std::make_shared<Simulator>(settings);
  if (dataset) sim->add_all(*dataset);
  options.simulator = sim;
  return sim;
}

Result<std::shared_ptr<Simulator>> attach_if_simulated(llm::ClientOptions& options, const core::Config& config,
                                                       const data::Dataset* dataset) {
  auto settings = llm::load_llm_settings(config);
  if (!settings) return settings.status();
  for (const auto& [name, profile] : settings->profiles)
    if (profile.provider == "sim") return attach(options, settings->sim, dataset);
  return std::shared_ptr<Simulator>();
}

Result<std::unique_ptr<llm::Client>> make_client(const core::Config& config, const data::Dataset* dataset,
                                                 llm::ClientOptions options) {
  auto simulator = attach_if_simulated(options, config, dataset);
  if (!simulator) return simulator.status();
  return llm::Client::from_config(config, options);
}

}  // namespace nl2sql::sim
