// The sampling search for D′ on one database (InstanceBuilder::separate_on_d): the two queries'
// lineage terms are split into those only one reads and those both read, then D′ is drawn from
// them in two phases — growing draws of output terms (and the largest groups whole), then the
// seeded sampling of the construction — each attempt verified on both queries and shrunk. One
// Search object holds the state of one search; every random choice comes from its one generator,
// in a fixed order, so a seed gives the same D′.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <optional>
#include <random>

#include "nl2sql/core/text.h"
#include "nl2sql/db/result_compare.h"
#include "nl2sql/select/separating_instance.h"

namespace nl2sql::select {
namespace {

using TermList = std::vector<const LineageTerm*>;
using RowSet = std::map<std::string, std::set<int64_t>>;

uint64_t below(std::mt19937_64& rng, uint64_t n) { return n == 0 ? 0 : rng() % n; }

std::string seconds_text(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f s", s);
  return buf;
}

// k distinct elements of `pool` (all when k ≥ size), in a seeded order.
TermList draw(const TermList& pool, size_t k, std::mt19937_64& rng) {
  TermList out;
  if (pool.empty() || k == 0) return out;
  if (k >= pool.size()) return pool;
  std::set<size_t> taken;
  while (taken.size() < k) taken.insert(static_cast<size_t>(below(rng, pool.size())));
  for (size_t i : taken) out.push_back(pool[i]);
  return out;
}

void append(TermList& to, const TermList& more) { to.insert(to.end(), more.begin(), more.end()); }

void sort_unique(TermList& v) {
  std::sort(v.begin(), v.end(), [](const LineageTerm* x, const LineageTerm* y) { return *x < *y; });
  v.erase(std::unique(v.begin(), v.end(), [](const LineageTerm* x, const LineageTerm* y) { return *x == *y; }),
          v.end());
}

// Every term of a query (or of its top witnesses only), sorted and unique.
TermList terms_of(const QueryLineage& q, bool top_only) {
  TermList v;
  for (size_t k = 0; k < q.witnesses.size(); ++k)
    if (!top_only || (k < q.top.size() && q.top[k]))
      for (const auto& t : q.witnesses[k]->terms) v.push_back(&t);
  sort_unique(v);
  return v;
}

// x − y, y − x and x ∩ y of two sorted term lists, by one merge pass.
struct Split {
  TermList only1, only2, common;
};
Split split(const TermList& x, const TermList& y) {
  Split s;
  for (size_t i = 0, j = 0; i < x.size() || j < y.size();) {
    if (j == y.size() || (i < x.size() && *x[i] < *y[j])) s.only1.push_back(x[i++]);
    else if (i == x.size() || *y[j] < *x[i]) s.only2.push_back(y[j++]);
    else s.common.push_back(x[i++]), ++j;
  }
  return s;
}

// The values of the rows picked so far: a support term that shares one is likely to join.
struct PickedValues {
  std::set<std::string> keys;      // python keys, for scoring
  std::set<std::string> literals;  // SQL literals, for lookups by value
  void add(const db::Value& v) {
    if (v.is_null()) return;
    keys.insert(db::python_key(v));
    if (v.type == db::ValueType::kInteger) literals.insert(std::to_string(v.i));
    else if (v.type == db::ValueType::kText && v.s.size() <= 64) {
      std::string q = "'";
      for (char c : v.s) q += c == '\'' ? std::string("''") : std::string(1, c);
      literals.insert(q + "'");
    }
  }
};

// The largest group of every grouped witness, whole (a COUNT ranking, a HAVING threshold), up
// to `most` terms in all.
TermList largest_groups(const std::vector<const WitnessTerms*>& witnesses, size_t most) {
  TermList groups;
  for (const WitnessTerms* w : witnesses) {
    // Group numbers are the witness's row numbers: dense, so counted in a vector.
    std::vector<uint32_t> sizes;
    for (uint32_t g : w->group_of) {
      if (g == WitnessTerms::kNoGroup) continue;
      if (g >= sizes.size()) sizes.resize(static_cast<size_t>(g) + 1, 0);
      ++sizes[g];
    }
    if (sizes.empty()) continue;
    const auto largest = static_cast<uint32_t>(std::max_element(sizes.begin(), sizes.end()) - sizes.begin());
    for (size_t t = 0; t < w->terms.size() && groups.size() < most; ++t)
      if (w->group_of[t] == largest) groups.push_back(&w->terms[t]);
  }
  return groups;
}

}  // namespace

class InstanceBuilder::Search {
 public:
  Search(const InstanceBuilder& builder, const QueryLineage& a, const QueryLineage& b, uint64_t seed)
      : builder_(builder), options_(builder.options_), a_(a), b_(b), rng_(seed ^ 0x5eb4a7a1c0ffee11ULL) {}

