// Data-gated: the whole generate + fix stage with the offline `sim` provider on a slice of
// Spider dev and on BIRD dev's superhero questions. Simulated answers — this checks the
// machinery at scale (every answer extracted, candidates executed through the executor, the
// fixer never lowering executability, traces complete, gold reachable in the pool), not a model.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <set>

#include "generate/demo_pool.h"
#include "nl2sql/db/result_compare.h"
#include "nl2sql/eval/compare.h"
#include "nl2sql/fix/fixer.h"
#include "nl2sql/generate/generator.h"
#include "nl2sql/llm/client.h"
#include "nl2sql/sim/simulator.h"
#include "support/test_env.h"

namespace nl2sql::generate {
namespace {
using nlohmann::json;

struct Tally {
  size_t questions = 0, candidates = 0, extracted = 0, exec_before = 0, exec_after = 0, any_gold = 0;
};

Tally run_stage(const data::Dataset& ds, const std::string& only_db, size_t max_questions) {
  core::Config config(json::parse(R"({
    "llm": {"models": {"sim": {"provider": "sim"}, "sim2": {"provider": "sim"}}, "default_profile": "sim",
            "cache": {"mode": "off"}},
    "generate": {"generators": [{"name": "baseline"}, {"name": "dc", "samples": 3, "shuffle": true},
                                {"name": "qp", "samples": 2}, {"name": "os", "samples": 2},
                                {"name": "ssev", "profiles": ["sim", "sim2"]}]}})"));
  Tally t;
  auto client = sim::make_client(config, &ds);
  EXPECT_TRUE(client.is_ok()) << client.status().message();
  if (!client) return t;
  db::Executor ex;
  auto gens = make_generators(config, client->get(), &ex, llm::PromptLibrary::bundled());
  auto fixer = fix::Fixer::create(config, client->get(), llm::PromptLibrary::bundled());
  EXPECT_TRUE(gens.is_ok() && fixer.is_ok());
  if (!gens || !fixer) return t;
  const bool spider = ds.benchmark == data::Benchmark::kSpider;
  for (const auto& q : ds.questions) {
    if (t.questions >= max_questions) break;
    if (!only_db.empty() && q.db_id != only_db) continue;
    const auto path = ds.db_paths.at(q.db_id);
    auto gold = ex.run(path, q.gold_sql);
    if (!gold.ok()) continue;
    ++t.questions;
    GenerationInput in;
    in.question = &q;
    in.schema = &ds.schemas.at(q.db_id);
    in.db_path = path;
    in.seed = t.questions;
    fix::FixInput fin{&q, in.schema, path, nullptr, nullptr, &ex, in.seed};
    bool any = false;
    for (const auto& g : *gens) {
      auto cands = g->generate(in);
      EXPECT_TRUE(cands.is_ok()) << cands.status().message();
      if (!cands) continue;
      for (auto& c : *cands) {
        ++t.candidates;
        t.extracted += c.extraction_ok;
        // An SSEV PostSQL candidate whose prompt equalled its PreSQL one takes that answer and
        // sent nothing itself (generation_shared_with names it).
        if (c.generation_shared_with.empty()) {
          EXPECT_FALSE(c.calls.empty());
          if (!c.calls.empty()) {
            EXPECT_EQ(c.calls.back().provider, "sim");
          }
        } else {
          EXPECT_TRUE(c.calls.empty());
        }
        Candidate unfixed = c;
        fix::execute_candidate(unfixed, ex, path);
        t.exec_before += unfixed.execution.ok();
        EXPECT_TRUE(fixer->fix(c, fin).is_ok());
        t.exec_after += c.execution.ok();
        for (const auto& r : c.fix_rounds) EXPECT_FALSE(r.call.template_hash.empty());
        auto r = ex.run(path, c.sql);
        if (r.ok() && (spider ? db::spider_ts_equal(gold.result, r.result, eval::spider_order_matters(q.gold_sql))
                              : db::bird_equal(r.result, gold.result)))
          any = true;
      }
    }
    t.any_gold += any;
  }
  return t;
}

void check(const Tally& t, size_t min_questions) {
  ASSERT_GE(t.questions, min_questions);
  EXPECT_EQ(t.candidates, t.questions * 12);  // 1 + 3 + 2 + 2 + (2 PreSQL + 2 PostSQL)
  EXPECT_EQ(t.extracted, t.candidates);       // sim answers are always fenced
  EXPECT_GE(t.exec_after, t.exec_before);
  EXPECT_GT(t.exec_after, t.candidates * 9 / 10);
  EXPECT_GT(t.any_gold, t.questions * 9 / 10);
}

TEST(GenerateStageSlow, SimOnSpiderDevSlice) {
  NL2SQL_REQUIRE_DATA(data);
  data::DatasetSpec spec;
  spec.benchmark = data::Benchmark::kSpider;
  spec.data_dir = data / "spider";
  auto ds = data::load_dataset(spec);
  ASSERT_TRUE(ds.is_ok()) << ds.status().message();
  check(run_stage(*ds, "", 150), 100);
}

TEST(GenerateStageSlow, SimOnBirdSuperhero) {
  NL2SQL_REQUIRE_DATA(data);
  data::DatasetSpec spec;
  spec.data_dir = data / "bird";
  auto ds = data::load_dataset(spec);
  ASSERT_TRUE(ds.is_ok()) << ds.status().message();
  check(run_stage(*ds, "superhero", 1000), 100);
}

}  // namespace
}  // namespace nl2sql::generate

namespace nl2sql::generate {
namespace {

// The per-question demonstrations on real data: a Spider dev run draws them from Spider's train
// split (every train pair with its database present), never from the question's own database,
// and the most similar pair of a counting question is itself a counting question.
TEST(GenerateStageSlow, SpiderDevDemonstrationsComeFromTheTrainSplit) {
  NL2SQL_REQUIRE_DATA(data);
  data::DatasetSpec dev;
  dev.benchmark = data::Benchmark::kSpider;
  dev.data_dir = data / "spider";
  auto ds = data::load_dataset(dev);
  ASSERT_TRUE(ds.is_ok()) << ds.status().message();
  data::DatasetSpec train = dev;
  train.split = "train";
  QpDemoSource src;
  src.dataset = train;
  auto pool = DemoPool::build(src, DemoPoolOptions{});
  ASSERT_TRUE(pool.is_ok()) << pool.status().message();
  std::set<std::string> train_dbs;
  for (const auto& p : (*pool)->pairs()) train_dbs.insert(p.db_id);
  EXPECT_GT((*pool)->pairs().size(), 3000u);
  size_t checked = 0, counting = 0, counting_first_counts = 0;
  for (const auto& q : ds->questions) {
    if (checked >= 200) break;
    ++checked;
    auto chosen = (*pool)->choose(q, ds->schemas.at(q.db_id));
    ASSERT_EQ(chosen.size(), 3u);
    for (const auto& d : chosen) {
      const DemoPair& p = (*pool)->pairs()[d.index];
      EXPECT_NE(p.db_id, q.db_id);
      EXPECT_TRUE(train_dbs.count(p.db_id));
    }
    if (q.question.rfind("How many", 0) == 0) {
      ++counting;
      const std::string& first = (*pool)->pairs()[chosen[0].index].question;
      counting_first_counts += first.find("How many") != std::string::npos ||
                               first.find("how many") != std::string::npos;
    }
  }
  ASSERT_GT(counting, 10u);
  EXPECT_GE(counting_first_counts * 10, counting * 9) << counting_first_counts << " of " << counting;
}

}  // namespace
}  // namespace nl2sql::generate
