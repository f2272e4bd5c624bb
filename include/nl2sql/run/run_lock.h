// One run per run folder: an advisory lock (flock) on `<run folder>/.lock`, held for the life
// of the RunFolderLock. A second `nl2sql run` on a live folder (with or without --force-new)
// is refused with the holder's pid instead of doing the work twice and interleaving two
// stores. The lock dies with its process (kill -9 included), so a crashed run never leaves a
// stale lock behind. Not thread-safe; one object per run.
#pragma once

#include <filesystem>
#include <memory>

#include "nl2sql/core/status.h"

namespace nl2sql::run {

class RunFolderLock {
 public:
  // Fails (kInvalidInput) when another process holds the folder; the message names its pid.
  static Result<std::unique_ptr<RunFolderLock>> acquire(const std::filesystem::path& run_folder);
  // For readers (`nl2sql report`, `merge`): a shared lock, refused while a run holds the folder
  // (the message names its pid). A folder without a .lock file (never run by this version, or
  // on read-only media) needs none: the result is then null.
  static Result<std::unique_ptr<RunFolderLock>> acquire_shared(const std::filesystem::path& run_folder);
  ~RunFolderLock();
  RunFolderLock(const RunFolderLock&) = delete;
  RunFolderLock& operator=(const RunFolderLock&) = delete;

 private:
  explicit RunFolderLock(int fd) : fd_(fd) {}
  int fd_;
};

}  // namespace nl2sql::run
