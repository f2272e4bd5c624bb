// The orchestrator generator `agent` (see agent.h).
#include "agent.h"

#include <algorithm>

#include "nl2sql/generate/call_tags.h"
#include "nl2sql/llm/model_call.h"
#include "nl2sql/llm/answer.h"
#include "nl2sql/llm/client.h"
#include "nl2sql/llm/prompt_template.h"
#include "prompt_text.h"

namespace nl2sql::generate {
namespace {

class AgentGenerator : public Generator {
 public:
  AgentGenerator(AgenticSpec spec, AgentOptions options, llm::Client* client, const db::Executor* executor,
                 llm::PromptTemplate ledger, llm::PromptTemplate fast, llm::PromptTemplate slow)
      : spec_(std::move(spec)), o_(std::move(options)), client_(client), executor_(executor),
        ledger_(std::move(ledger)), fast_(std::move(fast)), slow_(std::move(slow)) {}

  std::string name() const override { return spec_.label; }

  Result<std::vector<Candidate>> generate(const GenerationInput& in) const override {
    if (in.question == nullptr || in.schema == nullptr)
      return invalid_input("generator " + spec_.label + ": GenerationInput needs a question and a schema");
    const data::Task& q = *in.question;
    const std::string where = "generator " + spec_.label + ", question " + q.question_id;

    // The schema the ledger and the slow loop see: enriched (descriptions, examples, matched
    // values), cut to the budget for large databases.
    context::RenderOptions render;
    render.descriptions = spec_.descriptions;
    render.examples = static_cast<size_t>(spec_.examples);
    std::string schema_note;
    std::vector<LlmCallTrace> schema_calls;
    const std::string schema = render_schema_within(
        in, render, {schema_budget_for(*client_, spec_.role, o_.max_schema_tokens), client_, o_.embeddings_profile,
                     "agent.schema_embed"},
        &schema_note, &schema_calls);

    // Task ledger: compiled once per question, shared by every sample.
    llm::ModelCall lc = base_call(in, ledger_, "agent.ledger", 0);
    lc.tag.task = llm::CallTask::kLedger;
    lc.values = {{"schema", schema},
                 {"evidence", evidence_text(q)},
                 {"rules", load_business_rules(o_.rules_dir, q.db_id)},
                 {"question", q.question}};
    auto ledger = llm::call_model(*client_, lc);
    if (!ledger) return ledger.status().with_context(where);
    std::string fact_sheet;
    std::string ledger_log;
    if (!ledger->text) {
      fact_sheet = "(the fact sheet could not be compiled: " + ledger->trace.error + ")";
      ledger_log = "model call failed: " + ledger->trace.error;
    } else if (auto j = parse_json_answer(*ledger->text)) {
      fact_sheet = j->dump(2);
      ledger_log = "fact sheet with " + std::to_string(j->size()) + " field(s)";
    } else {
      // Keep the model's text: a malformed sheet still carries what the model worked out.
      client_->accounting().record_parse_failure(ledger->trace.stage, q.question_id);
      fact_sheet = *ledger->text;
      ledger_log = "answer was not a JSON object; its text is used as the fact sheet";
    }

    std::vector<Candidate> out;
    for (int64_t s = 0; s < spec_.samples; ++s) {
      auto c = run_sample(in, s, schema, fact_sheet);
      if (!c) return c.status().with_context(where);
      std::string head;
      if (!schema_note.empty()) head += step_line(0, "schema", schema_note);
      head += step_line(0, "ledger", ledger_log);
      c->reasoning = head + c->reasoning;
      if (s == 0) {
        c->calls.insert(c->calls.begin(), ledger->trace);
        c->calls.insert(c->calls.begin(), schema_calls.begin(), schema_calls.end());
      }
      out.push_back(std::move(*c));
    }
    return out;
  }

 private:
  llm::ModelCall base_call(const GenerationInput& in, const llm::PromptTemplate& t, const std::string& stage,
                      int64_t sample) const {
    llm::ModelCall call;
    call.prompt = &t;
    call.stage = stage;
    call.role = spec_.role;
    call.profile = spec_.profile_for(sample);
    call.temperature = spec_.temperature;
    call.sample_index = sample;
    call.question_id = in.question->question_id;
    call.tag = generation_tag(*in.question, "agent", sample);
    return call;
  }

