// Separating instances (after the SISelection method): for two queries that return different
// results on a database D, a small sub-database D′ ⊆ D on which they still differ. Showing a
// model the question and D′ — a handful of rows — lets it work the answer out by hand, and the
// candidate whose answer on D′ matches the model's wins the duel.
//
// Construction. Each query's lineage (sql/lineage.h: witness queries returning the rowids of
// the base-table rows behind every output row or group) is split into simple terms: the rows
// joined to produce one output tuple (grouped witnesses are split position by position when
// every table's list has the same length, else the group is one term). With P1, P2 the term
// sets of the two queries, the search runs in two phases.
//  1. Growing draws from the output terms (the terms of each query's top witness, whose rows
//     make its output rows; a query without one, e.g. over a derived table, offers all its
//     terms): k terms of each of P1 − P2, P2 − P1 and P1 ∩ P2 for k = 1, 2, 4, … 64, each also
//     with the support rows of subqueries (below) when there are any; then the largest group
//     of every grouped witness of both queries, whole. This is what the ordinary differences
//     between real candidates need: two rows tied at the extreme (ORDER BY … LIMIT 1 against
//     = (SELECT MIN …)), n + 1 matching rows (LIMIT n without ORDER BY), a group large enough
//     for a HAVING threshold or a COUNT ranking (GROUP BY name against GROUP BY key), a few rows
//     of each case of a whole-table aggregate.
//  2. Sampling, up to `max_attempts` (42) times: pick M terms from P1 − P2 and N
//     from P2 − P1 — (M, N) = (3, 4) when either query mentions SUM, CASE and WHEN, (1, 2) when
//     either mentions COUNT, else (1, 1); when one difference is empty the other side fills in,
//     and when P1 = P2 two common terms are taken. Every other attempt also adds, for each witness
//     query not yet represented (rows read by subqueries), the term sharing most values with the
//     rows picked so far, so an IN/scalar subquery sees the rows it needs. Attempts 2, 3, 6, 7, …
//     swap M and N (which query's rows come in larger number decides e.g. ORDER BY COUNT … LIMIT 1);
//     when either query has HAVING, from attempt 5 every third attempt adds, for each picked term of
//     a grouped witness, the other terms of its group (at most `max_group_terms`), so HAVING
//     COUNT(…) > k can hold on D′. Later attempts grow the sample.
// D′ is the union of the picked rows; it separates when both queries run on it and their results
// differ under the relaxed equality. A separating D′ is then shrunk: rows are dropped, halves
// first and then single rows (delta debugging), while the two queries still differ, within
// `shrink_budget_s`; what remains is the instance. One of more than `max_rows` rows is not
// accepted (the search goes on; none found: `too_large`).
//
// Large databases. Witness queries cost as much as the queries themselves, and at BIRD scale a
// grouped join's is seconds. When a table of D has more than `sample_rows` rows, the search
// first works on a sample of D: a temporary SQLite file (deleted when no builder of the process
// holds it; one per database file and version, shared by the builders of the process; named
// nl2sql-sample-<pid>-…, so that the files of a process that was killed are removed by the next
// process that makes a sample: remove_orphaned_samples) holding
// every row of the small tables and about `sample_rows` rows of each large one, copied with
// their rowids and values. A large table keeps the rows whose key hashes into one bucket of m
// (nl2sql_hash; m from the largest table), the key being the column of its foreign key to
// another large table, else the column another large table's foreign key refers to, else the
// rowid — so rows joined along those keys are kept together. Both queries run on the sample;
// when they differ there, lineage and search run on the sample, and what they find is rows of
// D verified on both queries as any D′. When they do not differ on the sample, or no instance
// is found there, the lineages on D are computed and the search runs on D as above.
//
// No database is modified: rows are read from D through db::Executor (read-only) and D′ lives
// in an in-memory SQLite database created from the table definitions (sqlite_master, via
// sql::load_schema); queries run on it under the executor's read-only authorizer, with a
// single-statement read-only check and a deadline. All randomness comes from the seed.
//
// Thread-safety: an InstanceBuilder belongs to one thread (it caches rows); build one per
// question. The free functions are pure.
#pragma once

