// The run's set-up units (run_parts.h): services, store and resume check, the work, the
// scheduling policy, the weights' replay.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <set>

#include "batch_journal.h"
#include "nl2sql/core/log.h"
#include "nl2sql/db/schema_info.h"
#include "nl2sql/run/run_data.h"
#include "nl2sql/select/external.h"
#include "nl2sql/sim/simulator.h"

#include "manifest.h"
#include "nl2sql/pipeline/model_use.h"
#include "run_parts.h"

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

bool used_template_file(const llm::PromptLibrary& prompts, const std::string& name) {
  for (const auto& use : prompts.used())
    if (use.file == name) return true;
  return false;
}

// How each candidate pool read from a file meets the dataset: ids it has that the dataset does
// not, and questions of this run it has nothing for — counted, listed and logged, never dropped.
json describe_pools(const std::vector<std::unique_ptr<generate::Generator>>& generators, const data::Dataset& ds,
                    const std::vector<size_t>& picked) {
  json out = json::array();
  std::vector<data::Task> all;
  for (const auto& q : ds.questions) all.push_back(q.task());
  std::set<std::string> in_run;
  for (size_t i : picked) in_run.insert(ds.questions[i].question_id);
  for (const auto& g : generators) {
    const generate::CandidatePoolFile* pool = g->pool_file();
    if (!pool) continue;
    const generate::PoolCoverage c = pool->coverage(all);
    json missing = json::array();
    for (const auto& id : c.missing_ids)
      if (in_run.count(id)) missing.push_back(id);
    out.push_back({{"label", g->name()},
                   {"path", pool->path().string()},
                   {"layout", pool->layout()},
                   {"hash", pool->hash()},
                   {"candidates", c.candidates},
                   {"questions_with_candidates", c.questions},
                   {"run_questions_missing", missing},
                   {"unknown_ids", c.unknown_ids}});
    auto first = [](const json& ids) {
      std::string s;
      for (size_t i = 0; i < ids.size() && i < 5; ++i) s += (i ? ", " : "") + ids[i].get<std::string>();
      return ids.size() > 5 ? s + ", …" : s;
    };
    spdlog::info("generator {}: {} candidates for {} questions from {} ({})", g->name(), c.candidates, c.questions,
                 pool->path().string(), pool->layout());
    if (!missing.empty())
      spdlog::warn("generator {}: {} question(s) of this run are not in {} (they get no candidate from it; listed in "
                   "report.md): {}",
                   g->name(), missing.size(), pool->path().string(), first(missing));
    if (!c.unknown_ids.empty())
      spdlog::warn("generator {}: {} id(s) in {} are not questions of the dataset (listed in report.md): {}", g->name(),
                   c.unknown_ids.size(), pool->path().string(), first(json(c.unknown_ids)));
  }
  return out;
}

// The stages' objects: context builder, generators (with the coverage of pools read from
// files), fixer, the voting selectors' weight store, the selectors.
Status build_stages(Shared& s, const data::Dataset& ds, const std::vector<size_t>& picked) {
  const RunOptions& options = *s.options;
  auto ctx = context::ContextBuilder::create(s.config, s.client.get(), *s.executor, options.index_dir,
                                             s.prompts.get());
  if (!ctx) return ctx.status();
  s.context = std::move(*ctx);
  auto gens = generate::make_generators(s.config, s.client.get(), s.executor.get(), *s.prompts, &options.dataset);
  if (!gens) return gens.status();
  s.generators = std::move(*gens);
  if (s.generators.empty()) return invalid_input("config key generate.generators: no generator configured");
  for (const auto& g : s.generators) s.generator_names.push_back(g->name());
  s.candidate_pools = describe_pools(s.generators, ds, picked);
  auto fixer = fix::Fixer::create(s.config, s.client.get(), *s.prompts);
  if (!fixer) return fixer.status();
  s.fixer.emplace(std::move(*fixer));

  // select.method names a built-in method or an outside selector's label; the schema cannot
  // list the labels, so a misspelt method is refused here, even where run.selectors leaves it unused.
  auto method = s.config.get_string("select.method");
  if (!method) return method.status();
  if (auto t = select::method_traits(*method, s.config); !t)
    return invalid_input("config key select.method: " + t.status().message());
  bool voting = false;
  for (const auto& name : s.settings.selectors) {
    auto traits = select::method_traits(name, s.config);
    if (!traits) return invalid_input("config key run.selectors: " + traits.status().message());
    voting = voting || traits->uses_expert_weights;
  }
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
  services.prompts = s.prompts.get();
  services.weights = s.weights;
  for (const auto& name : s.settings.selectors) {
    auto sel = select::make_selector_named(name, s.config, services);
    if (!sel) return sel.status();
    s.selectors[name] = std::move(*sel);
  }
  return Status::ok();
}

}  // namespace