  Result<Candidate> run_sample(const GenerationInput& in, int64_t s, const std::string& schema,
                               const std::string& fact_sheet) const {
    const data::Task& q = *in.question;
    Candidate c;
    c.id = spec_.label + "#" + std::to_string(s);
    c.generator = spec_.kind;
    c.sample_index = s;
    std::vector<AttemptRecord> history;
    std::vector<AttemptOutcome> outcomes;
    std::vector<std::string> answers;
    std::string log, scratchpad_notes, own_notes;
    size_t best = 0;
    bool accepted = false;
    for (int64_t attempt = 1; attempt <= o_.max_attempts; ++attempt) {
      const bool slow = attempt > o_.fast_attempts;
      if (slow && attempt == o_.fast_attempts + 1)
        log += step_line(attempt, "escalate", "the fast loop failed " + std::to_string(o_.fast_attempts) +
                                                  " time(s); slow loop with the full schema and a scratchpad");
      const std::string hist = history.empty() ? "(no previous attempts)" : compress_history(q.question, history);
      llm::ModelCall call = base_call(in, slow ? slow_ : fast_, slow ? "agent.slow" : "agent.fast", s);
      // The sim writer: the first attempt is a generation, later ones repair the latest SQL
      // with the latest outcome as the failure (a distinct draw per attempt).
      call.tag.sample_index = s * 64 + attempt;
      if (!outcomes.empty() && !outcomes.back().sql.empty()) {
        call.tag.task = llm::CallTask::kFix;
        call.tag.failing_sql = outcomes.back().sql;
        call.tag.failure = outcomes.back().issues.empty() ? "other" : outcomes.back().issues.front().kind;
      }
      call.values = {{"fact_sheet", fact_sheet}, {"history", hist}, {"question", q.question}};
      if (slow) {
        std::string pad = scratchpad_notes.empty() ? "(nothing observed yet)\n" : scratchpad_notes;
        if (!own_notes.empty()) pad += "\nYour notes from the previous attempt:\n" + cut(own_notes, 2000) + "\n";
        call.values["schema"] = schema;
        call.values["evidence"] = evidence_text(q);
        call.values["scratchpad"] = pad;
      }
      auto a = llm::call_model(*client_, call);
      if (!a) return a.status();
      c.calls.push_back(a->trace);
      if (c.profile.empty()) c.profile = a->trace.profile;
      AttemptOutcome o;
      if (!a->text) {
        o.extraction_error = "model call failed: " + a->trace.error;
        o.result.status = db::ExecStatus::kRejected;
        o.result.error = o.extraction_error;
        o.issues.push_back({"error", o.extraction_error});
      } else {
        o = run_attempt(*a->text, q.question, executor_, in.db_path, o_.limits);
        if (slow) own_notes = llm::sql_reasoning(*a->text);
        if (o.sql.empty()) client_->accounting().record_parse_failure(a->trace.stage, q.question_id);
      }
      const std::string outcome = outcome_text(o);
      log += step_line(attempt, std::string(slow ? "slow" : "fast") + " attempt", outcome);
      scratchpad_notes += "- attempt " + std::to_string(attempt) + ": " +
                          (o.sql.empty() ? std::string("no SQL") : cut(o.sql, 300)) + "\n  → " +
                          (o.result.ok() ? render_summary(o.summary) : outcome + "\n");
      history.push_back({attempt, slow ? "slow" : "fast", o.sql, outcome,
                         o.result.ok() ? issues_text(o.issues) : o.summary.error});
      answers.push_back(a->text ? *a->text : "");
      outcomes.push_back(std::move(o));
      const size_t k = outcomes.size() - 1;
      // Best effort: fewest/mildest issues, the later attempt on a tie; an attempt without SQL never wins.
      if (!outcomes[k].sql.empty() &&
          (outcomes[best].sql.empty() || issue_weight(outcomes[k].issues) <= issue_weight(outcomes[best].issues)))
        best = k;
      if (outcomes[k].issues.empty()) {
        accepted = true;
        best = k;
        log += step_line(attempt, "accept", "result heuristics found no issue");
        break;
      }
      if (attempt < o_.max_attempts) log += step_line(attempt, "retry", outcomes[k].issues.front().kind);
    }
    if (!accepted)
      log += step_line(static_cast<int64_t>(outcomes.size()), "best effort",
                       "budget of " + std::to_string(o_.max_attempts) + " attempts spent; answering with attempt " +
                           std::to_string(best + 1));
    const AttemptOutcome& pick = outcomes[best];
    c.raw_response = answers[best];
    c.reasoning = log;
    if (pick.sql.empty()) {
      c.extraction_ok = false;
      c.extraction_error = pick.extraction_error;
    } else {
      c.sql = pick.sql;
      c.original_sql = pick.sql;
    }
    return c;
  }

