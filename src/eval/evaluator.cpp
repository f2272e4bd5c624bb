#include "nl2sql/eval/evaluator.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <optional>
#include <random>

#include <spdlog/spdlog.h>

#include "nl2sql/core/files.h"
#include "nl2sql/core/thread_pool.h"
#include "nl2sql/db/result_compare.h"
#include "nl2sql/db/result_digest.h"
#include "nl2sql/eval/compare.h"
#include "hardness.h"
#include "tie_check.h"
#include "nl2sql/sql/features.h"
#include "nl2sql/sql/parser.h"

namespace nl2sql::eval {
namespace fs = std::filesystem;
using db::ExecStatus;
using db::ExecutionResult;

const char* metric_name(Metric m) {
  switch (m) {
    case Metric::kBird: return "bird";
    case Metric::kSpiderTs: return "spider_ts";
    case Metric::kRelaxed: return "relaxed";
  }
  return "?";
}

Result<std::vector<Metric>> parse_metrics(const std::string& spec) {
  if (spec == "all") return std::vector<Metric>{Metric::kBird, Metric::kSpiderTs, Metric::kRelaxed};
  std::vector<Metric> out;
  size_t start = 0;
  while (start <= spec.size()) {
    size_t comma = spec.find(',', start);
    std::string m = spec.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (m == "bird") out.push_back(Metric::kBird);
    else if (m == "spider-ts" || m == "spider_ts") out.push_back(Metric::kSpiderTs);
    else if (m == "relaxed") out.push_back(Metric::kRelaxed);
    else return invalid_input("--metric \"" + m + "\": expected bird, spider-ts, relaxed or all");
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

Result<MetricSpec> parse_metric_spec(const std::string& spec) {
  MetricSpec out;
  std::string rest;
  size_t start = 0;
  while (start <= spec.size()) {
    size_t comma = spec.find(',', start);
    std::string m = spec.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    EfficiencyMetric e;
    if (m == "judge") {
      out.judge = true;
    } else if (parse_efficiency_metric(m, &e)) {
      if (std::find(out.efficiency.begin(), out.efficiency.end(), e) == out.efficiency.end()) out.efficiency.push_back(e);
    } else {
      rest += (rest.empty() ? "" : ",") + m;
    }
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  if (rest.empty() && (!out.efficiency.empty() || out.judge)) return out;
  auto metrics = parse_metrics(rest);
  if (!metrics)
    return invalid_input(metrics.status().message() + " (or ves, rves, ves-steps, rves-steps, judge)");
  out.metrics = std::move(*metrics);
  return out;
}

Result<PredictionFormat> parse_prediction_format(const std::string& name) {
  if (name == "auto") return PredictionFormat::kAuto;
  if (name == "bird") return PredictionFormat::kBird;
  if (name == "spider") return PredictionFormat::kSpider;
  if (name == "jsonl") return PredictionFormat::kJsonl;
  return invalid_input("--pred-format \"" + name + "\": expected auto, bird, spider or jsonl");
}

namespace {

void add_warning(std::vector<std::string>* warnings, std::string w) {
  if (warnings) warnings->push_back(std::move(w));
}

// The first ten keys of a list, then how many there are in all.
std::string listed_keys(const std::vector<std::string>& keys) {
  std::string s;
  for (size_t i = 0; i < keys.size() && i < 10; ++i) s += (i ? ", " : "") + keys[i];
  return s + (keys.size() > 10 ? ", … (" + std::to_string(keys.size()) + " in all)" : "");
}

// What a BIRD prediction file does that the official script reads differently or not at all.
struct BirdFileIrregularities {
  std::vector<std::string> non_string, no_separator;
  size_t out_of_order = 0;
  std::string first_out_of_order;
};

void warn_irregularities(const fs::path& path, const BirdFileIrregularities& f, std::vector<std::string>* warnings) {
  if (!f.non_string.empty())
    add_warning(warnings, path.string() + ": " + std::to_string(f.non_string.size()) +
                       " value(s) are not strings (keys " + listed_keys(f.non_string) +
                       "); scored as the official script does: the query \" \" on database financial");
  if (!f.no_separator.empty())
    add_warning(warnings, path.string() + ": " + std::to_string(f.no_separator.size()) +
                       " value(s) lack the \"\\t----- bird -----\\t\" separator (keys " + listed_keys(f.no_separator) +
                       "); the whole value is taken as the SQL");
  if (f.out_of_order > 0)
    add_warning(warnings, path.string() + ": " + std::to_string(f.out_of_order) +
                       " entries are not at the position their key names (first: " + f.first_out_of_order +
                       "). nl2sql pairs each prediction with the question its key names; the official script "
                       "pairs by file order, so its score for this file would differ");
}

// BIRD predict_dev.json: {"<position>": "SQL\t----- bird -----\tdb_id", …}.
Status read_bird_predictions(const fs::path& path, const std::string& text, const data::Dataset& ds,
                             std::vector<Prediction>& out, std::vector<std::string>* warnings) {
  // File order is kept (ordered_json): the official script pairs the i-th entry with the i-th
  // question whatever its key, and a file whose keys are out of order must say so.
  auto checked = core::parse_json(text, path.string());  // errors name line and column
  if (!checked) return checked.status();
  const auto doc = nlohmann::ordered_json::parse(text, nullptr, /*allow_exceptions=*/true, /*ignore_comments=*/true);
  if (!doc.is_object())
    return invalid_input(path.string() + ": expected a JSON object {\"0\": \"SQL\\t----- bird -----\\tdb_id\", …}");
  std::map<size_t, size_t> by_index;  // file position -> our question
  for (size_t i = 0; i < ds.questions.size(); ++i) by_index[ds.questions[i].index] = i;
  static const std::string kSep = "\t----- bird -----\t";
  BirdFileIrregularities odd;
  size_t entry = 0;
  for (auto it = doc.begin(); it != doc.end(); ++it, ++entry) {
    size_t pos;
    try {
      size_t used = 0;
      pos = std::stoul(it.key(), &used);
      if (used != it.key().size()) throw std::invalid_argument("trailing");
    } catch (...) {
      return invalid_input(path.string() + ": key \"" + it.key() + "\" is not a question position");
    }
    if (pos != entry && odd.out_of_order++ == 0)
      odd.first_out_of_order = "key \"" + it.key() + "\" is entry " + std::to_string(entry);
    auto q = by_index.find(pos);
    if (q == by_index.end()) {
      if (pos >= ds.total_questions)
        add_warning(warnings, path.string() + ": prediction \"" + it.key() + "\" has no question at that position");
      continue;
    }
    if (!it->is_string()) {
      // The official package_sqls turns it into the query " " on database "financial" and
      // goes on; so do we (the question then scores 0 unless it is a financial question whose
      // gold returns no rows).
      odd.non_string.push_back(it.key());
      out[q->second] = {" ", true, "financial"};
      continue;
    }
    std::string v = it->get<std::string>();
    std::string sql = v, db_id;
    if (auto sep = v.find(kSep); sep != std::string::npos) {
      sql = v.substr(0, sep);
      db_id = v.substr(sep + kSep.size());
    } else {
      odd.no_separator.push_back(it.key());
    }
    if (!db_id.empty() && db_id != ds.questions[q->second].db_id)
      add_warning(warnings, path.string() + ": prediction \"" + it.key() + "\" names db " + db_id + " but question " +
                         ds.questions[q->second].question_id + " is on " + ds.questions[q->second].db_id);
    out[q->second] = {sql, true, ""};
  }
  warn_irregularities(path, odd, warnings);
  return Status::ok();
}

// Spider: one SQL per line in question-file order (text after a tab is the db_id).
void read_spider_predictions(const fs::path& path, const std::string& t, const data::Dataset& ds,
                             std::vector<Prediction>& out, std::vector<std::string>* warnings) {
  std::vector<std::string> lines;
  size_t start = 0;
  while (start < t.size()) {
    size_t nl = t.find('\n', start);
    std::string line = t.substr(start, nl == std::string::npos ? std::string::npos : nl - start);
    if (!line.empty() && line.back() == '\r') line.pop_back();
    lines.push_back(line);
    if (nl == std::string::npos) break;
    start = nl + 1;
  }
  if (lines.size() != ds.total_questions)
    add_warning(warnings, path.string() + ": " + std::to_string(lines.size()) + " lines for " +
                       std::to_string(ds.total_questions) + " questions; missing lines count as no prediction");
  for (size_t i = 0; i < ds.questions.size(); ++i) {
    size_t pos = ds.questions[i].index;
    if (pos >= lines.size()) continue;
    std::string sql = lines[pos];
    // Text after a tab is not SQL (the official reader splits each line at tabs: "SQL\tdb_id");
    // a tab inside a query therefore cuts it, in both tools: say so.
    if (auto tab = sql.find('\t'); tab != std::string::npos) {
      std::string after = sql.substr(tab + 1);
      sql = sql.substr(0, tab);
      if (after != ds.questions[i].db_id)
        add_warning(warnings, path.string() + ":" + std::to_string(pos + 1) + ": a tab cuts the line; question " +
                           ds.questions[i].question_id + " is scored on \"" + sql +
                           "\" only (as the official evaluator)");
    }
    out[i] = {sql, true, ""};
  }
}

// JSONL: {"question_id", "sql"} per line, each question at most once.
Status read_jsonl_predictions(const fs::path& path, const std::string& t, const data::Dataset& ds,
                              std::vector<Prediction>& out, std::vector<std::string>* warnings) {
  std::map<std::string, size_t> by_id;
  for (size_t i = 0; i < ds.questions.size(); ++i) by_id[ds.questions[i].question_id] = i;
  std::map<std::string, size_t> seen_at;  // question id -> line, for the duplicate check
  size_t start = 0, line_no = 0;
  while (start < t.size()) {
    size_t nl = t.find('\n', start);
    std::string line = t.substr(start, nl == std::string::npos ? std::string::npos : nl - start);
    ++line_no;
    start = nl == std::string::npos ? t.size() : nl + 1;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    std::string label = path.string() + ":" + std::to_string(line_no);
    auto o = core::parse_json(line, label);
    if (!o) return o.status();
    if (!o->is_object() || !o->contains("question_id") || !o->contains("sql") || !(*o)["sql"].is_string())
      return invalid_input(label + ": expected {\"question_id\": …, \"sql\": \"…\"}");
    const auto& idj = (*o)["question_id"];
    std::string id = idj.is_string() ? idj.get<std::string>() : idj.dump();
    // Two predictions for one question: which one counts would be an accident of the file.
    if (auto [it, fresh] = seen_at.emplace(id, line_no); !fresh)
      return invalid_input(label + ": duplicate question_id " + id + " (also line " + std::to_string(it->second) + ")");
    auto q = by_id.find(id);
    if (q == by_id.end()) {
      add_warning(warnings, label + ": question_id " + id + " is not among the evaluated questions");
      continue;
    }
    out[q->second] = {(*o)["sql"].get<std::string>(), true, ""};
  }
  return Status::ok();
}

}  // namespace

Result<std::vector<Prediction>> read_predictions(const fs::path& path, PredictionFormat format,
                                                 const data::Dataset& ds,
                                                 std::vector<std::string>* warnings) {
  auto text = core::read_file(path);
  if (!text) return text.status();
  if (format == PredictionFormat::kAuto) {
    std::string ext = path.extension().string();
    format = ext == ".json" ? PredictionFormat::kBird
             : ext == ".jsonl" ? PredictionFormat::kJsonl
                               : PredictionFormat::kSpider;
  }
  std::vector<Prediction> out(ds.questions.size());
  if (format == PredictionFormat::kBird) {
    if (auto st = read_bird_predictions(path, *text, ds, out, warnings); !st.is_ok()) return st;
  } else if (format == PredictionFormat::kSpider) {
    read_spider_predictions(path, *text, ds, out, warnings);
  } else {
    if (auto st = read_jsonl_predictions(path, *text, ds, out, warnings); !st.is_ok()) return st;
  }
  return out;
}

std::string outcome_code(const ItemResult& item, bool primary_correct, bool pred_empty,
                         bool contains) {
  if (item.gold_unusable) return "RES6";
  // Correct under the primary metric's own reading of the text (an empty prediction against an
  // empty gold for bird, the first statement for spider-ts, gold's values plugged in).
  if (primary_correct) return "RES3";
  if (item.pred_status == "timeout" || item.pred_status == "row_cap") return "RES6";
  if (item.pred_status != "ok") return "RES1";
  if (pred_empty && item.gold_rows > 0) return "RES4";
  if (contains) return "RES5";
  return "RES2";
}

namespace {

// A result's first rows as one line, e.g. "(a, 10) (b, 10) … 4 rows".
std::string rows_preview(const db::ExecutionResult& e, size_t max_rows) {
  const db::ResultSet& r = e.result;
  if (e.row_count() == 0) return "no rows";
  std::string out;
  for (size_t i = 0; i < r.rows.size() && i < max_rows; ++i) {
    out += i ? " (" : "(";
    for (size_t j = 0; j < r.rows[i].size(); ++j) out += (j ? ", " : "") + r.rows[i][j].to_display();
    out += ")";
  }
  if (e.row_count() > max_rows) out += " … " + std::to_string(e.row_count()) + " rows";
  return out;
}

// Two executions compared for a verdict: exactly on their rows when both are whole, on their
// digests (db/result_digest.h) when either was hashed past QueryLimits::hash_rows_after; the
// other side's digest is then built from its rows (it has at most that many).
class ComparedPair {
 public:
  ComparedPair(const db::ExecutionResult& a, const db::ExecutionResult& b) : a_(a), b_(b) {}
  bool hashed() const { return a_.digest || b_.digest; }
  const db::ResultDigest& a() { return get(a_, da_); }
  const db::ResultDigest& b() { return get(b_, db_); }

 private:
  static const db::ResultDigest& get(const db::ExecutionResult& e, std::shared_ptr<const db::ResultDigest>& slot) {
    if (!slot) slot = e.digest ? e.digest : std::make_shared<const db::ResultDigest>(db::digest_of(e.result));
    return *slot;
  }
  const db::ExecutionResult& a_;
  const db::ExecutionResult& b_;
  std::shared_ptr<const db::ResultDigest> da_, db_;
};

bool bird_equal(const db::ExecutionResult& pred, const db::ExecutionResult& gold) {
  ComparedPair c(pred, gold);
  return c.hashed() ? db::bird_equal(c.a(), c.b()) : db::bird_equal(pred.result, gold.result);
}

bool spider_ts_equal(const db::ExecutionResult& gold, const db::ExecutionResult& pred, bool order_matters) {
  ComparedPair c(gold, pred);
  if (c.hashed()) return db::spider_ts_equal(c.a(), c.b(), order_matters);
  return gold.result.rows == pred.result.rows || db::spider_ts_equal(gold.result, pred.result, order_matters);
}

// Executes through the cache. `variant` separates executions with other settings.
db::CachedExecution run_cached(const db::Executor& executor, db::ResultCache* cache,
                               std::atomic<size_t>& hits, std::atomic<size_t>& misses,
                               const fs::path& db_path, const std::string& fingerprint,
                               const std::string& sql, const db::QueryLimits& limits, bool* cached,
                               std::string_view variant = "") {
  std::string key;
  if (cache) {
    key = db::ResultCache::key(fingerprint, sql, variant);
    if (auto hit = cache->get(key, limits.row_cap)) {
      ++hits;
      if (cached) *cached = true;
      return std::move(*hit);
    }
    ++misses;
  }
  db::CachedExecution e;
  e.result = executor.run(db_path, sql, limits);
  e.row_cap = limits.row_cap;
  if (cache) cache->put(key, e);
  return e;
}

}  // namespace

Metric primary_metric(data::Benchmark benchmark, const std::vector<Metric>& metrics) {
  const bool want_bird = std::count(metrics.begin(), metrics.end(), Metric::kBird);
  const bool want_ts = std::count(metrics.begin(), metrics.end(), Metric::kSpiderTs);
  Metric primary = metrics.empty() ? Metric::kBird : metrics.front();
  if (benchmark == data::Benchmark::kSpider && want_ts) primary = Metric::kSpiderTs;
  else if (want_bird) primary = Metric::kBird;
  return primary;
}

ItemJudge::ItemJudge(data::Benchmark benchmark, EvalOptions options, db::ResultCache* cache)
    : benchmark_(benchmark), options_(std::move(options)), cache_(cache),
      executor_([&] {
        db::ExecutorOptions o;
        o.limits = options_.pred_limits;
        return o;
      }()),
      primary_(primary_metric(benchmark_, options_.metrics)) {
  // Verdicts need whole answers, not capped ones: past the row cap (eval.row_cap) an answer is
  // hashed rather than kept, so the cap bounds memory and never decides a verdict.
  const size_t kept = options_.pred_limits.row_cap;
  gold_limits_ = options_.gold_limits;
  verdict_limits_ = options_.pred_limits;
  if (kept > 0) {
    if (gold_limits_.hash_rows_after == 0) gold_limits_.hash_rows_after = kept;
    verdict_limits_.row_cap = 0;
    verdict_limits_.hash_rows_after = kept;
  }
}

db::CachedExecution ItemJudge::run(const fs::path& db_path, const std::string& fingerprint,
                                   const std::string& sql, const db::QueryLimits& limits,
                                   bool* cached, std::string_view variant) const {
  bool hit = false;
  auto e = run_cached(executor_, cache_, hits_, misses_, db_path, fingerprint, sql, limits, &hit, variant);
  if (!hit) ++executions_;
  if (cached) *cached = hit;
  return e;
}

std::string ItemJudge::variant_fingerprint(const fs::path& file) const {
  std::lock_guard lock(variant_mu_);
  auto [it, fresh] = variant_fps_.try_emplace(file.string());
  if (fresh) {
    auto f = db::database_fingerprint(file);
    // Unreadable: no shared cache entry (the path itself is unique to this file).
    it->second = f ? *f : "unfingerprinted:" + file.string();
  }
  return it->second;
}

db::CachedExecution ItemJudge::gold(const data::Question& q, const fs::path& db_path,
                                    const std::string& fp, bool* cached, double* exec_ms,
                                    const db::ExecutionResult* known) const {
  TieProbe probe;
  const TieCheckKind kind = options_.check_ties ? tie_check_kind(q.gold_sql, &probe) : TieCheckKind::kNone;
  const std::string key = cache_ ? db::ResultCache::key(fp, q.gold_sql) : std::string();
  auto timed = [&](const db::ExecutionResult& r) {
    ++executions_;
    if (exec_ms) *exec_ms += r.elapsed_ms;
  };
  std::optional<db::CachedExecution> hit;
  if (known && known->ok()) {
    hit.emplace();
    hit->result = *known;
    hit->row_cap = gold_limits_.row_cap;
    if (cache_) cache_->put(key, *hit);  // as a run of gold would be (not when hashed)
  } else if (cache_) {
    hit = cache_->get(key, gold_limits_.row_cap);
    ++(hit ? hits_ : misses_);
  }
  if (cached) *cached = hit.has_value();
  db::CachedExecution gold;
  std::optional<db::ExecutionResult> probed;  // the tie probe, when it ran before gold
  if (hit) {
    gold = std::move(*hit);
  } else {
    if (kind == TieCheckKind::kOrderByProbe && probe.answers_gold) {
      // Gold is `… ORDER BY keys LIMIT 1`: the probe returns its first two rows with their keys.
      // When the first row's keys are its own, that row is gold's answer whatever the engine
      // does with ties, and the tie check is settled with it: one query instead of two.
      auto r = executor_.run(db_path, probe.sql, options_.gold_limits);
      timed(r);
      const auto& rows = r.result.rows;
      if (r.ok() && (rows.size() < 2 || keys_told_apart(probe, rows[0], rows[1]))) {
        const size_t outputs = r.result.columns.size() - probe.appended;
        gold.result.elapsed_ms = r.elapsed_ms;
        gold.result.result.columns.assign(r.result.columns.begin(), r.result.columns.begin() + static_cast<std::ptrdiff_t>(outputs));
        if (!rows.empty()) gold.result.result.rows.emplace_back(rows[0].begin(), rows[0].begin() + static_cast<std::ptrdiff_t>(outputs));
        gold.row_cap = gold_limits_.row_cap;
        gold.tie_checked = true;
        if (cache_) cache_->put(key, gold);
        return gold;
      }
      probed = std::move(r);
    }
    gold.result = executor_.run(db_path, q.gold_sql, gold_limits_);
    timed(gold.result);
    gold.row_cap = gold_limits_.row_cap;
    if (cache_) cache_->put(key, gold);
  }
  if (kind != TieCheckKind::kNone && gold.result.ok() && !gold.tie_checked) {
    bool tie = false;
    if (kind == TieCheckKind::kOrderByProbe) {
      if (!probed) {
        probed = executor_.run(db_path, probe.sql, options_.gold_limits);
        timed(*probed);
      }
      tie = probed->ok() && probe_shows_tie(probe, probed->result);
    } else {  // kReverseScan: gold's text with tables scanned the other way
      db::QueryLimits reversed = gold_limits_;
      reversed.reverse_scan_order = true;
      auto alt = executor_.run(db_path, q.gold_sql, reversed);
      timed(alt);
      tie = alt.ok() && !bird_equal(alt, gold.result);
    }
    gold.tie_checked = true;
    gold.tie_dependent = tie;
    // Stores the derived fact with the execution already run.
    if (cache_) cache_->put(key, gold);
  }
  return gold;
}

namespace {

// The official spider-ts preprocessing of one text: "> =" joined; without keep-distinct, the
// first statement only (re-joined from sqlparse's first statement) with every DISTINCT removed;
// with it, Python's one-statement rule (`runnable`); then YEAR(CURDATE()) → 2020.
std::string spider_ts_text(const std::string& s, bool keep_distinct, bool* runnable) {
  std::string t = spider_postprocess(s);
  *runnable = true;
  if (!keep_distinct) t = remove_distinct(first_statement(t));
  else *runnable = python_runs_as_one_statement(t);
  return replace_cur_year(t);
}

// An answer kept for the caller (selection compares rows): one past the row cap is what it was
// before hashing, a row-cap status without rows.
void unhash_past_row_cap(db::ExecutionResult& run, size_t cap) {
  if (run.digest || (cap > 0 && run.result.rows.size() > cap)) {
    run.status = ExecStatus::kRowCap;
    run.error = "result has more than " + std::to_string(cap) + " rows";
    run.result.rows.clear();
    run.digest.reset();
  }
}

}  // namespace

// One judgement in progress: the request, the item being filled, gold's and the prediction's
// executions and the SQLite time spent, with one member per step of ItemJudge::judge.
class ItemJudge::Judging {
 public:
  Judging(const ItemJudge& judge, const JudgeRequest& request)
      : j_(judge), request_(request), q_(request.question), p_(request.prediction), item_(judged_.item) {}

  Judged judge() {
    auto t0 = std::chrono::steady_clock::now();
    describe_question();
    take_gold();
    blank_ = p_.present && holds_no_statement(p_.sql);
    take_prediction();
    score();
    item_.total_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    if (request_.keep_prediction_run) {
      judged_.prediction_run = std::move(pred_.result);
      unhash_past_row_cap(judged_.prediction_run, j_.options_.pred_limits.row_cap);
    }
    judged_.exec_ms = exec_ms_;
    return std::move(judged_);
  }

 private:
  // The texts spider-ts compares, and gold's answer to its own (a test suite's variants too).
  struct SpiderTsTexts {
    std::string gold, pred;
    bool order_matters = false;
    const db::ExecutionResult* gold_run = nullptr;
    const std::vector<fs::path>* variants = nullptr;
  };

  bool wants(Metric m) const { return std::count(j_.options_.metrics.begin(), j_.options_.metrics.end(), m) > 0; }

  // Any SQL through the judge's cache; its time counts unless it was a cache hit.
  db::CachedExecution run(const fs::path& db_path, const std::string& fp, const std::string& sql,
                          const db::QueryLimits& limits) {
    bool cached = false;
    auto e = j_.run(db_path, fp, sql, limits, &cached);
    exec_ms_ += cached ? 0 : e.result.elapsed_ms;
    return e;
  }

  void describe_question() {
    item_.question_id = q_.question_id;
    item_.index = q_.index;
    item_.db_id = q_.db_id;
    item_.difficulty = q_.difficulty;
    if (item_.difficulty.empty() && j_.benchmark_ == data::Benchmark::kSpider) {
      // The parsed "sql" field when the file has it (dev.json), else our own AST.
      if (!q_.spider_sql.is_null()) {
        item_.difficulty = spider_hardness(q_.spider_sql);
      } else if (auto stmt = sql::parse_query(q_.gold_sql); stmt.is_ok()) {
        item_.difficulty = sql::spider_hardness(*stmt->select);
      }
    }
  }

  void take_gold() {
    if (request_.known_gold) {
      gold_ = *request_.known_gold;
      item_.gold_cached = true;
    } else {
      gold_ = j_.gold(q_, request_.db_path, request_.fingerprint, &item_.gold_cached, &exec_ms_);
    }
    item_.gold_status = db::exec_status_name(gold_.result.status);
    item_.gold_error = gold_.result.error;
    item_.gold_unusable = !gold_.result.ok();
    item_.gold_rows = gold_.result.row_count();
    item_.gold_ms = gold_.result.elapsed_ms;
    item_.gold_tie_dependent = j_.options_.check_ties && gold_.result.ok() && gold_.tie_dependent;
  }

  void take_prediction() {
    // Gold that timed out or outgrew its caps decides every metric's verdict (0, RES6) whatever
    // the prediction returns, so the prediction is not run (it could cost a timeout of its own),
    // unless the caller wants its result (a run's selection does).
    const bool gold_decides = !request_.keep_prediction_run && (gold_.result.status == ExecStatus::kTimeout ||
                                                                gold_.result.status == ExecStatus::kRowCap);
    if (!p_.present || blank_) {
      item_.pred_status = "missing";
      item_.error = p_.present ? "empty prediction" : "no prediction for this question";
      pred_.result.status = ExecStatus::kError;
      pred_.result.error = item_.error;
    } else if (gold_decides) {
      item_.pred_status = "not_run";
      item_.error = std::string("not executed: gold's ") + db::exec_status_name(gold_.result.status) +
                    " decides every verdict";
      pred_.result.status = ExecStatus::kError;
      pred_.result.error = item_.error;
    } else {
      const db::ExecutionResult* known = request_.known_prediction;
      if (known && known->ok()) {
        pred_.result = *known;  // its first rows and the shared digest of the whole answer
        item_.pred_cached = true;
      } else {
        pred_ = j_.run(request_.db_path, request_.fingerprint, p_.sql, j_.verdict_limits_, &item_.pred_cached);
      }
      exec_ms_ += item_.pred_cached ? 0 : pred_.result.elapsed_ms;
      item_.pred_status = db::exec_status_name(pred_.result.status);
      item_.error = pred_.result.error;
      item_.pred_rows = pred_.result.row_count();
      item_.pred_ms = pred_.result.elapsed_ms;
    }
  }

  // Every requested metric's verdict, Soft-F1 and the outcome code.
  void score() {
    const bool both_ok = pred_.result.ok() && gold_.result.ok();
    const auto& pr = pred_.result.result;
    const auto& gr = gold_.result.result;
    // Answers hashed past the row cap are compared on their digests (same rules).
    ComparedPair hashed(pred_.result, gold_.result);
    const bool large = hashed.hashed();
    // Identical results (same values, types and order) are equal under every metric; the BIRD
    // rule still runs because of its UTF-8 quirk, which is cheap.
    const bool identical = both_ok && !large && pr.rows == gr.rows;
    if (wants(Metric::kBird)) score_bird(hashed, both_ok);
    if (wants(Metric::kRelaxed))
      item_.verdicts["relaxed"] =
          identical || (both_ok && (large ? db::relaxed_equal(hashed.a(), hashed.b()) : db::relaxed_equal(pr, gr)));
    if (wants(Metric::kSpiderTs)) item_.verdicts["spider_ts"] = score_spider_ts();
    item_.soft_f1 = identical ? 1.0
                    : both_ok ? (large ? db::soft_f1(hashed.a(), hashed.b()) : db::soft_f1(pr, gr))
                              : 0.0;
    const Metric primary = j_.primary_;
    bool primary_ok = item_.verdicts.count(metric_name(primary)) && item_.verdicts[metric_name(primary)];
    bool contains = both_ok && !primary_ok &&
                    (large ? db::contains_gold(hashed.a(), hashed.b()) : db::contains_gold(pr, gr));
    item_.outcome =
        outcome_code(item_, primary_ok, pred_.result.ok() && pred_.result.row_count() == 0, contains);
  }

  void score_bird(ComparedPair& hashed, bool both_ok) {
    // The official script runs the text through Python's sqlite3: one statement only (`q;;` is
    // an error there), and a text with no statement runs as a query with no rows. A non-string
    // value in its file runs on "financial" instead of the question's database.
    const bool python_ok = p_.present && python_runs_as_one_statement(p_.sql);
    const bool other_db = !p_.official_db.empty() && p_.official_db != q_.db_id;
    bool v = false;
    if (!python_ok || other_db) {
      v = false;
    } else if (blank_) {
      v = gold_.result.ok() && gold_.result.row_count() == 0;
    } else {
      v = both_ok && (hashed.hashed() ? db::bird_equal(hashed.a(), hashed.b())
                                      : db::bird_equal(pred_.result.result, gold_.result.result));
    }
    item_.verdicts["bird"] = v;
    const bool bird_primary = j_.primary_ == Metric::kBird;
    if (bird_primary && p_.present && !python_ok && pred_.result.ok()) {
      item_.pred_status = "error";
      item_.error = "You can only execute one statement at a time (Python's sqlite3, which the official script uses)";
    } else if (bird_primary && blank_ && v) {
      item_.note = "empty prediction: Python runs it as a query with no rows, and gold has none";
    }
  }

  // Runs the preprocessed text only when preprocessing changed it.
  const db::ExecutionResult* run_if_changed(const std::string& original, const std::string& processed,
                                            const db::ExecutionResult& base, const db::QueryLimits& limits,
                                            db::ExecutionResult& storage) {
    if (processed == original) return &base;
    storage = run(request_.db_path, request_.fingerprint, processed, limits).result;
    return &storage;
  }

  bool equal_to_gold(const SpiderTsTexts& ts, const db::ExecutionResult& e) const {
    return e.ok() && spider_ts_equal(*ts.gold_run, e, ts.order_matters);
  }

  bool score_spider_ts() {
    if (!gold_.result.ok() || !p_.present || blank_) return false;
    const bool ts_primary = j_.primary_ == Metric::kSpiderTs;
    bool g_runnable = true, p_runnable = true;
    SpiderTsTexts ts;
    ts.gold = spider_ts_text(q_.gold_sql, j_.options_.keep_distinct, &g_runnable);
    ts.pred = spider_ts_text(p_.sql, j_.options_.keep_distinct, &p_runnable);
    ts.order_matters = spider_order_matters(ts.gold);
    db::ExecutionResult g_alt, p_alt;
    ts.gold_run = run_if_changed(q_.gold_sql, ts.gold, gold_.result, j_.gold_limits_, g_alt);
    const db::ExecutionResult* p_use =
        p_runnable ? run_if_changed(p_.sql, ts.pred, pred_.result, j_.verdict_limits_, p_alt) : nullptr;
    if (!g_runnable || !ts.gold_run->ok()) {
      if (ts_primary && !g_runnable) item_.note = "gold holds more than one statement, which Python's sqlite3 refuses";
      return false;
    }
    // A test suite: gold and the prediction must agree on every other database file of the
    // folder too (the official evaluator's rule); the first disagreement is recorded.
    static const std::vector<fs::path> kNone;
    const auto vit = j_.options_.variants.find(q_.db_id);
    ts.variants = vit == j_.options_.variants.end() ? &kNone : &vit->second;
    item_.ts_databases = 1 + ts.variants->size();
    item_.ts_original = p_use && equal_to_gold(ts, *p_use);
    bool ok = item_.ts_original && on_every_variant(ts, ts.pred);
    if (ts_primary && p_use && p_use != &pred_.result && p_use->ok() && !pred_.result.ok()) {
      // Scored on its first statement: report that execution, not the refused full text.
      item_.note = "spider-ts scored the first statement only, as the official evaluator (" + item_.error + ")";
      item_.pred_status = db::exec_status_name(p_use->status);
      item_.error = p_use->error;
      item_.pred_rows = p_use->row_count();
    }
    if (!ok && j_.options_.plug_value) ok = passes_with_gold_values(ts);
    return ok;
  }

  // Whether `text` agrees with gold on every variant of the suite; else records the first where
  // it does not, and why.
  bool on_every_variant(const SpiderTsTexts& ts, const std::string& text) {
    for (const auto& v : *ts.variants) {
      const std::string vfp = j_.variant_fingerprint(v);
      auto g = run(v, vfp, ts.gold, j_.gold_limits_);
      if (!g.result.ok()) {
        item_.ts_failed_on = v.filename().string();
        item_.ts_failure = "gold fails there (" + g.result.error + "); the official evaluator stops on this";
        return false;
      }
      auto e = run(v, vfp, text, j_.verdict_limits_);
      const bool same = e.result.ok() && spider_ts_equal(g.result, e.result, ts.order_matters);
      if (!same) {
        item_.ts_failed_on = v.filename().string();
        item_.ts_failure = e.result.ok() ? "gold: " + rows_preview(g.result, 3) + " / prediction: " + rows_preview(e.result, 3)
                                         : "the prediction fails there: " + e.result.error;
        return false;
      }
    }
    return true;
  }

  // --plug_value: gold's literal values in the prediction's value slots, every filling; one
  // filling must pass on every database file.
  bool passes_with_gold_values(const SpiderTsTexts& ts) {
    const bool ts_primary = j_.primary_ == Metric::kSpiderTs;
    bool truncated = false;
    for (const auto& alt : plugged_predictions(ts.gold, ts.pred, j_.options_.plug_value_limit, &truncated)) {
      const std::string& text = alt;  // from the preprocessed text: YEAR(CURDATE()) is already replaced
      auto e = run(request_.db_path, request_.fingerprint, text, j_.verdict_limits_);
      if (!equal_to_gold(ts, e.result)) continue;
      item_.ts_original = true;
      if (on_every_variant(ts, text)) {
        item_.ts_failed_on.clear();
        item_.ts_failure.clear();
        if (ts_primary) item_.note = "correct with gold's values plugged in (--plug-value): " + alt;
        return true;
      }
    }
    if (truncated && ts_primary)
      item_.note = "--plug-value tried the first " + std::to_string(j_.options_.plug_value_limit) + " fillings only";
    return false;
  }

  const ItemJudge& j_;
  const JudgeRequest& request_;
  const data::Question& q_;
  const Prediction& p_;
  Judged judged_;
  ItemResult& item_;
  db::CachedExecution gold_, pred_;
  bool blank_ = false;
  double exec_ms_ = 0;
};

Judged ItemJudge::judge(const JudgeRequest& request) const { return Judging(*this, request).judge(); }

bool ItemJudge::correct(const ItemResult& item) const {
  auto it = item.verdicts.find(metric_name(primary_));
  return it != item.verdicts.end() && it->second;
}

namespace {

// Each database's fingerprint (the result cache's keys), by db_id.
Result<std::map<std::string, std::string>> database_fingerprints(const data::Dataset& ds) {
  std::map<std::string, std::string> fingerprints;
  for (const auto& [db_id, path] : ds.db_paths) {
    auto f = db::database_fingerprint(path);
    if (!f) return f.status();
    fingerprints[db_id] = *f;
  }
  return fingerprints;
}

// "judge" in eval.metrics: each question's two answers as tables for the model of role judge,
// beside the rule-based verdicts already in report.items.
Status judge_semantics(const data::Dataset& ds, const std::vector<Prediction>& preds, const EvalOptions& options,
                       const ItemJudge& judge, const std::map<std::string, std::string>& fingerprints,
                       EvalReport& report) {
  if (!options.judge_client) return invalid_input("eval.metrics: judge needs a model client (role judge)");
  auto prompt = options.prompts ? options.prompts->load("judge_semantic")
                                : llm::PromptLibrary::bundled().load("judge_semantic");
  if (!prompt) return prompt.status();
  std::vector<JudgeInput> inputs(ds.questions.size());
  report.judged.resize(ds.questions.size());
  core::parallel_for(ds.questions.size(), report.threads, [&](size_t i) {
    const data::Question& q = ds.questions[i];
    const fs::path& db_path = ds.db_paths.at(q.db_id);
    const std::string& fp = fingerprints.at(q.db_id);
    db::ExecutionResult pred;
    if (preds[i].present) {
      pred = judge.run(db_path, fp, preds[i].sql, judge.options().pred_limits).result;
    } else {
      pred.status = ExecStatus::kError;
      pred.error = "no prediction";
    }
    auto gold = judge.gold(q, db_path, fp);
    JudgedItem& j = report.judged[i];
    j.question_id = q.question_id;
    j.question = q.question;
    j.gold_sql = q.gold_sql;
    j.pred_sql = preds[i].present ? preds[i].sql : "";
    j.gold_table = judge_table(gold.result);
    j.pred_table = judge_table(pred);
    j.rule_code = report.items[i].outcome;
    j.ex_correct = judge.correct(report.items[i]);
    inputs[i] = {q.question_id, q.question, j.gold_table, j.pred_table};
  });
  auto results = judge_items(*options.judge_client, *prompt, inputs, report.threads);
  if (!results) return results.status();
  for (size_t i = 0; i < results->size(); ++i) report.judged[i].result = std::move((*results)[i]);
  return Status::ok();
}

// VES / R-VES and their steps variants, after the correctness pass, so nothing else of this
// evaluation runs SQL while pairs are timed.
Status measure_efficiency_of(const data::Dataset& ds, const std::vector<Prediction>& preds,
                             const EvalOptions& options, db::ResultCache* cache, EvalReport& report) {
  std::vector<PredictedSql> sqls;
  sqls.reserve(preds.size());
  for (const auto& p : preds) sqls.push_back({p.sql, p.present});
  EfficiencyOptions eo;
  eo.metrics = options.efficiency;
  eo.repeats = options.ves_repeats;
  eo.timeout_s = options.pred_limits.timeout_s;
  eo.threads = report.threads;
  auto eff = measure_efficiency(ds, sqls, eo, cache);
  if (!eff) return eff.status();
  report.efficiency = std::move(*eff);
  return Status::ok();
}

}  // namespace

Result<EvalReport> evaluate(const data::Dataset& ds, const std::vector<Prediction>& preds,
                            const EvalOptions& options) {
  if (preds.size() != ds.questions.size())
    return internal_error("predictions are not aligned with the questions");
  auto started = std::chrono::steady_clock::now();
  EvalReport report;
  report.benchmark = data::benchmark_name(ds.benchmark);
  report.split = ds.split;
  report.metrics = options.metrics;
  report.skipped = ds.skipped;
  report.warnings = ds.warnings;
  report.threads = options.threads == 0 ? core::default_threads() : options.threads;

  std::unique_ptr<db::ResultCache> cache;
  if (options.cache_file) {
    auto c = db::ResultCache::open(*options.cache_file);
    if (!c) return c.status();
    cache = std::move(*c);
  }
  auto phase = [&](const char* what) {
    spdlog::debug("eval: {} after {:.1f} ms", what,
                  std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started).count());
  };
  phase("cache opened");
  auto fingerprints = database_fingerprints(ds);
  if (!fingerprints) return fingerprints.status();
  EvalOptions judged = options;
  if (judged.variants.empty()) {
    auto v = data::test_suite_variants(ds, options.test_suite);
    if (!v) return v.status();
    judged.variants = std::move(*v);
  }
  ItemJudge judge(ds.benchmark, judged, cache.get());
  std::mutex exec_mu;
  double exec_ms_total = 0;

  phase("fingerprints ready");
  report.items.resize(ds.questions.size());
  core::parallel_for(ds.questions.size(), report.threads, [&](size_t i) {
    const data::Question& q = ds.questions[i];
    auto judged = judge.judge({.question = q,
                               .db_path = ds.db_paths.at(q.db_id),
                               .fingerprint = fingerprints->at(q.db_id),
                               .prediction = preds[i]});
    report.items[i] = std::move(judged.item);
    std::lock_guard lock(exec_mu);
    exec_ms_total += judged.exec_ms;
  });
  phase("questions scored");
  if (cache) cache->flush();
  phase("cache flushed");
  report.exec_ms_total = exec_ms_total;
  report.cache_hits = judge.cache_hits();
  report.cache_misses = judge.cache_misses();
  auto fp = ds.fingerprint();
  report.dataset_fingerprint = fp ? *fp : "unavailable: " + fp.status().message();
  if (options.judge) {
    if (auto st = judge_semantics(ds, preds, options, judge, *fingerprints, report); !st.is_ok()) return st;
    phase("judged");
  }
  if (!options.efficiency.empty()) {
    if (auto st = measure_efficiency_of(ds, preds, options, cache.get(), report); !st.is_ok()) return st;
    phase("efficiency measured");
  }
  report.wall_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  summarize(report, options);  // callers that add warnings afterwards summarize again
  return report;
}

Interval bootstrap_ci(const std::vector<int>& outcomes, int samples, uint64_t seed) {
  if (outcomes.empty()) return {};
  // For 0/1 outcomes, the number of successes among n draws with replacement is
  // Binomial(n, k/n): the percentile bootstrap without materializing the resamples.
  long k = 0;
  for (int x : outcomes) k += x;
  const long n = static_cast<long>(outcomes.size());
  std::mt19937_64 rng(seed);
  std::binomial_distribution<long> draw(n, static_cast<double>(k) / static_cast<double>(n));
  std::vector<double> means;
  means.reserve(static_cast<size_t>(samples));
  for (int s = 0; s < samples; ++s)
    means.push_back(100.0 * static_cast<double>(draw(rng)) / static_cast<double>(n));
  std::sort(means.begin(), means.end());
  auto at = [&](double q) {
    size_t idx = static_cast<size_t>(q * static_cast<double>(means.size() - 1) + 0.5);
    return means[std::min(idx, means.size() - 1)];
  };
  return {at(0.025), at(0.975)};
}

nlohmann::json test_suite_summary(const std::vector<SuiteOutcome>& outcomes) {
  size_t on_suite = 0, max_files = 1, original_ok = 0, suite_ok = 0, original_total = 0;
  nlohmann::json original_only = nlohmann::json::array();
  for (const auto& o : outcomes) {
    if (o.databases <= 1) {  // no suite: the original is all there is
      original_total += o.suite;
      continue;
    }
    ++on_suite;
    max_files = std::max(max_files, o.databases);
    original_ok += o.original;
    original_total += o.original;
    suite_ok += o.suite;
    if (o.original && !o.suite)
      original_only.push_back({{"question_id", o.question_id}, {"db_id", o.db_id}, {"variant", o.failed_on},
                               {"why", o.why}});
  }
  if (on_suite == 0) return nullptr;
  const double n = static_cast<double>(outcomes.size());
  return {{"questions_on_a_suite", on_suite},
          {"most_database_files", max_files},
          {"correct_on_suite", suite_ok},
          {"correct_on_original", original_ok},
          {"ex_original_only", 100.0 * static_cast<double>(original_total) / n},
          {"passes_original_fails_variant", original_only}};
}

namespace {

using nlohmann::json;

double percent_of(const std::vector<int>& v) {
  if (v.empty()) return 0.0;
  long sum = 0;
  for (int x : v) sum += x;
  return 100.0 * static_cast<double>(sum) / static_cast<double>(v.size());
}

// One metric's EX over some items: all of them and those with usable gold, with a 95% CI.
json ex_block(const std::vector<const ItemResult*>& items, const std::string& metric, const EvalOptions& options) {
  std::vector<int> all, usable;
  for (const auto* it : items) {
    int v = it->verdicts.count(metric) && it->verdicts.at(metric) ? 1 : 0;
    all.push_back(v);
    if (!it->gold_unusable) usable.push_back(v);
  }
  long correct = 0;
  for (int x : all) correct += x;
  auto ci = bootstrap_ci(all, options.bootstrap_samples, options.bootstrap_seed);
  json b;
  b["n"] = all.size();
  b["correct"] = correct;
  b["ex"] = percent_of(all);
  b["ci95"] = {ci.low, ci.high};
  b["n_usable_gold"] = usable.size();
  b["ex_usable_gold"] = percent_of(usable);
  return b;
}

// Per metric: overall, by difficulty and by database.
json metrics_summary(const EvalReport& report, const EvalOptions& options) {
  std::vector<const ItemResult*> all;
  std::map<std::string, std::vector<const ItemResult*>> by_diff, by_db;
  for (const auto& it : report.items) {
    all.push_back(&it);
    by_diff[it.difficulty.empty() ? "unknown" : it.difficulty].push_back(&it);
    by_db[it.db_id].push_back(&it);
  }
  json metrics = json::object();
  for (Metric m : report.metrics) {
    std::string name = metric_name(m);
    json mj;
    mj["overall"] = ex_block(all, name, options);
    json d = json::object();
    for (auto& [k, v] : by_diff) d[k] = ex_block(v, name, options);
    mj["by_difficulty"] = d;
    json dbs = json::object();
    for (auto& [k, v] : by_db) dbs[k] = ex_block(v, name, options);
    mj["by_database"] = dbs;
    metrics[name] = mj;
  }
  return metrics;
}

// The outcome counts, AgentNLQ's rule-based semantic accuracy and Soft-F1.
void add_outcomes(const EvalReport& report, json& s) {
  json outcomes = json::object();
  for (const char* code : {"RES1", "RES2", "RES3", "RES4", "RES5", "RES6"}) outcomes[code] = 0;
  double f1 = 0;
  for (const auto& it : report.items) {
    outcomes[it.outcome] = outcomes[it.outcome].get<int>() + 1;
    f1 += it.soft_f1;
  }
  s["outcomes"] = outcomes;
  // AgentNLQ's formula on our own rule-based codes: (RES3 + RES5) / n.
  s["rule_semantic_accuracy"] =
      report.items.empty() ? 0.0
                           : 100.0 * (outcomes["RES3"].get<double>() + outcomes["RES5"].get<double>()) /
                                 static_cast<double>(report.items.size());
  std::vector<SuiteOutcome> suite;
  for (const auto& it : report.items) {
    const auto v = it.verdicts.find("spider_ts");
    suite.push_back({it.question_id, it.db_id, it.ts_databases, it.ts_original, v != it.verdicts.end() && v->second,
                     it.ts_failed_on, it.ts_failure});
  }
  if (auto t = test_suite_summary(suite); !t.is_null()) s["test_suite"] = std::move(t);
  s["soft_f1"] = report.items.empty() ? 0.0 : 100.0 * f1 / static_cast<double>(report.items.size());
}

// Unusable gold, tie-dependent gold and skipped questions, one entry each.
void add_question_lists(const EvalReport& report, json& s) {
  json gold_bad = json::array(), tie_list = json::array(), skipped = json::array();
  for (const auto& it : report.items) {
    if (it.gold_unusable)
      gold_bad.push_back({{"question_id", it.question_id}, {"db_id", it.db_id},
                          {"status", it.gold_status}, {"error", it.gold_error}});
    if (it.gold_tie_dependent) tie_list.push_back(it.question_id);
  }
  for (const auto& sk : report.skipped)
    skipped.push_back({{"question_id", sk.question_id}, {"db_id", sk.db_id}, {"reason", sk.reason}});
  s["gold_unusable_list"] = gold_bad;
  s["gold_tie_dependent_list"] = tie_list;
  s["skipped"] = skipped;
}

}  // namespace

void summarize(EvalReport& report, const EvalOptions& options) {
  json s;
  s["benchmark"] = report.benchmark;
  s["split"] = report.split;
  s["dataset_fingerprint"] = report.dataset_fingerprint;
  s["questions_evaluated"] = report.items.size();
  s["questions_skipped"] = report.skipped.size();
  size_t unusable = 0, ties = 0;
  for (const auto& it : report.items) {
    unusable += it.gold_unusable;
    ties += it.gold_tie_dependent;
  }
  s["gold_unusable"] = unusable;
  s["gold_tie_dependent"] = ties;
  s["metrics"] = metrics_summary(report, options);
  add_outcomes(report, s);
  add_question_lists(report, s);
  s["warnings"] = report.warnings;
  if (!report.judged.empty()) s["judge"] = judge_summary(report.judged, options.bootstrap_samples, options.bootstrap_seed);
  if (!report.efficiency.empty())
    s["efficiency"] = efficiency_summary(report.efficiency, options.bootstrap_samples, options.bootstrap_seed);
  s["timing"] = {{"wall_s", report.wall_s},
                 {"questions_per_s", report.wall_s > 0 ? static_cast<double>(report.items.size()) / report.wall_s : 0.0},
                 {"sqlite_exec_ms_total", report.exec_ms_total},
                 {"threads", report.threads},
                 {"cache_hits", report.cache_hits},
                 {"cache_misses", report.cache_misses}};
  report.summary = std::move(s);
}

}  // namespace nl2sql::eval
