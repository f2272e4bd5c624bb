#include "nl2sql/eval/report.h"

#include <fmt/format.h>

#include "nl2sql/core/build_info.h"
#include "nl2sql/core/files.h"
#include "nl2sql/core/text.h"

namespace nl2sql::eval {
using nlohmann::json;

nlohmann::json report_to_json(const EvalReport& r) {
  json items = json::array();
  for (size_t i = 0; i < r.items.size(); ++i) {
    const ItemResult& it = r.items[i];
    json v = json::object();
    for (const auto& [k, b] : it.verdicts) v[k] = b;
    items.push_back({{"question_id", it.question_id},
                     {"index", it.index},
                     {"db_id", it.db_id},
                     {"difficulty", it.difficulty},
                     {"verdicts", v},
                     {"outcome", it.outcome},
                     {"soft_f1", it.soft_f1},
                     {"pred_status", it.pred_status},
                     {"error", it.error},
                     {"gold_status", it.gold_status},
                     {"gold_error", it.gold_error},
                     {"gold_unusable", it.gold_unusable},
                     {"gold_tie_dependent", it.gold_tie_dependent},
                     {"pred_rows", it.pred_rows},
                     {"gold_rows", it.gold_rows},
                     {"timings_ms", {{"pred", it.pred_ms}, {"gold", it.gold_ms}, {"total", it.total_ms}}},
                     {"cached", {{"pred", it.pred_cached}, {"gold", it.gold_cached}}}});
    if (!it.note.empty()) items.back()["note"] = it.note;
    if (!r.efficiency.empty() && i < r.efficiency.items.size()) {
      const auto& e = r.efficiency.items[i];
      json scores = json::object();
      for (const auto& [name, sc] : e.scores)
        scores[name] = {{"ratio", sc.ratio}, {"ratio_sd", sc.ratio_sd}, {"ratio_interval", {sc.ratio_low, sc.ratio_high}},
                        {"rerun_interval", {sc.rerun_low, sc.rerun_high}},
                        {"rounds", sc.rounds}, {"kept", sc.kept}, {"reward", sc.reward}, {"near_boundary", sc.near_boundary}};
      json ej = {{"status", e.status}, {"scores", scores}};
      if (!e.error.empty()) ej["error"] = e.error;
      if (!e.timed_failure.empty()) ej["timed_failure"] = e.timed_failure;
      auto counters = [](const db::StatementCounters& c) {
        return json{{"vm_steps", c.vm_steps}, {"vm_steps_first_row", c.vm_steps_first_row},
                    {"fullscan_steps", c.fullscan_steps}, {"sorts", c.sorts}};
      };
      if (e.pred_counters.vm_steps > 0) ej["steps"] = {{"pred", counters(e.pred_counters)}, {"gold", counters(e.gold_counters)}};
      items.back()["efficiency"] = std::move(ej);
    }
    if (i < r.judged.size()) {
      const auto& j = r.judged[i];
      json jj = {{"code", j.result.code}, {"reasoning", j.result.reasoning}, {"cached", j.result.from_cache},
                 {"question", j.question}, {"gold_sql", j.gold_sql}, {"pred_sql", j.pred_sql},
                 {"gold_table", j.gold_table}, {"pred_table", j.pred_table}, {"rule_code", j.rule_code},
                 {"ex", j.ex_correct}};
      if (!j.result.error.empty()) jj["error"] = j.result.error;
      items.back()["judge"] = std::move(jj);
    }
    if (it.ts_databases > 1) {
      items.back()["test_suite"] = {{"databases", it.ts_databases}, {"original", it.ts_original}};
      if (!it.ts_failed_on.empty()) {
        items.back()["test_suite"]["failed_on"] = it.ts_failed_on;
        items.back()["test_suite"]["why"] = it.ts_failure;
      }
    }
  }
  json out;
  out["tool"] = {{"name", "nl2sql"}, {"version", core::build_info().version}};
  out["predictions_file"] = r.predictions_file;
  out["summary"] = r.summary;
  out["items"] = std::move(items);
  return out;
}

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n\r") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) {
    if (c == '"') out += "\"\"";
    else out.push_back(c);
  }
  return out + "\"";
}

