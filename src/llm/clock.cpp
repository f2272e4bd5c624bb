#include "nl2sql/llm/clock.h"

#include <thread>

namespace nl2sql::llm {

void SystemClock::sleep_for(Duration d) {
  if (d.count() > 0) std::this_thread::sleep_for(d);
}

Clock::TimePoint ManualClock::now() {
  std::lock_guard lock(mu_);
  return now_;
}

void ManualClock::sleep_for(Duration d) {
  std::lock_guard lock(mu_);
  sleeps_.push_back(d);
  if (d.count() > 0) now_ += d;
}

void ManualClock::advance(Duration d) {
  std::lock_guard lock(mu_);
  now_ += d;
}

std::vector<Clock::Duration> ManualClock::sleeps() {
  std::lock_guard lock(mu_);
  return sleeps_;
}

Clock::Duration ManualClock::total_slept() {
  std::lock_guard lock(mu_);
  Duration total{0};
  for (auto d : sleeps_) total += d;
  return total;
}

}  // namespace nl2sql::llm