Result<Services> set_up(Shared& s, const data::Dataset& ds, const std::vector<size_t>& picked,
                        PreflightGate& preflight) {
  const RunOptions& options = *s.options;
  Services out;
  llm::ClientOptions client_options;
  client_options.transport = options.transport;
  client_options.cancel_flag = options.cancel;
  client_options.stop_on_fatal_error = true;
  // The offline simulator, when a profile is simulated: it reads the dataset's gold itself (no
  // stage input carries gold); its duels judge candidates with the run's evaluator (set below).
  auto simulator = sim::attach_if_simulated(client_options, s.config, &ds);
  if (!simulator) return simulator.status();
  auto client = llm::Client::from_config(s.config, client_options);
  if (!client) return client.status();
  s.client = std::move(*client);
  auto use = model_use(s.config, s.settings.selectors);
  if (!use) return use.status();
  out.used_profiles = s.client->profiles_for(use->roles, use->profiles);
  out.simulated = s.client->any_simulated(out.used_profiles);
  // Preflight: one real request per profile the run uses, so a wrong model name, a refused
  // field or a dead endpoint stops the run in seconds instead of failing every question. It
  // does not hold the run back: it is sent while the run gets ready (at once when the run folder
  // is new, so every picked question is to run), and the questions start meanwhile with their
  // model calls held until it passed (llm::Client::hold_calls_until).
  const bool preflighting = s.client->settings().preflight &&
                            s.client->settings().cache.mode != llm::CacheMode::kReplay &&
                            s.client->settings().cache.mode != llm::CacheMode::kReadOnly;
  preflight.configure(s.client.get(), out.used_profiles, preflighting);
  if (!picked.empty() && (options.force_new || !fs::exists(options.out_dir / run::RunStore::kFileName)))
    preflight.start();
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
  out.lock = std::move(*folder_lock);
  if (options.force_new) {
    for (const char* f : {"run.sqlite", "run.sqlite-wal", "run.sqlite-shm", "manifest.json",
                          "config.resolved.json", "weights.json"})
      fs::remove(options.out_dir / f, ec);
  }
  auto exec_cache = db::ResultCache::open(options.out_dir / "exec_cache.sqlite");
  if (!exec_cache) return exec_cache.status();
  s.exec_cache = std::move(*exec_cache);
  // A test-suite folder judges spider-ts on every database file, as `nl2sql eval` does.
  auto variants = data::test_suite_variants(ds, s.settings.eval.test_suite);
  if (!variants) return variants.status().with_context("config key eval.test_suite");
  s.settings.eval.variants = std::move(*variants);
  s.judge = std::make_unique<eval::ItemJudge>(ds.benchmark, s.settings.eval, s.exec_cache.get());
  if (*simulator) {
    std::map<std::string, const data::Question*> by_id;
    for (const auto& q : ds.questions) by_id[q.question_id] = &q;
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
      return s.judge->correct(
          s.judge->judge({.question = q, .db_path = db->second, .fingerprint = fp->second, .prediction = p}).item);
    });
  }

  NL2SQL_RETURN_IF_ERROR(build_stages(s, ds, picked));
  for (const auto& [db_id, path] : ds.db_paths) {
    auto f = db::database_fingerprint(path);
    if (!f) return f.status();
    s.fingerprints[db_id] = *f;
    if (auto info = db::inspect_schema(path);
        info && std::none_of(info->tables.begin(), info->tables.end(),
                             [](const db::TableInfo& t) { return t.declares_collation(); }))
      s.collation_free.insert(db_id);
  }
  return out;
}

