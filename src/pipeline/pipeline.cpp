#include "nl2sql/pipeline/pipeline.h"
#include "nl2sql/pipeline/model_use.h"
#include "nl2sql/run/run_lock.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "nl2sql/context/question_context.h"
#include "nl2sql/core/files.h"
#include "nl2sql/core/hash.h"
#include "nl2sql/core/log.h"
#include "nl2sql/core/thread_pool.h"
#include "nl2sql/db/executor.h"
#include "nl2sql/db/result_cache.h"
#include "nl2sql/eval/evaluator.h"
#include "nl2sql/fix/fixer.h"
#include "nl2sql/generate/generator.h"
#include "nl2sql/llm/client.h"
#include "nl2sql/llm/prompt_template.h"
#include "progress.h"
#include "nl2sql/run/run_data.h"
#include "nl2sql/run/run_store.h"
#include "nl2sql/select/clusters.h"
#include "nl2sql/select/selector.h"
#include "nl2sql/select/weights.h"
#include "nl2sql/sim/simulator.h"
#include "nl2sql/sql/features.h"
#include "nl2sql/sql/parser.h"

namespace nl2sql::pipeline {
namespace fs = std::filesystem;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

namespace {

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

uint64_t derive_seed(uint64_t run_seed, const std::string& question_id, const std::string& stage) {
  return core::xxh64(question_id + '\x1f' + stage, run_seed);
}

std::string utc_now() {
  auto t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

// Settings of the run itself (run.*, eval.*), read once; errors name the key.
struct RunSettings {
  uint64_t seed = 0;
  size_t threads = 8;
  size_t sql_threads = 0;
  std::optional<double> max_cost_usd;
  std::vector<std::string> selectors;
  std::string primary_selector;
  std::vector<size_t> curve_points{1, 3, 7, 21};
  bool curve_selector = true;
  std::vector<eval::Metric> metrics;
  double timeout_s = 30;
  size_t row_cap = 100000;
};

Result<RunSettings> load_run_settings(const core::Config& config, data::Benchmark benchmark) {
  RunSettings s;
  auto seed = config.get_int("run.seed", 0);
  if (!seed) return seed.status();
  s.seed = static_cast<uint64_t>(*seed);
  // 0 = automatic: questions in parallel up to the LLM layer's global in-flight limit (each
  // question mostly waits on the model), SQL on one thread per core.
  auto threads = config.get_int("run.threads", 0);
  if (!threads) return threads.status();
  if (*threads < 0) return invalid_input("config key run.threads: must be >= 0 (0: automatic)");
  auto in_flight = config.get_int("llm.max_in_flight", 64);
  if (!in_flight) return in_flight.status();
  s.threads = *threads > 0 ? static_cast<size_t>(*threads)
                           : static_cast<size_t>(std::clamp<int64_t>(*in_flight, 1, 64));
  auto sql_threads = config.get_int("run.sql_threads", 0);
  if (!sql_threads) return sql_threads.status();
  if (*sql_threads < 0) return invalid_input("config key run.sql_threads: must be >= 0 (0: one per core)");
  s.sql_threads = *sql_threads > 0 ? static_cast<size_t>(*sql_threads) : core::default_threads();
  if (config.has("run.max_cost_usd") && !config.find("run.max_cost_usd")->is_null()) {
    auto c = config.get_number("run.max_cost_usd");
    if (!c) return c.status();
    s.max_cost_usd = *c;
  }
  if (const json* sel = config.find("run.selectors")) {
    if (!sel->is_array()) return invalid_input("config key run.selectors: expected a list of selector names");
    for (const auto& v : *sel) {
      if (!v.is_string()) return invalid_input("config key run.selectors: expected a list of selector names");
      s.selectors.push_back(v.get<std::string>());
    }
  }
  auto method = config.get_string("select.method", "self_consistency");
  if (!method) return method.status();
  auto primary = config.get_string("run.primary_selector", *method);
  if (!primary) return primary.status();
  s.primary_selector = *primary;
  if (std::find(s.selectors.begin(), s.selectors.end(), s.primary_selector) == s.selectors.end())
    s.selectors.insert(s.selectors.begin(), s.primary_selector);
  if (const json* cp = config.find("run.curve_points")) {
    if (!cp->is_array()) return invalid_input("config key run.curve_points: expected a list of integers");
    s.curve_points.clear();
    for (const auto& v : *cp) {
      if (!v.is_number_integer() || v.get<int64_t>() < 1)
        return invalid_input("config key run.curve_points: expected positive integers");
      s.curve_points.push_back(v.get<size_t>());
    }
  }
  auto curve_sel = config.get_bool("run.curve_selector", true);
  if (!curve_sel) return curve_sel.status();
  s.curve_selector = *curve_sel;
  // "auto": the benchmark's official metric first (it decides correctness), relaxed beside it.
  std::string metrics = "auto";
  if (const json* m = config.find("eval.metrics")) {
    if (m->is_string()) {
      metrics = m->get<std::string>();
    } else if (m->is_array()) {
      metrics.clear();
      for (const auto& v : *m) {
        if (!v.is_string()) return invalid_input("config key eval.metrics: expected metric names");
        metrics += (metrics.empty() ? "" : ",") + v.get<std::string>();
      }
    } else {
      return invalid_input("config key eval.metrics: expected a metric name or a list of them");
    }
  }
  if (metrics == "auto")
    metrics = benchmark == data::Benchmark::kSpider ? "spider-ts,relaxed" : "bird,relaxed";
  auto parsed = eval::parse_metrics(metrics);
  if (!parsed) return invalid_input("config key eval.metrics: " + parsed.status().message());
  s.metrics = *parsed;
  auto timeout = config.get_number("eval.timeout_s", 30.0);
  if (!timeout) return timeout.status();
  s.timeout_s = *timeout;
  auto row_cap = config.get_int("eval.row_cap", 100000);
  if (!row_cap) return row_cap.status();
  s.row_cap = static_cast<size_t>(std::max<int64_t>(0, *row_cap));
  return s;
}

// Every prompt template's hash, by name (a changed prompt changes results).
Result<json> prompt_hashes(const fs::path& dir) {
  json out = json::object();
  std::error_code ec;
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(dir, ec))
    if (entry.path().extension() == ".txt") files.push_back(entry.path());
  if (ec) return io_error("cannot list prompts folder " + dir.string() + ": " + ec.message());
  std::sort(files.begin(), files.end());
  for (const auto& f : files) {
    auto t = llm::PromptTemplate::load(f);
    if (!t) return t.status();
    out[f.stem().string()] = t->hash();
  }
  return out;
}

// Sums a list of call traces (JSON) into a stage's usage.
void add_calls(std::map<std::string, run::StageUsage>& usage, const std::string& stage, const json& calls) {
  if (!calls.is_array()) return;
  run::StageUsage& u = usage[stage];
  for (const auto& c : calls) {
    u.calls += 1;
    u.prompt_tokens += c.value("prompt_tokens", int64_t{0});
    u.completion_tokens += c.value("completion_tokens", int64_t{0});
    u.cost_usd += c.value("cost_usd", 0.0);
    u.latency_s += c.value("latency_s", 0.0);
    // Prompts whose schema was lightened to fit the model's context (the ladder's rung > 0).
    if (c.value("prompt_rung", 0) > 0) u.degraded_prompts += 1;
  }
}

// Model calls that failed (after their retries), the retries themselves, and the answers of
// successful calls that no reader could use (parse failures, by the stage that read them),
// between two snapshots of one question's accounting: what a stage's result cost in faults
// survived.
run::LlmFaults llm_faults_between(const llm::UsageTotals& before, const llm::UsageTotals& after) {
  auto diff = [](const std::map<std::string, int64_t>& b, const std::map<std::string, int64_t>& a) {
    std::map<std::string, int64_t> out;
    for (const auto& [k, v] : a) {
      auto it = b.find(k);
      int64_t d = v - (it == b.end() ? 0 : it->second);
      if (d > 0) out[k] = d;
    }
    return out;
  };
  run::LlmFaults f;
  f.failed_calls = after.errors - before.errors;
  f.retries = after.retries - before.retries;
  f.failed_by_kind = diff(before.errors_by_kind, after.errors_by_kind);
  f.parse_failures = after.parse_failures - before.parse_failures;
  f.parse_failures_by_stage = diff(before.parse_failures_by_stage, after.parse_failures_by_stage);
  return f;
}

// The store's final records, typed (this build writes them, so they read at its version).
Result<std::vector<run::QuestionRecord>> final_records(const run::RunStore& store, const fs::path& dir) {
  auto rows = store.final_records();
  if (!rows) return rows.status();
  std::vector<run::QuestionRecord> out;
  for (const auto& r : *rows) {
    auto rec = run::record_from_json(r);
    if (!rec) return rec.status().with_context((dir / run::RunStore::kFileName).string());
    out.push_back(std::move(*rec));
  }
  return out;
}

run::Verdict verdict_of(const eval::ItemResult& item) {
  run::Verdict v;
  v.verdicts = item.verdicts;
  v.outcome = item.outcome;
  v.soft_f1 = item.soft_f1;
  v.pred_status = item.pred_status;
  v.error = item.error;
  v.gold_status = item.gold_status;
  v.gold_error = item.gold_error;
  v.gold_unusable = item.gold_unusable;
  v.gold_tie_dependent = item.gold_tie_dependent;
  v.pred_rows = static_cast<int64_t>(item.pred_rows);
  v.gold_rows = static_cast<int64_t>(item.gold_rows);
  v.difficulty = item.difficulty;
  return v;
}

// Rebuilds the retrieval a generator needs from the stored context payload.
context::Retrieval retrieval_from_json(const json& ctx) {
  context::Retrieval r;
  for (const auto& k : ctx.value("keywords", json::array()))
    r.keywords.push_back({k.value("text", ""), k.value("source", "")});
  for (const auto& v : ctx.value("values", json::array())) {
    context::ValueMatch m;
    m.table = v.value("table", "");
    m.column = v.value("column", "");
    m.value = v.value("value", "");
    m.score = v.value("score", 0.0);
    m.keyword = v.value("keyword", "");
    r.values.push_back(std::move(m));
  }
  for (const auto& c : ctx.value("columns", json::array())) {
    context::ColumnMatch m;
    m.table = c.value("table", "");
    m.column = c.value("column", "");
    m.score = c.value("score", 0.0);
    m.keyword = c.value("keyword", "");
    m.via = c.value("via", "");
    r.columns.push_back(std::move(m));
  }
  return r;
}

// Interleaves candidates generator by generator (dc#0, qp#0, os#0, dc#1, …) so that the first k
// of the order are a fair small pool for the curves vs number of candidates.
std::vector<int> interleaved_order(const std::vector<generate::Candidate>& cands,
                                   const std::vector<std::string>& generator_order) {
  std::map<std::string, std::vector<int>> by_gen;
  std::vector<std::string> gens;
  for (size_t i = 0; i < cands.size(); ++i) {
    if (!by_gen.count(cands[i].generator)) gens.push_back(cands[i].generator);
    by_gen[cands[i].generator].push_back(static_cast<int>(i));
  }
  std::stable_sort(gens.begin(), gens.end(), [&](const std::string& a, const std::string& b) {
    auto pa = std::find(generator_order.begin(), generator_order.end(), a) - generator_order.begin();
    auto pb = std::find(generator_order.begin(), generator_order.end(), b) - generator_order.begin();
    return pa < pb;
  });
  std::vector<int> order;
  for (size_t round = 0; order.size() < cands.size(); ++round)
    for (const auto& g : gens)
      if (round < by_gen[g].size()) order.push_back(by_gen[g][round]);
  return order;
}

// Everything one run shares across questions. Immutable after setup except where noted.
struct Shared {
  const RunOptions* options = nullptr;
  RunSettings settings;
  const data::Dataset* ds = nullptr;
  core::Config config;
  fs::path prompts_dir;
  std::unique_ptr<llm::Client> client;
  std::unique_ptr<db::Executor> executor;
  std::unique_ptr<db::ResultCache> exec_cache;
  std::unique_ptr<eval::ItemJudge> judge;
  std::unique_ptr<context::ContextBuilder> context;
  std::vector<std::unique_ptr<generate::Generator>> generators;
  std::vector<std::string> generator_names;
  std::optional<fix::Fixer> fixer;
  std::map<std::string, std::unique_ptr<select::Selector>> selectors;
  std::shared_ptr<select::WeightStore> weights;  // null unless a voting selector runs
  std::map<std::string, std::string> fingerprints;  // db_id → database fingerprint
  run::RunStore* store = nullptr;
  Progress* progress = nullptr;

