// nl2sql judge-export / judge-import: the human alignment check of the semantic-accuracy judge
// (AgentNLQ, Appendix B). export writes a seeded, code-stratified sample of an evaluation's
// judged questions for people to label; import reads the labels back into accuracy, precision,
// recall and F1 of the judge.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <cmath>
#include <iostream>

#include "cli/command.h"
#include "nl2sql/core/files.h"
#include "nl2sql/eval/judge.h"

namespace nl2sql::cli {
namespace {

struct JudgeExportArgs {
  std::string eval;
  std::string out;
  size_t sample = 50;
  uint64_t seed = 1;
};

int run_judge_export(const JudgeExportArgs& a) {
  std::filesystem::path file = a.eval;
  if (std::filesystem::is_directory(file)) file /= "eval.json";
  auto text = core::read_file(file);
  if (!text) {
    spdlog::error("{}", text.status().message());
    return kExitBadInput;
  }
  auto doc = core::parse_json(*text, file.string());
  if (!doc) {
    spdlog::error("{}", doc.status().message());
    return kExitBadInput;
  }
  size_t rows = 0;
  auto csv = eval::judge_sample_csv(*doc, a.sample, a.seed, &rows);
  if (!csv) {
    spdlog::error("{}: {}", file.string(), csv.status().message());
    return kExitBadInput;
  }
  Status st = core::write_file_atomic(a.out, *csv);
  if (!st) {
    spdlog::error("{}", st.message());
    return kExitFailure;
  }
  std::cout << fmt::format("{} question(s) written to {} (seed {}); fill the label column with RES1-RES6 or "
                           "correct/incorrect, then run nl2sql judge-import --labels {}\n",
                           rows, a.out, a.seed, a.out);
  return kExitOk;
}

struct ImportArgs {
  std::string labels;
  bool json = false;
};

int run_import(const ImportArgs& a) {
  auto text = core::read_file(a.labels);
  if (!text) {
    spdlog::error("{}", text.status().message());
    return kExitBadInput;
  }
  auto r = eval::read_labels(*text, a.labels);
  if (!r) {
    spdlog::error("{}", r.status().message());
    return kExitBadInput;
  }
  const auto& al = r->alignment;
  auto num = [](double v) { return std::isnan(v) ? nlohmann::json(nullptr) : nlohmann::json(v); };
  if (a.json) {
    nlohmann::json j = {{"labelled", r->rows}, {"unlabelled", r->unlabelled},
                        {"tp", al.tp}, {"fp", al.fp}, {"fn", al.fn}, {"tn", al.tn},
                        {"accuracy", num(al.accuracy())}, {"precision", num(al.precision())},
                        {"recall", num(al.recall())}, {"f1", num(al.f1())},
                        {"code_labels", al.code_labels}, {"code_agreement", al.code_agree}};
    std::cout << j.dump(2) << "\n";
    return kExitOk;
  }
  auto pct = [](double v) { return std::isnan(v) ? std::string("n/a") : fmt::format("{:.2f}", v); };
  std::cout << fmt::format("{} labelled question(s) ({} without a label, skipped)\n\n", r->rows, r->unlabelled);
  std::cout << fmt::format("{:<28}{:>18}{:>20}\n", "", "label = correct", "label = incorrect");
  std::cout << fmt::format("{:<28}{:>18}{:>20}\n", "judge = correct (RES3/5)", fmt::format("{} TP", al.tp), fmt::format("{} FP", al.fp));
  std::cout << fmt::format("{:<28}{:>18}{:>20}\n\n", "judge = incorrect", fmt::format("{} FN", al.fn), fmt::format("{} TN", al.tn));
  std::cout << fmt::format("accuracy (alignment rate) {}%\nprecision {}%\nrecall    {}%\nF1        {}\n", pct(al.accuracy()),
                           pct(al.precision()), pct(al.recall()), pct(al.f1()));
  if (al.code_labels > 0)
    std::cout << fmt::format("labels given as codes: {}; same code as the judge: {} ({:.2f}%)\n", al.code_labels,
                             al.code_agree, 100.0 * static_cast<double>(al.code_agree) / static_cast<double>(al.code_labels));
  return kExitOk;
}

RunFn setup_judge_export(CLI::App& app) {
  auto args = std::make_shared<JudgeExportArgs>();
  auto* cmd = app.add_subcommand("judge-export", "Write a code-stratified sample of judged questions as CSV for human labels");
  cmd->add_option("--eval", args->eval, "eval.json (or its folder) of `nl2sql eval --metric judge --out DIR`")->required();
  cmd->add_option("--out", args->out, "CSV file to write (question, both tables, both SQL, an empty label column)")->required();
  cmd->add_option("--sample", args->sample, "Questions in the sample (all when more than judged)")->capture_default_str();
  cmd->add_option("--seed", args->seed, "Seed of the sample")->capture_default_str();
  return [args] { return run_judge_export(*args); };
}

RunFn setup_judge_import(CLI::App& app) {
  auto args = std::make_shared<ImportArgs>();
  auto* cmd = app.add_subcommand("judge-import", "Accuracy, precision, recall and F1 of the judge against a labelled judge-export CSV");
  cmd->add_option("--labels", args->labels, "The CSV of judge-export with its label column filled")->required();
  cmd->add_flag("--json", args->json, "Print the figures as JSON");
  return [args] { return run_import(*args); };
}

NL2SQL_REGISTER_COMMAND("judge-export", setup_judge_export);
NL2SQL_REGISTER_COMMAND("judge-import", setup_judge_import);

}  // namespace
}  // namespace nl2sql::cli
