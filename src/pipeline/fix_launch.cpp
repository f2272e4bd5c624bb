#include "fix_launch.h"

#include <utility>

#include "nl2sql/fix/execution_memo.h"

namespace nl2sql::pipeline {

FixLaunch::FixLaunch(const fix::Fixer* fixer, fix::FixInput input, std::function<uint64_t(const std::string&)> seed_of,
                     size_t generators)
    : fixer_(fixer != nullptr && fixer->options().enabled ? fixer : nullptr),
      input_(std::move(input)),
      seed_of_(std::move(seed_of)),
      finished_(generators, nullptr),
      reported_(generators, false) {}

FixLaunch::~FixLaunch() { join(); }

void FixLaunch::join() {
  {
    std::lock_guard lock(mu_);
    stopped_ = true;  // no generator reporting after this starts anything
  }
  // Every done() call has returned by now (finish() and the destructor run after the generator
  // threads are joined), so loops_ no longer changes.
  for (auto& l : loops_)
    if (l->thread.joinable()) l->thread.join();
}

void FixLaunch::done(size_t g, const std::vector<generate::Candidate>* out) {
  std::lock_guard lock(mu_);
  if (g >= reported_.size() || reported_[g]) return;
  reported_[g] = true;
  if (out == nullptr) stopped_ = true;
  finished_[g] = out;
  while (!stopped_ && next_ < finished_.size() && reported_[next_]) {
    release(*finished_[next_]);
    finished_[next_] = nullptr;
    ++next_;
  }
}

void FixLaunch::release(const std::vector<generate::Candidate>& out) {
  for (const auto& c : out) {
    const size_t index = released_++;
    leader_.push_back(-1);
    if (fixer_ != nullptr && !c.sql.empty()) {
      const std::string key = fix::normalize_sql(c.sql) + '\x1f' + fixer_->profile_for(c);
      auto [it, fresh] = first_of_.emplace(key, index);
      if (!fresh) {
        leader_.back() = static_cast<int>(it->second);
        continue;
      }
    }
    auto loop = std::make_unique<Loop>();
    loop->index = index;
    loop->candidate = c;
    Loop* l = loop.get();
    loop->thread = std::thread([this, l] {
      fix::FixInput in = input_;
      in.seed = seed_of_(l->candidate.id);
      if (fixer_ != nullptr) {
        l->status = fixer_->fix(l->candidate, in);
      } else {
        fix::execute_candidate(l->candidate, *input_.memo);
      }
    });
    loops_.push_back(std::move(loop));
  }
}

Status FixLaunch::finish(std::vector<generate::Candidate>& pool, std::vector<int>& leader) {
  join();
  // Every generator reported and none failed: the released candidates are the pool.
  if (next_ != finished_.size() || released_ != pool.size())
    return internal_error("fix: " + std::to_string(released_) + " candidates started for a pool of " +
                          std::to_string(pool.size()));
  Status first = Status::ok();
  for (auto& l : loops_) {
    if (first.is_ok() && !l->status.is_ok()) first = l->status;
    pool[l->index] = std::move(l->candidate);
  }
  loops_.clear();
  leader = leader_;
  return first;
}

}  // namespace nl2sql::pipeline
