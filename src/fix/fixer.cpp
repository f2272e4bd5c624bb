// Execution-feedback fixer (see fixer.h).
#include "nl2sql/fix/fixer.h"

#include <algorithm>
#include <cctype>
#include <functional>
#include <optional>
#include <set>

#include "nl2sql/context/schema_render.h"
#include "nl2sql/feedback/feedback.h"
#include "nl2sql/core/hash.h"
#include "nl2sql/generate/call_tags.h"
#include "nl2sql/llm/model_call.h"
#include "nl2sql/llm/answer.h"
#include "nl2sql/llm/client.h"
#include "nl2sql/sql/parser.h"

namespace nl2sql::fix {
namespace {

using generate::Candidate;
using feedback::ExecutionSummary;



// Whether `sql` is a statement that is not a query (INSERT, PRAGMA, …); parse failures are
// left to the executor, which reports them as errors the fixer can work on.
std::optional<std::string> non_query_keyword(const std::string& sql) {
  auto st = sql::parse(sql);
  if (st && !st->is_query()) return st->keyword.empty() ? std::string("?") : st->keyword;
  return std::nullopt;
}

}  // namespace

Result<FixOptions> load_fix_options(const core::Config& config) {
  FixOptions o;
  if (const auto* f = config.find("fix")) {
    if (!f->is_object()) return invalid_input("config key \"fix\" must be an object");
    static const std::set<std::string> kKeys = {"enabled", "max_rounds", "on_empty_result", "role",
                                                "profile", "temperature", "preview_rows", "hint_names", "keep_rows", "template"};
    for (const auto& [k, v] : f->items())
      if (!kKeys.count(k)) return invalid_input("config key \"fix." + k + "\" is not known");
  }
  auto en = config.get_bool("fix.enabled");
  if (!en) return en.status();
  o.enabled = *en;
  auto mr = config.get_int("fix.max_rounds");
  if (!mr) return mr.status();
  if (*mr < 0 || *mr > 20) return invalid_input("config key \"fix.max_rounds\" must be in [0, 20]");
  o.max_rounds = *mr;
  auto oe = config.get_bool("fix.on_empty_result");
  if (!oe) return oe.status();
  o.on_empty_result = *oe;
  auto role = config.get_string("fix.role");
  if (!role) return role.status();
  o.role = *role;
  o.role_mapped = config.has("llm.roles." + o.role);
  auto prof = config.get_string("fix.profile", "");
  if (!prof) return prof.status();
  o.profile = *prof;
  if (config.has("fix.temperature")) {
    auto t = config.get_number("fix.temperature");
    if (!t) return t.status();
    if (*t < 0 || *t > 2) return invalid_input("config key \"fix.temperature\" must be in [0, 2]");
    o.temperature = *t;
  }
  auto pr = config.get_int("fix.preview_rows");
  if (!pr) return pr.status();
  if (*pr < 0) return invalid_input("config key \"fix.preview_rows\" must be >= 0");
  o.preview_rows = static_cast<size_t>(*pr);
  auto hn = config.get_int("fix.hint_names");
  if (!hn) return hn.status();
  if (*hn < 1) return invalid_input("config key \"fix.hint_names\" must be >= 1");
  o.hint_names = static_cast<size_t>(*hn);
  auto kr = config.get_int("fix.keep_rows");
  if (!kr) return kr.status();
  if (*kr < 0) return invalid_input("config key \"fix.keep_rows\" must be >= 0");
  o.keep_rows = static_cast<size_t>(*kr);
  return o;
}

size_t kept_rows(const FixOptions& options) {
  if (options.keep_rows == 0) return 0;
  // The selectors' result previews show 5 rows (select/prompt_parts.h).
  constexpr size_t kSelectPreviewRows = 5;
  return std::max({options.keep_rows, options.preview_rows, kSelectPreviewRows});
}

void execute_candidate(Candidate& c, const db::Executor& executor, const std::filesystem::path& db_path,
                       size_t preview_rows) {
  ExecutionMemo memo(executor, db_path);
  execute_candidate(c, memo, preview_rows);
}

void prefetch_execution(const Candidate& c, ExecutionMemo& memo) {
  if (!c.extraction_ok || c.sql.empty() || non_query_keyword(c.sql)) return;
  memo.run(c.sql);
}

void execute_candidate(Candidate& c, ExecutionMemo& memo, size_t preview_rows) {
  c.execution = ExecutionSummary{};
  if (!c.extraction_ok || c.sql.empty()) return;
  if (auto kw = non_query_keyword(c.sql)) {
    c.rejected = true;
    c.rejection = "rejected: not read-only (" + *kw + " statement)";
    return;
  }
  const auto shared = memo.run(c.sql);
  const db::ExecutionResult& r = *shared;
  c.execution = feedback::summarize_execution(r, preview_rows);
  if (r.status == db::ExecStatus::kRejected) {
    // The executor's guardrails refused it before running (several statements, PRAGMA …).
    c.rejected = true;
    c.rejection = "rejected: not read-only (" + r.error + ")";
  }
}

Result<Fixer> Fixer::create(const core::Config& config, llm::Client* client, const llm::PromptLibrary& prompts) {
  auto o = load_fix_options(config);
  if (!o) return o.status();
  auto file = config.get_string("fix.template", "");
  if (!file) return file.status();
  auto t = prompts.load_as("fix_sql", *file);
  if (!t) return t.status().with_context(file->empty() ? "fix: prompt fix_sql" : "config key \"fix.template\"");
  if (client == nullptr && o->enabled && o->max_rounds > 0) return invalid_input("fix: no LLM client");
  return Fixer(std::move(*o), client, std::move(*t));
}

Fixer::Fixer(FixOptions options, llm::Client* client, llm::PromptTemplate prompt)
    : options_(std::move(options)), client_(client), prompt_(std::move(prompt)) {}

bool Fixer::needs_fix(const ExecutionSummary& e) const {
  if (!e.executed) return false;
  if (!e.ok()) return true;
  return options_.on_empty_result && e.rows == 0;
}

std::function<std::string(int, int64_t)> fix_schema_ladder(const context::SchemaSources& sources) {
  context::RenderOptions ro;
  std::string schema_text = context::render_schema(sources, ro);
  return [sources, ro, schema_text = std::move(schema_text)](int rung, int64_t schema_tokens) {
    if (rung == 0) return schema_text;
    const std::set<std::string> filtered;
    context::RenderOptions o = context::options_at_rung(ro, rung, filtered);
    if (rung >= context::kSchemaLadderRungs) o.descriptions = false;
    std::string text = context::render_schema(sources, o);
    if (rung >= context::kSchemaLadderRungs && schema_tokens > 0 &&
        static_cast<int64_t>(text.size() / 4) > schema_tokens)
      text = text.substr(0, static_cast<size_t>(schema_tokens) * 4) + "\n-- (schema cut to fit the model's context)";
    return text;
  };
}

Status Fixer::fix(Candidate& c, const FixInput& in) const {
  if (in.executor == nullptr || in.question == nullptr || in.schema == nullptr)
    return invalid_input("fixer: FixInput needs an executor, a question and a schema");
  // Without a memo from the caller, one for this candidate: its rounds still never run a
  // query twice.
  std::optional<ExecutionMemo> own;
  if (in.memo == nullptr) own.emplace(*in.executor, in.db_path);
  ExecutionMemo& memo = in.memo ? *in.memo : *own;
  execute_candidate(c, memo, options_.preview_rows);
  c.still_failing = false;
  if (c.rejected || !c.execution.executed) return Status::ok();
  if (!options_.enabled || options_.max_rounds == 0 || client_ == nullptr) {
    c.still_failing = needs_fix(c.execution);
    return Status::ok();
  }
  if (c.original_sql.empty()) c.original_sql = c.sql;
  const auto schema_at = fix_schema_ladder(
      {in.schema, in.index, in.retrieval ? &in.retrieval->values : nullptr, in.metadata});
  const int first = static_cast<int>(c.fix_rounds.size()) + 1;
  for (int k = 0; k < options_.max_rounds && needs_fix(c.execution); ++k) {
    auto round = repair_round(c, in, memo, schema_at, first + k);
    if (!round) return round.status();
    // The model answered the query it was asked to repair (up to blanks: the same query, the
    // same execution, the same failure): the next round would ask the same again, so this
    // candidate's fixing ends here.
    const bool unchanged = normalize_sql(round->sql_after) == normalize_sql(round->sql_before);
    c.fix_rounds.push_back(std::move(*round));
    if (unchanged) break;
  }
  c.still_failing = needs_fix(c.execution);
  return Status::ok();
}

Result<generate::FixRound> Fixer::repair_round(Candidate& c, const FixInput& in, ExecutionMemo& memo,
                                               const std::function<std::string(int, int64_t)>& schema_at,
                                               int number) const {
  generate::FixRound round;
  round.round = number;
  round.failure_class = feedback::classify_failure(c.execution);
  const std::string what = round.failure_class == "empty_result"
                               ? std::string("The query executed successfully but returned no rows.")
                               : (c.execution.status == db::ExecStatus::kTimeout ? "Timed out: " : "Error: ") +
                                     c.execution.error;
  const std::string hint = feedback::failure_hint(round.failure_class, c.execution, c.sql, {in.schema, in.index, options_.hint_names});
  round.feedback = what + "\n" + hint;
  round.sql_before = c.sql;

  llm::ModelCall call;
  call.prompt = &prompt_;
  call.stage = "fix";
  call.role = options_.role;
  call.profile = profile_for(c);
  call.temperature = options_.temperature;
  // Distinct per candidate and round so that repeated rounds are distinct samples.
  call.sample_index = c.sample_index * 64 + round.round;
  call.question_id = in.question->question_id;
  call.schema_at = schema_at;
  call.values = {{"question", in.question->question},
                 {"evidence", in.question->evidence.empty() ? "(none)" : in.question->evidence},
                 {"sql", c.sql},
                 {"failure_class", round.failure_class},
                 {"feedback", what},
                 {"hint", hint}};
  call.tag = generate::generation_tag(*in.question, c.generator, call.sample_index);
  call.tag.task = llm::CallTask::kFix;
  call.tag.failing_sql = c.sql;
  call.tag.failure = round.failure_class;
  auto a = llm::call_model(*client_, call);
  if (!a) return a.status().with_context("fixer, question " + in.question->question_id + ", candidate " + c.id);
  round.call = a->trace;
  std::string next = c.sql;
  if (a->text) {
    auto ex = llm::extract_sql(*a->text);
    if (ex && !non_query_keyword(ex->sql)) next = ex->sql;
    if (!ex) client_->accounting().record_parse_failure(call.stage, in.question->question_id);
  }
  round.sql_after = next;
  if (next == c.sql) {
    // Same query again: its execution is known; do not run it twice.
    round.execution_after = c.execution;
    return round;
  }
  const auto shared = memo.run(next);
  const db::ExecutionResult& r = *shared;
  round.execution_after = feedback::summarize_execution(r, options_.preview_rows);
  if (r.status == db::ExecStatus::kRejected) {
    // A "fix" the guardrails refuse is not adopted; the round stays in the trace.
    round.sql_after = c.sql;
  } else {
    c.sql = next;
    c.execution = round.execution_after;
  }
  return round;
}

}  // namespace nl2sql::fix