#include <cstdint>
#include <cstddef>
#include <filesystem>
#include <initializer_list>
#include <iterator>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "nl2sql/core/status.h"
#include "nl2sql/db/executor.h"
#include "nl2sql/sql/analysis.h"
#include "nl2sql/sql/lineage.h"

// SQLite's handles, declared at global scope as sqlite3.h declares them (an elaborated
// `struct sqlite3*` inside the namespace would declare a type of its own).
struct sqlite3;
struct sqlite3_stmt;

namespace nl2sql::select {

// One simple term: the (table, rowid) pairs of the rows behind one output tuple, sorted by
// (table, rowid), without repeats; the table is an index into the builder's schema
// (InstanceBuilder::schema().tables). A BIRD-sized query has millions of terms, sorted and
// compared many times, so a term is compact: up to kInline rows are held in its own 32 bytes
// (no allocation), more in one heap block. Terms compare as the sequences of their pairs
// (lexicographically). Schemas of more than 65,535 tables are not supported (the table index is
// stored in 16 bits).
class LineageTerm {
 public:
  using value_type = std::pair<uint32_t, int64_t>;
  static constexpr uint32_t kInline = 3;
  static constexpr uint32_t kMaxTables = 0xFFFF;

  class const_iterator {
   public:
    using iterator_category = std::forward_iterator_tag;
    using value_type = LineageTerm::value_type;
    using difference_type = std::ptrdiff_t;
    using pointer = void;
    using reference = value_type;
    const_iterator() = default;
    const_iterator(const LineageTerm* term, uint32_t k) : term_(term), k_(k) {}
    value_type operator*() const { return (*term_)[k_]; }
    const_iterator& operator++() { ++k_; return *this; }
    const_iterator operator++(int) { auto copy = *this; ++k_; return copy; }
    bool operator==(const const_iterator& o) const { return k_ == o.k_; }
    bool operator!=(const const_iterator& o) const { return k_ != o.k_; }

   private:
    const LineageTerm* term_ = nullptr;
    uint32_t k_ = 0;
  };

  LineageTerm() = default;
  // The given rows, sorted and without repeats.
  LineageTerm(std::initializer_list<value_type> rows);
  LineageTerm(const LineageTerm& other);
  LineageTerm(LineageTerm&& other) noexcept;
  LineageTerm& operator=(const LineageTerm& other);
  LineageTerm& operator=(LineageTerm&& other) noexcept;
  ~LineageTerm();

  size_t size() const { return heap() ? block()->size : tag(); }
  bool empty() const { return size() == 0; }
  value_type operator[](size_t k) const { return {table_at(k), id_at(k)}; }
  value_type front() const { return (*this)[0]; }
  const_iterator begin() const { return {this, 0}; }
  const_iterator end() const { return {this, static_cast<uint32_t>(size())}; }

  // Appends a row (table < kMaxTables); call normalize() once all are in.
  void add(uint32_t table, int64_t id);
  // Sorts the rows by (table, rowid) and drops repeats.
  void normalize();

  friend bool operator==(const LineageTerm& a, const LineageTerm& b);
  friend bool operator!=(const LineageTerm& a, const LineageTerm& b) { return !(a == b); }
  friend bool operator<(const LineageTerm& a, const LineageTerm& b);

 private:
  struct Block {  // followed by int64_t ids[capacity], then uint16_t tables[capacity]
    uint32_t size;
    uint32_t capacity;
  };
  static constexpr uint16_t kHeapTag = 0xFFFF;
  // Inline: words_[0..2] the rowids, words_[3] three 16-bit tables then the 16-bit size.
  // Heap: words_[0] the Block's address, the top 16 bits of words_[3] kHeapTag.
  uint64_t words_[4] = {0, 0, 0, 0};

