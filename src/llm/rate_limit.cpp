#include "nl2sql/llm/rate_limit.h"

#include <algorithm>
#include <cmath>

namespace nl2sql::llm {

Status InFlightLimit::acquire() {
  std::unique_lock lock(mu_);
  cv_.wait(lock, [&] { return cancelled_ || max_ <= 0 || in_flight_ < max_; });
  if (cancelled_) return Status(ErrorCode::kCancelled, "cancelled while waiting for a slot");
  ++in_flight_;
  peak_ = std::max(peak_, in_flight_);
  return Status::ok();
}

void InFlightLimit::release() {
  {
    std::lock_guard lock(mu_);
    --in_flight_;
  }
  cv_.notify_one();
}

void InFlightLimit::cancel() {
  {
    std::lock_guard lock(mu_);
    cancelled_ = true;
  }
  cv_.notify_all();
}

int64_t InFlightLimit::in_flight() {
  std::lock_guard lock(mu_);
  return in_flight_;
}

int64_t InFlightLimit::peak() {
  std::lock_guard lock(mu_);
  return peak_;
}

TokenBucket::TokenBucket(double per_minute, std::shared_ptr<Clock> clock)
    : per_minute_(per_minute), clock_(std::move(clock)), level_(per_minute) {
  last_ = clock_->now();
}

void TokenBucket::refill_locked(Clock::TimePoint now) {
  if (now <= last_) return;
  double secs = std::chrono::duration<double>(now - last_).count();
  level_ = std::min(per_minute_, level_ + secs * per_minute_ / 60.0);
  last_ = now;
}

Status TokenBucket::acquire(double n, const std::function<bool()>& cancelled) {
  if (per_minute_ <= 0) return Status::ok();
  // Bounded: each wait is computed to bring the level back to positive; a concurrent taker
  // can push it down again, so loop, but never forever without progress in time.
  for (;;) {
    if (cancelled && cancelled()) {
      return Status(ErrorCode::kCancelled, "cancelled while waiting for the rate limit");
    }
    Clock::Duration wait{0};
    {
      std::lock_guard lock(mu_);
      refill_locked(clock_->now());
      // A request larger than the whole bucket waits for a full bucket, then goes.
      const double need = std::min(n, per_minute_);
      if (level_ >= need) {
        level_ -= n;
        return Status::ok();
      }
      double secs = (need - level_) * 60.0 / per_minute_;
      // Poll at least every 250 ms so cancellation is noticed.
      secs = std::min(secs, 0.25);
      wait = std::chrono::duration_cast<Clock::Duration>(std::chrono::duration<double>(secs));
      if (wait.count() <= 0) wait = Clock::Duration(1);
    }
    clock_->sleep_for(wait);
  }
}

void TokenBucket::charge(double n) {
  if (per_minute_ <= 0) return;
  std::lock_guard lock(mu_);
  refill_locked(clock_->now());
  level_ -= n;
}

double TokenBucket::level() {
  std::lock_guard lock(mu_);
  refill_locked(clock_->now());
  return level_;
}

}  // namespace nl2sql::llm
