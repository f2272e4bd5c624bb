// The sample files of the separating-instance search that a killed process left behind are
// removed by the next process that makes a sample; files of live processes and other files stay.
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "nl2sql/select/separating_instance.h"

namespace nl2sql::select {
namespace {

std::filesystem::path make_dir() {
  auto dir = std::filesystem::temp_directory_path() /
             ("nl2sql-orphans-test-" + std::to_string(::getpid()) + "-" +
              ::testing::UnitTest::GetInstance()->current_test_info()->name());
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

void touch(const std::filesystem::path& p) { std::ofstream(p) << "x"; }

// The pid of a process that has ended (and been reaped).
pid_t dead_pid() {
  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  int status = 0;
  ::waitpid(child, &status, 0);
  return child;
}

TEST(SeparatingSample, FilesOfEndedProcessesAreRemovedOthersKept) {
  const auto dir = make_dir();
  const pid_t gone = dead_pid();
  const auto orphan = dir / ("nl2sql-sample-" + std::to_string(gone) + "-abc123");
  const auto mine = dir / ("nl2sql-sample-" + std::to_string(::getpid()) + "-def456");
  const auto old_style = dir / "nl2sql-sample-Xy12Zq";  // no pid: not ours to judge
  const auto other = dir / ("other-" + std::to_string(gone) + "-abc");
  for (const auto& p : {orphan, mine, old_style, other}) touch(p);

  EXPECT_EQ(remove_orphaned_samples(dir), 1);
  EXPECT_FALSE(std::filesystem::exists(orphan));
  EXPECT_TRUE(std::filesystem::exists(mine));
  EXPECT_TRUE(std::filesystem::exists(old_style));
  EXPECT_TRUE(std::filesystem::exists(other));
  EXPECT_EQ(remove_orphaned_samples(dir), 0);
  std::filesystem::remove_all(dir);
}

TEST(SeparatingSample, AMissingFolderRemovesNothing) {
  EXPECT_EQ(remove_orphaned_samples(std::filesystem::temp_directory_path() / "nl2sql-no-such-folder-xyz"), 0);
}

}  // namespace
}  // namespace nl2sql::select
