#include "question_run.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <map>
#include <tuple>

#include "nl2sql/core/json_read.h"
#include "nl2sql/select/clusters.h"
#include "nl2sql/sql/features.h"
#include "nl2sql/sql/parser.h"
#include "progress.h"

namespace nl2sql::pipeline {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// A call trace's tokens.
llm::Usage usage_of(const llm::LlmCallTrace& call) {
  llm::Usage u;
  u.prompt_tokens = call.prompt_tokens;
  u.completion_tokens = call.completion_tokens;
  if (call.cached_tokens) u.cached_tokens = *call.cached_tokens;
  if (call.reasoning_tokens) u.reasoning_tokens = *call.reasoning_tokens;
  return u;
}

// Sums call traces into a stage's usage; answers from the response cache are counted apart,
// priced at their profile's rates (`prices`) as the money they saved.
void add_call(run::StageUsage& u, const llm::LlmCallTrace& c, const std::map<std::string, llm::ModelProfile>& prices) {
  // Another question's answer reused by a per-run memo (the os generator's example calls):
  // counted where it was sent.
  if (!c.shared_from.empty()) return;
  if (c.from_cache) {
    u.cache_hits += 1;
    u.cache_prompt_tokens += c.prompt_tokens;
    u.cache_completion_tokens += c.completion_tokens;
    auto p = prices.find(c.profile);
    if (p != prices.end()) u.saved_usd += llm::cost_usd(p->second, usage_of(c));
    return;
  }
  u.calls += 1;
  u.prompt_tokens += c.prompt_tokens;
  u.completion_tokens += c.completion_tokens;
  if (c.cached_tokens) {
    u.cached_tokens += *c.cached_tokens;
    u.calls_reporting_cached += 1;
  }
  if (c.reasoning_tokens) {
    u.reasoning_tokens += *c.reasoning_tokens;
    u.calls_reporting_reasoning += 1;
  }
  u.cost_usd += c.cost_usd;
  u.latency_s += c.latency_s;
  // Prompts whose schema was lightened to fit the model's context (the ladder's rung > 0).
  if (c.prompt_rung > 0) u.degraded_prompts += 1;
}

void add_calls(std::map<std::string, run::StageUsage>& usage, const std::string& stage,
               const std::vector<llm::LlmCallTrace>& calls, const std::map<std::string, llm::ModelProfile>& prices) {
  run::StageUsage& u = usage[stage];
  for (const auto& c : calls) add_call(u, c, prices);
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
  v.suite_databases = static_cast<int64_t>(item.ts_databases);
  v.suite_original = item.ts_original;
  v.suite_failed_on = item.ts_failed_on;
  v.suite_failure = item.ts_failure;
  return v;
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

}  // namespace

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


Status QuestionRun::load_context(json done) {
  done.erase("llm_faults");  // kept per stage; the record sums them
  auto ctx = context::context_record_from_json(done, "question " + q_.question_id + ", stored context");
  if (!ctx) return ctx.status();
  context_ = std::move(*ctx);
  return context_ready();
}

Result<json> QuestionRun::run_context() {
  auto t0 = Clock::now();
  auto ctx = s_.context->build(task_, *schema_, db_path_, core::stage_seed(s_.settings.seed, q_.question_id, "context"));
  if (!ctx) return ctx.status();
  context_ = ctx->record();
  context_->latency_s = seconds_since(t0);
  NL2SQL_RETURN_IF_ERROR(context_ready());
  return context::to_json(*context_);
}

Status QuestionRun::context_ready() {
  latency_["context"] = context_->latency_s.value_or(0.0);
  retrieval_ = context_->retrieval();
  selected_columns_ = context_->selected_columns;
  auto index = s_.context->index(q_.db_id, db_path_, *schema_);
  if (index) index_ = *index;  // examples in prompts; without it generation still works
  if (s_.context->settings().metadata) {
    // Built (or loaded) once per database by the builder; a resumed context stage opens it here.
    auto meta = s_.context->metadata(q_.db_id, db_path_, *schema_);
    if (!meta) return meta.status().with_context("question " + q_.question_id);
    metadata_ = *meta;
  }
  return Status::ok();
}

Status QuestionRun::load_generate(json done) {
  const std::string where = "question " + q_.question_id + ", stored generate";
  NL2SQL_RETURN_IF_ERROR(core::known_keys_only(done, {"candidates", "latency_s", "llm_faults"}, where));
  NL2SQL_RETURN_IF_ERROR(load_candidates(done, "generate"));
  return core::read_key(done, "latency_s", latency_["generate"], where);
}

Result<json> QuestionRun::run_generate() {
  auto t0 = Clock::now();
  const llm::UsageTotals before = usage_now();
  generate::GenerationInput input;
  input.question = &task_;
  input.schema = schema_;
  input.db_path = db_path_;
  input.index = index_.get();
  input.retrieval = &retrieval_;
  input.selected_columns = selected_columns_;
  input.metadata = metadata_.get();
  input.seed = core::stage_seed(s_.settings.seed, q_.question_id, "generate");
  input.schema_seed = generate::schema_seed(s_.settings.seed, task_.db_id);
  // Generators of one question run side by side: their calls are independent, and the
  // question's critical path is then the slowest generator, not their sum.
  std::vector<Result<std::vector<generate::Candidate>>> outs(s_.generators.size(),
                                                            Result<std::vector<generate::Candidate>>(
                                                                internal_error("not run")));
  // A generator's queries start running as soon as it is done, while the others still wait for
  // their model: the fix stage then finds them in the question's memo.
  fix::ExecutionMemo& shared_memo = judging_->memo();
  input.execute = [&shared_memo](const std::string& sql) { return shared_memo.run(sql); };
  // Its fix loops start then too, once the generators before it are done (FixLaunch).
  fix_launch_ = launch_fixes(s_.generators.size());
  std::vector<std::thread> threads;
  for (size_t g = 0; g < s_.generators.size(); ++g)
    threads.emplace_back([&, g] {
      outs[g] = s_.generators[g]->generate(input);
      if (!outs[g] || cancelled()) {
        fix_launch_->done(g, nullptr);
        return;
      }
      for (const auto& c : *outs[g]) shared_memo.expect(c.sql);
      fix_launch_->done(g, &*outs[g]);
      for (const auto& c : *outs[g]) fix::prefetch_execution(c, shared_memo);
    });
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
  return payload;
}

std::unique_ptr<FixLaunch> QuestionRun::launch_fixes(size_t generators) {
  fix::FixInput input;
  input.question = &task_;
  input.schema = schema_;
  input.db_path = db_path_;
  input.index = index_.get();
  input.retrieval = &retrieval_;
  input.metadata = metadata_.get();
  input.executor = s_.executor.get();
  input.memo = &judging_->memo();
  auto seed_of = [seed = s_.settings.seed, id = q_.question_id](const std::string& candidate) {
    return core::stage_seed(seed, id, "fix#" + candidate);
  };
  return std::make_unique<FixLaunch>(s_.fixer ? &*s_.fixer : nullptr, std::move(input), std::move(seed_of),
                                     generators);
}

Status QuestionRun::load_fix(json done) {
  fix_launch_.reset();
  const std::string where = "question " + q_.question_id + ", stored fix";
  NL2SQL_RETURN_IF_ERROR(
      core::known_keys_only(done, {"candidates", "executable_before_fix", "latency_s", "llm_faults"}, where));
  NL2SQL_RETURN_IF_ERROR(load_candidates(done, "fix"));
  exec_before_fix_.clear();
  NL2SQL_RETURN_IF_ERROR(core::read_key(done, "executable_before_fix", exec_before_fix_, where));
  return core::read_key(done, "latency_s", latency_["fix"], where);
}

Result<json> QuestionRun::run_fix() {
  auto t0 = Clock::now();
  exec_before_fix_.clear();
  // Every candidate's fix loop runs on its own: one waiting for its model's answer never holds
  // another back (the client bounds the calls in flight, the executor the queries), and
  // identical queries run once through the question's memo. Candidates with the same SQL,
  // repaired by the same model, would send the same fix requests: the first of them is fixed
  // and the others take its outcome (fix_shared_with). The loops started with generation,
  // unless it was read from the run store.
  if (!fix_launch_) {
    for (const auto& c : candidates_) judging_->memo().expect(c.sql);
    fix_launch_ = launch_fixes(1);
    fix_launch_->done(0, &candidates_);
  }
  std::vector<int> leader;
  Status fixed = fix_launch_->finish(candidates_, leader);
  fix_launch_.reset();
  NL2SQL_RETURN_IF_ERROR(fixed);
  for (size_t i = 0; i < candidates_.size(); ++i) {
    if (leader[i] < 0) continue;
    auto& c = candidates_[i];
    const auto& l = candidates_[static_cast<size_t>(leader[i])];
    c.fix_shared_with = l.id;
    c.sql = l.sql;
    c.execution = l.execution;
    c.still_failing = l.still_failing;
  }
  for (size_t i = 0; i < candidates_.size(); ++i) {
    // Executable before fixing: the first round's starting point failed only when a round ran.
    const auto& c = candidates_[leader[i] >= 0 ? static_cast<size_t>(leader[i]) : i];
    bool before = c.fix_rounds.empty() ? c.execution.ok() && !c.rejected
                                       : false;
    if (!c.fix_rounds.empty() && c.fix_rounds.front().failure_class == "empty_result") before = true;
    exec_before_fix_[candidates_[i].id] = before;
  }
  latency_["fix"] = seconds_since(t0);
  json payload = {{"candidates", json::array()},
                  {"executable_before_fix", exec_before_fix_},
                  {"latency_s", latency_["fix"]}};
  for (const auto& c : candidates_) payload["candidates"].push_back(generate::to_json(c));
  return payload;
}

// Judges every candidate against gold (the evaluator's own rules, through the run's result
// cache) and keeps each candidate's result for selection. Not checkpointed: it is SQL only, and
// the result cache makes a resumed judge a lookup.
//
// Each distinct query is judged once (candidates with the same SQL share the item and the
// result). A query the fix stage executed is not executed again: its result from the question's
// memo is handed to the run's result cache before the judge looks it up there, and the memo's
// shared result is what selection sees.
Result<json> QuestionRun::run_judge() {
  auto t0 = Clock::now();
  judging_->judge_candidates(candidates_);
  latency_["eval"] = seconds_since(t0);
  return json();
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

void QuestionRun::prepare_selection() {
  // Pool for the selectors: the gold-free task and the candidates (no gold in either).
  select::SelectionInput& input = selection_input_;
  input = select::SelectionInput();
  std::vector<bool>& correct = correct_;
  correct.clear();
  input.question = &task_;
  input.schema = schema_;
  input.metadata = metadata_.get();
  input.db_path = db_path_;
  input.generator_order = s_.generator_names;
  input.seed = core::stage_seed(s_.settings.seed, q_.question_id, "select");
  // The tournament's verdicts serve the curves' re-runs on the pool's prefixes too.
  input.pair_verdicts = std::make_shared<select::PairVerdicts>();
  // And every model-calling selector's answers serve the curves' re-runs of the same request.
  input.ask_memo = std::make_shared<select::AskMemo>();
  for (size_t i = 0; i < candidates_.size(); ++i) {
    const auto& c = candidates_[i];
    select::PoolCandidate pc;
    pc.id = c.id;
    pc.generator = c.generator;
    pc.profile = c.profile;
    pc.sql = c.sql;
    pc.result = judging_->result(i);
    input.candidates.push_back(std::move(pc));
    correct.push_back(judging_->correct(i));
  }

}

Status QuestionRun::load_select(json done) {
  prepare_selection();
  select::SelectionInput& input = selection_input_;
  {
    const std::string where = "question " + q_.question_id + ", stored select";
    NL2SQL_RETURN_IF_ERROR(core::read_key(done, "latency_s", latency_["select"], where));
    selections_.clear();
    for (const auto& [name, sel] : done.items()) {
      if (name == "latency_s" || name == "llm_faults") continue;
      auto rec = run::selection_from_json(sel, name, where + " \"" + name + "\"");
      if (!rec) return rec.status();
      selections_[name] = std::move(*rec);
    }
    // The stored tournament's verdicts serve the curves' re-runs below, as in an uninterrupted run.
    if (auto t = selections_.find("tournament"); t != selections_.end()) {
      const auto* duels = std::get_if<select::DuelExplanation>(&t->second.explanation);
      std::map<std::string, std::string> sql_of;
      for (const auto& c : input.candidates) sql_of[c.id] = c.sql;
      if (duels && duels->decisions)
        for (const auto& d : *duels->decisions) {
          if (d.by != "model") continue;
          const std::string w = d.winner.value_or("");
          if (!sql_of.count(d.a) || !sql_of.count(d.b)) continue;
          input.pair_verdicts->put(sql_of[d.a], sql_of[d.b], w.empty() ? "" : w == d.a ? "A" : "B");
        }
    }
  }
  return Status::ok();
}

Result<json> QuestionRun::run_select() {
  prepare_selection();
  select::SelectionInput& input = selection_input_;
  {
    auto t0 = Clock::now();
    for (const auto& name : s_.settings.selectors) {
      auto t1 = Clock::now();
      auto sel = s_.selectors.at(name)->select(input);
      if (!sel) return sel.status();
      select::check_duels_against_gold(*sel, db_path_, *s_.executor, q_.gold_sql);
      run::SelectionRecord rec;
      rec.chosen = sel->chosen;
      rec.llm_calls = sel->llm_calls();
      // A selector's explanation its family's struct cannot hold is a bug of that selector
      // (tests/select/explanation_test.cpp runs every one through it).
      auto explanation = select::explanation_from_json(sel->explanation, name, "question " + q_.question_id +
                                                                                   ", selection \"" + name + "\"");
      if (!explanation) return internal_error(explanation.status().message());
      rec.explanation = std::move(*explanation);
      rec.latency_s = seconds_since(t1);
      rec.calls = sel->calls;
      for (const auto& c : sel->calls) rec.cost_usd += c.cost_usd;
      if (sel->chosen >= 0 && sel->chosen < static_cast<int>(candidates_.size())) {
        rec.candidate_id = candidates_[sel->chosen].id;
        rec.sql = candidates_[sel->chosen].sql;
        rec.correct = judging_->correct(static_cast<size_t>(sel->chosen));
      } else {
        rec.correct = false;
      }
      selections_[name] = std::move(rec);
    }
    latency_["select"] = seconds_since(t0);
    json payload = json::object();
    for (const auto& [name, rec] : selections_) payload[name] = run::to_json(rec);
    payload["latency_s"] = latency_["select"];
    return payload;
  }
}

// Curves vs number of candidates: bounds and self-consistency on the first k candidates of
// the interleaved order; the primary selector re-run on that prefix when run.curve_selector.
// The selection's pool and verdict memos serve these re-runs (no pair asked twice).
Result<json> QuestionRun::run_curves() {
  const select::SelectionInput& input = selection_input_;
  const std::vector<bool>& correct = correct_;
  curves_.clear();
  curve_calls_.clear();
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
    } else if (s_.settings.curve_selector && !primary->traits().uses_expert_weights) {
      auto sel = primary->select(sub);
      if (sel) curve_calls_.insert(curve_calls_.end(), sel->calls.begin(), sel->calls.end());
      if (sel && sel->chosen >= 0) point.selector = static_cast<bool>(sub_correct[sel->chosen]);
      else if (sel) point.selector = false;
    }
    // run.curve_selectors: each selector on the same prefix, once per repeat with a selection
    // seed of its own (repeat 0: the question's selection seed, so on the whole pool it is the
    // stored selection); a selector that calls no model is the same every time and runs once.
    if (!s_.settings.curve_selectors.empty()) {
      point.contested = clusters.clusters.size() >= 2 && point.upper.value_or(false);
      for (const auto& name : s_.settings.curve_selectors) {
        const bool is_primary = name == s_.settings.primary_selector;
        size_t repeats = is_primary ? s_.settings.curve_repeats_primary : s_.settings.curve_repeats;
        if (s_.selectors.at(name)->traits().deterministic()) repeats = 1;
        std::vector<bool>& picks = point.selectors[name];
        for (size_t r = 0; r < repeats; ++r) {
          if (r == 0 && n == candidates_.size()) {
            if (auto it = selections_.find(name); it != selections_.end()) {
              picks.push_back(it->second.correct.value_or(false));
              continue;
            }
          }
          if (r == 0 && is_primary && point.selector) {
            picks.push_back(*point.selector);
            continue;
          }
          select::SelectionInput rin = sub;
          if (r > 0) rin.seed = core::stage_seed(s_.settings.seed, q_.question_id, "select#" + std::to_string(r));
          auto sel = s_.selectors.at(name)->select(rin);
          if (!sel) {
            spdlog::warn("question {}: curve selector {} on {} candidates (repeat {}): {}", q_.question_id, name, n, r,
                         sel.status().message());
            picks.push_back(false);
            continue;
          }
          curve_calls_.insert(curve_calls_.end(), sel->calls.begin(), sel->calls.end());
          picks.push_back(sel->chosen >= 0 && sub_correct[static_cast<size_t>(sel->chosen)]);
        }
      }
    }
    curves_[static_cast<int64_t>(k)] = point;
  }
  faults_["curves"] = llm_faults_between(curves_before, usage_now());
  return json();
}

