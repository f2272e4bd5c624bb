// The semantic-accuracy judge and its alignment check (see judge.h).
#include "nl2sql/eval/judge.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>
#include <mutex>
#include <optional>

#include "nl2sql/core/hash.h"
#include "nl2sql/core/text.h"
#include "nl2sql/core/thread_pool.h"
#include "nl2sql/eval/evaluator.h"
#include "nl2sql/llm/answer.h"
#include "nl2sql/llm/model_call.h"

namespace nl2sql::eval {

namespace {

// A classification code as written, without its whitespace and upper-cased: " res 3" -> "RES3".
std::string label_code(const std::string& text) {
  std::string out;
  for (char ch : text)
    if (!std::isspace(static_cast<unsigned char>(ch))) out.push_back(ch);
  return core::upper(out);
}

// A value as a record shows it: numbers bare, text quoted (JSON-style), NULL as null.
std::string record_value(const db::Value& v) {
  switch (v.type) {
    case db::ValueType::kNull: return "null";
    case db::ValueType::kInteger:
    case db::ValueType::kReal: return v.to_display();
    case db::ValueType::kText: return nlohmann::json(v.s).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    case db::ValueType::kBlob: return v.to_display();
  }
  return v.to_display();
}

// The first `max_chars` code points of UTF-8 `s` (a cut text ends with "…").
std::string cut_code_points(const std::string& s, size_t max_chars) {
  size_t count = 0, i = 0;
  while (i < s.size()) {
    if (count == max_chars) return s.substr(0, i) + "…";
    const auto c = static_cast<unsigned char>(s[i]);
    size_t len = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xe ? 3 : (c >> 3) == 0x1e ? 4 : 1;
    i += std::min(len, s.size() - i);
    ++count;
  }
  return s;
}

}  // namespace

std::string judge_table(const db::ExecutionResult& result, size_t max_chars) {
  std::string text;
  if (!result.ok()) {
    text = "Failed to execute the query: " + (result.error.empty() ? std::string(db::exec_status_name(result.status)) : result.error);
  } else if (result.result.rows.empty()) {
    text = "None (no rows; columns: ";
    for (size_t c = 0; c < result.result.columns.size(); ++c) text += (c ? ", " : "") + result.result.columns[c];
    text += ")";
  } else {
    text = "[";
    const auto& cols = result.result.columns;
    for (size_t r = 0; r < result.result.rows.size(); ++r) {
      text += r ? ", {" : "{";
      const auto& row = result.result.rows[r];
      for (size_t c = 0; c < row.size(); ++c) {
        const std::string name = c < cols.size() ? cols[c] : "column" + std::to_string(c + 1);
        text += (c ? ", " : "") + nlohmann::json(name).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) +
                ": " + record_value(row[c]);
      }
      text += "}";
      if (text.size() > 4 * max_chars + 16) break;  // enough to cut from
    }
    text += "]";
  }
  return cut_code_points(text, max_chars);
}

Result<JudgeVerdict> read_judge_answer(const std::string& answer) {
  auto j = llm::read_json(answer, {llm::JsonShape::kObject, ""});
  if (!j) return invalid_input("judge answer: " + j.status().message());
  const nlohmann::json* code = nullptr;
  const nlohmann::json* why = nullptr;
  for (auto it = j->begin(); it != j->end(); ++it) {
    const std::string k = core::lower(it.key());
    if (k == "classification code" || k == "classification_code" || k == "code") code = &it.value();
    if (k == "reasoning" || k == "reason") why = &it.value();
  }
  if (!code || !code->is_string()) return invalid_input("judge answer: no \"Classification code\" string");
  const std::string c = label_code(code->get<std::string>());
  if (c.size() != 4 || c.rfind("RES", 0) != 0 || c[3] < '1' || c[3] > '6')
    return invalid_input("judge answer: \"" + code->get<std::string>() + "\" is not one of RES1-RES6");
  JudgeVerdict v;
  v.code = c;
  if (why && why->is_string()) v.reasoning = why->get<std::string>();
  return v;
}

bool judge_counts_correct(const std::string& code) { return code == "RES3" || code == "RES5"; }

