#include "nl2sql/pipeline/question_set.h"

#include <algorithm>
#include <charconv>
#include <set>

#include "nl2sql/core/hash.h"

namespace nl2sql::pipeline {
namespace {

std::optional<size_t> to_size(std::string_view s) {
  while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
  while (!s.empty() && s.back() == ' ') s.remove_suffix(1);
  if (s.empty()) return std::nullopt;
  size_t v = 0;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || ptr != s.data() + s.size()) return std::nullopt;
  return v;
}

}  // namespace

Result<Shard> parse_shard(const std::string& text) {
  auto slash = text.find('/');
  if (slash == std::string::npos)
    return invalid_input("--shard: expected I/N (e.g. 0/4), got '" + text + "'");
  auto i = to_size(std::string_view(text).substr(0, slash));
  auto n = to_size(std::string_view(text).substr(slash + 1));
  if (!i || !n || *n == 0 || *i >= *n)
    return invalid_input("--shard: expected I/N with 0 <= I < N, got '" + text + "'");
  return Shard{*i, *n};
}

Result<std::vector<size_t>> parse_ranges(const std::string& text, size_t count) {
  std::set<size_t> out;
  size_t start = 0;
  while (start <= text.size()) {
    size_t comma = text.find(',', start);
    if (comma == std::string::npos) comma = text.size();
    std::string part = text.substr(start, comma - start);
    start = comma + 1;
    if (part.find_first_not_of(' ') == std::string::npos) {
      if (comma == text.size()) break;
      return invalid_input("--questions: empty range in '" + text + "'");
    }
    auto dash = part.find('-');
    std::optional<size_t> lo, hi;
    if (dash == std::string::npos) {
      lo = hi = to_size(part);
    } else {
      lo = to_size(std::string_view(part).substr(0, dash));
      hi = to_size(std::string_view(part).substr(dash + 1));
    }
    if (!lo || !hi || *lo > *hi)
      return invalid_input("--questions: '" + part + "' is not an index or a range like 0-99");
    if (*hi >= count)
      return invalid_input("--questions: '" + part + "' goes past the last question (index " +
                           std::to_string(count == 0 ? 0 : count - 1) + ")");
    for (size_t k = *lo; k <= *hi; ++k) out.insert(k);
    if (comma == text.size()) break;
  }
  return std::vector<size_t>(out.begin(), out.end());
}

Result<std::vector<size_t>> select_questions(const data::Dataset& ds, const QuestionFilter& filter) {
  std::vector<size_t> picked;
  if (filter.ranges.empty()) {
    picked.resize(ds.questions.size());
    for (size_t i = 0; i < picked.size(); ++i) picked[i] = i;
  } else {
    // Positions in the question file, whether or not a question's database is present: the
    // same --questions picks the same questions on every machine.
    auto r = parse_ranges(filter.ranges, std::max(ds.total_questions, ds.questions.size()));
    if (!r) return r.status();
    const std::set<size_t> wanted(r->begin(), r->end());
    for (size_t i = 0; i < ds.questions.size(); ++i)
      if (wanted.count(ds.questions[i].index)) picked.push_back(i);
  }
  if (!filter.db_id.empty()) {
    if (!ds.db_paths.count(filter.db_id) && !ds.schemas.count(filter.db_id))
      return invalid_input("--db: no database '" + filter.db_id + "' in this dataset");
    std::erase_if(picked, [&](size_t i) { return ds.questions[i].db_id != filter.db_id; });
  }
  if (filter.sample && *filter.sample < picked.size()) {
    // Rank by a seeded hash of the question id: stable under reordering of the file and
    // independent of which other questions are present.
    std::vector<std::pair<uint64_t, size_t>> keyed;
    keyed.reserve(picked.size());
    for (size_t i : picked) {
      keyed.emplace_back(core::xxh64(ds.questions[i].question_id, filter.seed), i);
    }
    std::sort(keyed.begin(), keyed.end());
    keyed.resize(*filter.sample);
    picked.clear();
    for (auto& [k, i] : keyed) picked.push_back(i);
    std::sort(picked.begin(), picked.end());
  }
  if (filter.shard) {
    std::vector<size_t> slice;
    for (size_t k = 0; k < picked.size(); ++k)
      if (k % filter.shard->count == filter.shard->index) slice.push_back(picked[k]);
    picked = std::move(slice);
  }
  return picked;
}

std::vector<data::SkippedQuestion> skipped_in_selection(const data::Dataset& ds, const QuestionFilter& filter) {
  std::set<size_t> wanted;
  bool all = filter.ranges.empty();
  if (!all) {
    auto r = parse_ranges(filter.ranges, std::max(ds.total_questions, ds.questions.size()));
    if (r) wanted.insert(r->begin(), r->end());
  }
  std::vector<data::SkippedQuestion> out;
  for (const auto& sk : ds.skipped) {
    if (!all && !wanted.count(sk.index)) continue;
    if (!filter.db_id.empty() && sk.db_id != filter.db_id) continue;
    out.push_back(sk);
  }
  return out;
}

}  // namespace nl2sql::pipeline