void QuestionRun::add_usage(run::QuestionRecord& rec,
                            const std::map<std::string, run::SelectionRecord>& selections) const {
  const auto& prices = s_.client->settings().profiles;
  // A question that failed before its context stage ended has no context payload.
  if (context_) add_calls(rec.usage, "context", context_->calls, prices);
  for (const auto& c : candidates_) {
    add_calls(rec.usage, "generate", c.calls, prices);
    run::StageUsage& fix = rec.usage["fix"];
    for (const auto& r : c.fix_rounds) add_call(fix, r.call, prices);
  }
  for (const auto& [name, sel] : selections)
    if (sel.calls) add_calls(rec.usage, "select", *sel.calls, prices);
  // The primary selector re-run on the curves' candidate prefixes (run.curve_selector).
  add_calls(rec.usage, "curves", curve_calls_, prices);
}

// The counts untraced usage is reckoned in (calls, tokens, cost, cache hits) of `from` added to `to`.
static void add_counts(run::StageUsage& to, const run::StageUsage& from) {
  to.calls += from.calls;
  to.prompt_tokens += from.prompt_tokens;
  to.completion_tokens += from.completion_tokens;
  to.cost_usd += from.cost_usd;
  to.cache_hits += from.cache_hits;
  to.cache_prompt_tokens += from.cache_prompt_tokens;
  to.cache_completion_tokens += from.cache_completion_tokens;
}