Result<std::vector<JudgeResult>> judge_items(llm::Client& client, const llm::PromptTemplate& prompt,
                                             const std::vector<JudgeInput>& inputs, size_t threads) {
  std::vector<JudgeResult> out(inputs.size());
  std::mutex mu;
  Status fatal = Status::ok();
  core::parallel_for(inputs.size(), std::max<size_t>(1, threads), [&](size_t i) {
    {
      std::lock_guard lock(mu);
      if (!fatal) return;
    }
    const JudgeInput& in = inputs[i];
    llm::ModelCall call;
    call.prompt = &prompt;
    call.values = {{"question", in.question}, {"gold_table", in.gold_table}, {"generated_table", in.pred_table}};
    call.stage = "judge";
    call.role = "judge";
    call.temperature = 0.0;
    call.question_id = in.question_id;
    call.tag.question_id = in.question_id;
    call.tag.question = in.question;
    auto answer = llm::call_model(client, call);
    if (!answer) {
      std::lock_guard lock(mu);
      if (fatal) fatal = answer.status();
      return;
    }
    JudgeResult& r = out[i];
    r.from_cache = answer->trace.from_cache;
    r.prompt_tokens = answer->trace.prompt_tokens;
    r.completion_tokens = answer->trace.completion_tokens;
    r.cost_usd = answer->trace.cost_usd;
    if (!answer->text) {
      r.error = "call failed: " + answer->trace.error;
      return;
    }
    auto v = read_judge_answer(*answer->text);
    if (!v) {
      r.error = v.status().message();
      client.accounting().record_parse_failure("judge", in.question_id);
      return;
    }
    r.code = v->code;
    r.reasoning = v->reasoning;
  });
  if (!fatal) return fatal;
  return out;
}

nlohmann::json judge_summary(const std::vector<JudgedItem>& items, int bootstrap_samples, uint64_t seed) {
  using nlohmann::json;
  static const std::vector<std::string> kCodes = {"RES1", "RES2", "RES3", "RES4", "RES5", "RES6"};
  json codes = json::object();
  for (const auto& c : kCodes) codes[c] = 0;
  codes["unparsed"] = 0;
  json confusion = json::object();
  for (const auto& j : kCodes) {
    confusion[j] = json::object();
    for (const auto& r : kCodes) confusion[j][r] = 0;
  }
  confusion["unparsed"] = json::object();
  for (const auto& r : kCodes) confusion["unparsed"][r] = 0;
  std::vector<int> judged_ok;
  size_t rule_ok = 0, ex_ok = 0, cached = 0;
  int64_t prompt_tokens = 0, completion_tokens = 0;
  double cost = 0;
  json disagreements = json::array();
  for (const auto& it : items) {
    const std::string jc = it.result.code.empty() ? "unparsed" : it.result.code;
    codes[jc] = codes[jc].get<size_t>() + 1;
    if (confusion[jc].contains(it.rule_code)) confusion[jc][it.rule_code] = confusion[jc][it.rule_code].get<size_t>() + 1;
    const bool ok = judge_counts_correct(it.result.code);
    judged_ok.push_back(ok ? 1 : 0);
    rule_ok += judge_counts_correct(it.rule_code);
    ex_ok += it.ex_correct;
    cached += it.result.from_cache;
    prompt_tokens += it.result.prompt_tokens;
    completion_tokens += it.result.completion_tokens;
    cost += it.result.cost_usd;
    if (ok != it.ex_correct)
      disagreements.push_back({{"question_id", it.question_id},
                               {"question", it.question},
                               {"judge_code", jc},
                               {"rule_code", it.rule_code},
                               {"ex", it.ex_correct},
                               {"reasoning", it.result.reasoning},
                               {"error", it.result.error},
                               {"gold_table", it.gold_table},
                               {"pred_table", it.pred_table}});
  }
  const double n = static_cast<double>(items.size());
  auto pct = [&](size_t k) { return items.empty() ? 0.0 : 100.0 * static_cast<double>(k) / n; };
  size_t correct = 0;
  for (int x : judged_ok) correct += static_cast<size_t>(x);
  auto ci = bootstrap_ci(judged_ok, bootstrap_samples, seed);
  return {{"n", items.size()},
          {"semantic_accuracy", pct(correct)},
          {"ci95", {ci.low, ci.high}},
          {"rule_semantic_accuracy", pct(rule_ok)},
          {"ex", pct(ex_ok)},
          {"codes", codes},
          {"confusion_judge_by_rule", confusion},
          {"disagreements_with_ex", disagreements},
          {"tokens", {{"prompt", prompt_tokens}, {"completion", completion_tokens}}},
          {"cost_usd", cost},
          {"cached_answers", cached}};
}