std::string report_to_csv(const EvalReport& r) {
  std::string out = "question_id,db_id,difficulty";
  for (Metric m : r.metrics) out += std::string(",") + metric_name(m);
  for (EfficiencyMetric m : r.efficiency.metrics)
    out += fmt::format(",{0}_ratio,{0}_reward", efficiency_metric_name(m));
  if (!r.judged.empty()) out += ",judge_code";
  out += ",outcome,soft_f1,pred_status,gold_status,gold_tie_dependent,pred_rows,gold_rows,pred_ms,gold_ms,error\n";
  for (size_t i = 0; i < r.items.size(); ++i) {
    const ItemResult& it = r.items[i];
    out += csv_field(it.question_id) + "," + csv_field(it.db_id) + "," + csv_field(it.difficulty);
    for (Metric m : r.metrics) {
      auto v = it.verdicts.find(metric_name(m));
      out += ",";
      out += (v != it.verdicts.end() && v->second) ? "1" : "0";
    }
    for (EfficiencyMetric m : r.efficiency.metrics) {
      const auto& scores = r.efficiency.items[i].scores;
      auto sc = scores.find(efficiency_metric_name(m));
      out += sc == scores.end() ? ",0,0" : fmt::format(",{:.6g},{:.4f}", sc->second.ratio, sc->second.reward);
    }
    if (!r.judged.empty()) out += "," + (i < r.judged.size() ? r.judged[i].result.code : std::string());
    out += fmt::format(",{},{:.4f},{},{},{},{},{},{:.3f},{:.3f},{}\n", it.outcome, it.soft_f1,
                       it.pred_status, it.gold_status, it.gold_tie_dependent ? 1 : 0, it.pred_rows,
                       it.gold_rows, it.pred_ms, it.gold_ms, csv_field(it.error));
  }
  return out;
}

std::string test_suite_markdown(const json& t) {
  std::string md = fmt::format(
      "\n## Test suite\n\nspider-ts compared gold and prediction on every database file of the question's folder "
      "(up to {} files) for {} question(s), as the official test-suite evaluator does: a prediction is correct only "
      "when it matches on all of them. On the original databases alone, spider-ts EX would be {:.2f}%. {} question(s) "
      "pass on the original but fail on a variant:\n\n",
      t["most_database_files"].get<size_t>(), t["questions_on_a_suite"].get<size_t>(),
      t["ex_original_only"].get<double>(), t["passes_original_fails_variant"].size());
  if (!t["passes_original_fails_variant"].empty()) {
    md += "| question | db | variant | gold vs prediction there |\n|---|---|---|---|\n";
    for (const auto& q : t["passes_original_fails_variant"])
      md += fmt::format("| {} | {} | {} | {} |\n", q["question_id"].get<std::string>(), q["db_id"].get<std::string>(),
                        q["variant"].get<std::string>(), q["why"].get<std::string>());
  }
  return md;
}

std::string efficiency_markdown(const json& e) {
  std::string md = fmt::format(
      "\n## Efficiency\n\nTimed metrics: {} round(s) per correct pair, one pair at a time, prediction then gold, "
      "each on a fresh read-only connection. CPU: {}.",
      e["repeats"].get<int>(), e["cpu"].get<std::string>());
  if (e.contains("load_average_before"))
    md += fmt::format(" 1-minute load average {:.2f} before and {:.2f} after the timed pass ({:.1f} s): a load above "
                      "zero means other work shared the machine.",
                      e["load_average_before"].get<double>(), e["load_average_after"].get<double>(), e["timed_s"].get<double>());
  md += "\n\nPairs: ";
  bool first = true;
  for (auto& [status, n] : e["pairs"].items()) {
    md += fmt::format("{}{} {}", first ? "" : ", ", n.get<size_t>(), status);
    first = false;
  }
  md += "\n";
  for (auto& [name, m] : e["metrics"].items()) {
    md += fmt::format("\n### {}\n\n```\n{}```\n", name, efficiency_table(e, name));
    if (m.contains("near_boundary")) {
      md += fmt::format("\n{} pair(s) have a rerun interval (where another run's ratio would fall, 95%) that crosses a "
                        "reward boundary (0.25, 0.5, 1, 2): their reward could flip on another run.\n",
                        m["near_boundary"].get<size_t>());
      if (!m["near_boundary_list"].empty()) {
        md += "\n| question | ratio | rerun interval |\n|---|---:|---|\n";
        for (const auto& q : m["near_boundary_list"])
          md += fmt::format("| {} | {:.4f} | [{:.4f}, {:.4f}] |\n", q["question_id"].get<std::string>(), q["ratio"].get<double>(),
                            q["rerun_interval"][0].get<double>(), q["rerun_interval"][1].get<double>());
      }
    }
  }
  if (e.contains("rank_correlation")) {
    md += "\n| timed ~ steps | pairs | Spearman ρ of per-question ratios |\n|---|---:|---:|\n";
    for (auto& [pair, c] : e["rank_correlation"].items())
      md += fmt::format("| {} | {} | {} |\n", pair, c["pairs"].get<size_t>(),
                        c["spearman"].is_null() ? std::string("n/a") : fmt::format("{:.3f}", c["spearman"].get<double>()));
  }
  return md;
}