  uint16_t tag() const { return static_cast<uint16_t>(words_[3] >> 48); }
  void set_tag(uint16_t t);
  bool heap() const { return tag() == kHeapTag; }
  Block* block() const;
  static int64_t* block_ids(Block* b);
  static uint16_t* block_tables(Block* b);
  uint32_t table_at(size_t k) const;
  int64_t id_at(size_t k) const;
  void release();
};

// One witness query's terms on D. Read-only once built: lineages whose witness queries have the
// same text share one (see InstanceBuilder::lineage).
struct WitnessTerms {
  static constexpr uint32_t kNoGroup = UINT32_MAX;
  std::vector<LineageTerm> terms;  // sorted, unique
  // Per term: the output group (witness row) it came from; kNoGroup for an ungrouped witness.
  // Lets the search add a term's whole group (a HAVING COUNT(…) > k group).
  std::vector<uint32_t> group_of;
  std::string fallback;  // why these are every row of some tables instead (see lineage())
};

struct QueryLineage {
  static constexpr uint32_t kNoGroup = WitnessTerms::kNoGroup;
  std::string sql;
  db::ResultSet result;                      // on D (empty when the caller supplied it)
  std::vector<std::shared_ptr<const WitnessTerms>> witnesses;  // one per witness query
  std::vector<char> top;                     // per witness: the top query's own (its output rows)
  std::vector<std::string> fallbacks;        // over-approximations the rewrite used
  std::vector<std::string> sampled;          // grouped witnesses kept to a sample of groups
  // How the witnesses were had: queries run on D, taken from another live lineage with the
  // same witness text, and known empty from the query's empty result on D (none run).
  int witnesses_run = 0;
  int witnesses_shared = 0;
  int witnesses_empty = 0;
  // Large databases: the lineage on the sample of D (its result is the query's result on the
  // sample), with `witnesses` left empty; the result on D the caller gave is kept for the
  // lineage on D, computed only when the sample does not separate.
  std::shared_ptr<const QueryLineage> on_sample;
  std::shared_ptr<const db::ResultSet> result_on_d;
};

struct InstanceOptions {
  int max_attempts = 42;
  double query_timeout_s = 5.0;   // per query on D′
  size_t affinity_sample = 256;   // terms per witness query scored for the support rows
  size_t max_group_terms = 64;    // most terms of one group a whole-group attempt adds
  // Grouped witnesses over a table of more rows keep a hash sample of their groups
  // (sql::LineageOptions::group_budget); 0: always exact.
  int64_t lineage_group_budget = 100000;
  // Most rows of an accepted instance (select.separating_instances.max_rows): a model works out
  // the answer on D′ by hand, so a larger one is no instance.
  size_t max_rows = 30;
  double shrink_budget_s = 0.2;   // time to drop rows from one separating instance; 0: none
  // Phase 1 and D′ made of the named tables only; off: the search as before them (the sampling
  // alone, every table created), for a before/after in one binary.
  bool grow = true;
  // Wall time after which the search stops between attempts (timed_out); 0: none.
  double search_budget_s = 2.0;
  // Sample of D (see "Large databases" above): when a table of D has more rows than this, the
  // search first works on a sample database with about this many rows of each table; 0: never.
  int64_t sample_rows = 20000;
};

// D′: tables (only the non-empty ones) with their rows, as columns + rows.
struct InstanceTables {
  std::map<std::string, db::ResultSet> tables;
  size_t rows() const;
  // {"table": [{"column": value, …}, …], …} for traces (keys sorted).
  nlohmann::json to_json() const;
  // The same as indented JSON text with tables and columns in schema order: what the model sees.
  std::string to_prompt_text() const;
};

struct SeparatingInstance {
  bool found = false;
  int attempts = 0;
  InstanceTables instance;
  db::ResultSet answer_a, answer_b;  // the two queries on D′
  std::string failure;               // why none was found (when !found)
  // None found, but a separating one of more than max_rows rows was (the smallest: too_large_rows).
  bool too_large = false;
  size_t too_large_rows = 0;
  size_t rows_before_shrink = 0;     // of the accepted instance, as first found
  bool timed_out = false;            // none found within InstanceOptions::search_budget_s
  bool on_sample = false;            // found on the sample of D (large databases)
  nlohmann::json to_json() const;
};

// An in-memory copy of a database's table definitions holding chosen rows; runs read-only
// queries against it. The search tries many row sets on the same tables, so the rows can be
// replaced (reload) without building a new database, and the statements run are kept prepared
// (the last few, by text): the schema never changes after create.
class MemoryDatabase {
 public:
  static Result<std::unique_ptr<MemoryDatabase>> create(const sql::Schema& schema,
                                                        const InstanceTables& rows);
  ~MemoryDatabase();
  MemoryDatabase(const MemoryDatabase&) = delete;
  MemoryDatabase& operator=(const MemoryDatabase&) = delete;
  // Replaces the rows of every table by those of `rows` (a table `rows` does not name is left
  // empty): the database then holds what create(schema, rows) would, rowids included.
  Status reload(const InstanceTables& rows);
  // One read-only statement; errors (SQL errors, timeouts, writes) are statuses.
  Result<db::ResultSet> run(const std::string& sql, double timeout_s = 5.0) const;