run::StageUsage QuestionRun::traced_usage() const {
  run::QuestionRecord scratch;
  add_usage(scratch, selections_);
  run::StageUsage sum;
  for (const auto& [stage, u] : scratch.usage) add_counts(sum, u);
  return sum;
}

// A stage that fails drops the traces of calls it had answered when a sibling call failed (a
// generator whose other sample was cancelled by a stop returns the error, not its answered
// samples): the client counted those calls for the question, and what it counted since the
// stage began beyond what the traces hold is added to the stage, so every token the server
// processed and the client read is in the report.
void QuestionRun::add_untraced_usage(run::QuestionRecord& rec, const char* stage) const {
  const llm::UsageTotals counted = s_.client->accounting().question(q_.question_id);
  const run::StageUsage traced = traced_usage();
  auto gap = [](int64_t counted_now, int64_t counted_then, int64_t traced_now, int64_t traced_then) {
    return std::max<int64_t>(0, (counted_now - counted_then) - (traced_now - traced_then));
  };
  const llm::UsageTotals& c0 = stage_began_counted_;
  const run::StageUsage& t0 = stage_began_traced_;
  run::StageUsage missing;
  missing.calls = gap(counted.calls - counted.cache_hits, c0.calls - c0.cache_hits, traced.calls, t0.calls);
  missing.prompt_tokens = gap(counted.prompt_tokens - counted.cache_prompt_tokens,
                              c0.prompt_tokens - c0.cache_prompt_tokens, traced.prompt_tokens, t0.prompt_tokens);
  missing.completion_tokens =
      gap(counted.completion_tokens - counted.cache_completion_tokens,
          c0.completion_tokens - c0.cache_completion_tokens, traced.completion_tokens, t0.completion_tokens);
  missing.cost_usd = std::max(0.0, (counted.cost_usd - c0.cost_usd) - (traced.cost_usd - t0.cost_usd));
  missing.cache_hits = gap(counted.cache_hits, c0.cache_hits, traced.cache_hits, t0.cache_hits);
  missing.cache_prompt_tokens =
      gap(counted.cache_prompt_tokens, c0.cache_prompt_tokens, traced.cache_prompt_tokens, t0.cache_prompt_tokens);
  missing.cache_completion_tokens = gap(counted.cache_completion_tokens, c0.cache_completion_tokens,
                                        traced.cache_completion_tokens, t0.cache_completion_tokens);
  if (missing == run::StageUsage{}) return;
  add_counts(rec.usage[stage], missing);
  spdlog::debug("question {}: {} stage failed; {} answered call(s) ({} + {} tokens) it left untraced are counted",
                q_.question_id, stage, missing.calls, missing.prompt_tokens, missing.completion_tokens);
}