Result<OpenedStore> open_store(Shared& s, const data::Dataset& ds, const std::vector<size_t>& picked,
                               const Services& services) {
  const RunOptions& options = *s.options;
  auto fingerprint = ds.fingerprint();
  if (!fingerprint) return fingerprint.status();
  for (const auto& name : s.prompts->unmatched_overrides())
    if (!used_template_file(*s.prompts, name))
      spdlog::warn("prompts folder {}: {}.txt is no bundled template's name and no `template` key names it: unused",
                   s.prompts->override_dir().string(), name);
  json manifest = make_manifest(s, ds, *fingerprint, picked, templates_json(s.prompts->used()), services.simulated,
                                services.used_profiles);
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
  // Batch jobs a stop left running are picked up from the store, new ones recorded there.
  s.client->set_batch_journal(std::make_shared<RunStoreBatchJournal>(**store));
  if (services.simulated)
    spdlog::warn("the sim provider answers some roles: every accuracy in this run is SIMULATED "
                 "(derived from gold), not a model's");

  return OpenedStore{std::move(*store), manifest["primary_metric"].get<std::string>()};
}

Result<Work> load_work(Shared& s, const data::Dataset& ds, const std::vector<size_t>& picked) {
  Work w;
  {
    auto recs = run::read_final_records(*s.store, s.options->out_dir);
    if (!recs) return recs.status();
    w.store_had_finals = !recs->empty();
    for (auto& r : *recs) {
      // A question that failed (its model calls, its database) is attempted again: its
      // finished stages are reused, the failed one is redone.
      if (!r.ok) {
        std::string id = r.question_id;
        w.failed_before.emplace(std::move(id), std::move(r));
        continue;
      }
      std::string id = r.question_id;
      w.finals.emplace(std::move(id), std::move(r));
    }
  }
  for (size_t pos = 0; pos < picked.size(); ++pos) {
    const auto& q = ds.questions[picked[pos]];
    s.order.push_back(q.question_id);
    if (!w.finals.count(q.question_id)) {
      w.pending.push_back(&q);
      w.positions.push_back(pos);
    }
  }
  return w;
}

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

int64_t slot_rank(int64_t question_position, const std::string& stage) {
  return question_position - kLevelHeadStart * requests_after(stage);
}

void set_slot_priority(llm::Client& client, const std::vector<std::string>& order) {
  auto position = std::make_shared<std::map<std::string, int64_t>>();
  for (size_t pos = 0; pos < order.size(); ++pos) position->emplace(order[pos], static_cast<int64_t>(pos));
  client.set_priority([position](const llm::ChatRequest& r) {
    llm::SlotPriority p;
    if (auto it = position->find(r.question_id); it != position->end()) p.rank = it->second;
    p.rank = slot_rank(p.rank, r.stage);
    return p;
  });
}

void replay_weights(Shared& s, const std::map<std::string, run::QuestionRecord>& finals) {
  if (!s.weights) return;
  {
    // Replays the stored weight updates in run order, up to the first unfinished question.
    std::lock_guard lock(s.seq_mu);
    for (size_t pos = 0; pos < s.order.size(); ++pos) {
      auto it = finals.find(s.order[pos]);
      if (it == finals.end()) break;
      std::map<std::string, bool> expert_correct;
      for (const auto& c : it->second.candidates) {
        if (!c.judged || !c.judged->correct) continue;
        bool& v = expert_correct.try_emplace(select::expert_of(s.expert_kind, c.generator, c.profile), false)
                      .first->second;
        v = v || *c.judged->correct;
      }
      if (!expert_correct.empty()) s.weights->update(expert_correct, s.order[pos]);
      s.seq_next = pos + 1;
    }
    for (size_t pos = s.seq_next; pos < s.order.size(); ++pos)
      if (finals.count(s.order[pos])) s.seq_done.insert(pos);
  }
}

}  // namespace nl2sql::pipeline
