#include "nl2sql/llm/rate_limit.h"

#include <algorithm>
#include <cmath>

namespace nl2sql::llm {

Status InFlightLimit::acquire(SlotPriority priority) {
  std::unique_lock lock(mu_);
  if (cancelled_) return Status(ErrorCode::kCancelled, "cancelled while waiting for a slot");
  if (max_ <= 0 || (in_flight_ < max_ && waiters_.empty())) {
    ++in_flight_;
    peak_ = std::max(peak_, in_flight_);
    return Status::ok();
  }
  Waiter me;
  const Key key{priority.rank, tickets_++};
  waiters_.emplace(key, &me);
  me.cv.wait(lock, [&] { return me.granted || cancelled_; });
  if (!me.granted) {  // cancelled before a slot came
    waiters_.erase(key);
    return Status(ErrorCode::kCancelled, "cancelled while waiting for a slot");
  }
  return Status::ok();  // release() handed its slot over: in_flight_ already counts it
}

void InFlightLimit::release() {
  std::lock_guard lock(mu_);
  // The freed slot is handed on only while the count stays within a (possibly lowered) limit.
  if (!waiters_.empty() && !cancelled_ && (max_ <= 0 || in_flight_ <= max_)) {
    auto first = waiters_.begin();
    Waiter* next = first->second;
    waiters_.erase(first);
    next->granted = true;
    next->cv.notify_one();  // under the lock: `next` lives on its waiter's stack until it wakes
    return;
  }
  --in_flight_;
}

void InFlightLimit::set_max(int64_t max_in_flight) {
  std::lock_guard lock(mu_);
  if (max_ <= 0 || max_in_flight <= 0) return;
  max_ = max_in_flight;
  while (!waiters_.empty() && !cancelled_ && in_flight_ < max_) {
    auto first = waiters_.begin();
    Waiter* next = first->second;
    waiters_.erase(first);
    ++in_flight_;
    peak_ = std::max(peak_, in_flight_);
    next->granted = true;
    next->cv.notify_one();
  }
}

int64_t InFlightLimit::max() {
  std::lock_guard lock(mu_);
  return max_;
}

void InFlightLimit::cancel() {
  std::lock_guard lock(mu_);
  cancelled_ = true;
  for (auto& [key, w] : waiters_) w->cv.notify_one();
}

int64_t InFlightLimit::in_flight() {
  std::lock_guard lock(mu_);
  return in_flight_;
}

int64_t InFlightLimit::waiting() {
  std::lock_guard lock(mu_);
  return static_cast<int64_t>(waiters_.size());
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
