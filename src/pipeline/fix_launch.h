// A question's fix loops, started generator by generator: the loops of a generator's candidates
// start as soon as it and every generator before it are done, while later generators still wait
// for their model. The question's critical path then no longer holds a fast generator's repairs
// until the slowest generator answers.
//
// Which candidate is repaired does not depend on when it starts: of the candidates with the same
// query (after normalisation) and the same repairing model, the first in pool order (generators
// in configured order, then sample order) is fixed and the others take its outcome, as when the
// whole pool starts at once. Releasing generators in order is what guarantees that: a candidate
// is released only when every candidate before it is known.
//
// Each loop works on its own copy of the candidate; finish() waits for all of them and writes the
// repaired candidates into the pool. Thread-safe: generator threads call done() concurrently.
// The destructor waits for loops still running (a question that failed after some started).
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "nl2sql/core/status.h"
#include "nl2sql/fix/fixer.h"
#include "nl2sql/generate/candidate.h"

namespace nl2sql::pipeline {

class FixLaunch {
 public:
  // `input.memo` is required; the caller announces the candidates' queries to it (expect())
  // before handing them here. `fixer` null (or disabled): each candidate is only executed
  // through the memo. `seed_of` gives the fix seed of a candidate id. `generators`: how many
  // done() calls to expect.
  FixLaunch(const fix::Fixer* fixer, fix::FixInput input, std::function<uint64_t(const std::string&)> seed_of,
            size_t generators);
  ~FixLaunch();
  FixLaunch(const FixLaunch&) = delete;
  FixLaunch& operator=(const FixLaunch&) = delete;

  // Generator g's candidates (`out` stays valid until this call returns; it is copied). Null
  // when the generator failed or the run is stopping: nothing after it is started.
  void done(size_t g, const std::vector<generate::Candidate>* out);

  // Waits for every loop. `pool` is the question's candidates in pool order (the released ones,
  // unrepaired); each fixed candidate replaces its entry, and leader[i] is the index of the
  // candidate whose outcome candidate i takes (-1 when it was fixed itself). The first failing
  // loop's status is returned.
  Status finish(std::vector<generate::Candidate>& pool, std::vector<int>& leader);

 private:
  struct Loop {
    size_t index = 0;
    generate::Candidate candidate;
    Status status;
    std::thread thread;
  };
  void release(const std::vector<generate::Candidate>& out);  // requires mu_
  void join();

  const fix::Fixer* fixer_;
  const fix::FixInput input_;
  const std::function<uint64_t(const std::string&)> seed_of_;
  std::mutex mu_;
  // Guarded by mu_:
  std::vector<const std::vector<generate::Candidate>*> finished_;  // per generator, until released
  std::vector<bool> reported_;
  size_t next_ = 0;      // the first generator not yet released
  bool stopped_ = false;  // a generator failed: nothing more is started
  size_t released_ = 0;   // candidates released so far (the next one's pool index)
  std::map<std::string, size_t> first_of_;
  std::vector<int> leader_;
  std::vector<std::unique_ptr<Loop>> loops_;
};

}  // namespace nl2sql::pipeline
