// ChildProcess: an outside program nl2sql runs and talks to by lines on its stdin and stdout
// (generate/outside_program.h's protocol). The program is started with fork/exec from one
// long-lived launcher thread, in a process group of its own (a terminal's Ctrl-C reaches nl2sql
// only; nl2sql decides when its children stop), with PR_SET_PDEATHSIG so it dies when nl2sql
// dies — the launcher thread never ends, so the signal only comes when the process does. Its
// environment is nl2sql's minus the variables named in `unset_env` and every variable whose name
// holds "API_KEY", plus `set_env`. Its stderr is read on a thread of its own; the last
// `stderr_tail_bytes` are kept for error messages.
//
// Ownership: the object owns the process; the destructor (or kill()) sends SIGKILL to the whole
// process group and reaps it. Thread-safety: one thread at a time writes and reads lines;
// stderr_tail() may be called from any thread.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "nl2sql/core/status.h"

namespace nl2sql::core {

struct ChildOptions {
  std::vector<std::string> argv;                  // argv[0] is looked up in PATH when it has no '/'
  std::map<std::string, std::string> set_env;     // added (or replaced)
  std::vector<std::string> unset_env;             // removed (e.g. the API keys' variables)
  size_t stderr_tail_bytes = 4096;
  size_t max_line_bytes = 64u << 20;              // a longer stdout line is a protocol fault
};

class ChildProcess {
 public:
  static Result<std::unique_ptr<ChildProcess>> start(const ChildOptions& options);
  ~ChildProcess();
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  // Writes `line` and a newline to the program's stdin. kUnavailable when it has closed it.
  Status write_line(const std::string& line);
  // The next line of its stdout (without the newline). kTimeout when `timeout` passed first;
  // kUnavailable when the program closed its stdout or exited (the message says how it ended);
  // kCancelled when `stop` returned true (asked every 100 ms while waiting).
  Result<std::string> read_line(std::chrono::milliseconds timeout, const std::function<bool()>& stop = {});
  // SIGKILL to the process group, then reaps the program. Idempotent.
  void kill();
  std::string stderr_tail() const;
  pid_t pid() const { return pid_; }

 private:
  ChildProcess() = default;
  std::string exit_description();
  void read_stderr();  // err_thread_'s loop

  pid_t pid_ = -1;
  int in_fd_ = -1;    // our end of its stdin
  int out_fd_ = -1;   // our end of its stdout
  int err_fd_ = -1;   // our end of its stderr (read by err_thread_)
  std::string out_buffer_;  // bytes read past the last line returned
  size_t max_line_bytes_ = 0;
  size_t tail_bytes_ = 0;
  std::thread err_thread_;
  mutable std::mutex err_mu_;
  std::condition_variable err_cv_;
  std::string err_tail_;  // guarded by err_mu_
  bool err_done_ = false; // guarded by err_mu_: stderr reached its end
  std::atomic<bool> stop_stderr_{false};
  std::mutex wait_mu_;
  bool reaped_ = false;   // guarded by wait_mu_
  int wait_status_ = 0;   // guarded by wait_mu_
};

// The process environment as a child would get it (exposed for tests): `environ` minus
// `unset_env` and every variable whose name holds "API_KEY", plus `set_env`; "NAME=value" strings.
std::vector<std::string> child_environment(const std::map<std::string, std::string>& set_env,
                                           const std::vector<std::string>& unset_env);

}  // namespace nl2sql::core
