// The prefix share of a run (see prefix_share.h).
#include "nl2sql/report/prefix_share.h"

#include "nl2sql/core/hash.h"

namespace nl2sql::report {

PrefixIndex::PrefixIndex(size_t block_chars) : block_chars_(block_chars == 0 ? 1 : block_chars), slots_(1024, 0) {}

bool PrefixIndex::contains(uint64_t hash) const {
  if (hash == 0) hash = 1;
  const size_t mask = slots_.size() - 1;
  for (size_t i = hash & mask;; i = (i + 1) & mask) {
    if (slots_[i] == hash) return true;
    if (slots_[i] == 0) return false;
  }
}

void PrefixIndex::insert(uint64_t hash) {
  if (hash == 0) hash = 1;
  if (2 * (size_ + 1) > slots_.size()) {
    // Grown at half full: probes stay short.
    std::vector<uint64_t> old(slots_.size() * 2, 0);
    old.swap(slots_);
    size_ = 0;
    for (uint64_t h : old)
      if (h != 0) insert(h);
  }
  const size_t mask = slots_.size() - 1;
  for (size_t i = hash & mask;; i = (i + 1) & mask) {
    if (slots_[i] == hash) return;
    if (slots_[i] == 0) {
      slots_[i] = hash;
      ++size_;
      return;
    }
  }
}

size_t PrefixIndex::add(std::string_view text) {
  const size_t blocks = text.size() / block_chars_;
  std::vector<uint64_t> chain(blocks);
  uint64_t h = 0;
  for (size_t b = 0; b < blocks; ++b) chain[b] = h = core::xxh64(text.substr(b * block_chars_, block_chars_), h);
  // Every prefix of a remembered text is remembered too, so presence is monotone in the prefix
  // length: the longest present one is found by binary search.
  size_t lo = 0, hi = blocks;  // the first `lo` blocks are present; beyond `hi` none is
  while (lo < hi) {
    const size_t mid = lo + (hi - lo + 1) / 2;
    if (contains(chain[mid - 1])) lo = mid;
    else hi = mid - 1;
  }
  for (uint64_t c : chain) insert(c);
  return lo * block_chars_;
}

PrefixShare prefix_share(const run::RunData& run, size_t block_chars) {
  PrefixShare out;
  PrefixIndex index(block_chars);
  for (const auto& r : run.records)
    for (const auto& call : run::recorded_calls(r)) {
      const llm::LlmCallTrace& t = *call.trace;
      // Every prompt the run asked for, answered by a server or by the response cache (a warm
      // rerun or a resumed run has the figure of a cold one); another question's answer shared
      // by a memo was asked for there.
      if (!t.shared_from.empty()) continue;
      const std::string text = t.system + '\x1e' + t.prompt;
      const auto prefix = static_cast<int64_t>(index.add(text));
      for (PrefixShareCounts* c : {&out.total, &out.by_stage[call.stage]}) {
        c->requests += 1;
        c->prompt_chars += static_cast<int64_t>(text.size());
        c->prefix_chars += prefix;
      }
    }
  return out;
}

}  // namespace nl2sql::report
