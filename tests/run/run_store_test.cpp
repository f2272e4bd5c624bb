#include "nl2sql/run/run_store.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <random>
#include <set>
#include <thread>

#include <gtest/gtest.h>

#include "nl2sql/core/files.h"
#include "support/test_env.h"

namespace nl2sql::run {
namespace {

using nlohmann::json;

TEST(RunStore, PutGetReplaceAndOrder) {
  testing::TempDir dir;
  auto missing = RunStore::open(dir / "run", /*create=*/false);
  ASSERT_FALSE(missing.is_ok());
  EXPECT_EQ(missing.status().code(), ErrorCode::kNotFound);

  auto store = RunStore::open(dir / "run", true);
  ASSERT_TRUE(store.is_ok()) << store.status().to_string();
  auto& s = **store;
  ASSERT_TRUE(s.put_stage("q7", 7, "generate", kStageDone, {{"n", 3}}).is_ok());
  ASSERT_TRUE(s.put_stage("q2", 2, "final", kStageDone, {{"question_id", "q2"}}).is_ok());
  ASSERT_TRUE(s.put_stage("q7", 7, "final", kStageError, {{"question_id", "q7"}, {"status", "error"}}).is_ok());
  ASSERT_TRUE(s.put_stage("q7", 7, "generate", kStageDone, {{"n", 4}}).is_ok());  // redone

  auto g = s.get_stage("q7", "generate");
  ASSERT_TRUE(g.is_ok());
  ASSERT_TRUE(g->has_value());
  EXPECT_EQ((**g)["n"], 4);
  EXPECT_FALSE(s.get_stage("q7", "select")->has_value());
  EXPECT_FALSE(s.get_stage("nope", "generate")->has_value());

  auto done = s.stages_done("q7");
  ASSERT_TRUE(done.is_ok());
  EXPECT_EQ(done->size(), 2u);
  EXPECT_EQ(done->at("final"), kStageError);

  auto finals = s.final_records();
  ASSERT_TRUE(finals.is_ok());
  ASSERT_EQ(finals->size(), 2u);
  EXPECT_EQ((*finals)[0]["question_id"], "q2");  // by index, not insertion order
  EXPECT_EQ((*finals)[1]["question_id"], "q7");
  EXPECT_EQ(*s.question_ids(), (std::vector<std::string>{"q2", "q7"}));
  EXPECT_EQ(s.all_rows()->size(), 3u);
  EXPECT_EQ(*s.integrity_check(), "ok");
}

TEST(RunStore, ManifestAndConfigAreStoredAndWrittenBeside) {
  testing::TempDir dir;
  {
    auto store = RunStore::open(dir.path(), true);
    ASSERT_TRUE(store.is_ok());
    EXPECT_EQ((*store)->manifest().status().code(), ErrorCode::kNotFound);
    json m = {{"benchmark", "bird"}, {"config_hash", "abc"}, {"question_ids", {"1", "2"}}};
    ASSERT_TRUE((*store)->save_manifest(m).is_ok());
    ASSERT_TRUE((*store)->save_resolved_config({{"run", {{"seed", 3}}}}).is_ok());
    ASSERT_TRUE((*store)->set_meta("progress", {{"done", 2}}).is_ok());
  }
  auto store = RunStore::open(dir.path(), false);
  ASSERT_TRUE(store.is_ok());
  EXPECT_EQ((*store)->manifest()->at("config_hash"), "abc");
  EXPECT_EQ((**(*store)->get_meta("progress"))["done"], 2);
  EXPECT_FALSE((*store)->get_meta("absent")->has_value());
  auto file = core::read_json_file(dir / "manifest.json");
  ASSERT_TRUE(file.is_ok());
  EXPECT_EQ((*file)["benchmark"], "bird");
  EXPECT_EQ((*core::read_json_file(dir / "config.resolved.json"))["run"]["seed"], 3);
}

TEST(RunStore, ManyThreadsWriteWithoutLosingRows) {
  testing::TempDir dir;
  auto store = RunStore::open(dir.path(), true);
  ASSERT_TRUE(store.is_ok());
  constexpr int kThreads = 4, kPerThread = 25;
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        int q = t * kPerThread + i;
        if (!(*store)->put_stage("q" + std::to_string(q), q, "final", kStageDone, {{"q", q}}).is_ok())
          ++failures;
      }
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
  auto finals = (*store)->final_records();
  ASSERT_TRUE(finals.is_ok());
  ASSERT_EQ(finals->size(), size_t{kThreads * kPerThread});
  for (int q = 0; q < kThreads * kPerThread; ++q) EXPECT_EQ((*finals)[q]["q"], q);
}

// The payload a writer stores for row i: big enough that a row spans several pages, so a kill
// lands inside a write often, and checkable after the fact.
json payload_for(int i) {
  return {{"i", i}, {"blob", std::string(3000 + (i % 7) * 500, static_cast<char>('a' + i % 26))}};
}

// Child: opens the store and writes rows start.., reporting each committed row on the pipe.
[[noreturn]] void writer_child(const std::filesystem::path& dir, int start, int count, int fd) {
  auto store = RunStore::open(dir, true);
  if (!store.is_ok()) _exit(2);
  for (int i = start; i < start + count; ++i) {
    std::string qid = "q" + std::to_string(i);
    if (!(*store)->put_stage(qid, i, "generate", kStageDone, payload_for(i)).is_ok()) _exit(3);
    if (!(*store)->put_stage(qid, i, "final", kStageDone, payload_for(i)).is_ok()) _exit(3);
    int32_t done = i;
    if (write(fd, &done, sizeof done) != sizeof done) _exit(4);
  }
  _exit(0);
}

TEST(RunStore, SurvivesKillNineAtRandomPoints) {
  testing::TempDir dir;
  std::mt19937 rng(20261121);
  int next = 0;  // first row not yet acknowledged
  for (int round = 0; round < 5; ++round) {
    int pipefd[2];
    ASSERT_EQ(pipe(pipefd), 0);
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      close(pipefd[0]);
      writer_child(dir.path(), next, 100000, pipefd[1]);
    }
    close(pipefd[1]);
    // Kill after a random number of acknowledged rows: the child is then somewhere inside the
    // next put (or between the two puts of a question).
    int wait_for = std::uniform_int_distribution<int>(1, 40)(rng);
    int last = next - 1;
    for (int k = 0; k < wait_for; ++k) {
      int32_t v;
      ASSERT_EQ(read(pipefd[0], &v, sizeof v), static_cast<ssize_t>(sizeof v));
      last = v;
    }
    kill(pid, SIGKILL);
    int status = 0;
    waitpid(pid, &status, 0);
    EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
    // The child may have run ahead of our reads: its acknowledgements still in the pipe count too
    // (the write end is closed now, so this ends at EOF).
    for (int32_t v; read(pipefd[0], &v, sizeof v) == static_cast<ssize_t>(sizeof v);) last = v;
    close(pipefd[0]);

    auto store = RunStore::open(dir.path(), false);
    ASSERT_TRUE(store.is_ok()) << store.status().to_string();
    EXPECT_EQ(*(*store)->integrity_check(), "ok");
    auto rows = (*store)->all_rows();
    ASSERT_TRUE(rows.is_ok()) << rows.status().to_string();
    // Every acknowledged row is there; any row present is whole.
    std::set<int> finals;
    for (const auto& r : *rows) {
      int i = r.payload["i"].get<int>();
      EXPECT_EQ(r.payload, payload_for(i)) << "torn row " << r.question_id << "/" << r.stage;
      if (r.stage == kFinalStage) finals.insert(i);
    }
    for (int i = 0; i <= last; ++i) EXPECT_TRUE(finals.count(i)) << "lost acknowledged row " << i;
    // At most the one question in flight beyond the acknowledged ones.
    EXPECT_LE(static_cast<int>(finals.size()), last + 2);
    // Resume where the acknowledged rows end, as the pipeline would.
    next = last + 1;
  }
  auto store = RunStore::open(dir.path(), false);
  ASSERT_TRUE(store.is_ok());
  EXPECT_GE((*store)->final_records()->size(), static_cast<size_t>(next));
}

}  // namespace
}  // namespace nl2sql::run