  // Sequencing of the select stage for weighted voting (question t waits for t−1).
  std::vector<std::string> order;  // question ids in run order
  std::mutex seq_mu;
  std::condition_variable seq_cv;
  size_t seq_next = 0;             // guarded by seq_mu
  std::set<size_t> seq_done;       // guarded by seq_mu: positions finished out of order
};

bool uses_weights(const std::string& selector) {
  return selector == "wma" || selector == "rwma" || selector == "naive_vote";
}

// When every candidate lacks SQL because its model call failed, the first call error (the
// reason the question could not be attempted); nullopt when any model call answered.
std::optional<std::string> all_model_calls_failed(const std::vector<generate::Candidate>& candidates) {
  if (candidates.empty()) return std::nullopt;
  std::string first;
  for (const auto& c : candidates) {
    if (!c.sql.empty()) return std::nullopt;
    bool failed_call = false;
    for (const auto& call : c.calls) {
      if (call.error.empty()) return std::nullopt;
      failed_call = true;
      if (first.empty()) first = call.error;
    }
    if (!failed_call) return std::nullopt;
  }
  return "every model call failed (" + std::to_string(candidates.size()) + " candidates); first: " + first;
}

class QuestionRun {
 public:
  QuestionRun(Shared& shared, const data::Question& q, size_t position)
      : s_(shared), q_(q), task_(q.task()), position_(position) {}