 private:
  MemoryDatabase() = default;
  Status exec(const std::string& sql);
  sqlite3* db_ = nullptr;
  // Set only around reload's own statements (db/writable_lock_down.h): SQL given to run() is
  // always prepared and stepped under the read-only authorizer.
  bool writes_open_ = false;
  std::set<std::string> filled_;  // tables holding rows
  bool has_sequence_ = false;     // an AUTOINCREMENT table: sqlite_sequence is reset too
  mutable std::vector<std::pair<std::string, sqlite3_stmt*>> prepared_;  // newest last
};

class InstanceBuilder {
 public:
  // Loads the schema of `db_path`; `executor` must outlive the builder.
  static Result<InstanceBuilder> open(const std::filesystem::path& db_path,
                                      const db::Executor& executor, InstanceOptions options = {});

  // Runs `sql` on D and gathers its lineage terms. A caller that already holds the query's
  // result on D (the selectors do: candidates are executed once) passes it, and the query is
  // not run again — at BIRD scale that run costs as much as the witness queries. A result cut
  // to its first rows (QueryLimits::hash_rows_after) must keep at least one: an empty one
  // means the whole answer is empty, and the query's own plain witness is then not run.
  // A witness query whose text another lineage of this builder (or of a copy) still holds is
  // not run again: its terms are shared (at BIRD scale each witness is a scan of the data).
  // On a large database (InstanceOptions::sample_rows) the lineage is taken on the sample of D
  // (QueryLineage::on_sample) and the one on D only if separate() needs it.
  Result<QueryLineage> lineage(const std::string& sql,
                               const db::ResultSet* result_on_d = nullptr) const;
  // Builds the sample of D now if D is large and no live builder of this process made it yet
  // (otherwise the first lineage() does): for a caller that times it on its own.
  Status prepare_sample() const;
  // Searches for D′ separating `a` and `b` (whose results on D should differ).
  Result<SeparatingInstance> separate(const QueryLineage& a, const QueryLineage& b,
                                      uint64_t seed) const;
  // The rows of the given (table → rowids) as InstanceTables (read through the executor).
  Result<InstanceTables> fetch(const std::map<std::string, std::set<int64_t>>& rows) const;
  // Runs `sql` on an in-memory database holding `instance`.
  Result<db::ResultSet> run_on(const InstanceTables& instance, const std::string& sql) const;

  const sql::Schema& schema() const { return *schema_; }

