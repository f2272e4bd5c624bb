#include "question_judging.h"

#include <map>
#include <tuple>

namespace nl2sql::pipeline {

using fix::ExecutionMemo;

QuestionJudging::QuestionJudging(Shared& shared, const data::Question& q, std::filesystem::path db_path)
    : s_(shared), q_(q), db_path_(std::move(db_path)), fingerprint_(shared.fingerprints.at(q.db_id)) {
  if (!q_.gold_sql.empty()) start_gold();
}

QuestionJudging::~QuestionJudging() {
  // Gold's run reads this object: it ends before anything here goes.
  if (gold_ahead_.valid()) gold_ahead_.wait();
}

db::QueryLimits QuestionJudging::limits() const {
  db::QueryLimits limits = s_.executor->options().limits;
  limits.hash_rows_after = fix::kept_rows(s_.fixer->options());
  if (s_.collation_free.count(q_.db_id)) limits.keep_first_distinct = limits.hash_rows_after;
  return limits;
}

void QuestionJudging::start_gold() {
  // A DISTINCT gold, where the memo makes DISTINCT queries from their plain twins, runs as its
  // plain twin with repeats dropped (fix::distinct_of): candidates write either form, and the
  // one run answers both (the memo is given the plain run too). Gold itself runs when the plain
  // run failed or cannot give the DISTINCT result.
  std::optional<std::string> twin;
  if (s_.collation_free.count(q_.db_id)) twin = fix::without_distinct(q_.gold_sql);
  std::promise<ExecutionMemo::Shared> plain_run;
  if (twin) {
    gold_twin_text_ = *twin;
    gold_twin_ahead_ = plain_run.get_future().share();
  }
  gold_ahead_ = std::async(std::launch::async, [this, twin, plain_run = std::move(plain_run)]() mutable {
                  db::QueryLimits run_limits = limits();
                  run_limits.row_cap = 0;  // verdicts need the whole answer; the digest bounds memory
                  std::optional<db::ExecutionResult> whole;
                  if (twin) {
                    auto plain =
                        std::make_shared<const db::ExecutionResult>(s_.executor->run(db_path_, *twin, run_limits));
                    if (plain->ok()) whole = fix::distinct_of(*plain, run_limits.hash_rows_after);
                    plain_run.set_value(plain->ok() ? plain : nullptr);
                  }
                  if (!whole) whole = s_.executor->run(db_path_, q_.gold_sql, run_limits);
                  // A failed run (a timeout, an error) is not taken: gold runs under the
                  // judge's own limits.
                  return s_.judge->gold(q_, db_path_, fingerprint_, nullptr, nullptr, whole->ok() ? &*whole : nullptr);
                }).share();
}

ExecutionMemo& QuestionJudging::memo() {
  if (!memo_) {
    const db::QueryLimits memo_limits = limits();
    memo_ = std::make_unique<ExecutionMemo>(*s_.executor, db_path_, memo_limits);
    if (s_.collation_free.count(q_.db_id)) memo_->derive_distinct(memo_limits.hash_rows_after);
    // A whole run as a run of the same query under the memo's limits would give it.
    auto shaped = [memo_limits](const db::ExecutionResult* whole) -> ExecutionMemo::Shared {
      auto r = whole ? fix::shaped_as(*whole, memo_limits) : std::nullopt;
      return r ? std::make_shared<const db::ExecutionResult>(std::move(*r)) : nullptr;
    };
    if (gold_ahead_.valid())
      memo_->provide(q_.gold_sql, std::async(std::launch::deferred, [gold = gold_ahead_, shaped] {
                                    return shaped(&gold.get().result);
                                  }).share());
    if (gold_twin_ahead_.valid())
      memo_->provide(gold_twin_text_, std::async(std::launch::deferred, [plain = gold_twin_ahead_, shaped] {
                                        return shaped(plain.get().get());
                                      }).share());
  }
  return *memo_;
}

bool QuestionJudging::correct(size_t i) const { return s_.judge->correct(items_.at(i)); }

// Each distinct query is judged once (candidates with the same SQL share the item and the
// result). A query the fix stage executed is not executed again: its result from the question's
// memo is handed to the run's result cache before the judge looks it up there, and the memo's
// shared result is what selection sees.
void QuestionJudging::judge_candidates(const std::vector<generate::Candidate>& candidates) {
  const db::QueryLimits& pred_limits = s_.settings.eval.pred_limits;
  items_.assign(candidates.size(), eval::ItemResult{});
  results_.assign(candidates.size(), nullptr);
  std::map<std::tuple<bool, bool, std::string>, size_t> judged;  // (present, rejected, sql) → first
  // Gold is one more query of the question, run once for all its judgements (the final
  // verdict's included), with its tie check: from the question's start (gold_ahead_), and a
  // candidate that wrote gold's text took that run through the memo. Without it (no gold ahead),
  // when a candidate ran the same text (after normalisation) successfully, gold's answer is
  // taken from it, also when that result was cut to its first rows plus the digest of the whole
  // answer (past fix.keep_rows), which the result cache cannot hold. A candidate whose text is
  // gold's but whose run stopped at the fix stage's row cap (gold's answer is larger) is judged
  // on gold's execution, not run once more.
  if (gold_ahead_.valid()) {
    known_gold_ = gold_ahead_.get();
  } else {
    ExecutionMemo::Shared same = memo_ ? memo_->find(q_.gold_sql) : nullptr;
    known_gold_ =
        s_.judge->gold(q_, db_path_, fingerprint_, nullptr, nullptr, same && same->ok() ? same.get() : nullptr);
  }
  gold_text_ = fix::normalize_sql(q_.gold_sql);
  capped_gold_text_ = false;
  for (size_t i = 0; i < candidates.size(); ++i) {
    const auto& c = candidates[i];
    eval::Prediction p;
    p.present = c.extraction_ok && !c.sql.empty();
    p.sql = c.sql;
    auto [it, fresh] = judged.try_emplace({p.present, c.rejected, c.sql}, i);
    if (!fresh) {
      items_[i] = items_[it->second];
      results_[i] = results_[it->second];
      continue;
    }
    ExecutionMemo::Shared known = p.present && memo_ ? memo_->find(c.sql) : nullptr;
    if (known && s_.exec_cache && known->status != db::ExecStatus::kTimeout) {
      db::CachedExecution e;
      e.result = *known;
      e.row_cap = pred_limits.row_cap;
      s_.exec_cache->put(db::ResultCache::key(fingerprint_, c.sql), e);
    }
    // A result hashed past fix.keep_rows is not in the result cache (only its first rows are
    // held): the judge takes it as it is, and compares it on its digest.
    const db::ExecutionResult* hashed = known && known->ok() && known->digest ? known.get() : nullptr;
    if (!hashed && known_gold_->result.ok() && known && known->status == db::ExecStatus::kRowCap &&
        fix::normalize_sql(c.sql) == gold_text_) {
      hashed = &known_gold_->result;
      capped_gold_text_ = true;
    }
    auto item = s_.judge->judge({.question = q_,
                                 .db_path = db_path_,
                                 .fingerprint = fingerprint_,
                                 .prediction = p,
                                 .keep_prediction_run = !known,
                                 .known_prediction = hashed,
                                 .known_gold = known_gold_ ? &*known_gold_ : nullptr});
    items_[i] = std::move(item.item);
    if (!p.present || c.rejected) continue;
    if (known) {
      if (known->ok()) results_[i] = std::move(known);
    } else if (item.prediction_run.ok()) {
      results_[i] = std::make_shared<const db::ExecutionResult>(std::move(item.prediction_run));
    }
  }
  memo_.reset();  // what selection needs is in results_
}

eval::ItemResult QuestionJudging::judge_prediction(const std::string& sql,
                                                   const std::vector<generate::Candidate>& candidates) const {
  eval::Prediction p;
  p.present = !sql.empty();
  p.sql = sql;
  // The chosen query's result, when it was hashed past fix.keep_rows (so not in the cache).
  const db::ExecutionResult* hashed = nullptr;
  for (size_t i = 0; i < candidates.size() && i < results_.size() && !hashed; ++i)
    if (p.present && candidates[i].sql == p.sql && results_[i] && results_[i]->digest) hashed = results_[i].get();
  // Gold's own text, whose candidates stopped at the row cap: judged on gold's execution.
  if (!hashed && p.present && capped_gold_text_ && fix::normalize_sql(p.sql) == gold_text_)
    hashed = &known_gold_->result;
  return s_.judge
      ->judge({.question = q_,
               .db_path = db_path_,
               .fingerprint = fingerprint_,
               .prediction = p,
               .known_prediction = hashed,
               .known_gold = known_gold_ ? &*known_gold_ : nullptr})
      .item;
}

}  // namespace nl2sql::pipeline
