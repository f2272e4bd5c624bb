// Outside programs on pipes (child_process.h).
#include "nl2sql/core/child_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <future>
#include <set>
#include <utility>

extern char** environ;

namespace nl2sql::core {
namespace {

using Clock = std::chrono::steady_clock;

// Forks run here, on a thread that lives as long as the process: PR_SET_PDEATHSIG fires when the
// thread that forked ends, so a question's worker thread must not be the parent.
class Launcher {
 public:
  static Launcher& get() {
    static Launcher* launcher = new Launcher();  // never destroyed: its thread never ends
    return *launcher;
  }
  template <typename F>
  auto run(F job) -> decltype(job()) {
    auto task = std::make_shared<std::packaged_task<decltype(job())()>>(std::move(job));
    auto result = task->get_future();
    {
      std::lock_guard lock(mu_);
      jobs_.push_back([task] { (*task)(); });
    }
    cv_.notify_one();
    return result.get();
  }

 private:
  Launcher() { std::thread([this] { loop(); }).detach(); }
  void loop() {
    for (;;) {
      std::function<void()> job;
      {
        std::unique_lock lock(mu_);
        cv_.wait(lock, [&] { return !jobs_.empty(); });
        job = std::move(jobs_.front());
        jobs_.pop_front();
      }
      job();
    }
  }
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> jobs_;  // guarded by mu_
};

bool has_api_key_in_name(const std::string& name) { return name.find("API_KEY") != std::string::npos; }

// argv[0] as a path execve takes: itself when it names a folder, else the first executable of
// that name in PATH.
Result<std::string> resolve_program(const std::string& name) {
  if (name.empty()) return invalid_input("the program's argv[0] is empty");
  if (name.find('/') != std::string::npos) return name;
  const char* path = std::getenv("PATH");
  std::string dirs = path ? path : "/usr/local/bin:/usr/bin:/bin";
  size_t start = 0;
  while (start <= dirs.size()) {
    size_t end = dirs.find(':', start);
    if (end == std::string::npos) end = dirs.size();
    std::string dir = dirs.substr(start, end - start);
    std::string candidate = (dir.empty() ? "." : dir) + "/" + name;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
    start = end + 1;
  }
  return not_found("program \"" + name + "\" is not in PATH");
}

void close_fd(int& fd) {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

struct Fds {
  int in[2] = {-1, -1};   // socketpair: [0] ours, [1] the child's stdin
  int out[2] = {-1, -1};  // pipe: [0] ours, [1] the child's stdout
  int err[2] = {-1, -1};  // pipe: [0] ours, [1] the child's stderr
  int exec_err[2] = {-1, -1};  // the child's exec errno, if exec failed
  void close_all() {
    for (int* p : {in, out, err, exec_err}) {
      close_fd(p[0]);
      close_fd(p[1]);
    }
  }
};

Status open_fds(Fds& f) {
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, f.in) != 0 || ::pipe2(f.out, O_CLOEXEC) != 0 ||
      ::pipe2(f.err, O_CLOEXEC) != 0 || ::pipe2(f.exec_err, O_CLOEXEC) != 0) {
    const int e = errno;
    f.close_all();
    return Status(ErrorCode::kIo, std::string("cannot create the program's pipes: ") + std::strerror(e));
  }
  return Status::ok();
}

// In the child, between fork and exec: async-signal-safe calls only.
[[noreturn]] void exec_child(const Fds& f, pid_t parent, const char* path, char* const* argv, char* const* envp) {
  ::setpgid(0, 0);
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != parent) ::_exit(127);  // nl2sql died before the line above
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  ::signal(SIGPIPE, SIG_DFL);
  ::signal(SIGINT, SIG_DFL);
  ::signal(SIGTERM, SIG_DFL);
  if (::dup2(f.in[1], 0) < 0 || ::dup2(f.out[1], 1) < 0 || ::dup2(f.err[1], 2) < 0) ::_exit(127);
  ::execve(path, argv, envp);
  const int e = errno;
  ssize_t ignored = ::write(f.exec_err[1], &e, sizeof e);
  (void)ignored;
  ::_exit(127);
}

}  // namespace

std::vector<std::string> child_environment(const std::map<std::string, std::string>& set_env,
                                           const std::vector<std::string>& unset_env) {
  const std::set<std::string> drop(unset_env.begin(), unset_env.end());
  std::vector<std::string> out;
  for (char** e = environ; e && *e; ++e) {
    std::string entry(*e);
    const std::string name = entry.substr(0, entry.find('='));
    if (drop.count(name) || has_api_key_in_name(name) || set_env.count(name)) continue;
    out.push_back(std::move(entry));
  }
  for (const auto& [k, v] : set_env) out.push_back(k + "=" + v);
  return out;
}

