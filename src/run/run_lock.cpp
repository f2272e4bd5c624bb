#include "nl2sql/run/run_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

namespace nl2sql::run {
namespace {

// The pid the holder wrote into the lock file ("unknown" when it wrote none).
std::string holder_pid(int fd) {
  char buf[32] = {0};
  const ssize_t n = ::pread(fd, buf, sizeof buf - 1, 0);
  std::string holder = n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string("unknown");
  while (!holder.empty() && (holder.back() == '\n' || holder.back() == ' ')) holder.pop_back();
  return holder;
}

}  // namespace

Result<std::unique_ptr<RunFolderLock>> RunFolderLock::acquire(const std::filesystem::path& run_folder) {
  const std::filesystem::path path = run_folder / ".lock";
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return io_error("cannot open " + path.string() + ": " + std::strerror(errno));
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    const std::string holder = holder_pid(fd);
    ::close(fd);
    if (err != EWOULDBLOCK) return io_error("cannot lock " + path.string() + ": " + std::strerror(err));
    return invalid_input("run folder " + run_folder.string() + " is in use by another nl2sql run (pid " + holder +
                         "): wait for it to finish, stop it, or choose another --out");
  }
  // Who holds it, for the message above; failures to write it change nothing.
  const std::string pid = std::to_string(::getpid()) + "\n";
  if (::ftruncate(fd, 0) == 0) {
    [[maybe_unused]] ssize_t w = ::pwrite(fd, pid.data(), pid.size(), 0);
  }
  return std::unique_ptr<RunFolderLock>(new RunFolderLock(fd));
}

Result<std::unique_ptr<RunFolderLock>> RunFolderLock::acquire_shared(const std::filesystem::path& run_folder) {
  const std::filesystem::path path = run_folder / ".lock";
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT || errno == EACCES || errno == EROFS) return std::unique_ptr<RunFolderLock>();
    return io_error("cannot open " + path.string() + ": " + std::strerror(errno));
  }
  if (::flock(fd, LOCK_SH | LOCK_NB) != 0) {
    const int err = errno;
    const std::string holder = holder_pid(fd);
    ::close(fd);
    if (err != EWOULDBLOCK) return io_error("cannot lock " + path.string() + ": " + std::strerror(err));
    return invalid_input("run folder " + run_folder.string() + " is being written by an nl2sql run (pid " + holder +
                         "): wait for it to finish (its own reports are written when it ends)");
  }
  return std::unique_ptr<RunFolderLock>(new RunFolderLock(fd));
}

RunFolderLock::~RunFolderLock() {
  ::flock(fd_, LOCK_UN);
  ::close(fd_);
}

}  // namespace nl2sql::run