Status QuestionRun::incomplete_stage(const std::string& /*stage*/, const run::LlmFaults& faults) const {
  int64_t lost = 0;
  std::string kinds;
  for (const auto& [kind, n] : faults.failed_by_kind) {
    if (!llm::is_lost_call_kind_name(kind)) continue;
    lost += n;
    kinds += (kinds.empty() ? "" : ", ") + kind + " " + std::to_string(n);
  }
  if (lost == 0) return Status::ok();
  const bool cached = s_.client->settings().cache.mode == llm::CacheMode::kReadWrite;
  return Status(ErrorCode::kUnavailable,
                "incomplete: " + std::to_string(lost) + " model call" + (lost == 1 ? "" : "s") +
                    " got no answer (" + kinds + "); the stage is not stored — rerun the same command to send " +
                    (cached ? "them again (answered calls come from the response cache)"
                            : "its calls again (llm.cache.mode is not read-write: answered calls are sent again too)"));
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

// A candidate as the record keeps it: the generate layer's trace, not yet judged.
run::CandidateRecord candidate_record(const generate::Candidate& c) {
  run::CandidateRecord out;
  static_cast<generate::Candidate&>(out) = c;
  return out;
}

run::QuestionRecord QuestionRun::final_record() {
  run::QuestionRecord rec = base_record();
  if (auto stmt = sql::parse_query(q_.gold_sql); stmt.is_ok())
    for (const auto& t : sql::compute_features(*stmt->select).tags()) rec.features.push_back(t);
  rec.context = context_;

  auto clusters = [&] {
    std::vector<select::PoolCandidate> pool;
    for (size_t i = 0; i < candidates_.size(); ++i) {
      select::PoolCandidate pc;
      pc.id = candidates_[i].id;
      pc.generator = candidates_[i].generator;
      pc.sql = candidates_[i].sql;
      pc.result = judging_->result(i);
      pool.push_back(std::move(pc));
    }
    return select::cluster_pool(pool, select::ResultEquality::kRelaxed, s_.generator_names);
  }();
  std::vector<bool> matches;
  for (size_t i = 0; i < candidates_.size(); ++i) {
    run::CandidateRecord c = candidate_record(candidates_[i]);
    const eval::ItemResult& item = judging_->item(i);
    const bool correct = judging_->correct(i);
    run::CandidateRecord::Judgement g;
    if (!item.gold_unusable) g.correct = correct;
    g.cluster = clusters.cluster_of[i];
    auto before = exec_before_fix_.find(candidates_[i].id);
    g.executable_before_fix = before != exec_before_fix_.end() && before->second;
    g.executable_after_fix = judging_->result(i) != nullptr;
    g.outcome = item.outcome;
    g.verdicts = item.verdicts;
    c.judged = std::move(g);
    if (judging_->result(i)) matches.push_back(correct);
    rec.candidates.push_back(std::move(c));
  }
  rec.selections = selections_;
  if (auto it = rec.selections.find(s_.settings.primary_selector); it != rec.selections.end())
    rec.prediction = it->second.sql;
  {
    auto t0 = Clock::now();
    verdict_ = judging_->judge_prediction(rec.prediction, candidates_);
    latency_["eval"] += seconds_since(t0);
  }
  rec.verdict = verdict_of(*verdict_);
  if (rec.difficulty.empty()) rec.difficulty = verdict_->difficulty;
  rec.bounds = run::Bounds{select::oracle_bound(matches), select::adversarial_bound(matches)};
  rec.curves = curves_;

  add_usage(rec, rec.selections);
  rec.curve_calls = curve_calls_;
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
    // What the question's model calls did before it failed stays accounted for: the context
    // stage's calls when it ran, the candidates made so far (their traces hold the failed calls)
    // and the faults per stage. (Without the context, a keyword call that failed before the
    // generate stage failed was counted in the record's faults and traced nowhere.)
    rec.context = context_;
    for (const auto& c : candidates_) rec.candidates.push_back(candidate_record(c));
    // The selectors that ran keep their calls' traces (a failed call among them included).
    rec.selections = selections_;
    rec.curve_calls = curve_calls_;
    // Every call it made is counted: the report's totals include failed questions.
    add_usage(rec, selections_);
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
  // Gold runs for the judge from the start, beside the model calls; a candidate that writes
  // gold's text takes that run (see QuestionJudging::memo()).
  judging_.emplace(s_, q_, db_path_);
  const bool sequenced = static_cast<bool>(s_.weights);
  // The stage table: a stage a previous run stored is loaded from the run store; the others run,
  // and those with a place in the store are stored with the faults their calls survived (each
  // call's usage is in the traces the record holds). The first stage that fails ends the question.
  struct Row {
    Stage stage;
    const char* stored_as;                           // nullptr: never stored
    Status (QuestionRun::*load)(json stored);        // the stored stage back into this run
    Result<json> (QuestionRun::*run)();              // runs it; the payload to store
  };
  static constexpr Row kStages[] = {
      {Stage::kContext, "context", &QuestionRun::load_context, &QuestionRun::run_context},
      {Stage::kGenerate, "generate", &QuestionRun::load_generate, &QuestionRun::run_generate},
      {Stage::kFix, "fix", &QuestionRun::load_fix, &QuestionRun::run_fix},
      {Stage::kJudge, nullptr, nullptr, &QuestionRun::run_judge},
      {Stage::kSelect, "select", &QuestionRun::load_select, &QuestionRun::run_select},
      {Stage::kCurves, nullptr, nullptr, &QuestionRun::run_curves}};
  run::QuestionRecord rec;
  Stage stage = Stage::kContext;
  Status st = Status::ok();
  for (const Row& row : kStages) {
    stage = row.stage;
    // Weighted voting: question t selects after question t-1 updated the weights.
    if (row.stage == Stage::kSelect && sequenced) {
      wait_turn();
      if (cancelled()) st = Status(ErrorCode::kCancelled, "run cancelled");
    }
    if (!st) break;
    stage_began_counted_ = usage_now();
    stage_began_traced_ = traced_usage();
    if (row.stored_as)
      if (auto done = stored(row.stored_as)) {
        st = (this->*row.load)(std::move(*done));
        if (!st) break;
        continue;
      }
    // Fix loops started with generation counted their faults there until it was stored; the fix
    // stage counts from then on.
    const llm::UsageTotals before = row.stage == Stage::kFix && fix_launch_ ? usage_at_put_ : usage_now();
    Result<json> payload = (this->*row.run)();
    st = payload.status();
    if (st && row.stored_as) st = put(row.stored_as, std::move(*payload), before);
    if (!st) break;
  }
  if (st) {
    rec = final_record();
    if (sequenced) {
      // An expert (a generator or a profile, as select.wma.experts says) is right when any of
      // its candidates is.
      std::map<std::string, bool> expert_correct;
      for (size_t i = 0; i < candidates_.size(); ++i) {
        if (judging_->item(i).gold_unusable) continue;
        const auto& c = candidates_[i];
        bool& v = expert_correct.try_emplace(select::expert_of(s_.expert_kind, c.generator, c.profile), false)
                      .first->second;
        v = v || judging_->correct(i);
      }
      if (!expert_correct.empty()) s_.weights->update(expert_correct, q_.question_id);
      rec.weights = s_.weights->snapshot();
    }
  } else {
    // The curves are part of the select stage in a failed record's words.
    rec = fail(st, stage_name(stage == Stage::kCurves ? Stage::kSelect : stage));
    add_untraced_usage(rec, stage_name(stage));
  }
  if (sequenced) finish_turn();
  return rec;
}

const char* stage_name(Stage stage) {
  switch (stage) {
    case Stage::kContext: return "context";
    case Stage::kGenerate: return "generate";
    case Stage::kFix: return "fix";
    case Stage::kJudge: return "judge";
    case Stage::kSelect: return "select";
    case Stage::kCurves: return "curves";
  }
  return "?";
}

}  // namespace nl2sql::pipeline