double Alignment::accuracy() const {
  const size_t n = tp + fp + fn + tn;
  return n ? 100.0 * static_cast<double>(tp + tn) / static_cast<double>(n) : std::numeric_limits<double>::quiet_NaN();
}
double Alignment::precision() const {
  return tp + fp ? 100.0 * static_cast<double>(tp) / static_cast<double>(tp + fp) : std::numeric_limits<double>::quiet_NaN();
}
double Alignment::recall() const {
  return tp + fn ? 100.0 * static_cast<double>(tp) / static_cast<double>(tp + fn) : std::numeric_limits<double>::quiet_NaN();
}
double Alignment::f1() const {
  const double p = precision(), r = recall();
  if (std::isnan(p) || std::isnan(r) || p + r == 0) return std::numeric_limits<double>::quiet_NaN();
  return 2 * p * r / (p + r);
}

int parse_label(const std::string& label, std::string* code) {
  const std::string l = label_code(label);
  if (l.size() == 4 && l.rfind("RES", 0) == 0 && l[3] >= '1' && l[3] <= '6') {
    if (code) *code = l;
    return judge_counts_correct(l) ? 1 : 0;
  }
  if (l == "CORRECT" || l == "YES" || l == "TRUE" || l == "1" || l == "Y") return 1;
  if (l == "INCORRECT" || l == "NO" || l == "FALSE" || l == "0" || l == "N" || l == "WRONG") return 0;
  return -1;
}

std::string csv_escape(const std::string& field) {
  if (field.find_first_of(",\"\n\r") == std::string::npos) return field;
  std::string out = "\"";
  for (char c : field) {
    if (c == '"') out += "\"\"";
    else out.push_back(c);
  }
  return out + "\"";
}