std::string judge_markdown(const json& j) {
  std::string md = fmt::format(
      "\n## Semantic accuracy (LLM judge)\n\nThe model of role `judge` read each question with both result tables "
      "(cut to 500 characters) and gave a RES code; semantic accuracy = (RES3 + RES5) / n, as AgentNLQ computes it.\n\n"
      "| measure | % |\n|---|---:|\n| semantic accuracy (judge) | {:.2f} [{:.2f}, {:.2f}] |\n"
      "| (RES3 + RES5) / n on the rule codes | {:.2f} |\n| EX (primary metric) | {:.2f} |\n\n",
      j["semantic_accuracy"].get<double>(), j["ci95"][0].get<double>(), j["ci95"][1].get<double>(),
      j["rule_semantic_accuracy"].get<double>(), j["ex"].get<double>());
  md += fmt::format("{} question(s); {} answer(s) unreadable or failed (counted as not correct); {} answer(s) from the "
                    "cache; {} prompt + {} completion tokens, ${:.4f}.\n",
                    j["n"].get<size_t>(), j["codes"]["unparsed"].get<size_t>(), j["cached_answers"].get<size_t>(),
                    j["tokens"]["prompt"].get<int64_t>(), j["tokens"]["completion"].get<int64_t>(),
                    j["cost_usd"].get<double>());
  md += "\n### Judge code × rule code\n\n| judge \\ rule | RES1 | RES2 | RES3 | RES4 | RES5 | RES6 |\n|---|---:|---:|---:|---:|---:|---:|\n";
  for (auto& [jc, row] : j["confusion_judge_by_rule"].items()) {
    md += "| " + jc;
    for (const char* rc : {"RES1", "RES2", "RES3", "RES4", "RES5", "RES6"}) md += fmt::format(" | {}", row[rc].get<size_t>());
    md += " |\n";
  }
  const auto& d = j["disagreements_with_ex"];
  md += fmt::format("\n### Judge and EX disagree ({} question(s))\n\nA prediction the judge accepts and EX rejects "
                    "may hide a wrong gold answer: worth a look.\n",
                    d.size());
  if (!d.empty()) {
    md += "\n| question | judge | rule | EX | gold table | predicted table | judge's reasoning |\n|---|---|---|---|---|---|---|\n";
    for (const auto& q : d)
      md += fmt::format("| {} | {} | {} | {} | {} | {} | {} |\n", core::markdown_cell(q["question_id"].get<std::string>()),
                        q["judge_code"].get<std::string>(), q["rule_code"].get<std::string>(), q["ex"].get<bool>() ? "1" : "0",
                        core::markdown_cell(q["gold_table"].get<std::string>()), core::markdown_cell(q["pred_table"].get<std::string>()),
                        core::markdown_cell(q["reasoning"].get<std::string>().empty() ? q["error"].get<std::string>() : q["reasoning"].get<std::string>()));
  }
  return md;
}