  // Runs the missing stages; returns the final record (status "error" when a stage failed).
  run::QuestionRecord run();

 private:
  Status stage_context();
  Status stage_generate();
  Status stage_fix();
  Status stage_judge();
  Status stage_select();
  run::QuestionRecord final_record();
  // The record's fields every outcome shares: the question, and the faults and candidates so far.
  run::QuestionRecord base_record() const;
  void wait_turn();
  void finish_turn();
  // The cancel flag, or the client stopped by an auth failure.
  bool cancelled() const { return s_.client->cancelled(); }
  llm::UsageTotals usage_now() { return s_.client->accounting().question(q_.question_id); }
  // Stores a finished stage with the faults its model calls survived — unless the run is
  // stopping: a stage finishing after a cancellation may have swallowed a cancelled call, and
  // storing it would make the resumed run differ from an uninterrupted one.
  Status put(const std::string& stage, json payload, const llm::UsageTotals& before) {
    if (cancelled()) return Status(ErrorCode::kCancelled, "run stopping: stage " + stage + " not stored");
    faults_[stage] = llm_faults_between(before, usage_now());
    payload["llm_faults"] = run::to_json(faults_[stage]);
    return s_.store->put_stage(q_.question_id, static_cast<int64_t>(q_.index), stage, run::kStageDone,
                               payload);
  }
  std::optional<json> stored(const std::string& stage) {
    auto r = s_.store->get_stage(q_.question_id, stage);
    if (!r || !r->has_value()) return std::nullopt;
    // Faults unreadable in a stored stage count as none (the stage's result itself is intact).
    auto faults = run::faults_from_json((**r).value("llm_faults", json()), "stage " + stage);
    faults_[stage] = faults ? *faults : run::LlmFaults{};
    return **r;
  }
  // Candidates from a stored generate/fix payload (replacing any in memory).
  Status load_candidates(const json& payload) {
    candidates_.clear();
    for (const auto& c : payload.value("candidates", json::array())) {
      auto cand = generate::candidate_from_json(c);
      if (!cand) return cand.status();
      candidates_.push_back(std::move(*cand));
    }
    return Status::ok();
  }

