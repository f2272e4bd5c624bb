// Progress of a run on stderr. On a terminal one status line is redrawn in place (questions
// done/total, ETA, running EX, tokens, cost, errors); otherwise (a log file, CI) a plain line is
// printed every `interval_s` seconds and once at the end. spdlog lines written meanwhile go on
// their own lines: the status line is cleared before and redrawn after (see ProgressSink).
// Thread-safe: workers call question_started/finished from any thread; one ticker thread draws.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <mutex>
#include <string>
#include <thread>

#include "nl2sql/pipeline/pipeline.h"

namespace nl2sql::llm {
class Client;
}

namespace nl2sql::pipeline {

struct ProgressOptions {
  ProgressMode mode = ProgressMode::kAuto;
  double interval_s = 10;
  size_t total = 0;
};

class Progress {
 public:
  Progress(ProgressOptions options, llm::Client* client);
  ~Progress();
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  void add_resumed(bool correct);
  void question_started();
  void question_finished(bool correct, bool error);
  void start();
  void stop();  // draws the final line

  // The current status line (also used by tests).
  std::string line();

 private:
  void loop();
  ProgressOptions options_;
  llm::Client* client_;
  bool terminal_ = false;
  std::chrono::steady_clock::time_point started_;
  std::atomic<size_t> done_{0}, correct_{0}, errors_{0}, running_{0}, resumed_{0};
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;  // guarded by mu_
  std::thread ticker_;
};

}  // namespace nl2sql::pipeline