std::string report_to_markdown(const EvalReport& r) {
  const json& s = r.summary;
  std::string md = fmt::format("# nl2sql eval: {} {}\n\n", r.benchmark, r.split);
  md += fmt::format("Predictions: `{}`  \nDataset fingerprint: `{}`  \n", r.predictions_file,
                    s.value("dataset_fingerprint", ""));
  md += fmt::format("Questions evaluated: {} (skipped: {}, gold unusable: {}, gold tie-dependent: {})\n\n",
                    s["questions_evaluated"].get<size_t>(), s["questions_skipped"].get<size_t>(),
                    s["gold_unusable"].get<size_t>(), s["gold_tie_dependent"].get<size_t>());
  md += "## Execution accuracy\n\n| metric | EX % | 95% CI | correct / n | EX % excl. unusable gold |\n|---|---:|---|---:|---:|\n";
  for (auto& [name, m] : s["metrics"].items()) {
    const json& o = m["overall"];
    md += fmt::format("| {} | {:.2f} | [{:.2f}, {:.2f}] | {} / {} | {:.2f} (n={}) |\n", name,
                      o["ex"].get<double>(), o["ci95"][0].get<double>(), o["ci95"][1].get<double>(),
                      o["correct"].get<long>(), o["n"].get<size_t>(), o["ex_usable_gold"].get<double>(),
                      o["n_usable_gold"].get<size_t>());
  }
  md += fmt::format("\nSoft-F1: {:.2f}\n", s["soft_f1"].get<double>());
  if (s.contains("test_suite")) md += test_suite_markdown(s["test_suite"]);
  for (const char* section : {"by_difficulty", "by_database"}) {
    md += fmt::format("\n## EX {}\n\n| {} | n", section == std::string("by_difficulty") ? "by difficulty" : "by database",
                      section == std::string("by_difficulty") ? "difficulty" : "database");
    for (auto& [name, m] : s["metrics"].items()) md += " | " + name;
    md += " |\n|---|---:";
    for (size_t i = 0; i < s["metrics"].size(); ++i) md += "|---:";
    md += "|\n";
    if (s["metrics"].empty()) continue;
    const json& first = s["metrics"].begin().value()[section];
    for (auto& [key, blk] : first.items()) {
      md += fmt::format("| {} | {}", key, blk["n"].get<size_t>());
      for (auto& [name, m] : s["metrics"].items())
        md += fmt::format(" | {:.2f}", m[section][key]["ex"].get<double>());
      md += " |\n";
    }
  }
  if (s.contains("judge")) md += judge_markdown(s["judge"]);
  if (s.contains("efficiency")) md += efficiency_markdown(s["efficiency"]);
  md += "\n## Outcomes\n\n| code | meaning | count |\n|---|---|---:|\n";
  static const char* kMeaning[] = {"failed execution", "wrong result", "correct",
                                   "empty where gold is not", "gold answer plus extra columns/rows",
                                   "timeout / row cap / gold unusable"};
  for (int i = 0; i < 6; ++i) {
    std::string code = "RES" + std::to_string(i + 1);
    md += fmt::format("| {} | {} | {} |\n", code, kMeaning[i], s["outcomes"][code].get<int>());
  }
  if (!s["gold_unusable_list"].empty()) {
    md += "\n## Gold unusable\n\n| question | db | status | error |\n|---|---|---|---|\n";
    for (const auto& g : s["gold_unusable_list"])
      md += fmt::format("| {} | {} | {} | {} |\n", g["question_id"].get<std::string>(),
                        g["db_id"].get<std::string>(), g["status"].get<std::string>(),
                        g["error"].get<std::string>());
  }
  if (!s["gold_tie_dependent_list"].empty()) {
    md += "\n## Gold answers that depend on tie order\n\nThese gold queries return a different "
          "answer set when rows that tie under ORDER BY come out in another order (LIMIT cuts "
          "inside a tie): a known source of evaluator disagreement.\n\n";
    for (const auto& q : s["gold_tie_dependent_list"]) md += "- " + q.get<std::string>() + "\n";
  }
  if (!s["skipped"].empty()) {
    md += "\n## Skipped questions\n\n";
    std::map<std::string, size_t> reasons;
    for (const auto& k : s["skipped"]) ++reasons[k["reason"].get<std::string>()];
    for (auto& [reason, n] : reasons) md += fmt::format("- {} question(s): {}\n", n, reason);
  }
  const json& t = s["timing"];
  md += fmt::format("\n## Timing\n\n{:.3f} s wall, {:.1f} questions/s on {} threads; time inside "
                    "SQLite {:.1f} ms (summed over threads); result cache {} hits / {} misses.\n",
                    t["wall_s"].get<double>(), t["questions_per_s"].get<double>(),
                    t["threads"].get<size_t>(), t["sqlite_exec_ms_total"].get<double>(),
                    t["cache_hits"].get<size_t>(), t["cache_misses"].get<size_t>());
  return md;
}

Status write_report(const EvalReport& report, const std::filesystem::path& out_dir) {
  // Predictions and SQLite messages may hold bytes that are not UTF-8 (a Latin-1 prediction
  // file): replaced with U+FFFD rather than failing the whole report.
  NL2SQL_RETURN_IF_ERROR(core::write_file_atomic(
      out_dir / "eval.json",
      report_to_json(report).dump(2, ' ', false, nlohmann::json::error_handler_t::replace)));
  NL2SQL_RETURN_IF_ERROR(core::write_file_atomic(out_dir / "eval.md", report_to_markdown(report)));
  NL2SQL_RETURN_IF_ERROR(core::write_file_atomic(out_dir / "eval.csv", report_to_csv(report)));
  return Status::ok();
}

