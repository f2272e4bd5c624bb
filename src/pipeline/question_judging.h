// A question's judging, its state in one place: gold's run (started with the question, beside
// the model calls), the question's executions (the memo every stage runs its queries through,
// which hands gold's run to a candidate that writes gold's text), and the verdicts on the
// candidates and on the prediction. Gold never leaves it and QuestionRun: the stages see the memo
// and, once judged, each candidate's correctness and result. Private to the pipeline layer.
#pragma once

#include <filesystem>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "nl2sql/generate/candidate.h"
#include "shared.h"

namespace nl2sql::pipeline {

class QuestionJudging {
 public:
  // `db_path` is the question's database; gold's run starts here when the question has gold.
  QuestionJudging(Shared& shared, const data::Question& q, std::filesystem::path db_path);
  ~QuestionJudging();
  QuestionJudging(const QuestionJudging&) = delete;
  QuestionJudging& operator=(const QuestionJudging&) = delete;

  // The question's executions, created on first use under limits() (fix stage, then judging).
  fix::ExecutionMemo& memo();

  // Judges every candidate against gold (the evaluator's own rules, through the run's result
  // cache) and keeps each candidate's result for selection; the memo is released after.
  void judge_candidates(const std::vector<generate::Candidate>& candidates);
  // After judge_candidates, per candidate: the evaluator's item, its correctness under the
  // primary metric, its result (null when it did not execute).
  const eval::ItemResult& item(size_t i) const { return items_.at(i); }
  bool correct(size_t i) const;
  const fix::ExecutionMemo::Shared& result(size_t i) const { return results_.at(i); }
  // The verdict on the question's prediction (empty: none), taking the candidates' runs where
  // the evaluator could not find them in its cache.
  eval::ItemResult judge_prediction(const std::string& sql, const std::vector<generate::Candidate>& candidates) const;

 private:
  // The limits of the question's executions: the executor's, a result past fix.keep_rows rows
  // kept as its first rows and the digest of the whole answer; on a database without declared
  // collations (DISTINCT twins derived), also the first rows of each kind past them, so a
  // DISTINCT twin is made from the answer whatever the repeats among its first rows.
  db::QueryLimits limits() const;
  void start_gold();

  Shared& s_;
  const data::Question& q_;
  const std::filesystem::path db_path_;
  const std::string& fingerprint_;
  std::unique_ptr<fix::ExecutionMemo> memo_;
  std::vector<eval::ItemResult> items_;
  std::vector<fix::ExecutionMemo::Shared> results_;
  // Gold's execution with its tie check, made once for every judgement of the question (the
  // final verdict's included), and gold's text normalized (fix::normalize_sql).
  std::optional<db::CachedExecution> known_gold_;
  std::string gold_text_;
  bool capped_gold_text_ = false;  // a candidate with gold's text stopped at the row cap
  // A DISTINCT gold's plain twin (fix::without_distinct) and its whole run, when gold runs as it.
  std::string gold_twin_text_;
  std::shared_future<fix::ExecutionMemo::Shared> gold_twin_ahead_;
  // Gold's execution with its tie check, started with the question: gold's text runs under the
  // memo's limits without the row cap (its whole answer: kept rows and digest), beside the model
  // calls, and the judge takes it. The memo hands it, shaped as a candidate's run is (stopped at
  // the row cap when larger), to a candidate that writes gold's text. Declared after everything
  // it reads, so it is destroyed (waited for) first.
  std::shared_future<db::CachedExecution> gold_ahead_;
};

}  // namespace nl2sql::pipeline
