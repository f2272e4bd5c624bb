// Separating instances: lineage terms and the sampling search for D′ (the construction is in
// the header). D′ as tables, its in-memory database and the answer format are in
// instance_database.cpp.
#include "nl2sql/select/separating_instance.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <cstdio>
#include <chrono>
#include <cstring>
#include <new>
#include <optional>
#include <random>

#include "nl2sql/core/text.h"
#include "nl2sql/db/result_compare.h"
#include "nl2sql/sql/parser.h"

namespace nl2sql::select {
namespace {

using json = nlohmann::json;

uint64_t below(std::mt19937_64& rng, uint64_t n) { return n == 0 ? 0 : rng() % n; }

std::string seconds_text(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f s", s);
  return buf;
}

// k distinct elements of `pool` (all when k ≥ size), in a seeded order.
std::vector<const LineageTerm*> draw(const std::vector<const LineageTerm*>& pool, size_t k,
                                     std::mt19937_64& rng) {
  std::vector<const LineageTerm*> out;
  if (pool.empty() || k == 0) return out;
  if (k >= pool.size()) return pool;
  std::set<size_t> taken;
  while (taken.size() < k) taken.insert(static_cast<size_t>(below(rng, pool.size())));
  for (size_t i : taken) out.push_back(pool[i]);
  return out;
}

}  // namespace

// ---- LineageTerm ----

LineageTerm::Block* LineageTerm::block() const {
  Block* b = nullptr;
  std::memcpy(&b, &words_[0], sizeof b);
  return b;
}
int64_t* LineageTerm::block_ids(Block* b) { return reinterpret_cast<int64_t*>(b + 1); }
uint16_t* LineageTerm::block_tables(Block* b) {
  return reinterpret_cast<uint16_t*>(block_ids(b) + b->capacity);
}
void LineageTerm::set_tag(uint16_t t) {
  words_[3] = (words_[3] & 0x0000FFFFFFFFFFFFULL) | (static_cast<uint64_t>(t) << 48);
}
uint32_t LineageTerm::table_at(size_t k) const {
  if (heap()) return block_tables(block())[k];
  return static_cast<uint32_t>((words_[3] >> (16 * k)) & 0xFFFFU);
}
int64_t LineageTerm::id_at(size_t k) const {
  return heap() ? block_ids(block())[k] : static_cast<int64_t>(words_[k]);
}

namespace {
// A Block able to hold `capacity` rows (ids first, 8-aligned after the header).
template <typename Block>
Block* allocate_block(uint32_t capacity) {
  void* p = ::operator new(sizeof(Block) + static_cast<size_t>(capacity) * (sizeof(int64_t) + sizeof(uint16_t)));
  return new (p) Block{0, capacity};
}
}  // namespace

void LineageTerm::release() {
  if (heap()) ::operator delete(block());
  words_[0] = words_[1] = words_[2] = words_[3] = 0;
}

LineageTerm::LineageTerm(std::initializer_list<value_type> rows) {
  for (const auto& [table, id] : rows) add(table, id);
  normalize();
}

LineageTerm::LineageTerm(const LineageTerm& other) {
  if (!other.heap()) {
    std::copy(std::begin(other.words_), std::end(other.words_), std::begin(words_));
    return;
  }
  const uint32_t n = other.block()->size;
  if (n <= kInline) {
    for (uint32_t k = 0; k < n; ++k) add(other.table_at(k), other.id_at(k));
    return;
  }
  Block* b = allocate_block<Block>(n);
  b->size = n;
  std::copy(block_ids(other.block()), block_ids(other.block()) + n, block_ids(b));
  std::copy(block_tables(other.block()), block_tables(other.block()) + n, block_tables(b));
  std::memcpy(&words_[0], &b, sizeof b);
  set_tag(kHeapTag);
}

LineageTerm::LineageTerm(LineageTerm&& other) noexcept {
  std::copy(std::begin(other.words_), std::end(other.words_), std::begin(words_));
  std::fill(std::begin(other.words_), std::end(other.words_), 0);
}

LineageTerm& LineageTerm::operator=(const LineageTerm& other) {
  if (this != &other) {
    LineageTerm copy(other);
    *this = std::move(copy);
  }
  return *this;
}

LineageTerm& LineageTerm::operator=(LineageTerm&& other) noexcept {
  if (this != &other) {
    release();
    std::copy(std::begin(other.words_), std::end(other.words_), std::begin(words_));
    std::fill(std::begin(other.words_), std::end(other.words_), 0);
  }
  return *this;
}

LineageTerm::~LineageTerm() { release(); }

void LineageTerm::add(uint32_t table, int64_t id) {
  if (!heap()) {
    const uint16_t n = tag();
    if (n < kInline) {
      const unsigned shift = 16U * n;
      words_[n] = static_cast<uint64_t>(id);
      words_[3] = (words_[3] & ~(0xFFFFULL << shift)) | (static_cast<uint64_t>(table & 0xFFFFU) << shift);
      set_tag(static_cast<uint16_t>(n + 1));
      return;
    }
    Block* b = allocate_block<Block>(2 * kInline + 2);
    b->size = n;
    for (uint32_t k = 0; k < n; ++k) {
      block_ids(b)[k] = id_at(k);
      block_tables(b)[k] = static_cast<uint16_t>(table_at(k));
    }
    words_[1] = words_[2] = words_[3] = 0;
    std::memcpy(&words_[0], &b, sizeof b);
    set_tag(kHeapTag);
  }
  Block* b = block();
  if (b->size == b->capacity) {
    Block* bigger = allocate_block<Block>(2 * b->capacity);
    bigger->size = b->size;
    std::copy(block_ids(b), block_ids(b) + b->size, block_ids(bigger));
    std::copy(block_tables(b), block_tables(b) + b->size, block_tables(bigger));
    ::operator delete(b);
    b = bigger;
    std::memcpy(&words_[0], &b, sizeof b);
  }
  block_ids(b)[b->size] = id;
  block_tables(b)[b->size] = static_cast<uint16_t>(table);
  ++b->size;
}

void LineageTerm::normalize() {
  const size_t n = size();
  if (n <= 1) return;
  if (!heap()) {
    std::array<value_type, kInline> rows;
    for (size_t k = 0; k < n; ++k) rows[k] = (*this)[k];
    std::sort(rows.begin(), rows.begin() + static_cast<std::ptrdiff_t>(n));
    auto end = std::unique(rows.begin(), rows.begin() + static_cast<std::ptrdiff_t>(n));
    release();
    for (auto it = rows.begin(); it != end; ++it) add(it->first, it->second);
    return;
  }
  std::vector<value_type> rows(n);
  for (size_t k = 0; k < n; ++k) rows[k] = (*this)[k];
  std::sort(rows.begin(), rows.end());
  rows.erase(std::unique(rows.begin(), rows.end()), rows.end());
  if (rows.size() <= kInline) {
    release();
    for (const auto& [table, id] : rows) add(table, id);
    return;
  }
  Block* b = block();
  b->size = static_cast<uint32_t>(rows.size());
  for (size_t k = 0; k < rows.size(); ++k) {
    block_ids(b)[k] = rows[k].second;
    block_tables(b)[k] = static_cast<uint16_t>(rows[k].first);
  }
}

bool operator==(const LineageTerm& a, const LineageTerm& b) {
  const size_t n = a.size();
  if (b.size() != n) return false;
  for (size_t k = 0; k < n; ++k)
    if (a.id_at(k) != b.id_at(k) || a.table_at(k) != b.table_at(k)) return false;
  return true;
}

bool operator<(const LineageTerm& a, const LineageTerm& b) {
  const size_t na = a.size(), nb = b.size();
  for (size_t k = 0; k < na && k < nb; ++k) {
    const uint32_t ta = a.table_at(k), tb = b.table_at(k);
    if (ta != tb) return ta < tb;
    const int64_t ia = a.id_at(k), ib = b.id_at(k);
    if (ia != ib) return ia < ib;
  }
  return na < nb;
}

// ---- InstanceBuilder ----

Result<InstanceBuilder> InstanceBuilder::open(const std::filesystem::path& db_path,
                                              const db::Executor& executor,
                                              InstanceOptions options) {
  auto schema = db::inspect_schema(db_path);
  if (!schema.is_ok()) return schema.status();
  InstanceBuilder b;
  b.db_path_ = db_path;
  b.executor_ = &executor;
  b.options_ = options;
  b.schema_ = std::make_shared<const sql::Schema>(std::move(*schema));
  b.row_cache_ = std::make_shared<std::map<std::pair<std::string, int64_t>, db::Row>>();
  b.table_rows_ = std::make_shared<std::map<std::string, int64_t>>();
  b.witness_memo_ = std::make_shared<WitnessMemo>();
  b.sample_ = std::make_shared<SampleSlot>();
  return b;
}

Result<QueryLineage> InstanceBuilder::lineage(const std::string& sql,
                                              const db::ResultSet* result_on_d) const {
  auto sample = sample_builder();
  // No sample (a small D), or none could be made: D itself.
  if (!sample.is_ok() || !*sample) return lineage_on_d(sql, result_on_d);
  auto on_sample = (*sample)->lineage_on_d(sql, nullptr);
  if (!on_sample.is_ok()) return lineage_on_d(sql, result_on_d);
  QueryLineage out;
  out.sql = sql;
  out.fallbacks = on_sample->fallbacks;
  out.sampled = on_sample->sampled;
  out.witnesses_run = on_sample->witnesses_run;
  out.witnesses_shared = on_sample->witnesses_shared;
  out.witnesses_empty = on_sample->witnesses_empty;
  if (result_on_d != nullptr) out.result_on_d = std::make_shared<const db::ResultSet>(*result_on_d);
  out.on_sample = std::make_shared<const QueryLineage>(std::move(*on_sample));
  return out;
}

Result<SeparatingInstance> InstanceBuilder::separate(const QueryLineage& a, const QueryLineage& b,
                                                     uint64_t seed) const {
  int sample_attempts = 0;
  if (a.on_sample && b.on_sample && !db::relaxed_equal(a.on_sample->result, b.on_sample->result)) {
    auto sample = sample_builder();
    if (sample.is_ok() && *sample) {
      auto s = (*sample)->separate_on_d(*a.on_sample, *b.on_sample, seed);
      if (s.is_ok() && s->found) {
        s->on_sample = true;
        return s;
      }
      if (s.is_ok()) sample_attempts = s->attempts;
    }
  }
  // The two do not differ on the sample, or no instance was found there: lineages on D.
  auto on_d = [&](const QueryLineage& q) -> Result<std::shared_ptr<const QueryLineage>> {
    if (!q.on_sample) return std::shared_ptr<const QueryLineage>(std::shared_ptr<const QueryLineage>(), &q);  // not owned
    // A few are kept: a builder that lives across questions (a benchmark's) must not keep all.
    constexpr size_t kKept = 8;
    if (sample_->on_d.size() >= kKept && !sample_->on_d.count(q.sql)) sample_->on_d.clear();
    auto& slot = sample_->on_d[q.sql];
    if (!slot) {
      auto l = lineage_on_d(q.sql, q.result_on_d.get());
      if (!l.is_ok()) return l.status();
      slot = std::make_shared<const QueryLineage>(std::move(*l));
    }
    return slot;
  };
  auto a_on_d = on_d(a);
  if (!a_on_d.is_ok()) return a_on_d.status();
  auto b_on_d = on_d(b);
  if (!b_on_d.is_ok()) return b_on_d.status();
  auto s = separate_on_d(**a_on_d, **b_on_d, seed);
  if (s.is_ok()) s->attempts += sample_attempts;
  return s;
}

Result<QueryLineage> InstanceBuilder::lineage_on_d(const std::string& sql,
                                                   const db::ResultSet* result_on_d) const {
  QueryLineage out;
  out.sql = sql;
  if (schema_->tables.size() > LineageTerm::kMaxTables)
    return invalid_input("lineage: more than " + std::to_string(LineageTerm::kMaxTables) + " tables in the schema");
  if (result_on_d == nullptr) {
    auto r = executor_->run(db_path_, sql);
    if (!r.ok()) return Status(ErrorCode::kSql, "candidate does not run on D: " + r.error);
    out.result = std::move(r.result);
  }
  auto stmt = sql::parse_query(sql);
  if (!stmt.is_ok()) return stmt.status();
  sql::LineageOptions lo;
  lo.group_budget = options_.lineage_group_budget;
  if (lo.group_budget > 0) {
    // A table that cannot be counted leaves the lineage exact.
    auto counts = sql::count_table_rows(*stmt->select, *schema_, db_path_, *executor_, table_rows_.get());
    if (counts.is_ok()) lo.table_rows = std::move(*counts);
  }
  auto lin = sql::rewrite_lineage(*stmt->select, *schema_, lo);
  if (!lin.is_ok()) return lin.status();
  out.fallbacks = lin->fallbacks;
  out.sampled = lin->sampled;
  db::QueryLimits limits = executor_->options().limits;
  limits.row_cap = 0;
  auto index_of = [&](const std::string& name) -> std::optional<uint32_t> {
    const sql::TableInfo* info = schema_->find(name);
    if (!info) return std::nullopt;
    return static_cast<uint32_t>(info - schema_->tables.data());
  };
  // Every row of `table` as one-row terms (the rewrite's over-approximation), streamed.
  auto all_rows = [&](const std::string& table, std::vector<LineageTerm>& terms,
                      std::vector<uint32_t>& groups) -> Status {
    auto t = index_of(table);
    if (!t) return not_found("lineage: table " + table + " is not in the schema");
    const std::string& name = schema_->tables[*t].name;
    auto w = executor_->run(db_path_, "SELECT rowid FROM " + core::quote_sql_identifier(name), limits,
                            [&](const db::Row& row) {
                              if (row.empty() || row[0].type != db::ValueType::kInteger) return;
                              terms.emplace_back();
                              terms.back().add(*t, row[0].i);
                              groups.push_back(QueryLineage::kNoGroup);
                            });
    if (!w.ok()) return Status(ErrorCode::kSql, "lineage of " + name + ": " + w.error);
    return Status::ok();
  };
  // Sorts a witness's terms, drops repeats (keeping the first group) and stores both. In place:
  // at BIRD scale a witness has millions of terms, and a sorted copy would double them.
  auto store = [&](std::vector<LineageTerm>& terms, std::vector<uint32_t>& groups) -> std::shared_ptr<WitnessTerms> {
    const auto n = static_cast<uint32_t>(terms.size());
    groups.resize(n, QueryLineage::kNoGroup);
    std::vector<uint32_t> order(n);
    for (uint32_t k = 0; k < n; ++k) order[k] = k;
    std::stable_sort(order.begin(), order.end(), [&](uint32_t x, uint32_t y) { return terms[x] < terms[y]; });
    // Position k takes the term at order[k]: each cycle of the permutation moved once.
    for (uint32_t k = 0; k < n; ++k) {
      if (order[k] == k) continue;
      LineageTerm first = std::move(terms[k]);
      const uint32_t first_group = groups[k];
      uint32_t j = k;
      while (order[j] != k) {
        const uint32_t next = order[j];
        terms[j] = std::move(terms[next]);
        groups[j] = groups[next];
        order[j] = j;
        j = next;
      }
      terms[j] = std::move(first);
      groups[j] = first_group;
      order[j] = j;
    }
    size_t kept = 0;
    for (size_t k = 0; k < terms.size(); ++k) {
      if (kept > 0 && terms[kept - 1] == terms[k]) continue;
      if (kept != k) {
        terms[kept] = std::move(terms[k]);
        groups[kept] = groups[k];
      }
      ++kept;
    }
    terms.resize(kept);
    groups.resize(kept);
    auto w = std::make_shared<WitnessTerms>();
    w->terms = std::move(terms);
    w->group_of = std::move(groups);
    return w;
  };
  // Runs one witness query on D into terms and their groups, each row split into terms as it is
  // read (never held: at BIRD scale a witness has millions of rows). `fallback` says why the
  // rewrite's whole-table over-approximation was used instead, if it was.
  auto run_query = [&](const sql::WitnessQuery& q, std::vector<LineageTerm>& terms,
                       std::vector<uint32_t>& groups, std::string& fallback) -> Status {
    const size_t n = q.tables.size();
    std::vector<uint32_t> table_index(n);
    for (size_t k = 0; k < n; ++k) {
      auto t = index_of(q.tables[k]);
      if (!t) return not_found("lineage: table " + q.tables[k] + " is not in the schema");
      table_index[k] = *t;
    }
    std::vector<std::vector<int64_t>> lists(n);
    Status row_error = Status::ok();
    uint32_t row_number = 0;
    auto take = [&](const db::Row& row) {
      // Rows are numbered across the sample and, when the sample kept nothing (none of its rows
      // holds a rowid, so none makes a term), the exact query: group numbers stay distinct.
      const uint32_t group = q.grouped ? row_number : WitnessTerms::kNoGroup;
      ++row_number;
      if (!row_error.is_ok()) return;
      if (row.size() < n) {
        row_error = internal_error("lineage query returned too few columns");
        return;
      }
      for (size_t k = 0; k < n; ++k) {
        lists[k].clear();
        if (!sql::for_each_rowid(row[row.size() - n + k], [&](int64_t id) { lists[k].push_back(id); })) {
          row_error = internal_error("lineage query returned a malformed rowid list");
          return;
        }
      }
      bool aligned = n > 0 && std::all_of(lists.begin(), lists.end(),
                                          [&](const auto& l) { return l.size() == lists[0].size(); });
      if (aligned) {
        for (size_t pos = 0; pos < lists[0].size(); ++pos) {
          LineageTerm t;
          for (size_t k = 0; k < n; ++k) t.add(table_index[k], lists[k][pos]);
          t.normalize();
          terms.push_back(std::move(t));
          groups.push_back(group);
        }
      } else {
        // Outer joins leave NULL rowids that group_concat skips: positions no longer line up,
        // so the whole group is one term.
        LineageTerm t;
        for (size_t k = 0; k < n; ++k)
          for (int64_t id : lists[k]) t.add(table_index[k], id);
        t.normalize();
        if (!t.empty()) {
          terms.push_back(std::move(t));
          groups.push_back(group);
        }
      }
    };
    auto w = sql::run_witness(q, db_path_, *executor_, limits, take);
    if (!w.ok() && !q.all_rows_on_error.empty()) {
      // A decorrelated subquery witness SQLite would not run (e.g. an unqualified column
      // that became ambiguous): the rewrite's whole-table over-approximation instead.
      terms.clear();
      groups.clear();
      fallback = "decorrelated witness failed (" + w.error + "): every row of its tables";
      for (const auto& t : q.all_rows_on_error) NL2SQL_RETURN_IF_ERROR(all_rows(t, terms, groups));
      return Status::ok();
    }
    if (!w.ok()) return Status(ErrorCode::kSql, "lineage query failed: " + w.error);
    return row_error;
  };
  // The terms of one witness query: shared with a live lineage of the same witness text, none
  // when the query's own plain witness meets an empty result, run on D otherwise.
  auto witness = [&](const sql::WitnessQuery& q) -> Result<std::shared_ptr<const WitnessTerms>> {
    if (q.rows_are_output && result_on_d != nullptr && result_on_d->rows.empty()) {
      ++out.witnesses_empty;
      return std::make_shared<const WitnessTerms>();
    }
    const std::string key = q.all_rows_of.empty() ? q.sql + '\n' + q.exact_sql : "all rows of\n" + q.all_rows_of;
    {
      std::lock_guard lock(witness_memo_->mu);
      if (auto shared = witness_memo_->by_sql[key].lock()) {
        ++out.witnesses_shared;
        return std::shared_ptr<const WitnessTerms>(std::move(shared));
      }
    }
    ++out.witnesses_run;
    std::vector<LineageTerm> terms;
    std::vector<uint32_t> groups;  // parallel to terms: the witness row (group) of each
    std::string fallback;
    if (!q.all_rows_of.empty()) {
      NL2SQL_RETURN_IF_ERROR(all_rows(q.all_rows_of, terms, groups));
    } else {
      NL2SQL_RETURN_IF_ERROR(run_query(q, terms, groups, fallback));
    }
    std::shared_ptr<WitnessTerms> built = store(terms, groups);
    built->fallback = std::move(fallback);
    std::shared_ptr<const WitnessTerms> made = std::move(built);
    std::lock_guard lock(witness_memo_->mu);
    auto& slot = witness_memo_->by_sql[key];
    if (auto other = slot.lock()) return other;  // another thread ran it meanwhile
    slot = made;
    // Entries whose lineages are gone are dropped now and then, so the memo stays small.
    if (witness_memo_->by_sql.size() > 256)
      std::erase_if(witness_memo_->by_sql, [](const auto& e) { return e.second.expired(); });
    return made;
  };
  for (const auto& q : lin->queries) {
    auto w = witness(q);
    if (!w.is_ok()) return w.status();
    if (!(*w)->fallback.empty()) out.fallbacks.push_back((*w)->fallback);
    out.witnesses.push_back(std::move(*w));
    out.top.push_back(q.of_top_query ? 1 : 0);
  }
  return out;
}

Result<InstanceTables> InstanceBuilder::fetch(
    const std::map<std::string, std::set<int64_t>>& rows) const {
  InstanceTables out;
  for (const auto& [table, ids] : rows) {
    const sql::TableInfo* info = schema_->find(table);
    if (!info) return not_found("table " + table + " is not in the schema");
    std::vector<int64_t> missing;
    for (int64_t id : ids)
      if (!row_cache_->count({info->name, id})) missing.push_back(id);
    for (size_t start = 0; start < missing.size(); start += 500) {
      std::string list;
      for (size_t k = start; k < std::min(missing.size(), start + 500); ++k)
        list += (list.empty() ? "" : ",") + std::to_string(missing[k]);
      auto r = executor_->run(db_path_, "SELECT rowid, * FROM " + core::quote_sql_identifier(info->name) +
                                            " WHERE rowid IN (" + list + ")");
      if (!r.ok()) return Status(ErrorCode::kSql, "reading rows of " + info->name + ": " + r.error);
      for (auto& row : r.result.rows) {
        if (row.empty() || row[0].type != db::ValueType::kInteger) continue;
        int64_t id = row[0].i;
        row.erase(row.begin());
        (*row_cache_)[{info->name, id}] = std::move(row);
      }
    }
    db::ResultSet rs;
    for (const auto& c : info->columns) rs.columns.push_back(c.name);
    for (int64_t id : ids) {
      auto it = row_cache_->find({info->name, id});
      if (it != row_cache_->end()) rs.rows.push_back(it->second);
    }
    if (!rs.rows.empty()) out.tables[info->name] = std::move(rs);
  }
  return out;
}

Result<db::ResultSet> InstanceBuilder::run_on(const InstanceTables& instance,
                                              const std::string& sql) const {
  auto mem = MemoryDatabase::create(*schema_, instance);
  if (!mem.is_ok()) return mem.status();
  return (*mem)->run(sql, options_.query_timeout_s);
}

Status InstanceBuilder::Scratch::load(const InstanceTables& rows) {
  if (db) return db->reload(rows);
  auto mem = MemoryDatabase::create(*tables, rows);
  if (!mem.is_ok()) return mem.status();
  db = std::move(*mem);
  return Status::ok();
}

Result<std::optional<InstanceBuilder::Separation>> InstanceBuilder::try_rows(
    const std::string& a, const std::string& b, Scratch& scratch,
    const std::map<std::string, std::set<int64_t>>& rows, std::string& last_error) const {
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

Result<SeparatingInstance> InstanceBuilder::separate_on_d(const QueryLineage& a, const QueryLineage& b,
                                                          uint64_t seed) const {
  SeparatingInstance out;
  using TermList = std::vector<const LineageTerm*>;
  auto sort_unique = [](TermList& v) {
    std::sort(v.begin(), v.end(), [](const LineageTerm* x, const LineageTerm* y) { return *x < *y; });
    v.erase(std::unique(v.begin(), v.end(), [](const LineageTerm* x, const LineageTerm* y) { return *x == *y; }),
            v.end());
  };
  // Every term of a query (or of its top witnesses only), sorted and unique.
  auto terms_of = [&](const QueryLineage& q, bool top_only) {
    TermList v;
    for (size_t k = 0; k < q.witnesses.size(); ++k)
      if (!top_only || (k < q.top.size() && q.top[k]))
        for (const auto& t : q.witnesses[k]->terms) v.push_back(&t);
    sort_unique(v);
    return v;
  };
  // x − y, y − x and x ∩ y of two sorted term lists, by one merge pass.
  struct Split {
    TermList only1, only2, common;
  };
  auto split = [](const TermList& x, const TermList& y) {
    Split s;
    for (size_t i = 0, j = 0; i < x.size() || j < y.size();) {
      if (j == y.size() || (i < x.size() && *x[i] < *y[j])) s.only1.push_back(x[i++]);
      else if (i == x.size() || *y[j] < *x[i]) s.only2.push_back(y[j++]);
      else s.common.push_back(x[i++]), ++j;
    }
    return s;
  };
  const auto p1 = terms_of(a, false), p2 = terms_of(b, false);
  const Split all = split(p1, p2);
  const auto& only1 = all.only1;
  const auto& only2 = all.only2;
  const auto& common = all.common;
  if (p1.empty() && p2.empty()) {
    out.failure = "neither query reads any row";
    return out;
  }
  // The output terms: a query without a top witness (a derived table, a compound) offers all.
  auto top1 = terms_of(a, true), top2 = terms_of(b, true);
  if (top1.empty()) top1 = p1;
  if (top2.empty()) top2 = p2;
  const Split top = split(top1, top2);
  // Both queries' witnesses: the support rows of subqueries come from them, and a term's group
  // mates from the one holding it. Each witness's terms are sorted.
  std::vector<const WitnessTerms*> witnesses;
  bool subqueries = false;  // a witness that is not a top query's own
  for (const QueryLineage* q : {&a, &b})
    for (size_t k = 0; k < q->witnesses.size(); ++k) {
      witnesses.push_back(q->witnesses[k].get());
      subqueries = subqueries || k >= q->top.size() || !q->top[k];
    }
  auto table_name = [&](uint32_t t) -> const std::string& { return schema_->tables[t].name; };

  // The group mates of a term (see WitnessTerms::group_of): the witness holding it, by address.
  auto group_mates = [&](const LineageTerm* t) {
    std::vector<const LineageTerm*> mates;
    for (const WitnessTerms* w : witnesses) {
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
  };

  std::mt19937_64 rng(seed ^ 0x5eb4a7a1c0ffee11ULL);
  // Adds to `rows`, for each witness not yet represented by `picks` (rows read by subqueries),
  // the term sharing most values with the rows picked so far.
  auto add_support = [&](const TermList& picks, std::map<std::string, std::set<int64_t>>& rows) -> Status {
    // Values of the rows picked so far: a support term that shares one is likely to join.
    auto picked = fetch(rows);
    if (!picked.is_ok()) return picked.status();
    std::set<std::string> values;          // python keys, for scoring
    std::set<std::string> literal_values;  // SQL literals, for lookups by value
    auto add_value = [&](const db::Value& v) {
      if (v.is_null()) return;
      values.insert(db::python_key(v));
      if (v.type == db::ValueType::kInteger) literal_values.insert(std::to_string(v.i));
      else if (v.type == db::ValueType::kText && v.s.size() <= 64) {
        std::string q = "'";
        for (char c : v.s) q += c == '\'' ? std::string("''") : std::string(1, c);
        literal_values.insert(q + "'");
      }
    };
    for (const auto& [t, rs] : picked->tables)
      for (const auto& row : rs.rows)
        for (const auto& v : row) add_value(v);
    std::set<LineageTerm> chosen;
    for (const auto* p : picks) chosen.insert(*p);
    for (size_t w = 0; w < witnesses.size(); ++w) {
      const auto& terms = witnesses[w]->terms;
      if (terms.empty()) continue;
      bool represented = std::any_of(chosen.begin(), chosen.end(), [&](const LineageTerm& t) {
        return std::binary_search(terms.begin(), terms.end(), t);
      });
      if (represented) continue;
      std::vector<const LineageTerm*> pool;
      std::vector<LineageTerm> looked_up;  // owns terms found by value (single-row witnesses)
      if (terms.size() > options_.affinity_sample && terms.front().size() == 1) {
        // Too many rows to score them all: ask D for the rows of this table sharing a value
        // with the rows picked so far (join keys), and keep those that are witnesses.
        const uint32_t table = terms.front().front().first;
        const sql::TableInfo* info = &schema_->tables[table];
        std::string list;
        size_t k = 0;
        for (const auto& v : literal_values) {
          if (k++ >= 64) break;
          list += (list.empty() ? "" : ", ") + v;
        }
        if (info && !list.empty()) {
          std::string where;
          for (const auto& c : info->columns)
            where += (where.empty() ? "" : " OR ") + core::quote_sql_identifier(c.name) + " IN (" + list + ")";
          auto r = executor_->run(db_path_, "SELECT rowid FROM " + core::quote_sql_identifier(info->name) +
                                                " WHERE " + where + " LIMIT 512");
          if (r.ok())
            for (const auto& row : r.result.rows)
              if (!row.empty() && row[0].type == db::ValueType::kInteger) {
                LineageTerm t{{table, row[0].i}};
                if (std::binary_search(terms.begin(), terms.end(), t)) looked_up.push_back(std::move(t));
              }
        }
        for (const auto& t : looked_up) pool.push_back(&t);
      }
      if (pool.empty())
        for (const auto& t : terms) pool.push_back(&t);
      auto sample = draw(pool, options_.affinity_sample, rng);
      std::shuffle(sample.begin(), sample.end(), rng);
      std::map<std::string, std::set<int64_t>> sample_rows;
      for (const auto* t : sample)
        for (const auto& [table, id] : *t) sample_rows[table_name(table)].insert(id);
      auto fetched = fetch(sample_rows);
      if (!fetched.is_ok()) return fetched.status();
      const LineageTerm* best = sample.front();
      size_t best_score = 0;
      for (const auto* t : sample) {
        size_t score = 0;
        for (const auto& [table, id] : *t) {
          auto it = row_cache_->find({table_name(table), id});
          if (it == row_cache_->end()) continue;
          for (const auto& v : it->second)
            if (!v.is_null() && values.count(db::python_key(v))) ++score;
        }
        if (score > best_score) best_score = score, best = t;
      }
      // The new rows' values count for the witnesses still to come (a chain of joins).
      for (const auto& [table, id] : *best) {
        auto it = row_cache_->find({table_name(table), id});
        if (it == row_cache_->end()) continue;
        for (const auto& v : it->second) add_value(v);
      }
      chosen.insert(*best);
      for (const auto& [table, id] : *best) rows[table_name(table)].insert(id);
    }
    return Status::ok();
  };

  // D′ is created, for every draw and every step of the shrinking, with only the tables the two
  // queries name (a word match: naming more is harmless).
  sql::Schema named;
  for (const auto& t : schema_->tables)
    if (core::mentions_identifier(a.sql, t.name) || core::mentions_identifier(b.sql, t.name)) named.tables.push_back(t);
  if (named.tables.empty() || !options_.grow) named = *schema_;
  Scratch scratch{&named, nullptr};
  std::string last_error;
  // One attempt: the rows of `picks` (plus support rows); true when an instance was accepted.
  // A term of more rows than `term_rows` (an outer join's whole group, which lineage cannot split
  // into tuples: at BIRD scale thousands of rows) brings a seeded sample of that many of them —
  // D′ is verified anyway, and no model reads thousands of rows.
  const auto start = std::chrono::steady_clock::now();
  auto out_of_time = [&] {
    return options_.search_budget_s > 0 &&
           std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() > options_.search_budget_s;
  };
  auto attempt = [&](const TermList& picks, bool support, size_t term_rows) -> Result<bool> {
    ++out.attempts;
    std::map<std::string, std::set<int64_t>> rows;
    for (const auto* t : picks) {
      if (t->size() <= term_rows) {
        for (const auto& [table, id] : *t) rows[table_name(table)].insert(id);
        continue;
      }
      std::vector<LineageTerm::value_type> all_rows(t->begin(), t->end());
      std::shuffle(all_rows.begin(), all_rows.end(), rng);
      for (size_t k = 0; k < term_rows; ++k) rows[table_name(all_rows[k].first)].insert(all_rows[k].second);
    }
    if (rows.empty()) return false;
    if (support) NL2SQL_RETURN_IF_ERROR(add_support(picks, rows));
    auto found = try_rows(a.sql, b.sql, scratch, rows, last_error);
    if (!found.is_ok()) return found.status();
    if (!*found) return false;
    const size_t before = (*found)->instance.rows();
    Separation small = options_.shrink_budget_s > 0 ? shrink(a.sql, b.sql, scratch, std::move(**found)) : std::move(**found);
    const size_t n = small.instance.rows();
    if (n > options_.max_rows) {
      if (!out.too_large || n < out.too_large_rows) out.too_large_rows = n;
      out.too_large = true;
      return false;
    }
    out.found = true;
    out.too_large = false;
    out.too_large_rows = 0;
    out.rows_before_shrink = before;
    out.instance = std::move(small.instance);
    out.answer_a = std::move(small.answer_a);
    out.answer_b = std::move(small.answer_b);
    return true;
  };

  // Phase 1: growing draws from the output terms, then the largest groups whole.
  const size_t top_size = std::max({top.only1.size(), top.only2.size(), top.common.size()});
  for (size_t k = 1; options_.grow && k <= 64; k *= 2) {
    TermList picks;
    for (const TermList* pool : {&top.only1, &top.only2, &top.common}) {
      auto x = draw(*pool, k, rng);
      picks.insert(picks.end(), x.begin(), x.end());
    }
    for (bool support : {false, true}) {
      if (support && !subqueries) continue;
      auto done = attempt(picks, support, std::max<size_t>(16, 4 * k));
      if (!done.is_ok()) return done.status();
      if (*done) return out;
      if (out_of_time()) break;
    }
    if (out_of_time()) break;
    if (k == 2) {
      // The largest group of every grouped witness, whole (a COUNT ranking, a HAVING threshold).
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
        for (size_t t = 0; t < w->terms.size() && groups.size() < 4 * options_.max_group_terms; ++t)
          if (w->group_of[t] == largest) groups.push_back(&w->terms[t]);
      }
      if (!groups.empty()) {
        auto done = attempt(groups, subqueries, 4 * options_.max_rows);
        if (!done.is_ok()) return done.status();
        if (*done) return out;
      }
    }
    if (k >= top_size) break;
  }

  // Phase 2: sampling.
  const auto [m0, n0] = sample_sizes(a.sql, b.sql);
  // A partial group still yields its output row unless a HAVING condition drops it.
  const bool having = core::mentions_identifier(a.sql, "having") || core::mentions_identifier(b.sql, "having");
  for (int round = 0; round < options_.max_attempts; ++round) {
    const size_t grow = 1 + static_cast<size_t>(round) / 14;
    const bool support = round % 2 == 1 && witnesses.size() > 2;
    const bool swapped = (round / 2) % 2 == 1;
    const bool whole_groups = having && round >= 5 && round % 3 == 2;
    const int m = swapped ? n0 : m0, n = swapped ? m0 : n0;
    TermList picks;
    if (only1.empty() && only2.empty()) {
      picks = draw(common, 2 * grow, rng);
    } else {
      auto x = draw(only1, static_cast<size_t>(m) * grow, rng);
      auto y = draw(only2, static_cast<size_t>(n) * grow, rng);
      picks.insert(picks.end(), x.begin(), x.end());
      picks.insert(picks.end(), y.begin(), y.end());
      // One side contributes nothing of its own (e.g. its answer is a subset of the other's):
      // now and then add a shared term so non-monotone queries get rows to work on.
      if ((only1.empty() || only2.empty()) && round % 4 == 3) {
        auto z = draw(common, 1, rng);
        picks.insert(picks.end(), z.begin(), z.end());
      }
    }
    if (whole_groups) {
      const size_t drawn = picks.size();
      for (size_t k = 0; k < drawn; ++k) {
        auto mates = group_mates(picks[k]);
        picks.insert(picks.end(), mates.begin(), mates.end());
      }
    }
    auto done = attempt(picks, support, 8 * grow * options_.max_rows);
    if (!done.is_ok()) return done.status();
    if (*done) return out;
    if (out_of_time()) {
      out.timed_out = true;
      break;
    }
  }
  if (out.timed_out)
    out.failure = "search timed out after " + std::to_string(out.attempts) + " attempts (" +
                  seconds_text(options_.search_budget_s) + " budget)" +
                  (out.too_large ? "; the smallest separating instance found has " + std::to_string(out.too_large_rows) + " rows" : "");
  else if (out.too_large)
    out.failure = "the smallest separating instance found has " + std::to_string(out.too_large_rows) +
                  " rows, over max_rows " + std::to_string(options_.max_rows);
  else
    out.failure = "no separating instance in " + std::to_string(out.attempts) + " attempts" +
                  (last_error.empty() ? "" : " (last error on D′: " + last_error + ")");
  return out;
}

std::pair<int, int> sample_sizes(const std::string& sql_a, const std::string& sql_b) {
  const std::string both = sql_a + "\n" + sql_b;
  auto has = [&](const char* word) { return core::mentions_identifier(both, word); };
  if (has("sum") && has("case") && has("when")) return {3, 4};
  if (has("count")) return {1, 2};
  return {1, 1};
}

}  // namespace nl2sql::select