Result<std::unique_ptr<ChildProcess>> ChildProcess::start(const ChildOptions& options) {
  if (options.argv.empty()) return invalid_input("the program's argv is empty");
  auto path = resolve_program(options.argv[0]);
  if (!path) return path.status();
  // Everything the child needs is built before fork: after it, only async-signal-safe calls.
  std::vector<std::string> env = child_environment(options.set_env, options.unset_env);
  std::vector<char*> argv, envp;
  for (const auto& a : options.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  for (const auto& e : env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);

  Fds f;
  NL2SQL_RETURN_IF_ERROR(open_fds(f));
  const pid_t parent = ::getpid();
  const auto [pid, fork_errno] = Launcher::get().run([&] {
    pid_t p = ::fork();
    if (p == 0) exec_child(f, parent, path->c_str(), argv.data(), envp.data());
    return std::pair<pid_t, int>(p, p < 0 ? errno : 0);  // errno is the launcher thread's
  });
  if (pid < 0) {
    const int e = fork_errno;
    f.close_all();
    return Status(ErrorCode::kIo, std::string("cannot start the program: fork: ") + std::strerror(e));
  }
  ::setpgid(pid, pid);  // also here: no race with a kill() before the child ran its own
  close_fd(f.in[1]);
  close_fd(f.out[1]);
  close_fd(f.err[1]);
  close_fd(f.exec_err[1]);
  int exec_errno = 0;
  ssize_t n;
  do n = ::read(f.exec_err[0], &exec_errno, sizeof exec_errno);
  while (n < 0 && errno == EINTR);
  close_fd(f.exec_err[0]);
  if (n == static_cast<ssize_t>(sizeof exec_errno)) {
    int status = 0;
    ::waitpid(pid, &status, 0);
    f.close_all();
    return Status(ErrorCode::kInvalidInput, "cannot run " + *path + ": " + std::strerror(exec_errno));
  }
  std::unique_ptr<ChildProcess> child(new ChildProcess());
  child->pid_ = pid;
  child->in_fd_ = f.in[0];
  child->out_fd_ = f.out[0];
  child->err_fd_ = f.err[0];
  child->max_line_bytes_ = options.max_line_bytes;
  child->tail_bytes_ = options.stderr_tail_bytes;
  ChildProcess* self = child.get();
  child->err_thread_ = std::thread([self] { self->read_stderr(); });
  return child;
}

void ChildProcess::read_stderr() {
  char buf[4096];
  for (;;) {
    pollfd p{err_fd_, POLLIN, 0};
    int r = ::poll(&p, 1, 100);
    if (r < 0 && errno == EINTR) continue;
    if (r == 0) {
      if (stop_stderr_) break;
      continue;
    }
    ssize_t n = ::read(err_fd_, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    std::lock_guard lock(err_mu_);
    err_tail_.append(buf, static_cast<size_t>(n));
    if (err_tail_.size() > tail_bytes_) err_tail_.erase(0, err_tail_.size() - tail_bytes_);
  }
  std::lock_guard lock(err_mu_);
  err_done_ = true;
  err_cv_.notify_all();
}

ChildProcess::~ChildProcess() {
  kill();
}

Status ChildProcess::write_line(const std::string& line) {
  std::string data = line + "\n";
  size_t sent = 0;
  while (sent < data.size()) {
    ssize_t n = ::send(in_fd_, data.data() + sent, data.size() - sent, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Status(ErrorCode::kUnavailable, "the program closed its stdin (" + exit_description() + ")");
    sent += static_cast<size_t>(n);
  }
  return Status::ok();
}

Result<std::string> ChildProcess::read_line(std::chrono::milliseconds timeout, const std::function<bool()>& stop) {
  const auto deadline = Clock::now() + timeout;
  for (;;) {
    if (size_t nl = out_buffer_.find('\n'); nl != std::string::npos) {
      std::string line = out_buffer_.substr(0, nl);
      out_buffer_.erase(0, nl + 1);
      if (!line.empty() && line.back() == '\r') line.pop_back();
      return line;
    }
    if (out_buffer_.size() > max_line_bytes_)
      return Status(ErrorCode::kInvalidInput, "the program wrote a line longer than " +
                                                  std::to_string(max_line_bytes_) + " bytes");
    if (stop && stop()) return Status(ErrorCode::kCancelled, "stopped while waiting for the program");
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) return Status(ErrorCode::kTimeout, "no answer line within the timeout");
    pollfd p{out_fd_, POLLIN, 0};
    int r = ::poll(&p, 1, static_cast<int>(std::min<int64_t>(left.count(), 100)));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) continue;
    char buf[65536];
    ssize_t n = ::read(out_fd_, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return Status(ErrorCode::kUnavailable, "the program closed its stdout (" + exit_description() + ")");
    out_buffer_.append(buf, static_cast<size_t>(n));
  }
}

// How the program ended, waiting up to two seconds for it (it just closed its stdout), and its
// stderr read to the end.
std::string ChildProcess::exit_description() {
  std::string what = "still running";
  {
    std::lock_guard lock(wait_mu_);
    for (int i = 0; i < 200 && !reaped_; ++i) {
      int status = 0;
      pid_t r = ::waitpid(pid_, &status, WNOHANG);
      if (r == pid_) {
        reaped_ = true;
        wait_status_ = status;
        break;
      }
      if (r < 0) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    if (reaped_) {
      if (WIFEXITED(wait_status_)) what = "exited with status " + std::to_string(WEXITSTATUS(wait_status_));
      else if (WIFSIGNALED(wait_status_)) what = "killed by signal " + std::to_string(WTERMSIG(wait_status_));
    }
  }
  std::unique_lock lock(err_mu_);
  err_cv_.wait_for(lock, std::chrono::seconds(1), [&] { return err_done_; });
  return what;
}

void ChildProcess::kill() {
  if (pid_ <= 0) return;
  {
    std::lock_guard lock(wait_mu_);
    ::kill(-pid_, SIGKILL);
    if (!reaped_) {
      int status = 0;
      while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
      }
      reaped_ = true;
      wait_status_ = status;
    }
  }
  {
    // The group is gone, so stderr ends; a grandchild that left the group may hold it open:
    // the reader then stops at its next poll.
    std::unique_lock lock(err_mu_);
    err_cv_.wait_for(lock, std::chrono::seconds(1), [&] { return err_done_; });
  }
  stop_stderr_ = true;
  if (err_thread_.joinable()) err_thread_.join();
  close_fd(in_fd_);
  close_fd(out_fd_);
  close_fd(err_fd_);
  pid_ = -1;
}

std::string ChildProcess::stderr_tail() const {
  std::lock_guard lock(err_mu_);
  return err_tail_;
}

}  // namespace nl2sql::core
