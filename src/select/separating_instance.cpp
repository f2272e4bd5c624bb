// Separating instances: lineage terms and the lineage of a query on D (the construction is in
// the header). The sampling search for D′ is in separating_search.cpp; D′ as tables, its
// in-memory database and the answer format are in instance_database.cpp.
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

namespace {

// Sorts a witness's terms, drops repeats (keeping the first group) and stores both. In place:
// at BIRD scale a witness has millions of terms, and a sorted copy would double them.
std::shared_ptr<WitnessTerms> sorted_witness(std::vector<LineageTerm>& terms, std::vector<uint32_t>& groups) {
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
}

// One row of a witness query as terms of group `group`: its trailing rowid columns (one per
// table of `table_index`) hold rowid lists; `lists` is scratch space kept across rows.
Status add_row_terms(const db::Row& row, const std::vector<uint32_t>& table_index, uint32_t group,
                     std::vector<std::vector<int64_t>>& lists, std::vector<LineageTerm>& terms,
                     std::vector<uint32_t>& groups) {
  const size_t n = table_index.size();
  if (row.size() < n) return internal_error("lineage query returned too few columns");
  for (size_t k = 0; k < n; ++k) {
    lists[k].clear();
    if (!sql::for_each_rowid(row[row.size() - n + k], [&](int64_t id) { lists[k].push_back(id); }))
      return internal_error("lineage query returned a malformed rowid list");
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
    return Status::ok();
  }
  // Outer joins leave NULL rowids that group_concat skips: positions no longer line up, so the
  // whole group is one term.
  LineageTerm t;
  for (size_t k = 0; k < n; ++k)
    for (int64_t id : lists[k]) t.add(table_index[k], id);
  t.normalize();
  if (!t.empty()) {
    terms.push_back(std::move(t));
    groups.push_back(group);
  }
  return Status::ok();
}

}  // namespace

// The witness queries of one lineage, run on D into terms (or shared with a live lineage of the
// same witness text through the builder's memo); counts go to the lineage being built.
class InstanceBuilder::WitnessReader {
 public:
  WitnessReader(const InstanceBuilder& builder, const db::ResultSet* result_on_d, QueryLineage& out)
      : b_(builder), result_on_d_(result_on_d), out_(out), limits_(builder.executor_->options().limits) {
    limits_.row_cap = 0;
  }
  Result<std::shared_ptr<const WitnessTerms>> witness(const sql::WitnessQuery& q);

 private:
  std::optional<uint32_t> index_of(const std::string& name) const {
    const sql::TableInfo* info = b_.schema_->find(name);
    if (!info) return std::nullopt;
    return static_cast<uint32_t>(info - b_.schema_->tables.data());
  }
  Status all_rows(const std::string& table, std::vector<LineageTerm>& terms, std::vector<uint32_t>& groups) const;
  Status run_query(const sql::WitnessQuery& q, std::vector<LineageTerm>& terms, std::vector<uint32_t>& groups,
                   std::string& fallback) const;
  std::shared_ptr<const WitnessTerms> remember(const std::string& key, std::shared_ptr<const WitnessTerms> made);

  const InstanceBuilder& b_;
  const db::ResultSet* result_on_d_;
  QueryLineage& out_;
  db::QueryLimits limits_;
};

// Every row of `table` as one-row terms (the rewrite's over-approximation), streamed.
Status InstanceBuilder::WitnessReader::all_rows(const std::string& table, std::vector<LineageTerm>& terms,
                                                std::vector<uint32_t>& groups) const {
  auto t = index_of(table);
  if (!t) return not_found("lineage: table " + table + " is not in the schema");
  const std::string& name = b_.schema_->tables[*t].name;
  auto w = b_.executor_->run(b_.db_path_, "SELECT rowid FROM " + core::quote_sql_identifier(name), limits_,
                             [&](const db::Row& row) {
                               if (row.empty() || row[0].type != db::ValueType::kInteger) return;
                               terms.emplace_back();
                               terms.back().add(*t, row[0].i);
                               groups.push_back(QueryLineage::kNoGroup);
                             });
  if (!w.ok()) return Status(ErrorCode::kSql, "lineage of " + name + ": " + w.error);
  return Status::ok();
}

// Runs one witness query on D into terms and their groups, each row split into terms as it is
// read (never held: at BIRD scale a witness has millions of rows). `fallback` says why the
// rewrite's whole-table over-approximation was used instead, if it was.
Status InstanceBuilder::WitnessReader::run_query(const sql::WitnessQuery& q, std::vector<LineageTerm>& terms,
                                                 std::vector<uint32_t>& groups, std::string& fallback) const {
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
    if (row_error.is_ok()) row_error = add_row_terms(row, table_index, group, lists, terms, groups);
  };
  auto w = sql::run_witness(q, b_.db_path_, *b_.executor_, limits_, take);
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
}

// The terms of one witness query: shared with a live lineage of the same witness text, none
// when the query's own plain witness meets an empty result, run on D otherwise.
Result<std::shared_ptr<const WitnessTerms>> InstanceBuilder::WitnessReader::witness(const sql::WitnessQuery& q) {
  if (q.rows_are_output && result_on_d_ != nullptr && result_on_d_->rows.empty()) {
    ++out_.witnesses_empty;
    return std::make_shared<const WitnessTerms>();
  }
  const std::string key = q.all_rows_of.empty() ? q.sql + '\n' + q.exact_sql : "all rows of\n" + q.all_rows_of;
  {
    std::lock_guard lock(b_.witness_memo_->mu);
    if (auto shared = b_.witness_memo_->by_sql[key].lock()) {
      ++out_.witnesses_shared;
      return std::shared_ptr<const WitnessTerms>(std::move(shared));
    }
  }
  ++out_.witnesses_run;
  std::vector<LineageTerm> terms;
  std::vector<uint32_t> groups;  // parallel to terms: the witness row (group) of each
  std::string fallback;
  if (!q.all_rows_of.empty()) {
    NL2SQL_RETURN_IF_ERROR(all_rows(q.all_rows_of, terms, groups));
  } else {
    NL2SQL_RETURN_IF_ERROR(run_query(q, terms, groups, fallback));
  }
  std::shared_ptr<WitnessTerms> built = sorted_witness(terms, groups);
  built->fallback = std::move(fallback);
  return remember(key, std::move(built));
}

// Stores `made` in the memo under `key`, unless another thread ran the same witness meanwhile
// (then its terms are shared instead).
std::shared_ptr<const WitnessTerms> InstanceBuilder::WitnessReader::remember(const std::string& key,
                                                                             std::shared_ptr<const WitnessTerms> made) {
  std::lock_guard lock(b_.witness_memo_->mu);
  auto& slot = b_.witness_memo_->by_sql[key];
  if (auto other = slot.lock()) return other;
  slot = made;
  // Entries whose lineages are gone are dropped now and then, so the memo stays small.
  if (b_.witness_memo_->by_sql.size() > 256)
    std::erase_if(b_.witness_memo_->by_sql, [](const auto& e) { return e.second.expired(); });
  return made;
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
  WitnessReader reader(*this, result_on_d, out);
  for (const auto& q : lin->queries) {
    auto w = reader.witness(q);
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

}  // namespace nl2sql::select