  Result<SeparatingInstance> run();

 private:
  void collect_terms();
  void name_tables();
  const std::string& table_name(uint32_t t) const { return builder_.schema_->tables[t].name; }
  bool out_of_time() const {
    return options_.search_budget_s > 0 &&
           std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count() > options_.search_budget_s;
  }
  TermList group_mates(const LineageTerm* t) const;
  // Phase 1 and phase 2; true when an instance was accepted.
  Result<bool> grow_phase();
  Result<bool> sampling_phase();
  TermList sampling_picks(int round, size_t grow, int m, int n);
  // One attempt: the rows of `picks` (plus support rows); true when an instance was accepted.
  Result<bool> attempt(const TermList& picks, bool support, size_t term_rows);
  RowSet rows_of(const TermList& picks, size_t term_rows);
  bool accept(Separation small, size_t rows_before_shrink);
  Status add_support(const TermList& picks, RowSet& rows);
  TermList lookup_by_value(const std::vector<LineageTerm>& terms, const PickedValues& values,
                           std::vector<LineageTerm>& looked_up) const;
  Result<const LineageTerm*> best_support_term(const TermList& sample, const PickedValues& values) const;
  std::string failure_text() const;

  const InstanceBuilder& builder_;
  const InstanceOptions& options_;
  const QueryLineage& a_;
  const QueryLineage& b_;
  SeparatingInstance out_;
  TermList p1_, p2_;
  Split all_, top_;
  // Both queries' witnesses: the support rows of subqueries come from them, and a term's group
  // mates from the one holding it. Each witness's terms are sorted.
  std::vector<const WitnessTerms*> witnesses_;
  bool subqueries_ = false;  // a witness that is not a top query's own
  std::mt19937_64 rng_;
  sql::Schema named_;
  Scratch scratch_;
  std::string last_error_;
  std::chrono::steady_clock::time_point start_;
};

Result<SeparatingInstance> InstanceBuilder::separate_on_d(const QueryLineage& a, const QueryLineage& b,
                                                          uint64_t seed) const {
  return Search(*this, a, b, seed).run();
}

Result<SeparatingInstance> InstanceBuilder::Search::run() {
  p1_ = terms_of(a_, false);
  p2_ = terms_of(b_, false);
  all_ = split(p1_, p2_);
  if (p1_.empty() && p2_.empty()) {
    out_.failure = "neither query reads any row";
    return std::move(out_);
  }
  collect_terms();
  name_tables();
  start_ = std::chrono::steady_clock::now();
  auto grown = grow_phase();
  if (!grown.is_ok()) return grown.status();
  if (*grown) return std::move(out_);
  auto sampled = sampling_phase();
  if (!sampled.is_ok()) return sampled.status();
  if (!*sampled) out_.failure = failure_text();
  return std::move(out_);
}

void InstanceBuilder::Search::collect_terms() {
  // The output terms: a query without a top witness (a derived table, a compound) offers all.
  auto top1 = terms_of(a_, true), top2 = terms_of(b_, true);
  if (top1.empty()) top1 = p1_;
  if (top2.empty()) top2 = p2_;
  top_ = split(top1, top2);
  for (const QueryLineage* q : {&a_, &b_})
    for (size_t k = 0; k < q->witnesses.size(); ++k) {
      witnesses_.push_back(q->witnesses[k].get());
      subqueries_ = subqueries_ || k >= q->top.size() || !q->top[k];
    }
}

// D′ is created, for every draw and every step of the shrinking, with only the tables the two
// queries name (a word match: naming more is harmless).
void InstanceBuilder::Search::name_tables() {
  for (const auto& t : builder_.schema_->tables)
    if (core::mentions_identifier(a_.sql, t.name) || core::mentions_identifier(b_.sql, t.name))
      named_.tables.push_back(t);
  if (named_.tables.empty() || !options_.grow) named_ = *builder_.schema_;
  scratch_.tables = &named_;
}

// The group mates of a term (see WitnessTerms::group_of): the witness holding it, by address.
TermList InstanceBuilder::Search::group_mates(const LineageTerm* t) const {
  TermList mates;
  for (const WitnessTerms* w : witnesses_) {
    const auto& terms = w->terms;
    const auto& groups = w->group_of;
    if (terms.empty() || t < terms.data() || t >= terms.data() + terms.size()) continue;
    const uint32_t g = groups[static_cast<size_t>(t - terms.data())];
    if (g == WitnessTerms::kNoGroup) break;
    for (size_t k = 0; k < terms.size() && mates.size() < options_.max_group_terms; ++k)
      if (groups[k] == g && &terms[k] != t) mates.push_back(&terms[k]);
    break;
  }
  return mates;
}

// Phase 1: growing draws from the output terms, then the largest groups whole.
Result<bool> InstanceBuilder::Search::grow_phase() {
  const size_t top_size = std::max({top_.only1.size(), top_.only2.size(), top_.common.size()});
  for (size_t k = 1; options_.grow && k <= 64; k *= 2) {
    TermList picks;
    for (const TermList* pool : {&top_.only1, &top_.only2, &top_.common}) append(picks, draw(*pool, k, rng_));
    for (bool support : {false, true}) {
      if (support && !subqueries_) continue;
      auto done = attempt(picks, support, std::max<size_t>(16, 4 * k));
      if (!done.is_ok() || *done) return done;
      if (out_of_time()) break;
    }
    if (out_of_time()) break;
    if (k == 2) {
      TermList groups = largest_groups(witnesses_, 4 * options_.max_group_terms);
      if (!groups.empty()) {
        auto done = attempt(groups, subqueries_, 4 * options_.max_rows);
        if (!done.is_ok() || *done) return done;
      }
    }
    if (k >= top_size) break;
  }
  return false;
}

// Phase 2: sampling.
Result<bool> InstanceBuilder::Search::sampling_phase() {
  const auto [m0, n0] = sample_sizes(a_.sql, b_.sql);
  // A partial group still yields its output row unless a HAVING condition drops it.
  const bool having = core::mentions_identifier(a_.sql, "having") || core::mentions_identifier(b_.sql, "having");
  for (int round = 0; round < options_.max_attempts; ++round) {
    const size_t grow = 1 + static_cast<size_t>(round) / 14;
    const bool support = round % 2 == 1 && witnesses_.size() > 2;
    const bool swapped = (round / 2) % 2 == 1;
    const bool whole_groups = having && round >= 5 && round % 3 == 2;
    TermList picks = sampling_picks(round, grow, swapped ? n0 : m0, swapped ? m0 : n0);
    if (whole_groups) {
      const size_t drawn = picks.size();
      for (size_t k = 0; k < drawn; ++k) append(picks, group_mates(picks[k]));
    }
    auto done = attempt(picks, support, 8 * grow * options_.max_rows);
    if (!done.is_ok() || *done) return done;
    if (out_of_time()) {
      out_.timed_out = true;
      break;
    }
  }
  return false;
}

// The draw of one sampling round: m·grow terms only the first query reads and n·grow only the
// second does.
TermList InstanceBuilder::Search::sampling_picks(int round, size_t grow, int m, int n) {
  if (all_.only1.empty() && all_.only2.empty()) return draw(all_.common, 2 * grow, rng_);
  TermList picks = draw(all_.only1, static_cast<size_t>(m) * grow, rng_);
  append(picks, draw(all_.only2, static_cast<size_t>(n) * grow, rng_));
  // One side contributes nothing of its own (e.g. its answer is a subset of the other's):
  // now and then add a shared term so non-monotone queries get rows to work on.
  if ((all_.only1.empty() || all_.only2.empty()) && round % 4 == 3) append(picks, draw(all_.common, 1, rng_));
  return picks;
}

Result<bool> InstanceBuilder::Search::attempt(const TermList& picks, bool support, size_t term_rows) {
  ++out_.attempts;
  RowSet rows = rows_of(picks, term_rows);
  if (rows.empty()) return false;
  if (support) NL2SQL_RETURN_IF_ERROR(add_support(picks, rows));
  auto found = builder_.try_rows(a_.sql, b_.sql, scratch_, rows, last_error_);
  if (!found.is_ok()) return found.status();
  if (!*found) return false;
  const size_t before = (*found)->instance.rows();
  return accept(options_.shrink_budget_s > 0 ? builder_.shrink(a_.sql, b_.sql, scratch_, std::move(**found))
                                             : std::move(**found),
                before);
}

// The rows of `picks`. A term of more rows than `term_rows` (an outer join's whole group, which
// lineage cannot split into tuples: at BIRD scale thousands of rows) brings a seeded sample of
// that many of them — D′ is verified anyway, and no model reads thousands of rows.
RowSet InstanceBuilder::Search::rows_of(const TermList& picks, size_t term_rows) {
  RowSet rows;
  for (const auto* t : picks) {
    if (t->size() <= term_rows) {
      for (const auto& [table, id] : *t) rows[table_name(table)].insert(id);
      continue;
    }
    std::vector<LineageTerm::value_type> all_rows(t->begin(), t->end());
    std::shuffle(all_rows.begin(), all_rows.end(), rng_);
    for (size_t k = 0; k < term_rows; ++k) rows[table_name(all_rows[k].first)].insert(all_rows[k].second);
  }
  return rows;
}

// A separating instance (shrunk): accepted unless over max_rows, when the smallest such size is
// kept for the failure message.
bool InstanceBuilder::Search::accept(Separation small, size_t rows_before_shrink) {
  const size_t n = small.instance.rows();
  if (n > options_.max_rows) {
    if (!out_.too_large || n < out_.too_large_rows) out_.too_large_rows = n;
    out_.too_large = true;
    return false;
  }
  out_.found = true;
  out_.too_large = false;
  out_.too_large_rows = 0;
  out_.rows_before_shrink = rows_before_shrink;
  out_.instance = std::move(small.instance);
  out_.answer_a = std::move(small.answer_a);
  out_.answer_b = std::move(small.answer_b);
  return true;
}

// Adds to `rows`, for each witness not yet represented by `picks` (rows read by subqueries), the
// term sharing most values with the rows picked so far.
Status InstanceBuilder::Search::add_support(const TermList& picks, RowSet& rows) {
  auto picked = builder_.fetch(rows);
  if (!picked.is_ok()) return picked.status();
  PickedValues values;
  for (const auto& [t, rs] : picked->tables)
    for (const auto& row : rs.rows)
      for (const auto& v : row) values.add(v);
  std::set<LineageTerm> chosen;
  for (const auto* p : picks) chosen.insert(*p);
  for (const WitnessTerms* witness : witnesses_) {
    const auto& terms = witness->terms;
    if (terms.empty()) continue;
    bool represented = std::any_of(chosen.begin(), chosen.end(), [&](const LineageTerm& t) {
      return std::binary_search(terms.begin(), terms.end(), t);
    });
    if (represented) continue;
    std::vector<LineageTerm> looked_up;  // owns terms found by value (single-row witnesses)
    TermList pool;
    if (terms.size() > options_.affinity_sample && terms.front().size() == 1)
      pool = lookup_by_value(terms, values, looked_up);
    if (pool.empty())
      for (const auto& t : terms) pool.push_back(&t);
    auto sample = draw(pool, options_.affinity_sample, rng_);
    std::shuffle(sample.begin(), sample.end(), rng_);
    auto best = best_support_term(sample, values);
    if (!best.is_ok()) return best.status();
    // The new rows' values count for the witnesses still to come (a chain of joins).
    for (const auto& [table, id] : **best) {
      auto it = builder_.row_cache_->find({table_name(table), id});
      if (it == builder_.row_cache_->end()) continue;
      for (const auto& v : it->second) values.add(v);
    }
    chosen.insert(**best);
    for (const auto& [table, id] : **best) rows[table_name(table)].insert(id);
  }
  return Status::ok();
}

// Too many rows of a single-row witness to score them all: D is asked for the rows of its table
// sharing a value with the rows picked so far (join keys), and those that are witnesses kept
// (owned by `looked_up`).
TermList InstanceBuilder::Search::lookup_by_value(const std::vector<LineageTerm>& terms, const PickedValues& values,
                                                  std::vector<LineageTerm>& looked_up) const {
  const uint32_t table = terms.front().front().first;
  const sql::TableInfo* info = &builder_.schema_->tables[table];
  std::string list;
  size_t k = 0;
  for (const auto& v : values.literals) {
    if (k++ >= 64) break;
    list += (list.empty() ? "" : ", ") + v;
  }
  if (info && !list.empty()) {
    std::string where;
    for (const auto& c : info->columns)
      where += (where.empty() ? "" : " OR ") + core::quote_sql_identifier(c.name) + " IN (" + list + ")";
    auto r = builder_.executor_->run(builder_.db_path_, "SELECT rowid FROM " + core::quote_sql_identifier(info->name) +
                                                            " WHERE " + where + " LIMIT 512");
    if (r.ok())
      for (const auto& row : r.result.rows)
        if (!row.empty() && row[0].type == db::ValueType::kInteger) {
          LineageTerm t{{table, row[0].i}};
          if (std::binary_search(terms.begin(), terms.end(), t)) looked_up.push_back(std::move(t));
        }
  }
  TermList pool;
  for (const auto& t : looked_up) pool.push_back(&t);
  return pool;
}

// The term of `sample` whose rows share most values with those picked so far (the first on a tie).
Result<const LineageTerm*> InstanceBuilder::Search::best_support_term(const TermList& sample,
                                                                      const PickedValues& values) const {
  RowSet sample_rows;
  for (const auto* t : sample)
    for (const auto& [table, id] : *t) sample_rows[table_name(table)].insert(id);
  auto fetched = builder_.fetch(sample_rows);
  if (!fetched.is_ok()) return fetched.status();
  const LineageTerm* best = sample.front();
  size_t best_score = 0;
  for (const auto* t : sample) {
    size_t score = 0;
    for (const auto& [table, id] : *t) {
      auto it = builder_.row_cache_->find({table_name(table), id});
      if (it == builder_.row_cache_->end()) continue;
      for (const auto& v : it->second)
        if (!v.is_null() && values.keys.count(db::python_key(v))) ++score;
    }
    if (score > best_score) best_score = score, best = t;
  }
  return best;
}

std::string InstanceBuilder::Search::failure_text() const {
  if (out_.timed_out)
    return "search timed out after " + std::to_string(out_.attempts) + " attempts (" +
           seconds_text(options_.search_budget_s) + " budget)" +
           (out_.too_large ? "; the smallest separating instance found has " + std::to_string(out_.too_large_rows) +
                                 " rows"
                           : "");
  if (out_.too_large)
    return "the smallest separating instance found has " + std::to_string(out_.too_large_rows) +
           " rows, over max_rows " + std::to_string(options_.max_rows);
  return "no separating instance in " + std::to_string(out_.attempts) + " attempts" +
         (last_error_.empty() ? "" : " (last error on D′: " + last_error_ + ")");
}

Result<std::optional<InstanceBuilder::Separation>> InstanceBuilder::try_rows(
    const std::string& a, const std::string& b, Scratch& scratch, const RowSet& rows,
    std::string& last_error) const {
  auto instance = fetch(rows);
  if (!instance.is_ok()) return instance.status();
  NL2SQL_RETURN_IF_ERROR(scratch.load(*instance));
  auto ra = scratch.db->run(a, options_.query_timeout_s);
  auto rb = scratch.db->run(b, options_.query_timeout_s);
  if (!ra.is_ok() || !rb.is_ok()) {
    last_error = (!ra.is_ok() ? ra.status() : rb.status()).message();
    return std::optional<Separation>();
  }
  if (db::relaxed_equal(*ra, *rb)) return std::optional<Separation>();
  return std::optional<Separation>(Separation{std::move(*instance), std::move(*ra), std::move(*rb)});
}

std::pair<int, int> sample_sizes(const std::string& sql_a, const std::string& sql_b) {
  const std::string both = sql_a + "\n" + sql_b;
  auto has = [&](const char* word) { return core::mentions_identifier(both, word); };
  if (has("sum") && has("case") && has("when")) return {3, 4};
  if (has("count")) return {1, 2};
  return {1, 1};
}

}  // namespace nl2sql::select
