// A fixed-size thread pool and a parallel_for built on it. Tasks are std::function<void()>;
// submit() is thread-safe; the destructor waits for queued tasks. parallel_for runs
// fn(i) for i in [0, n) on up to `threads` workers (the caller's thread included) and returns
// when all are done. fn must be thread-safe across different i.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

namespace nl2sql::core {

class ThreadPool {
 public:
  explicit ThreadPool(size_t threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  void submit(std::function<void()> task);
  void wait_idle();
  size_t size() const { return workers_.size(); }

 private:
  void loop();
  std::mutex mu_;
  std::condition_variable cv_;       // work available or stopping
  std::condition_variable idle_cv_;  // queue drained and nothing running
  std::deque<std::function<void()>> queue_;  // guarded by mu_
  size_t running_ = 0;                       // guarded by mu_
  bool stop_ = false;                        // guarded by mu_
  std::vector<std::thread> workers_;
};

void parallel_for(size_t n, size_t threads, const std::function<void(size_t)>& fn);

// The same collecting fn(i)'s results, in index order (T need not be default-constructible).
template <typename T, typename F>
std::vector<T> parallel_map(size_t n, size_t threads, F&& fn) {
  std::vector<std::optional<T>> got(n);
  parallel_for(n, threads, [&](size_t i) { got[i].emplace(fn(i)); });
  std::vector<T> out;
  out.reserve(n);
  for (auto& g : got) out.push_back(std::move(*g));
  return out;
}

// Default worker count: the number of hardware threads (at least 1).
size_t default_threads();

}  // namespace nl2sql::core