  Shared& s_;
  const data::Question& q_;  // gold stays in this class: the stages get task_
  const data::Task task_;
  size_t position_;
  const data::Schema* schema_ = nullptr;
  fs::path db_path_;
  json context_json_;
  context::Retrieval retrieval_;
  std::set<std::string> selected_columns_;
  std::shared_ptr<const context::ValueIndex> index_;
  std::vector<generate::Candidate> candidates_;
  json exec_before_fix_;  // per candidate id: executable before the fixer
  std::vector<eval::ItemResult> items_;
  std::vector<std::optional<db::ExecutionResult>> results_;
  std::map<std::string, run::SelectionRecord> selections_;
  std::map<int64_t, run::CurvePoint> curves_;
  std::map<std::string, double> latency_;
  std::optional<eval::ItemResult> verdict_;
  bool turn_taken_ = false;
  std::map<std::string, run::LlmFaults> faults_;  // per stage: failed model calls and retries
};

Status QuestionRun::stage_context() {
  if (auto done = stored("context")) {
    context_json_ = *done;
  } else {
    auto t0 = Clock::now();
    auto before = usage_now();
    auto ctx = s_.context->build(task_, *schema_, db_path_, derive_seed(s_.settings.seed, q_.question_id, "context"));
    if (!ctx) return ctx.status();
    context_json_ = ctx->to_json();
    latency_["context"] = seconds_since(t0);
    context_json_["latency_s"] = latency_["context"];
    NL2SQL_RETURN_IF_ERROR(put("context", context_json_, before));
    context_json_.erase("llm_faults");
  }
  context_json_.erase("llm_faults");  // kept per stage; the record sums them
  latency_["context"] = context_json_.value("latency_s", 0.0);
  retrieval_ = retrieval_from_json(context_json_);
  for (const auto& c : context_json_.value("selected_columns", json::array()))
    if (c.is_string()) selected_columns_.insert(c.get<std::string>());
  auto index = s_.context->index(q_.db_id, db_path_, *schema_);
  if (index) index_ = *index;  // examples in prompts; without it generation still works
  return Status::ok();
}

Status QuestionRun::stage_generate() {
  if (auto done = stored("generate")) {
    NL2SQL_RETURN_IF_ERROR(load_candidates(*done));
    latency_["generate"] = done->value("latency_s", 0.0);
    return Status::ok();
  }
  auto t0 = Clock::now();
  auto before = usage_now();
  generate::GenerationInput input;
  input.question = &task_;
  input.schema = schema_;
  input.db_path = db_path_;
  input.index = index_.get();
  input.retrieval = &retrieval_;
  input.selected_columns = selected_columns_;
  input.seed = derive_seed(s_.settings.seed, q_.question_id, "generate");
  // Generators of one question run side by side: their calls are independent, and the
  // question's critical path is then the slowest generator, not their sum.
  std::vector<Result<std::vector<generate::Candidate>>> outs(s_.generators.size(),
                                                            Result<std::vector<generate::Candidate>>(
                                                                internal_error("not run")));
  std::vector<std::thread> threads;
  for (size_t g = 0; g < s_.generators.size(); ++g)
    threads.emplace_back([&, g] { outs[g] = s_.generators[g]->generate(input); });
  for (auto& t : threads) t.join();
  for (auto& out : outs) {
    if (!out) return out.status();
    for (auto& c : *out) candidates_.push_back(std::move(c));
  }
  // A question none of whose candidates got an answer from the model is a failure, not a
  // wrong answer: left unstored, a rerun asks again.
  if (auto why = all_model_calls_failed(candidates_)) {
    faults_["generate"] = llm_faults_between(before, usage_now());
    return Status(ErrorCode::kUnavailable, "no candidate: " + *why);
  }
  latency_["generate"] = seconds_since(t0);
  json payload = {{"candidates", json::array()}, {"latency_s", latency_["generate"]}};
  for (const auto& c : candidates_) payload["candidates"].push_back(generate::to_json(c));
  return put("generate", payload, before);
}

Status QuestionRun::stage_fix() {
  if (auto done = stored("fix")) {
    NL2SQL_RETURN_IF_ERROR(load_candidates(*done));
    exec_before_fix_ = done->value("executable_before_fix", json::object());
    latency_["fix"] = done->value("latency_s", 0.0);
    return Status::ok();
  }
  auto t0 = Clock::now();
  auto before = usage_now();
  fix::FixInput input;
  input.question = &task_;
  input.schema = schema_;
  input.db_path = db_path_;
  input.index = index_.get();
  input.retrieval = &retrieval_;
  input.executor = s_.executor.get();
  exec_before_fix_ = json::object();
  std::vector<Status> statuses(candidates_.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < candidates_.size(); ++i) {
    threads.emplace_back([&, i] {
      auto& c = candidates_[i];
      fix::FixInput in = input;
      in.seed = derive_seed(s_.settings.seed, q_.question_id, "fix#" + c.id);
      if (s_.fixer && s_.fixer->options().enabled) {
        statuses[i] = s_.fixer->fix(c, in);
      } else {
        fix::execute_candidate(c, *s_.executor, db_path_);
      }
    });
    // Bounded fan-out: at most as many fixer loops at once as the question has generators
    // (each loop holds model calls in flight).
    if (threads.size() >= std::max<size_t>(4, s_.generators.size())) {
      for (auto& t : threads) t.join();
      threads.clear();
    }
  }
  for (auto& t : threads) t.join();
  for (const auto& st : statuses) NL2SQL_RETURN_IF_ERROR(st);
  for (const auto& c : candidates_) {
    // Executable before fixing: the first round's starting point failed only when a round ran.
    bool before = c.fix_rounds.empty() ? c.execution.ok() && !c.rejected
                                       : false;
    if (!c.fix_rounds.empty() && c.fix_rounds.front().failure_class == "empty_result") before = true;
    exec_before_fix_[c.id] = before;
  }
  latency_["fix"] = seconds_since(t0);
  json payload = {{"candidates", json::array()},
                  {"executable_before_fix", exec_before_fix_},
                  {"latency_s", latency_["fix"]}};
  for (const auto& c : candidates_) payload["candidates"].push_back(generate::to_json(c));
  return put("fix", payload, before);
}

// Judges every candidate against gold (the evaluator's own rules, through the run's result
// cache) and keeps each candidate's result for selection. Not checkpointed: it is SQL only, and
// the result cache makes a resumed judge a lookup.
Status QuestionRun::stage_judge() {
  auto t0 = Clock::now();
  const std::string& fp = s_.fingerprints.at(q_.db_id);
  items_.resize(candidates_.size());
  results_.resize(candidates_.size());
  for (size_t i = 0; i < candidates_.size(); ++i) {
    const auto& c = candidates_[i];
    eval::Prediction p;
    p.present = c.extraction_ok && !c.sql.empty();
    p.sql = c.sql;
    db::ExecutionResult exec;
    items_[i] = s_.judge->judge(q_, db_path_, fp, p, &exec);
    if (p.present && !c.rejected && exec.ok()) results_[i] = std::move(exec);
  }
  latency_["eval"] = seconds_since(t0);
  return Status::ok();
}

void QuestionRun::wait_turn() {
  std::unique_lock lock(s_.seq_mu);
  s_.seq_cv.wait(lock, [&] { return s_.seq_next >= position_ || cancelled(); });
  turn_taken_ = true;
}

void QuestionRun::finish_turn() {
  std::lock_guard lock(s_.seq_mu);
  s_.seq_done.insert(position_);
  while (s_.seq_done.count(s_.seq_next)) s_.seq_done.erase(s_.seq_next++);
  s_.seq_cv.notify_all();
}

Status QuestionRun::stage_select() {
  // Pool for the selectors: the gold-free task and the candidates (no gold in either).
  select::SelectionInput input;
  std::vector<bool> correct;  // per candidate, under the primary metric (gold stays here)
  input.question = &task_;
  input.schema = schema_;
  input.db_path = db_path_;
  input.generator_order = s_.generator_names;
  input.seed = derive_seed(s_.settings.seed, q_.question_id, "select");
  for (size_t i = 0; i < candidates_.size(); ++i) {
    const auto& c = candidates_[i];
    select::PoolCandidate pc;
    pc.id = c.id;
    pc.generator = c.generator;
    pc.profile = c.profile;
    pc.sql = c.sql;
    pc.result = results_[i];
    input.candidates.push_back(std::move(pc));
    correct.push_back(s_.judge->correct(items_[i]));
  }

  if (auto done = stored("select")) {
    latency_["select"] = done->value("latency_s", 0.0);
    selections_.clear();
    for (const auto& [name, sel] : done->items()) {
      if (name == "latency_s" || name == "llm_faults") continue;
      auto rec = run::selection_from_json(sel, "question " + q_.question_id + ", stored selection \"" + name + "\"");
      if (!rec) return rec.status();
      selections_[name] = std::move(*rec);
    }
  } else {
    auto t0 = Clock::now();
    auto before = usage_now();
    for (const auto& name : s_.settings.selectors) {
      auto t1 = Clock::now();
      auto sel = s_.selectors.at(name)->select(input);
      if (!sel) return sel.status();
      select::check_duels_against_gold(*sel, db_path_, *s_.executor, q_.gold_sql);
      run::SelectionRecord rec;
      rec.chosen = sel->chosen;
      rec.llm_calls = sel->llm_calls();
      rec.explanation = sel->explanation;
      rec.latency_s = seconds_since(t1);
      rec.calls = json::array();
      for (const auto& c : sel->calls) {
        rec.calls.push_back(context::call_to_json(c));
        rec.cost_usd += c.cost_usd;
      }
      if (sel->chosen >= 0 && sel->chosen < static_cast<int>(candidates_.size())) {
        rec.candidate_id = candidates_[sel->chosen].id;
        rec.sql = candidates_[sel->chosen].sql;
        rec.correct = s_.judge->correct(items_[sel->chosen]);
      } else {
        rec.correct = false;
      }
      selections_[name] = std::move(rec);
    }
    latency_["select"] = seconds_since(t0);
    json payload = json::object();
    for (const auto& [name, rec] : selections_) payload[name] = run::to_json(rec);
    payload["latency_s"] = latency_["select"];
    NL2SQL_RETURN_IF_ERROR(put("select", payload, before));
  }

  // Curves vs number of candidates: bounds and self-consistency on the first k candidates of
  // the interleaved order; the primary selector re-run on that prefix when run.curve_selector.
  curves_.clear();
  auto curves_before = usage_now();
  auto order = interleaved_order(candidates_, s_.generator_names);
  const auto* primary = s_.selectors.at(s_.settings.primary_selector).get();
  for (size_t k : s_.settings.curve_points) {
    if (k > candidates_.size() && k != s_.settings.curve_points.front()) continue;
    size_t n = std::min(k, candidates_.size());
    select::SelectionInput sub = input;
    sub.candidates.clear();
    std::vector<bool> sub_correct, matches;
    for (size_t j = 0; j < n; ++j) {
      sub.candidates.push_back(input.candidates[order[j]]);
      sub_correct.push_back(correct[order[j]]);
      if (input.candidates[order[j]].result) matches.push_back(correct[order[j]]);
    }
    auto clusters = select::cluster_pool(sub.candidates, select::ResultEquality::kRelaxed, s_.generator_names);
    bool sc = false;
    if (!clusters.clusters.empty()) {
      int rep = clusters.clusters.front().representative;
      sc = sub_correct[rep];
    }
    run::CurvePoint point;
    point.upper = select::oracle_bound(matches);
    point.lower = select::adversarial_bound(matches);
    point.self_consistency = sc;
    if (auto it = selections_.find(s_.settings.primary_selector); n == candidates_.size() && it != selections_.end()) {
      point.selector = it->second.correct.value_or(false);
    } else if (s_.settings.curve_selector && !uses_weights(s_.settings.primary_selector)) {
      auto sel = primary->select(sub);
      if (sel && sel->chosen >= 0) point.selector = static_cast<bool>(sub_correct[sel->chosen]);
      else if (sel) point.selector = false;
    }
    curves_[static_cast<int64_t>(k)] = point;
  }
  faults_["curves"] = llm_faults_between(curves_before, usage_now());
  return Status::ok();
}

run::QuestionRecord QuestionRun::base_record() const {
  run::QuestionRecord rec;
  rec.question_id = q_.question_id;
  rec.index = static_cast<int64_t>(q_.index);
  rec.db_id = q_.db_id;
  rec.question = q_.question;
  rec.evidence = q_.evidence;
  rec.difficulty = q_.difficulty;
  rec.gold_sql = q_.gold_sql;
  rec.primary_selector = s_.settings.primary_selector;
  for (const auto& [name, f] : faults_) rec.llm_faults += f;
  return rec;
}

// A candidate as the record keeps it: the generate layer's trace.
run::CandidateRecord candidate_record(const generate::Candidate& c) {
  run::CandidateRecord out;
  out.id = c.id;
  out.generator = c.generator;
  out.sql = c.sql;
  out.trace = generate::to_json(c);
  return out;
}

run::QuestionRecord QuestionRun::final_record() {
  run::QuestionRecord rec = base_record();
  if (auto stmt = sql::parse_query(q_.gold_sql); stmt.is_ok())
    for (const auto& t : sql::compute_features(*stmt->select).tags()) rec.features.push_back(t);
  rec.context = context_json_;

  auto clusters = [&] {
    std::vector<select::PoolCandidate> pool;
    for (size_t i = 0; i < candidates_.size(); ++i) {
      select::PoolCandidate pc;
      pc.id = candidates_[i].id;
      pc.generator = candidates_[i].generator;
      pc.sql = candidates_[i].sql;
      pc.result = results_[i];
      pool.push_back(std::move(pc));
    }
    return select::cluster_pool(pool, select::ResultEquality::kRelaxed, s_.generator_names);
  }();
  std::vector<bool> matches;
  for (size_t i = 0; i < candidates_.size(); ++i) {
    run::CandidateRecord c = candidate_record(candidates_[i]);
    const bool correct = s_.judge->correct(items_[i]);
    run::CandidateRecord::Judgement g;
    if (!items_[i].gold_unusable) g.correct = correct;
    g.cluster = clusters.cluster_of[i];
    auto before = exec_before_fix_.find(candidates_[i].id);
    g.executable_before_fix = before != exec_before_fix_.end() && before->is_boolean() && before->get<bool>();
    g.executable_after_fix = results_[i].has_value();
    g.outcome = items_[i].outcome;
    g.verdicts = items_[i].verdicts;
    c.judged = std::move(g);
    if (results_[i]) matches.push_back(correct);
    rec.candidates.push_back(std::move(c));
  }
  rec.selections = selections_;
  if (auto it = rec.selections.find(s_.settings.primary_selector); it != rec.selections.end())
    rec.prediction = it->second.sql;
  {
    auto t0 = Clock::now();
    eval::Prediction p;
    p.present = !rec.prediction.empty();
    p.sql = rec.prediction;
    verdict_ = s_.judge->judge(q_, db_path_, s_.fingerprints.at(q_.db_id), p);
    latency_["eval"] += seconds_since(t0);
  }
  rec.verdict = verdict_of(*verdict_);
  if (rec.difficulty.empty()) rec.difficulty = verdict_->difficulty;
  rec.bounds = run::Bounds{select::oracle_bound(matches), select::adversarial_bound(matches)};
  rec.curves = curves_;

  add_calls(rec.usage, "context", context_json_.value("calls", json::array()));
  for (const auto& c : candidates_) {
    json cj = generate::to_json(c);
    add_calls(rec.usage, "generate", cj.value("calls", json::array()));
    json fix_calls = json::array();
    for (const auto& r : cj.value("fix_rounds", json::array()))
      if (r.contains("call")) fix_calls.push_back(r["call"]);
    add_calls(rec.usage, "fix", fix_calls);
  }
  for (const auto& [name, sel] : rec.selections) add_calls(rec.usage, "select", sel.calls);
  double total = 0;
  for (const char* st : {"context", "generate", "fix", "select", "eval"}) {
    rec.latency_s[st] = latency_[st];
    total += latency_[st];
  }
  rec.latency_s["total"] = total;
  return rec;
}

run::QuestionRecord QuestionRun::run() {
  auto fail = [&](const Status& st, const char* stage) {
    run::QuestionRecord rec = base_record();
    rec.ok = false;
    rec.error = fmt::format("{} stage: {}", stage, st.message());
    // What the question's model calls did before it failed stays accounted for: the candidates
    // made so far (their traces hold the failed calls) and the faults per stage.
    for (const auto& c : candidates_) rec.candidates.push_back(candidate_record(c));
    return rec;
  };
  auto sit = s_.ds->schemas.find(q_.db_id);
  auto pit = s_.ds->db_paths.find(q_.db_id);
  if (sit == s_.ds->schemas.end() || pit == s_.ds->db_paths.end()) {
    if (s_.weights) finish_turn();
    return fail(not_found("database '" + q_.db_id + "' is not available"), "context");
  }
  schema_ = &sit->second;
  db_path_ = pit->second;
  const bool sequenced = static_cast<bool>(s_.weights);
  run::QuestionRecord rec;
  const char* stage = "context";
  Status st = stage_context();
  if (st) { stage = "generate"; st = stage_generate(); }
  if (st) { stage = "fix"; st = stage_fix(); }
  if (st) { stage = "judge"; st = stage_judge(); }
  if (st && sequenced) wait_turn();
  if (st && cancelled() && sequenced) st = Status(ErrorCode::kCancelled, "run cancelled");
  if (st) { stage = "select"; st = stage_select(); }
  if (st) {
    rec = final_record();
    if (sequenced) {
      // Experts are generators: an expert is right when any of its executable candidates is.
      std::map<std::string, bool> expert_correct;
      for (size_t i = 0; i < candidates_.size(); ++i) {
        if (items_[i].gold_unusable) continue;
        bool& v = expert_correct.try_emplace(candidates_[i].generator, false).first->second;
        v = v || s_.judge->correct(items_[i]);
      }
      if (!expert_correct.empty()) s_.weights->update(expert_correct, q_.question_id);
      rec.weights = s_.weights->snapshot();
    }
  } else {
    rec = fail(st, stage);
  }
  if (sequenced) finish_turn();
  return rec;
}

json make_manifest(const Shared& s, const data::Dataset& ds, const std::string& fingerprint,
                   const std::vector<size_t>& picked, const json& prompts, bool simulated,
                   const std::vector<std::string>& used_profiles) {
  json ids = json::array();
  for (size_t i : picked) ids.push_back(ds.questions[i].question_id);
  json m;
  m["tool_version"] = NL2SQL_VERSION;
  m["created_at"] = utc_now();
  m["benchmark"] = data::benchmark_name(ds.benchmark);
  m["split"] = ds.split;
  m["dataset_fingerprint"] = fingerprint;
  m["question_ids"] = ids;
  m["shard"] = s.options->filter.shard
                   ? json{{"index", s.options->filter.shard->index}, {"count", s.options->filter.shard->count}}
                   : json(nullptr);
  m["config_hash"] = core::sha256_hex(result_relevant_config(s.config.json()).dump());
  m["prompt_hashes"] = prompts;
  m["simulated"] = simulated;
  m["seed"] = s.settings.seed;
  m["primary_selector"] = s.settings.primary_selector;
  m["selectors"] = s.settings.selectors;
  m["generators"] = s.generator_names;
  m["primary_metric"] = eval::metric_name(eval::primary_metric(ds.benchmark, s.settings.metrics));
  m["record_version"] = run::kRecordVersion;
  // Which model answered: the profiles the run's roles resolve to, with the model and endpoint
  // as resolved (OPENAI_MODEL / OPENAI_BASE_URL included; credentials never). A resume with
  // another model or endpoint is refused like a config change.
  json models = json::object();
  for (const auto& name : used_profiles) {
    auto it = s.client->settings().profiles.find(name);
    if (it == s.client->settings().profiles.end()) continue;
    models[name] = {{"provider", it->second.provider},
                    {"model", it->second.model},
                    {"endpoint", core::mask_url(it->second.base_url)}};
  }
  m["models"] = models;
  json skipped = json::array();
  for (const auto& sk : skipped_in_selection(ds, s.options->filter))
    skipped.push_back({{"question_id", sk.question_id}, {"db_id", sk.db_id}, {"index", sk.index}, {"reason", sk.reason}});
  m["skipped"] = skipped;
  return m;
}

}  // namespace

json result_relevant_config(const json& config) {
  json c = config;
  c.erase("extends");
  if (c.contains("run") && c["run"].is_object())
    for (const char* k : {"threads", "sql_threads", "max_cost_usd", "fail_under", "progress"})
      c["run"].erase(k);
  if (c.contains("llm") && c["llm"].is_object()) {
    json& llm = c["llm"];
    for (const char* k : {"max_in_flight", "retry", "cache", "preflight", "stop_after_repeated_errors"}) llm.erase(k);
    if (llm.contains("models") && llm["models"].is_object())
      for (auto& [name, m] : llm["models"].items())
        if (m.is_object())
          for (const char* k : {"max_in_flight", "rpm", "tpm", "timeout_s", "idle_timeout_s", "stream",
                                "api_key_env", "headers", "query"})
            m.erase(k);
  }
  return c;
}

std::vector<std::string> manifest_differences(const json& stored, const json& current) {
  std::vector<std::string> out;
  auto str = [](const json& m, const char* k) { return m.contains(k) ? m[k].dump() : "null"; };
  if (str(stored, "benchmark") != str(current, "benchmark") || str(stored, "split") != str(current, "split"))
    out.push_back("dataset: " + str(stored, "benchmark") + "/" + str(stored, "split") + " → " +
                  str(current, "benchmark") + "/" + str(current, "split"));
  if (str(stored, "dataset_fingerprint") != str(current, "dataset_fingerprint"))
    out.push_back("data: the question file or a database file changed (dataset fingerprint differs)");
  if (str(stored, "config_hash") != str(current, "config_hash"))
    out.push_back("config: the resolved config differs (compare config.resolved.json with --set/extends)");
  // Runs recorded before models were part of the manifest resume as before.
  if (stored.contains("models") && str(stored, "models") != str(current, "models"))
    out.push_back("models: " + str(stored, "models") + " → " + str(current, "models") +
                  " (another model or endpoint: OPENAI_MODEL, OPENAI_BASE_URL or the profiles changed)");
  const json empty = json::object();
  const json& sp = stored.contains("prompt_hashes") ? stored["prompt_hashes"] : empty;
  const json& cp = current.contains("prompt_hashes") ? current["prompt_hashes"] : empty;
  std::vector<std::string> changed;
  for (const auto& [k, v] : cp.items())
    if (!sp.contains(k)) changed.push_back(k + " (new)");
    else if (sp[k] != v) changed.push_back(k);
  for (const auto& [k, v] : sp.items())
    if (!cp.contains(k)) changed.push_back(k + " (removed)");
  if (!changed.empty()) {
    std::string list;
    for (const auto& c : changed) list += (list.empty() ? "" : ", ") + c;
    out.push_back("prompts: " + list);
  }
  if (str(stored, "question_ids") != str(current, "question_ids")) {
    std::set<std::string> a, b;
    for (const auto& v : stored.value("question_ids", json::array())) a.insert(v.dump());
    for (const auto& v : current.value("question_ids", json::array())) b.insert(v.dump());
    size_t added = 0, removed = 0;
    for (const auto& x : b) added += !a.count(x);
    for (const auto& x : a) removed += !b.count(x);
    out.push_back(fmt::format("questions: {} added, {} removed (--questions/--sample/--db/--shard)",
                              added, removed));
  }
  if (str(stored, "shard") != str(current, "shard"))
    out.push_back("shard: " + str(stored, "shard") + " → " + str(current, "shard"));
  return out;
}

Result<RunSummary> run(const RunOptions& options) {
  auto started = Clock::now();
  RunSummary summary;
  summary.out_dir = options.out_dir;
  Shared s;
  s.options = &options;
  s.config = options.config;

  auto ds = data::load_dataset(options.dataset);
  if (!ds) return ds.status();
  s.ds = &*ds;
  for (const auto& sk : ds->skipped)
    spdlog::warn("question {} skipped: {}", sk.question_id, sk.reason);
  for (size_t i = 0; i < ds->warnings.size() && i < 5; ++i) spdlog::warn("{}", ds->warnings[i]);
  if (ds->warnings.size() > 5) spdlog::warn("… and {} more dataset warnings", ds->warnings.size() - 5);
  auto picked = select_questions(*ds, options.filter);
  if (!picked) return picked.status();
  summary.questions = picked->size();

  auto settings = load_run_settings(s.config, ds->benchmark);
  if (!settings) return settings.status();
  s.settings = std::move(*settings);
  s.prompts_dir = options.prompts_dir.empty() ? llm::bundled_prompts_dir() : options.prompts_dir;

  // Services.
  llm::ClientOptions client_options;
  client_options.transport = options.transport;
  client_options.cancel_flag = options.cancel;
  client_options.stop_on_fatal_error = true;
  // The offline simulator, when a profile is simulated: it reads the dataset's gold itself (no
  // stage input carries gold); its duels judge candidates with the run's evaluator (set below).
  auto simulator = sim::attach_if_simulated(client_options, s.config, &*ds);
  if (!simulator) return simulator.status();
  auto client = llm::Client::from_config(s.config, client_options);
  if (!client) return client.status();
  s.client = std::move(*client);
  auto use = model_use(s.config, s.settings.selectors);
  if (!use) return use.status();
  const std::vector<std::string> used_profiles = s.client->profiles_for(use->roles, use->profiles);
  summary.simulated = s.client->any_simulated(used_profiles);
  db::ExecutorOptions exec_options;
  exec_options.limits.timeout_s = s.settings.timeout_s;
  exec_options.limits.row_cap = s.settings.row_cap;
  exec_options.max_concurrent = s.settings.sql_threads;
  s.executor = std::make_unique<db::Executor>(exec_options);
  if (options.db_fault_injector) s.executor->set_fault_injector(options.db_fault_injector);

  std::error_code ec;
  fs::create_directories(options.out_dir, ec);
  if (ec) return io_error("cannot create run folder " + options.out_dir.string() + ": " + ec.message());
  // One run per folder, held until run() returns; taken before --force-new deletes anything.
  auto folder_lock = run::RunFolderLock::acquire(options.out_dir);
  if (!folder_lock) return folder_lock.status();
  if (options.force_new) {
    for (const char* f : {"run.sqlite", "run.sqlite-wal", "run.sqlite-shm", "manifest.json",
                          "config.resolved.json", "weights.json"})
      fs::remove(options.out_dir / f, ec);
  }
  auto exec_cache = db::ResultCache::open(options.out_dir / "exec_cache.sqlite");
  if (!exec_cache) return exec_cache.status();
  s.exec_cache = std::move(*exec_cache);
  eval::EvalOptions eval_options;
  eval_options.metrics = s.settings.metrics;
  eval_options.pred_limits.timeout_s = s.settings.timeout_s;
  eval_options.pred_limits.row_cap = s.settings.row_cap;
  eval_options.gold_limits.timeout_s = s.settings.timeout_s;
  s.judge = std::make_unique<eval::ItemJudge>(ds->benchmark, eval_options, s.exec_cache.get());
  if (*simulator) {
    std::map<std::string, const data::Question*> by_id;
    for (const auto& q : ds->questions) by_id[q.question_id] = &q;
    (*simulator)->set_judge([&s, by_id = std::move(by_id)](const std::string& question_id, const std::string& sql) {
      auto it = by_id.find(question_id);
      if (it == by_id.end()) return false;
      const data::Question& q = *it->second;
      auto db = s.ds->db_paths.find(q.db_id);
      auto fp = s.fingerprints.find(q.db_id);
      if (db == s.ds->db_paths.end() || fp == s.fingerprints.end()) return false;
      eval::Prediction p;
      p.present = true;
      p.sql = sql;
      return s.judge->correct(s.judge->judge(q, db->second, fp->second, p));
    });
  }

  auto ctx = context::ContextBuilder::create(s.config, s.client.get(), *s.executor, options.index_dir,
                                             s.prompts_dir);
  if (!ctx) return ctx.status();
  s.context = std::move(*ctx);
  auto gens = generate::make_generators(s.config, s.client.get(), s.executor.get(), s.prompts_dir);
  if (!gens) return gens.status();
  s.generators = std::move(*gens);
  if (s.generators.empty()) return invalid_input("config key generate.generators: no generator configured");
  for (const auto& g : s.generators) s.generator_names.push_back(g->name());
  auto fixer = fix::Fixer::create(s.config, s.client.get(), s.prompts_dir);
  if (!fixer) return fixer.status();
  s.fixer.emplace(std::move(*fixer));

  bool voting = false;
  for (const auto& name : s.settings.selectors) voting = voting || uses_weights(name);
  if (voting) {
    auto eps = select::configured_epsilon(s.config);
    if (!eps) return eps.status();
    s.weights = std::make_shared<select::WeightStore>(*eps);
  }
  select::SelectorServices services;
  services.client = s.client.get();
  services.executor = s.executor.get();
  services.prompts_dir = s.prompts_dir;
  services.weights = s.weights;
  for (const auto& name : s.settings.selectors) {
    auto sel = select::make_selector_named(name, s.config, services);
    if (!sel) return sel.status();
    s.selectors[name] = std::move(*sel);
  }

  // Manifest and the resume check.
  auto fingerprint = ds->fingerprint();
  if (!fingerprint) return fingerprint.status();
  for (const auto& [db_id, path] : ds->db_paths) {
    auto f = db::database_fingerprint(path);
    if (!f) return f.status();
    s.fingerprints[db_id] = *f;
  }
  auto prompts = prompt_hashes(s.prompts_dir);
  if (!prompts) return prompts.status();
  json manifest = make_manifest(s, *ds, *fingerprint, *picked, *prompts, summary.simulated, used_profiles);
  auto store = run::RunStore::open(options.out_dir, true);
  if (!store) return store.status();
  s.store = store->get();
  if (auto old = (*store)->get_meta("manifest"); old && old->has_value()) {
    auto diffs = manifest_differences(**old, manifest);
    if (!diffs.empty()) {
      std::string msg = "cannot resume the run in " + options.out_dir.string() +
                        ": it was started with different inputs —";
      for (const auto& d : diffs) msg += "\n  " + d;
      msg += "\nRerun with --force-new to start over (the run store is deleted) or choose another --out.";
      return invalid_input(msg);
    }
    manifest["created_at"] = (**old).value("created_at", manifest["created_at"].get<std::string>());
  }
  NL2SQL_RETURN_IF_ERROR((*store)->save_manifest(manifest));
  NL2SQL_RETURN_IF_ERROR((*store)->save_resolved_config(core::redact_json(s.config.json())));
  if (summary.simulated)
    spdlog::warn("the sim provider answers some roles: every accuracy in this run is SIMULATED "
                 "(derived from gold), not a model's");

  // Pending: questions without a final record; resumed ones are replayed for the weights.
  std::vector<const data::Question*> pending;
  std::vector<size_t> positions;
  std::map<std::string, run::QuestionRecord> finals;
  {
    auto recs = final_records(**store, options.out_dir);
    if (!recs) return recs.status();
    for (auto& r : *recs) {
      // A question that failed (its model calls, its database) is attempted again: its
      // finished stages are reused, the failed one is redone.
      if (!r.ok) continue;
      std::string id = r.question_id;
      finals.emplace(std::move(id), std::move(r));
    }
  }
  for (size_t pos = 0; pos < picked->size(); ++pos) {
    const auto& q = ds->questions[(*picked)[pos]];
    s.order.push_back(q.question_id);
    if (finals.count(q.question_id)) {
      ++summary.resumed;
    } else {
      pending.push_back(&q);
      positions.push_back(pos);
    }
  }
  if (s.weights) {
    // Replays the stored weight updates in run order, up to the first unfinished question.
    std::lock_guard lock(s.seq_mu);
    for (size_t pos = 0; pos < s.order.size(); ++pos) {
      auto it = finals.find(s.order[pos]);
      if (it == finals.end()) break;
      std::map<std::string, bool> expert_correct;
      for (const auto& c : it->second.candidates) {
        if (!c.judged || !c.judged->correct) continue;
        bool& v = expert_correct.try_emplace(c.generator, false).first->second;
        v = v || *c.judged->correct;
      }
      if (!expert_correct.empty()) s.weights->update(expert_correct, s.order[pos]);
      s.seq_next = pos + 1;
    }
    for (size_t pos = s.seq_next; pos < s.order.size(); ++pos)
      if (finals.count(s.order[pos])) s.seq_done.insert(pos);
  }
  if (summary.resumed)
    spdlog::info("resuming {}: {} of {} questions already finished", options.out_dir.string(),
                 summary.resumed, summary.questions);

  // Preflight: one real request per profile the run uses, so a wrong model name, a refused
  // field or a dead endpoint stops the run in seconds instead of failing every question.
  if (!pending.empty() && s.client->settings().preflight &&
      s.client->settings().cache.mode != llm::CacheMode::kReplay &&
      s.client->settings().cache.mode != llm::CacheMode::kReadOnly) {
    for (const auto& r : s.client->preflight(used_profiles)) {
      if (r.ok) {
        if (!r.simulated)
          spdlog::info("preflight: profile {} ({} at {}) answered in {:.2f} s{}", r.profile, r.model,
                       r.endpoint, r.latency_s, r.note.empty() ? "" : " — " + r.note);
        continue;
      }
      summary.fatal_error = "preflight: model profile \"" + r.profile + "\" (model " + r.model + " at " +
                            r.endpoint + ") failed: " + r.error +
                            " — check it with `nl2sql models check --config …`";
      summary.not_started = pending.size();
      summary.wall_s = seconds_since(started);
      spdlog::error("{}", summary.fatal_error);
      return summary;
    }
  }

  ProgressOptions popts;
  popts.mode = options.progress;
  popts.interval_s = options.progress_interval_s;
  popts.total = summary.questions;
  Progress progress(popts, s.client.get());
  for (const auto& [id, r] : finals) progress.add_resumed(r.correct(manifest["primary_metric"].get<std::string>()));
  s.progress = &progress;
  progress.start();

  // Workers.
  std::optional<double> cap = options.max_cost_usd ? options.max_cost_usd : s.settings.max_cost_usd;
  std::mutex mu;
  size_t in_flight = 0, finished_now = 0;  // guarded by mu
  double cost_finished = 0;                // guarded by mu: cost of questions finished now
  std::atomic<bool> budget_stop{false};
  std::atomic<size_t> not_started{0};
  std::atomic<size_t> unrecorded{0};  // finished, but the run store refused the final record
  const std::string primary_metric = manifest["primary_metric"];
  {
    core::ThreadPool pool(std::min(s.settings.threads, std::max<size_t>(1, pending.size())));
    for (size_t k = 0; k < pending.size(); ++k) {
      pool.submit([&, k] {
        const data::Question& q = *pending[k];
        bool cancelled = s.client->cancelled();
        {
          std::lock_guard lock(mu);
          // Budget: spent so far plus what the questions in flight are expected to cost.
          if (cap && !cancelled) {
            double spent = s.client->accounting().total().cost_usd;
            double per_q = finished_now ? cost_finished / finished_now : 0.0;
            if (spent + per_q * (in_flight + 1) > *cap) budget_stop = true;
          }
          if (!cancelled && !budget_stop) ++in_flight;
        }
        if (cancelled || budget_stop) {
          ++not_started;
          if (s.weights) {
            // Later questions would wait for this one forever.
            std::lock_guard lock(s.seq_mu);
            s.seq_done.insert(positions[k]);
            while (s.seq_done.count(s.seq_next)) s.seq_done.erase(s.seq_next++);
            s.seq_cv.notify_all();
          }
          return;
        }
        progress.question_started();
        double cost_before = s.client->accounting().by_question()[q.question_id].cost_usd;
        const llm::UsageTotals usage_before = s.client->accounting().question(q.question_id);
        QuestionRun qr(s, q, positions[k]);
        const run::QuestionRecord rec = qr.run();
        // Stopping (cancel flag or an auth failure): a record that failed, or whose calls were
        // cancelled or refused, is not stored — a resume completes it from its stored stages.
        bool interrupted = false;
        if (s.client->cancelled()) {
          const llm::UsageTotals after = s.client->accounting().question(q.question_id);
          auto grew = [&](const char* kind) {
            auto a = after.errors_by_kind.find(kind);
            auto b = usage_before.errors_by_kind.find(kind);
            return (a == after.errors_by_kind.end() ? 0 : a->second) >
                   (b == usage_before.errors_by_kind.end() ? 0 : b->second);
          };
          interrupted = !rec.ok || grew("cancelled") || grew("auth");
        }
        if (!interrupted) {
          if (auto st = s.store->put_stage(q.question_id, static_cast<int64_t>(q.index), run::kFinalStage,
                                           rec.ok ? run::kStageDone : run::kStageError, run::to_json(rec));
              !st) {
            spdlog::error("question {}: cannot record its result: {}", q.question_id, st.message());
            ++unrecorded;
          }
          if (!rec.ok) spdlog::warn("question {} failed: {}", q.question_id, rec.error);
        }
        double cost_after = s.client->accounting().by_question()[q.question_id].cost_usd;
        {
          std::lock_guard lock(mu);
          --in_flight;
          if (!interrupted) {
            ++finished_now;
            cost_finished += cost_after - cost_before;
          }
        }
        if (interrupted) ++not_started;
        else progress.question_finished(rec.correct(primary_metric), !rec.ok);
      });
    }
    pool.wait_idle();
  }
  progress.stop();
  s.exec_cache->flush();
  if (s.weights) {
    auto st = s.weights->save(options.out_dir / "weights.json");
    if (!st) spdlog::warn("cannot save weights.json: {}", st.message());
  }

  // Summary from the store (the source of truth, including resumed questions).
  auto recs = final_records(**store, options.out_dir);
  if (!recs) return recs.status();
  std::set<std::string> wanted(s.order.begin(), s.order.end());
  for (const auto& r : *recs) {
    if (!wanted.count(r.question_id)) continue;
    ++summary.finished;
    if (!r.ok) ++summary.failed;
    if (r.correct(primary_metric)) ++summary.correct;
  }
  summary.not_started = not_started;
  summary.unrecorded = unrecorded;
  if (summary.unrecorded)
    spdlog::error("{} questions could not be recorded (the run store refused the writes: disk full?); "
                  "free space and rerun the same command to redo them",
                  summary.unrecorded);
  summary.cancelled = options.cancel && options.cancel->load();
  if (auto fatal = s.client->fatal_error()) {
    summary.fatal_error = fatal->message();
    spdlog::error("run stopped early: {}; {} questions not recorded — their finished stages are "
                  "kept, rerun the same command to resume once it is fixed",
                  summary.fatal_error, summary.not_started);
  }
  {
    auto usage = s.client->accounting().total();
    summary.llm_calls = usage.calls;
    summary.llm_failed = usage.errors;
    summary.llm_retries = usage.retries;
  }
  summary.budget_stopped = budget_stop;
  summary.cost_usd = s.client->accounting().total().cost_usd;
  if (summary.budget_stopped)
    spdlog::warn("budget: stopped scheduling at ${:.4f} spent (cap ${:.4f}); {} questions not started",
                 summary.cost_usd, *cap, summary.not_started);

  summary.wall_s = seconds_since(started);
  return summary;
}

}  // namespace nl2sql::pipeline