namespace {

// The efficiency block of the console summary: the tables in the order the metrics were asked
// for, and the rank correlations.
std::string efficiency_console(const EvalReport& report, const json& e) {
  std::string out = fmt::format("\nefficiency: {} timed round(s) per correct pair, one pair at a time; CPU {}",
                                e["repeats"].get<int>(), e["cpu"].get<std::string>());
  if (e.contains("load_average_before"))
    out += fmt::format("; 1-min load {:.2f} before, {:.2f} after the timed pass",
                       e["load_average_before"].get<double>(), e["load_average_after"].get<double>());
  out += "\n";
  for (EfficiencyMetric metric : report.efficiency.metrics) {
    const std::string name = efficiency_metric_name(metric);
    const auto& m = e["metrics"][name];
    out += "\n" + efficiency_table(e, name);
    if (m.contains("near_boundary"))
      out += fmt::format("pairs whose ratio interval crosses a reward boundary: {}\n", m["near_boundary"].get<size_t>());
  }
  if (e.contains("rank_correlation"))
    for (auto& [pair, c] : e["rank_correlation"].items())
      out += fmt::format("Spearman rank correlation of per-question ratios, {}: {} ({} pairs)\n", pair,
                         c["spearman"].is_null() ? std::string("n/a (fewer than 2 pairs, or one side constant)")
                                                 : fmt::format("{:.3f}", c["spearman"].get<double>()),
                         c["pairs"].get<size_t>());
  return out + "\n";
}

}  // namespace

std::string report_to_console(const EvalReport& report) {
  const json& s = report.summary;
  std::string out = fmt::format("{} {}: {} questions evaluated, {} skipped, {} gold unusable\n", report.benchmark,
                                report.split, report.items.size(), report.skipped.size(),
                                s["gold_unusable"].get<size_t>());
  for (auto& [name, m] : s["metrics"].items()) {
    const auto& o = m["overall"];
    out += fmt::format("  {:<10} EX {:6.2f}%  95% CI [{:.2f}, {:.2f}]  ({}/{})\n", name, o["ex"].get<double>(),
                       o["ci95"][0].get<double>(), o["ci95"][1].get<double>(), o["correct"].get<long>(),
                       o["n"].get<size_t>());
  }
  out += fmt::format("  (RES3 + RES5) / n on the rule codes {:6.2f}%\n", s["rule_semantic_accuracy"].get<double>());
  if (s.contains("judge")) {
    const auto& j = s["judge"];
    out += fmt::format("  judge      semantic accuracy {:6.2f}%  95% CI [{:.2f}, {:.2f}]  ({} unreadable; {} disagree with EX; "
                       "{} cached; {} + {} tokens, ${:.4f})\n",
                       j["semantic_accuracy"].get<double>(), j["ci95"][0].get<double>(), j["ci95"][1].get<double>(),
                       j["codes"]["unparsed"].get<size_t>(), j["disagreements_with_ex"].size(),
                       j["cached_answers"].get<size_t>(), j["tokens"]["prompt"].get<int64_t>(),
                       j["tokens"]["completion"].get<int64_t>(), j["cost_usd"].get<double>());
  }
  out += fmt::format("  soft-F1    {:6.2f}\n", s["soft_f1"].get<double>());
  if (s.contains("test_suite")) {
    const auto& t = s["test_suite"];
    out += fmt::format("  test suite: {} question(s) on up to {} database files; spider-ts on the original databases alone "
                       "{:.2f}%; {} pass there but fail on a variant (listed in the report)\n",
                       t["questions_on_a_suite"].get<size_t>(), t["most_database_files"].get<size_t>(),
                       t["ex_original_only"].get<double>(), t["passes_original_fails_variant"].size());
  }
  if (s.contains("efficiency")) out += efficiency_console(report, s["efficiency"]);
  out += fmt::format("  {:.3f} s, {:.1f} questions/s\n", report.wall_s, s["timing"]["questions_per_s"].get<double>());
  return out;
}

double first_metric_ex(const EvalReport& report) {
  const json& metrics = report.summary["metrics"];
  if (metrics.empty()) return 0;
  return metrics.begin().value()["overall"]["ex"].get<double>();
}

}  // namespace nl2sql::eval