  AgenticSpec spec_;
  AgentOptions o_;
  llm::Client* client_;
  const db::Executor* executor_;
  llm::PromptTemplate ledger_, fast_, slow_;
};

}  // namespace

Result<AgentOptions> load_agent_options(const core::Config& config) {
  AgentOptions o;
  auto need = [](bool ok, const std::string& key, const std::string& what) -> Status {
    return ok ? Status::ok() : invalid_input("config key \"" + key + "\" " + what);
  };
  auto fa = config.get_int("agent.fast_attempts");
  if (!fa) return fa.status();
  auto ma = config.get_int("agent.max_attempts");
  if (!ma) return ma.status();
  auto st = config.get_int("agent.max_schema_tokens");
  if (!st) return st.status();
  auto rd = config.get_string("agent.rules_dir");
  if (!rd) return rd.status();
  auto ep = config.get_string("agent.embeddings_profile");
  if (!ep) return ep.status();
  auto to = config.get_number("agent.timeout_s");
  if (!to) return to.status();
  auto rc = config.get_int("agent.row_cap");
  if (!rc) return rc.status();
  auto pr = config.get_int("agent.preview_rows");
  if (!pr) return pr.status();
  auto sr = config.get_int("agent.single_answer_max_rows");
  if (!sr) return sr.status();
  auto mr = config.get_int("agent.max_rows");
  if (!mr) return mr.status();
  NL2SQL_RETURN_IF_ERROR(need(*fa >= 0, "agent.fast_attempts", "must be >= 0"));
  NL2SQL_RETURN_IF_ERROR(need(*ma >= 1, "agent.max_attempts", "must be >= 1"));
  NL2SQL_RETURN_IF_ERROR(need(*fa <= *ma, "agent.fast_attempts", "must not exceed agent.max_attempts"));
  NL2SQL_RETURN_IF_ERROR(need(*to > 0, "agent.timeout_s", "must be > 0"));
  NL2SQL_RETURN_IF_ERROR(need(*rc >= 1, "agent.row_cap", "must be >= 1"));
  NL2SQL_RETURN_IF_ERROR(need(*pr >= 0, "agent.preview_rows", "must be >= 0"));
  NL2SQL_RETURN_IF_ERROR(need(*sr >= 1, "agent.single_answer_max_rows", "must be >= 1"));
  NL2SQL_RETURN_IF_ERROR(need(*mr >= 0, "agent.max_rows", "must be >= 0"));
  o.fast_attempts = *fa;
  o.max_attempts = *ma;
  o.max_schema_tokens = *st;
  o.rules_dir = *rd;
  o.embeddings_profile = *ep;
  o.limits.timeout_s = *to;
  o.limits.row_cap = static_cast<size_t>(*rc);
  o.limits.preview_rows = static_cast<size_t>(*pr);
  o.limits.checks.single_answer_max_rows = static_cast<size_t>(*sr);
  o.limits.checks.max_rows = static_cast<size_t>(*mr);
  return o;
}

std::string compress_history(const std::string& question, const std::vector<AttemptRecord>& attempts) {
  std::string out = "Question: " + question + "\n\nEarlier attempts at this question (" +
                    std::to_string(attempts.size()) + "), oldest first:\n";
  for (const auto& a : attempts) {
    out += "\nAttempt " + std::to_string(a.attempt) + " (" + a.loop + " loop):\n";
    out += a.sql.empty() ? "(no SQL could be extracted)\n" : "```sql\n" + a.sql + "\n```\n";
    out += "Outcome: " + cut(a.outcome, 400) + "\n";
  }
  if (!attempts.empty()) out += "\nLatest error in full:\n" + attempts.back().error + "\n";
  out += "\nEvery attempt above failed. Do not repeat a failed strategy: change the tables, joins, filters or "
         "aggregation that caused the outcome, not just the formatting.\n";
  return out;
}

Result<std::unique_ptr<Generator>> make_agent_generator(AgenticSpec spec, AgentOptions options, llm::Client* client,
                                                        const db::Executor* executor,
                                                        const llm::PromptLibrary& prompts) {
  if (client == nullptr) return invalid_input("generator " + spec.label + ": no LLM client");
  auto load = [&](const char* name) {
    auto t = prompts.load(name);
    return t ? t : Result<llm::PromptTemplate>(t.status().with_context("generate: prompt " + std::string(name)));
  };
  auto ledger = load("agent_ledger");
  if (!ledger) return ledger.status();
  auto fast = load("agent_fast");
  if (!fast) return fast.status();
  auto slow = load("agent_slow");
  if (!slow) return slow.status();
  return std::unique_ptr<Generator>(std::make_unique<AgentGenerator>(std::move(spec), std::move(options), client,
                                                                     executor, std::move(*ledger), std::move(*fast),
                                                                     std::move(*slow)));
}

}  // namespace nl2sql::generate