std::vector<size_t> stratified_sample(const std::vector<std::string>& codes, size_t n, uint64_t seed) {
  std::map<std::string, std::vector<size_t>> strata;
  for (size_t i = 0; i < codes.size(); ++i) strata[codes[i]].push_back(i);
  if (n >= codes.size()) {
    std::vector<size_t> all;
    for (auto& [code, idx] : strata) all.insert(all.end(), idx.begin(), idx.end());
    return all;
  }
  // Proportional allocation by largest remainder, then at least one per stratum where n allows.
  const double total = static_cast<double>(codes.size());
  std::map<std::string, size_t> take;
  std::vector<std::pair<double, std::string>> remainders;
  size_t given = 0;
  for (auto& [code, idx] : strata) {
    const double exact = static_cast<double>(n) * static_cast<double>(idx.size()) / total;
    take[code] = static_cast<size_t>(std::floor(exact));
    given += take[code];
    remainders.push_back({exact - std::floor(exact), code});
  }
  std::stable_sort(remainders.begin(), remainders.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  for (size_t k = 0; given < n && k < remainders.size(); ++k, ++given) ++take[remainders[k].second];
  if (n >= strata.size()) {
    for (auto& [code, k] : take) {
      if (k > 0) continue;
      // Take one from the largest allocation.
      auto largest = std::max_element(take.begin(), take.end(), [](const auto& a, const auto& b) { return a.second < b.second; });
      --largest->second;
      k = 1;
    }
  }
  std::vector<size_t> out;
  for (auto& [code, idx] : strata) {
    // Seeded Fisher-Yates per stratum (the stream depends on the seed and the code only).
    core::SplitMix64 rng(core::xxh64(code, seed));
    std::vector<size_t> pool = idx;
    for (size_t i = pool.size(); i > 1; --i) std::swap(pool[i - 1], pool[rng.below(i)]);
    pool.resize(std::min(take[code], pool.size()));
    std::sort(pool.begin(), pool.end());
    out.insert(out.end(), pool.begin(), pool.end());
  }
  return out;
}

Result<std::string> judge_sample_csv(const nlohmann::json& eval_report, size_t n, uint64_t seed, size_t* rows) {
  if (!eval_report.is_object() || !eval_report.contains("items") || !eval_report["items"].is_array())
    return invalid_input("not an eval.json report (no \"items\" list)");
  std::vector<const nlohmann::json*> judged;
  std::vector<std::string> codes;
  for (const auto& it : eval_report["items"]) {
    if (!it.is_object() || !it.contains("judge") || !it["judge"].is_object()) continue;
    judged.push_back(&it);
    const std::string code = it["judge"].value("code", "");
    codes.push_back(code.empty() ? "unparsed" : code);
  }
  if (judged.empty()) return invalid_input("the report has no judged question: evaluate with --metric judge first");
  const auto picked = stratified_sample(codes, n, seed);
  std::string out = "question_id,question,judge_code,gold_sql,pred_sql,gold_table,pred_table,label\n";
  auto field = [](const nlohmann::json& j, const char* key) {
    const auto it = j.find(key);
    if (it == j.end() || it->is_null()) return std::string();
    return it->is_string() ? it->get<std::string>() : it->dump();
  };
  for (size_t i : picked) {
    const auto& it = *judged[i];
    const auto& j = it["judge"];
    out += csv_escape(field(it, "question_id")) + "," + csv_escape(field(j, "question")) + "," + csv_escape(codes[i]) + "," +
           csv_escape(field(j, "gold_sql")) + "," + csv_escape(field(j, "pred_sql")) + "," +
           csv_escape(field(j, "gold_table")) + "," + csv_escape(field(j, "pred_table")) + ",\n";
  }
  if (rows) *rows = picked.size();
  return out;
}

Result<LabelImport> read_labels(const std::string& csv, const std::string& where) {
  // A spreadsheet may save the labels with a byte-order mark.
  const std::string_view text = std::string_view(csv).substr(csv.rfind("\xEF\xBB\xBF", 0) == 0 ? 3 : 0);
  auto table = data::parse_csv(text, where);
  if (!table) return table.status();
  if (table->empty()) return invalid_input(where + ": empty file");
  const auto& header = table->front();
  auto column = [&](const std::string& name) -> std::optional<size_t> {
    for (size_t c = 0; c < header.size(); ++c)
      if (header[c] == name) return c;
    return std::nullopt;
  };
  const auto code_col = column("judge_code"), label_col = column("label"), id_col = column("question_id");
  if (!code_col || !label_col)
    return invalid_input(where + ": the header needs the columns judge_code and label (as judge-export writes them)");
  LabelImport out;
  for (size_t r = 1; r < table->size(); ++r) {
    const auto& row = (*table)[r];
    if (row.size() == 1 && row[0].empty()) continue;  // a blank line
    const std::string id = id_col && *id_col < row.size() ? row[*id_col] : "?";
    const std::string label = *label_col < row.size() ? row[*label_col] : "";
    if (label.find_first_not_of(" \t") == std::string::npos) {
      ++out.unlabelled;
      continue;
    }
    std::string label_code;
    const int human = parse_label(label, &label_code);
    if (human < 0)
      return invalid_input(where + ": row " + std::to_string(r) + " (question " + id + "): label \"" + label +
                           "\" is none of RES1-RES6, correct/incorrect, yes/no, true/false, 1/0");
    const std::string judge_code = *code_col < row.size() ? row[*code_col] : "";
    const bool judge_says = judge_counts_correct(judge_code);
    ++out.rows;
    if (judge_says && human) ++out.alignment.tp;
    else if (judge_says && !human) ++out.alignment.fp;
    else if (!judge_says && human) ++out.alignment.fn;
    else ++out.alignment.tn;
    if (!label_code.empty()) {
      ++out.alignment.code_labels;
      out.alignment.code_agree += label_code == judge_code;
    }
  }
  return out;
}

}  // namespace nl2sql::eval
