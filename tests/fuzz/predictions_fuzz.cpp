// libFuzzer target for the prediction-file readers (eval/evaluator.h read_predictions) in every
// format: BIRD predict_dev.json, Spider one-SQL-per-line text, JSONL and auto-detection. Built
// by tests/fuzz/run_fuzz.sh, not by CMake. The dataset is a fixed in-memory list of questions.
// Property: no crash, no uncaught exception; an accepted file yields one slot per question.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "nl2sql/data/dataset.h"
#include "nl2sql/eval/evaluator.h"

namespace {
const nl2sql::data::Dataset& dataset() {
  static auto* ds = [] {
    auto* d = new nl2sql::data::Dataset();
    for (size_t i = 0; i < 5; ++i) {
      nl2sql::data::Question q;
      q.question_id = std::to_string(i * 3);
      q.index = i;
      q.db_id = i % 2 ? "music_store" : "regional_schools";
      q.gold_sql = "SELECT 1";
      d->questions.push_back(q);
    }
    d->total_questions = d->questions.size();
    return d;
  }();
  return *ds;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const auto dir = [] {
    auto d = std::filesystem::temp_directory_path() / ("nl2sql_pred_fuzz_" + std::to_string(getpid()));
    std::filesystem::create_directories(d);
    return d;
  }();
  std::string text(reinterpret_cast<const char*>(data), size);
  using nl2sql::eval::PredictionFormat;
  const std::pair<const char*, PredictionFormat> formats[] = {{"p.json", PredictionFormat::kBird},
                                                              {"p.sql", PredictionFormat::kSpider},
                                                              {"p.jsonl", PredictionFormat::kJsonl},
                                                              {"p.json", PredictionFormat::kAuto}};
  for (const auto& [name, format] : formats) {
    auto file = dir / name;
    std::ofstream(file, std::ios::binary | std::ios::trunc) << text;
    std::vector<std::string> warnings;
    auto preds = nl2sql::eval::read_predictions(file, format, dataset(), &warnings);
    if (preds.is_ok() && preds->size() != dataset().questions.size()) {
      std::fprintf(stderr, "%zu prediction slots for %zu questions\n", preds->size(), dataset().questions.size());
      std::abort();
    }
  }
  return 0;
}
