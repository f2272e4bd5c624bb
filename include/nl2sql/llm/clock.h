// Clock: time and sleeping, injected so retries, backoff and rate limits are testable without
// real waiting. SystemClock is the real one; ManualClock's sleep_for advances its own time
// instantly and records the requested sleeps (tests read them back). Both are thread-safe.
#pragma once

#include <chrono>
#include <mutex>
#include <vector>

namespace nl2sql::llm {

class Clock {
 public:
  using Duration = std::chrono::nanoseconds;
  using TimePoint = std::chrono::time_point<std::chrono::steady_clock, Duration>;
  virtual ~Clock() = default;
  virtual TimePoint now() = 0;
  virtual void sleep_for(Duration d) = 0;
};

class SystemClock : public Clock {
 public:
  TimePoint now() override { return std::chrono::steady_clock::now(); }
  void sleep_for(Duration d) override;
};

class ManualClock : public Clock {
 public:
  TimePoint now() override;
  void sleep_for(Duration d) override;  // advances time by d, returns at once
  void advance(Duration d);
  std::vector<Duration> sleeps();       // every sleep_for so far, in order
  Duration total_slept();

 private:
  std::mutex mu_;
  TimePoint now_{};                 // guarded by mu_
  std::vector<Duration> sleeps_;    // guarded by mu_
};

}  // namespace nl2sql::llm