 private:
  // The two queries on D′ made of `rows` (all in the row cache), when both run and differ.
  struct Separation {
    InstanceTables instance;
    db::ResultSet answer_a, answer_b;
  };
  // The in-memory D′ of one search: created from `tables` (those the queries name) for the first
  // row set tried, refilled for every later one.
  struct Scratch {
    const sql::Schema* tables = nullptr;
    std::unique_ptr<MemoryDatabase> db;
    Status load(const InstanceTables& rows);
  };
  Result<std::optional<Separation>> try_rows(const std::string& a, const std::string& b, Scratch& scratch,
                                             const std::map<std::string, std::set<int64_t>>& rows,
                                             std::string& last_error) const;
  // Drops rows of a separating instance while the queries still differ (instance_shrink.cpp).
  Separation shrink(const std::string& a, const std::string& b, Scratch& scratch, Separation found) const;

  // One lineage's witness queries run on D into terms (separating_instance.cpp), and one
  // search for D′ (separating_search.cpp).
  class WitnessReader;
  class Search;

  // The lineage on D itself (lineage() without the sample).
  Result<QueryLineage> lineage_on_d(const std::string& sql, const db::ResultSet* result_on_d) const;
  // The search on D itself, with lineages on D.
  Result<SeparatingInstance> separate_on_d(const QueryLineage& a, const QueryLineage& b, uint64_t seed) const;
  // The builder over the sample of D; null when D has no table over sample_rows rows
  // (separating_sample.cpp).
  Result<std::shared_ptr<const InstanceBuilder>> sample_builder() const;

  InstanceBuilder() = default;
  std::filesystem::path db_path_;
  const db::Executor* executor_ = nullptr;
  InstanceOptions options_;
  std::shared_ptr<const sql::Schema> schema_;
  // Rows per table of D (for the lineage sample); filled lazily.
  std::shared_ptr<std::map<std::string, int64_t>> table_rows_;
  // (table, rowid) → row as read from D (columns in schema order); filled lazily.
  std::shared_ptr<std::map<std::pair<std::string, int64_t>, db::Row>> row_cache_;
  // Witness text → its terms while some lineage holds them (weak: the memo keeps nothing alive).
  struct WitnessMemo {
    std::mutex mu;
    std::map<std::string, std::weak_ptr<const WitnessTerms>> by_sql;
  };
  std::shared_ptr<WitnessMemo> witness_memo_;
  // The sample's builder once known (sample_builder); shared by copies of this builder.
  struct SampleSlot {
    bool known = false;
    std::shared_ptr<const void> file;  // the sample's file, deleted with its last holder
    std::shared_ptr<const InstanceBuilder> builder;
    // Lineages on D taken when the sample did not separate, by SQL text (the last few): a query
    // meets several others in a selector's round robin.
    std::map<std::string, std::shared_ptr<const QueryLineage>> on_d;
  };
  std::shared_ptr<SampleSlot> sample_;
};

// Removes the sample files (nl2sql-sample-<pid>-…) in `dir` whose process is gone — left by a
// process that was killed before it could delete them; files of live processes, and files named
// otherwise, are kept. Returns how many were removed. Called once per process, in the
// temporary folder, before its first sample is made.
int remove_orphaned_samples(const std::filesystem::path& dir);

// The (M, N) sample sizes of the construction for two queries' SQL texts.
std::pair<int, int> sample_sizes(const std::string& sql_a, const std::string& sql_b);

// A result rendered the way the evaluate-on-instance prompt asks the model to answer: one JSON
// array per row, one row per line; "(no rows)" when empty.
std::string render_answer_rows(const db::ResultSet& result);
// Parses a model's answer in that format (a fenced block or the bare text; a JSON array of
// arrays is accepted too). Values: JSON numbers, strings, null. Reasoning (<think> blocks, text
// before a lone </think>, harmony analysis) is dropped first.
Result<db::ResultSet> parse_answer_rows(const std::string& text);
// Relaxed equality after normalising values the way a person writes them: numeric text is a
// number, reals are rounded to 4 decimals, text is trimmed.
bool answers_match(const db::ResultSet& model_answer, const db::ResultSet& query_answer);

}  // namespace nl2sql::select
