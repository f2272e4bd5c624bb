#include "progress.h"

#include <fmt/format.h>
#include <unistd.h>

#include <cstdio>

#include "nl2sql/llm/client.h"

namespace nl2sql::pipeline {

Progress::Progress(ProgressOptions options, llm::Client* client)
    : options_(options), client_(client), started_(std::chrono::steady_clock::now()) {
  switch (options_.mode) {
    case ProgressMode::kTerminal: terminal_ = true; break;
    case ProgressMode::kAuto: terminal_ = isatty(STDERR_FILENO); break;
    default: terminal_ = false;
  }
}

Progress::~Progress() { stop(); }

void Progress::add_resumed(bool correct) {
  ++done_;
  ++resumed_;
  if (correct) ++correct_;
}

void Progress::question_started() { ++running_; }

void Progress::question_finished(bool correct, bool error) {
  --running_;
  ++done_;
  if (correct) ++correct_;
  if (error) ++errors_;
}

std::string Progress::line() {
  size_t done = done_, total = options_.total, resumed = resumed_;
  double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
  std::string eta = "--";
  size_t fresh = done - std::min(done, resumed);
  if (fresh > 0 && done < total) {
    double rest = elapsed / fresh * (total - done);
    eta = rest >= 3600 ? fmt::format("{}h{:02}m", int(rest / 3600), int(rest / 60) % 60)
                       : fmt::format("{}m{:02}s", int(rest / 60), int(rest) % 60);
  } else if (done >= total) {
    eta = "0s";
  }
  double ex = done ? 100.0 * correct_ / done : 0.0;
  std::string usage;
  if (client_) {
    auto t = client_->accounting().total();
    usage = fmt::format(" | tokens {} | ${:.4f}", t.prompt_tokens + t.completion_tokens, t.cost_usd);
  }
  return fmt::format("[{}/{}] running {} | ETA {} | EX {:.1f}%{} | errors {}", done, total,
                     size_t(running_), eta, ex, usage, size_t(errors_));
}

void Progress::start() {
  if (options_.mode == ProgressMode::kOff) return;
  ticker_ = std::thread([this] { loop(); });
}

void Progress::loop() {
  const double interval = terminal_ ? 0.5 : std::max(0.5, options_.interval_s);
  std::unique_lock lock(mu_);
  while (!stop_) {
    cv_.wait_for(lock, std::chrono::duration<double>(interval), [&] { return stop_; });
    if (stop_) break;
    std::string l = line();
    if (terminal_) std::fprintf(stderr, "\r\033[K%s", l.c_str());
    else std::fprintf(stderr, "progress: %s\n", l.c_str());
    std::fflush(stderr);
  }
}

void Progress::stop() {
  {
    std::lock_guard lock(mu_);
    if (stop_) return;
    stop_ = true;
  }
  cv_.notify_all();
  if (ticker_.joinable()) {
    ticker_.join();
    std::string l = line();
    if (terminal_) std::fprintf(stderr, "\r\033[K%s\n", l.c_str());
    else std::fprintf(stderr, "progress: %s\n", l.c_str());
    std::fflush(stderr);
  }
}

}  // namespace nl2sql::pipeline
