// Admission control for model calls: a counting limit on requests in flight and token buckets
// for requests-per-minute and tokens-per-minute. Both are thread-safe; waiting for a bucket
// goes through the injected Clock (so tests never sleep), waiting for an in-flight slot blocks
// on a condition variable until a slot frees or the limiter is cancelled.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <utility>

#include "nl2sql/core/status.h"
#include "nl2sql/llm/clock.h"

namespace nl2sql::llm {

// Which waiter gets the next free slot: the lowest rank, then the earliest arrival. All zero
// (the default) is plain first come, first served.
struct SlotPriority {
  int64_t rank = 0;
};

class InFlightLimit {
 public:
  explicit InFlightLimit(int64_t max_in_flight) : max_(max_in_flight) {}
  // Blocks until a slot is free; kCancelled after cancel(). max <= 0 means unlimited. A freed
  // slot goes to the waiter first by `priority` (never to a caller that arrives later: no
  // barging past the queue).
  Status acquire(SlotPriority priority = {});
  void release();
  void cancel();
  // Changes the limit (the overload back-pressure lowers and raises it). Lowered below the
  // requests in flight, no slot is handed on until enough of them have returned; raised, waiters
  // get the new slots at once. Ignored for an unlimited limit (max <= 0).
  void set_max(int64_t max_in_flight);
  int64_t max();
  int64_t in_flight();
  int64_t peak();
  int64_t waiting();  // callers blocked in acquire()

 private:
  struct Waiter {
    std::condition_variable cv;
    bool granted = false;
  };
  using Key = std::pair<int64_t, uint64_t>;  // rank, arrival ticket
  int64_t max_;                     // guarded by mu_
  std::mutex mu_;
  std::map<Key, Waiter*> waiters_;  // guarded by mu_
  uint64_t tickets_ = 0;            // guarded by mu_
  int64_t in_flight_ = 0;           // guarded by mu_
  int64_t peak_ = 0;                // guarded by mu_
  bool cancelled_ = false;          // guarded by mu_
};

// RAII slot holder.
class InFlightSlot {
 public:
  InFlightSlot() = default;
  explicit InFlightSlot(InFlightLimit* limit) : limit_(limit) {}
  ~InFlightSlot() {
    if (limit_) limit_->release();
  }
  InFlightSlot(const InFlightSlot&) = delete;
  InFlightSlot& operator=(const InFlightSlot&) = delete;

 private:
  InFlightLimit* limit_ = nullptr;
};

// A token bucket holding up to `per_minute` tokens, refilled continuously at per_minute/60 per
// second. acquire(n) waits (via the clock) until n tokens are there (a full bucket when n is
// larger than the bucket), then takes them; charge() takes tokens after the fact (completion
// tokens are only known then), so the level may go negative and later callers wait longer.
// per_minute <= 0 disables the bucket.
class TokenBucket {
 public:
  TokenBucket(double per_minute, std::shared_ptr<Clock> clock);
  // `cancelled` (may be empty) is polled between waits; kCancelled once it returns true.
  Status acquire(double n, const std::function<bool()>& cancelled = {});
  void charge(double n);
  double level();

 private:
  void refill_locked(Clock::TimePoint now);
  const double per_minute_;
  std::shared_ptr<Clock> clock_;
  std::mutex mu_;
  double level_;                 // guarded by mu_
  Clock::TimePoint last_;        // guarded by mu_
};

}  // namespace nl2sql::llm
