// nl2sql show-question: every model call a run recorded for one question — the prompt sent, the
// answer, the model and its sampling, tokens, latency and whether the request reached a server
// — grouped by stage in pipeline order, so a stage can be checked against its paper. Reads the
// question's final record (run::recorded_calls); nothing is sent, nothing is re-rendered.
#include <iostream>
#include <map>
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "cli/command.h"
#include "nl2sql/core/config.h"
#include "nl2sql/core/log.h"
#include "nl2sql/llm/profile.h"
#include "nl2sql/run/run_data.h"
#include "nl2sql/run/run_lock.h"

namespace nl2sql::cli {
namespace {

using nlohmann::json;

struct ShowQuestionArgs {
  std::string dir;
  std::string question_id;
  std::string stage;
  std::string format = "text";
};

// How the answer came to be: a request the server answered, the response cache, another
// question's answer shared by a memo, the simulator, or a failure.
std::string origin(const json& t) {
  if (!t.value("error", std::string()).empty()) return "failed";
  if (!t.value("shared_from", std::string()).empty()) return "shared";
  if (t.value("from_cache", false)) return "cache hit";
  if (t.value("provider", std::string()) == "sim") return "simulated";
  return "sent";
}

std::string text_field(const json& t, const char* key) { return core::redact(t.value(key, std::string())); }

void print_text(const run::QuestionRecord& r, const std::vector<run::RecordedCall>& calls, const std::string& stage) {
  std::cout << fmt::format("question {} (database {})\n{}\n", r.question_id, r.db_id, core::redact(r.question));
  if (!r.evidence.empty()) std::cout << "evidence: " << core::redact(r.evidence) << "\n";
  std::map<std::string, int64_t> by_origin;
  for (const auto& c : calls) by_origin[origin(llm::to_json(*c.trace))] += 1;
  std::string counts;
  for (const auto& [k, n] : by_origin) counts += fmt::format("{}{} {}", counts.empty() ? "" : ", ", n, k);
  std::cout << fmt::format("model calls recorded{}: {}{}\n", stage.empty() ? "" : " in stage " + stage, calls.size(),
                           counts.empty() ? "" : " (" + counts + ")");
  std::string group;
  for (size_t i = 0; i < calls.size(); ++i) {
    const json t = llm::to_json(*calls[i].trace);
    const std::string g = calls[i].stage + (calls[i].owner.empty() ? "" : ": " + calls[i].owner);
    if (g != group) {
      std::cout << "\n== " << g << " ==\n";
      group = g;
    }
    const std::string o = origin(t);
    std::string how = o;
    if (o == "shared") how = "shared from question " + t.value("shared_from", std::string()) + ", not sent again";
    if (o == "sent" && t.contains("request_hash"))
      how += " (request " + t.value("request_hash", std::string()).substr(0, 12) + ")";
    std::cout << fmt::format("\n[{}] {} · template {} ({})\n", i + 1, t.value("stage", std::string()),
                             t.value("template", std::string()), t.value("template_hash", std::string()).substr(0, 12));
    std::cout << fmt::format("    profile {} (model {}, {})  temperature {}  seed {}\n", t.value("profile", std::string()),
                             t.value("model", std::string()), t.value("provider", std::string()),
                             t.contains("temperature") ? fmt::format("{}", t["temperature"].get<double>()) : "-",
                             t.contains("seed") ? std::to_string(t["seed"].get<int64_t>()) : "-");
    // The server's own breakdown, where it gave one.
    const std::string cached = t.contains("cached_tokens") && t["cached_tokens"].is_number_integer()
                                   ? fmt::format(" ({} cached)", t["cached_tokens"].get<int64_t>())
                                   : "";
    const std::string reasoning = t.contains("reasoning_tokens") && t["reasoning_tokens"].is_number_integer()
                                      ? fmt::format(" ({} reasoning)", t["reasoning_tokens"].get<int64_t>())
                                      : "";
    std::cout << fmt::format("    tokens {}{} in + {}{} out  cost ${:.6f}  latency {:.3f} s  {}{}\n",
                             t.value("prompt_tokens", int64_t{0}), cached, t.value("completion_tokens", int64_t{0}),
                             reasoning,
                             t.value("cost_usd", 0.0), t.value("latency_s", 0.0), how,
                             t.value("prompt_rung", 0) > 0
                                 ? fmt::format("  schema lightened (rung {})", t.value("prompt_rung", 0))
                                 : "");
    if (const std::string s = text_field(t, "system"); !s.empty()) std::cout << "--- system ---\n" << s << "\n";
    std::cout << "--- prompt ---\n" << text_field(t, "prompt") << "\n";
    if (const std::string s = text_field(t, "reasoning"); !s.empty()) std::cout << "--- reasoning ---\n" << s << "\n";
    if (o == "failed") std::cout << "--- error ---\n" << text_field(t, "error") << "\n";
    else std::cout << "--- answer ---\n" << text_field(t, "response") << "\n";
  }
}

int run_show_question(const ShowQuestionArgs& a) {
  static const std::set<std::string> kStages = {"context", "generate", "fix", "select", "curves"};
  if (!a.stage.empty() && !kStages.count(a.stage)) {
    spdlog::error("--stage {}: expected one of context, generate, fix, select, curves", a.stage);
    return kExitBadInput;
  }
  if (a.format != "text" && a.format != "json") {
    spdlog::error("--format {}: expected text or json", a.format);
    return kExitBadInput;
  }
  // Read under a shared lock: a live run's folder is refused, not half-read.
  auto reading = run::RunFolderLock::acquire_shared(a.dir);
  if (!reading) {
    spdlog::error("{}", reading.status().message());
    return kExitBadInput;
  }
  auto data = run::load_run(a.dir);
  if (!data) {
    spdlog::error("{}", data.status().message());
    return kExitBadInput;
  }
  // The run's profiles read their keys from this environment: registering them makes every
  // printed text pass the redactor with them (a run folder never holds a key; this is the
  // second line of defence).
  if (data->config.is_object()) (void)llm::load_llm_settings(core::Config(data->config));
  const run::QuestionRecord* record = nullptr;
  for (const auto& r : data->records)
    if (r.question_id == a.question_id) record = &r;
  if (record == nullptr) {
    spdlog::error("{}: no finished question \"{}\" (its final record is missing: not run yet, or still running); "
                  "`nl2sql report {}` lists the run's questions",
                  a.dir, a.question_id, a.dir);
    return kExitBadInput;
  }
  std::vector<run::RecordedCall> calls;
  for (const auto& c : run::recorded_calls(*record))
    if (a.stage.empty() || c.stage == a.stage) calls.push_back(c);

  if (a.format == "json") {
    json out = {{"run", a.dir},
                {"question_id", record->question_id},
                {"db_id", record->db_id},
                {"question", record->question},
                {"evidence", record->evidence},
                {"stage_filter", a.stage.empty() ? json(nullptr) : json(a.stage)}};
    json arr = json::array();
    for (size_t i = 0; i < calls.size(); ++i) {
      json c = llm::to_json(*calls[i].trace);
      c["n"] = i + 1;
      c["pipeline_stage"] = calls[i].stage;
      c["owner"] = calls[i].owner;
      c["origin"] = origin(llm::to_json(*calls[i].trace));
      arr.push_back(std::move(c));
    }
    out["calls"] = std::move(arr);
    std::cout << core::redact(out.dump(2, ' ', false, json::error_handler_t::replace)) << "\n";
  } else {
    print_text(*record, calls, a.stage);
  }
  if (calls.empty())
    std::cerr << fmt::format(
        "no model call is recorded for question {}{}: its stages made none (heuristic-only config, or the question "
        "failed before its first call{}); a run keeps every prompt and answer it sends, so there is no setting to "
        "turn on\n",
        a.question_id, a.stage.empty() ? "" : " in stage " + a.stage,
        record->ok ? "" : ": " + core::redact(record->error));
  return kExitOk;
}

RunFn setup_show_question(CLI::App& app) {
  auto args = std::make_shared<ShowQuestionArgs>();
  auto* cmd = app.add_subcommand(
      "show-question",
      "Show every prompt a run sent for one question and every answer, grouped by stage, with model, sampling, "
      "tokens, latency and whether it was sent, a cache hit or shared");
  cmd->add_option("run", args->dir, "Run folder (runs/NAME)")->required();
  cmd->add_option("question_id", args->question_id, "Question id as the run names it")->required();
  cmd->add_option("--stage", args->stage, "Only the calls of one stage: context, generate, fix, select, curves");
  cmd->add_option("--format", args->format, "text (default) or json");
  return [args] { return run_show_question(*args); };
}

NL2SQL_REGISTER_COMMAND("show-question", setup_show_question);

}  // namespace
}  // namespace nl2sql::cli
