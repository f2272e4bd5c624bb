#include "nl2sql/pipeline/pipeline.h"
#include "nl2sql/pipeline/model_use.h"
#include "nl2sql/run/run_lock.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <malloc.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <future>
#include <cstdio>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <thread>
#include <tuple>

#include "nl2sql/context/question_context.h"
#include "nl2sql/core/files.h"
#include "nl2sql/core/hash.h"
#include "nl2sql/core/log.h"
#include "nl2sql/core/thread_pool.h"
#include "nl2sql/db/executor.h"
#include "nl2sql/db/result_cache.h"
#include "nl2sql/db/schema_info.h"
#include "nl2sql/eval/evaluator.h"
#include "nl2sql/fix/fixer.h"
#include "nl2sql/generate/generator.h"
#include "nl2sql/llm/client.h"
#include "nl2sql/run/run_data.h"
#include "nl2sql/run/run_store.h"
#include "nl2sql/select/selector.h"
#include "nl2sql/select/weights.h"
#include "nl2sql/sim/simulator.h"

#include "manifest.h"
#include "progress.h"
#include "question_run.h"
#include "shared.h"

namespace nl2sql::pipeline {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// How many dependent model calls of its question follow a request of `stage`, at most, in the
// longest chain of a CHASE-style run: keywords → column filter → the online synthetic examples
// → generation → fix rounds → selection. A stage not named here is taken as generation.
int64_t requests_after(const std::string& stage) {
  if (stage == "describe" || stage == "keywords") return 6;
  if (stage == "column_filter" || stage == "embeddings") return 5;
  if (stage.rfind("os_examples", 0) == 0) return 4;
  if (stage == "fix") return 2;
  if (stage == "select" || stage == "judge") return 1;
  return 3;
}

// Questions whose database is missing, in one line each for those the run selected and for the
// rest (a partial copy of BIRD run with --db has a thousand of the latter): how many, on which
// databases, the first ids. The selected ones are listed in full in the manifest and report.md.
void log_skipped(const std::vector<data::SkippedQuestion>& all, const std::vector<data::SkippedQuestion>& selected) {
  auto summarise = [](const std::vector<data::SkippedQuestion>& list, size_t from, size_t to) {
    std::set<std::string> dbs;
    std::string ids;
    for (size_t i = from; i < to; ++i) {
      dbs.insert(list[i].db_id);
      if (i - from < 5) ids += (ids.empty() ? "" : ", ") + list[i].question_id;
    }
    std::string names;
    for (const auto& d : dbs) {
      if (names.size() > 80) {
        names += ", …";
        break;
      }
      names += (names.empty() ? "" : ", ") + d;
    }
    return fmt::format("{} question{} ({} database{}: {}; first ids {}{})", to - from, to - from == 1 ? "" : "s",
                       dbs.size(), dbs.size() == 1 ? "" : "s", names, ids, to - from > 5 ? ", …" : "");
  };
  if (!selected.empty())
    spdlog::warn("{} of this run skipped: {} — listed in report.md; first reason: {}",
                 summarise(selected, 0, selected.size()), "their database is missing", selected.front().reason);
  if (all.size() > selected.size()) {
    std::set<std::string> chosen;
    for (const auto& sk : selected) chosen.insert(sk.question_id);
    std::vector<data::SkippedQuestion> rest;
    for (const auto& sk : all)
      if (!chosen.count(sk.question_id)) rest.push_back(sk);
    spdlog::info("{} outside this run's selection have no database either (not run, not reported)",
                 summarise(rest, 0, rest.size()));
  }
}

}  // namespace

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
  for (size_t i = 0; i < ds->warnings.size() && i < 5; ++i) spdlog::warn("{}", ds->warnings[i]);
  if (ds->warnings.size() > 5) spdlog::warn("… and {} more dataset warnings", ds->warnings.size() - 5);
  auto picked = select_questions(*ds, options.filter);
  if (!picked) return picked.status();
  log_skipped(ds->skipped, skipped_in_selection(*ds, options.filter));
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
  // Preflight: one real request per profile the run uses, so a wrong model name, a refused
  // field or a dead endpoint stops the run in seconds instead of failing every question. It
  // does not hold the run back: it is sent while the run gets ready (at once when the run folder
  // is new, so every picked question is to run), and the questions start meanwhile with their
  // model calls held until it passed (llm::Client::hold_calls_until).
  const bool preflighting = s.client->settings().preflight &&
                            s.client->settings().cache.mode != llm::CacheMode::kReplay &&
                            s.client->settings().cache.mode != llm::CacheMode::kReadOnly;
  std::future<std::vector<llm::PreflightResult>> preflight;
  auto start_preflight = [&] {
    preflight = std::async(std::launch::async, [client = s.client.get(), used_profiles] {
      return client->preflight(used_profiles);
    });
  };
  if (preflighting && !picked->empty() &&
      (options.force_new || !fs::exists(options.out_dir / run::RunStore::kFileName)))
    start_preflight();
  db::ExecutorOptions exec_options;
  exec_options.limits = s.settings.eval.pred_limits;
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
  // A test-suite folder judges spider-ts on every database file, as `nl2sql eval` does.
  auto variants = data::test_suite_variants(*ds, s.settings.eval.test_suite);
  if (!variants) return variants.status().with_context("config key eval.test_suite");
  s.settings.eval.variants = std::move(*variants);
  s.judge = std::make_unique<eval::ItemJudge>(ds->benchmark, s.settings.eval, s.exec_cache.get());
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
  auto gens = generate::make_generators(s.config, s.client.get(), s.executor.get(), s.prompts_dir, &options.dataset);
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
    auto kind = select::configured_experts(s.config);
    if (!kind) return kind.status();
    s.weights = std::make_shared<select::WeightStore>(*eps);
    s.expert_kind = *kind;
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
    if (auto info = db::inspect_schema(path);
        info && std::none_of(info->tables.begin(), info->tables.end(),
                             [](const db::TableInfo& t) { return t.declares_collation(); }))
      s.collation_free.insert(db_id);
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
  std::map<std::string, run::QuestionRecord> failed_before;  // redone now; their spend is carried
  bool store_had_finals = false;
  {
    auto recs = run::read_final_records(**store, options.out_dir);
    if (!recs) return recs.status();
    store_had_finals = !recs->empty();
    for (auto& r : *recs) {
      // A question that failed (its model calls, its database) is attempted again: its
      // finished stages are reused, the failed one is redone.
      if (!r.ok) {
        std::string id = r.question_id;
        failed_before.emplace(std::move(id), std::move(r));
        continue;
      }
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
  {
    // Requests waiting for a model slot go out oldest question first (run order), not in
    // arrival order: a question that started earlier finishes earlier, so its SQL runs while
    // later questions still wait for the model, instead of every question reaching its
    // executions at once when the model work ends. (Superhero x300, 30 questions, chase.json
    // against a 100 ms fake endpoint: 9.2-10.3 s against 10.8-12.1 s in arrival order; neutral
    // on Spider, where SQL is cheap.)
    //
    // A request that has more of its question's model calls after it gets a head start of
    // kLevelHeadStart positions per step (requests_after), so a younger question's keywords or
    // column filter are not held until every older question's last fix round went out: the
    // question that starts last then does not run its whole chain alone at the end, with slots
    // free. Longest-remaining-chain first is what makes unit-time tasks finish earliest (Hu's
    // level scheduling); a small head start keeps most of oldest-first, and with it how many
    // questions hold their state at once. (Superhero x300, 30 questions, chase.json, 100 ms
    // fake endpoint, 8 alternated pairs: median wall 4.11 s oldest-first, 4.06 s with 4; peak
    // RSS 100-107 against 110-113 MiB; level first alone, 3.98 s and 145 MiB over 3 runs.)
    constexpr int64_t kLevelHeadStart = 4;
    auto position = std::make_shared<std::map<std::string, int64_t>>();
    for (size_t pos = 0; pos < s.order.size(); ++pos) position->emplace(s.order[pos], static_cast<int64_t>(pos));
    s.client->set_priority([position](const llm::ChatRequest& r) {
      llm::SlotPriority p;
      if (auto it = position->find(r.question_id); it != position->end()) p.rank = it->second;
      p.rank -= kLevelHeadStart * requests_after(r.stage);
      return p;
    });
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
        const std::string profile = c.trace.is_object() ? c.trace.value("profile", std::string()) : std::string();
        bool& v = expert_correct.try_emplace(select::expert_of(s.expert_kind, c.generator, profile), false)
                      .first->second;
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

  if (!pending.empty() && preflighting && !preflight.valid()) start_preflight();
  std::promise<Status> preflight_passed;
  if (preflight.valid()) s.client->hold_calls_until(preflight_passed.get_future().share());
  // The preflight's verdict, once it answered: the gate of the questions' model calls.
  auto judge_preflight = [&] {
    if (!preflight.valid()) return;
    const auto checks = preflight.get();
    // The checks are real calls the server answered (and billed): the run's report counts them
    // under the stage "preflight", kept in the run store over every invocation.
    if (const auto by_stage = s.client->accounting().by_stage(); by_stage.count("preflight")) {
      const llm::UsageTotals& t = by_stage.at("preflight");
      if (t.calls > 0) {
        run::StageUsage u;
        u.calls = t.calls;
        u.prompt_tokens = t.prompt_tokens;
        u.completion_tokens = t.completion_tokens;
        u.cached_tokens = t.cached_tokens;
        u.calls_reporting_cached = t.calls_reporting_cached;
        u.reasoning_tokens = t.reasoning_tokens;
        u.calls_reporting_reasoning = t.calls_reporting_reasoning;
        u.cost_usd = t.cost_usd;
        u.latency_s = t.latency_s;
        if (auto st = run::add_run_usage(*s.store, "preflight", run::run_usage_delta(u)); !st.is_ok())
          spdlog::warn("run store: the preflight's usage was not recorded: {}", st.message());
      }
    }
    Status verdict = Status::ok();
    for (const auto& r : checks) {
      if (r.ok) {
        if (!r.simulated)
          spdlog::info("preflight: profile {} ({} at {}) answered in {:.2f} s{}", r.profile, r.model,
                       r.endpoint, r.latency_s, r.note.empty() ? "" : " — " + r.note);
        continue;
      }
      verdict = Status(ErrorCode::kUnavailable,
                       "preflight: model profile \"" + r.profile + "\" (model " + r.model + " at " + r.endpoint +
                           ") failed: " + r.error + " — check it with `nl2sql models check --config …`");
      // Stopped before the gate opens: no held call goes out, no question stores a stage.
      s.client->stop_with(verdict);
      break;
    }
    preflight_passed.set_value(verdict);
  };

  ProgressOptions popts;
  popts.mode = options.progress;
  popts.interval_s = options.progress_interval_s;
  popts.total = summary.questions;
  Progress progress(popts, s.client.get());
  for (const auto& [id, r] : finals) progress.add_resumed(r.correct(manifest["primary_metric"].get<std::string>()));
  s.progress = &progress;
  progress.start();

  // Every call the server answered stays in the report's totals, also when no stored record
  // holds it: a question interrupted by a stop (not stored) leaves the calls of the stages it ran
  // but did not store; a failed question redone now leaves those of the stages its new record
  // does not take over from the store. Their usage goes to the run-wide usage (run_usage), by
  // the record's stage names.
  //
  // An interrupted question's stages that this run stored are counted in the run usage too (a
  // stopped run's report then shows everything it spent), and noted as provisional
  // (kProvisionalUsageKey): when the question finishes in a later run, its record counts them
  // again, and the provisional amount leaves the run usage.
  std::mutex carry_mu;
  // `u` holds run-usage counts by name (run::run_usage_delta); a negative sign takes them back.
  auto add_usage = [&](const std::string& question_id, const std::string& stage, const json& u, int sign) {
    json delta = json::object();
    for (const auto& [k, v] : u.items()) {
      if (v.is_number_integer()) delta[k] = sign * v.get<int64_t>();
      else if (v.is_number()) delta[k] = sign * v.get<double>();
    }
    if (auto st = run::add_run_usage(*s.store, stage, delta); !st)
      spdlog::warn("run store: question {}'s spent usage was not recorded: {}", question_id, st.message());
  };
  auto usage_json = [](const run::StageUsage& u) { return run::run_usage_delta(u); };
  auto carry_usage = [&](const run::QuestionRecord& r, const std::function<bool(const std::string&)>& counted,
                         const std::function<bool(const std::string&)>& provisional) {
    std::lock_guard lock(carry_mu);
    json pending = json::object();
    for (const auto& [stage, u] : r.usage) {
      const std::string pipeline_stage = stage == "curves" ? "select" : stage;
      if (counted(pipeline_stage)) continue;
      if (u.calls == 0 && u.prompt_tokens == 0 && u.completion_tokens == 0) continue;
      add_usage(r.question_id, stage, usage_json(u), 1);
      if (provisional(pipeline_stage)) pending[stage] = usage_json(u);
    }
    if (pending.empty()) return;
    auto all = s.store->get_meta(run::kProvisionalUsageKey);
    json marks = all && *all && (**all).is_object() ? **all : json::object();
    for (auto& [stage, u] : pending.items()) {
      json& m = marks[r.question_id][stage];
      if (!m.is_object()) m = json::object();
      for (const auto& [f, v] : u.items()) {
        if (v.is_number_integer()) m[f] = m.value(f, int64_t{0}) + v.get<int64_t>();
        else if (v.is_number()) m[f] = m.value(f, 0.0) + v.get<double>();
      }
    }
    if (auto st = s.store->set_meta(run::kProvisionalUsageKey, marks); !st)
      spdlog::warn("run store: question {}'s provisional usage was not recorded: {}", r.question_id, st.message());
  };
  // A question whose record now holds the stages counted provisionally: the amount leaves the
  // run usage.
  auto settle_usage = [&](const std::string& question_id) {
    std::lock_guard lock(carry_mu);
    auto all = s.store->get_meta(run::kProvisionalUsageKey);
    if (!all || !*all || !(**all).is_object() || !(**all).contains(question_id)) return;
    json marks = **all;
    for (const auto& [stage, u] : marks[question_id].items()) add_usage(question_id, stage, u, -1);
    marks.erase(question_id);
    if (auto st = s.store->set_meta(run::kProvisionalUsageKey, marks); !st)
      spdlog::warn("run store: question {}'s provisional usage was not settled: {}", question_id, st.message());
  };

  // Workers.
  std::optional<double> cap = s.settings.max_cost_usd;
  std::mutex mu;
  size_t in_flight = 0, finished_now = 0;  // guarded by mu
  double cost_finished = 0;                // guarded by mu: cost of questions finished now
  std::atomic<bool> budget_stop{false};
  std::atomic<size_t> not_started{0};
  std::atomic<size_t> interrupted_n{0};  // started, stopped by the run's stop before their record
  std::atomic<size_t> unrecorded{0};  // finished, but the run store refused the final record
  // The records stored by this invocation, as they were stored (per pending question).
  std::vector<std::optional<run::QuestionRecord>> stored_now(pending.size());
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
        run::QuestionRecord rec = qr.run();
        // Stopping (cancel flag or an auth failure): a record that failed, or whose calls were
        // cancelled or refused, is not stored — a resume completes it from its stored stages.
        bool interrupted = false;
        bool keep = false;  // stored: kept for the run's summary and reports
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
          } else {
            keep = true;
          }
          if (!rec.ok) spdlog::warn("question {} failed: {}", q.question_id, rec.error);
        }
        auto stored_by_this_run = [&](const std::string& stage) { return qr.stored_now(stage); };
        auto none = [](const std::string&) { return false; };
        if (interrupted) {
          carry_usage(rec, [&](const std::string& stage) { return qr.from_store(stage); }, stored_by_this_run);
        } else if (keep) {
          if (auto old = failed_before.find(q.question_id); old != failed_before.end())
            carry_usage(old->second, [&](const std::string& stage) { return qr.from_store(stage); }, none);
          settle_usage(q.question_id);
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
        if (interrupted) ++interrupted_n;
        else progress.question_finished(rec.correct(primary_metric), !rec.ok);
        if (keep) stored_now[k] = std::move(rec);
        // What the finished question freed goes back to the system, instead of staying in its
        // thread's arena as free pages that later questions on other threads cannot use
        // (superhero x300, 30 questions: peak RSS 126-130 MiB against 140-147 MiB, same CPU).
        // Not under AddressSanitizer: its allocator serves the process, and glibc's malloc, never
        // used, would first be set up here by concurrent workers (ptmalloc_init is not
        // thread-safe: two workers initializing it at once each leave an arena reference that
        // their exits both release, and glibc aborts in __malloc_arena_thread_freeres).
#if !defined(__SANITIZE_ADDRESS__)
        malloc_trim(0);
#endif
      });
    }
    judge_preflight();
    pool.wait_idle();
  }
  progress.stop();
  summary.eval_executions = s.judge->executions();
  s.exec_cache->flush();
  if (s.weights) {
    auto st = s.weights->save(options.out_dir / "weights.json");
    if (!st) spdlog::warn("cannot save weights.json: {}", st.message());
  }

  // Summary from the store (the source of truth, including resumed questions). When the store
  // held no final record at the start, it holds now exactly those this invocation stored: they
  // are taken as they were stored, in the store's order, instead of read back (the end of a run
  // waits for that read).
  Result<std::vector<run::QuestionRecord>> recs = std::vector<run::QuestionRecord>();
  if (store_had_finals) {
    recs = run::read_final_records(**store, options.out_dir);
    if (!recs) return recs.status();
  } else {
    for (auto& r : stored_now)
      if (r) recs->push_back(std::move(*r));
    std::sort(recs->begin(), recs->end(), [](const run::QuestionRecord& a, const run::QuestionRecord& b) {
      return std::tie(a.index, a.question_id) < std::tie(b.index, b.question_id);
    });
  }
  std::set<std::string> wanted(s.order.begin(), s.order.end());
  for (const auto& r : *recs) {
    if (!wanted.count(r.question_id)) continue;
    ++summary.finished;
    if (!r.ok) ++summary.failed;
    if (r.correct(primary_metric)) ++summary.correct;
  }
  summary.not_started = not_started;
  summary.interrupted = interrupted_n;
  summary.unrecorded = unrecorded;
  if (summary.unrecorded)
    spdlog::error("{} questions could not be recorded (the run store refused the writes: disk full?); "
                  "free space and rerun the same command to redo them",
                  summary.unrecorded);
  summary.cancelled = options.cancel && options.cancel->load();
  if (auto fatal = s.client->fatal_error()) {
    summary.fatal_error = fatal->message();
    spdlog::error("run stopped early: {}; {} questions interrupted and {} not started — finished stages "
                  "are kept, rerun the same command to resume once it is fixed",
                  summary.fatal_error, summary.interrupted, summary.not_started);
  }
  {
    auto usage = s.client->accounting().total();
    summary.llm_calls = usage.calls;
    summary.llm_failed = usage.errors;
    summary.llm_retries = usage.retries;
  }
  for (const auto& load : s.client->profile_loads()) {
    if (load.overloads == 0) continue;
    summary.overloaded.push_back(load);
    if (auto st = run::add_endpoint_load(*s.store, load.profile, load.overloads, load.max_in_flight,
                                         load.lowest_in_flight);
        !st)
      spdlog::warn("run store: the endpoint load was not recorded: {}", st.message());
  }
  summary.budget_stopped = budget_stop;
  summary.cost_usd = s.client->accounting().total().cost_usd;
  if (summary.budget_stopped)
    spdlog::warn("budget: stopped scheduling at ${:.4f} spent (cap ${:.4f}); {} questions not started",
                 summary.cost_usd, *cap, summary.not_started);

  summary.records = std::move(*recs);
  summary.wall_s = seconds_since(started);
  return summary;
}

}  // namespace nl2sql::pipeline
