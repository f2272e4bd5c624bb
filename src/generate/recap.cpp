// The ReCAP generator `recap` (see recap.h).
#include "recap.h"

#include <algorithm>
#include <cctype>
#include <optional>
#include <set>

#include "nl2sql/feedback/feedback.h"
#include "nl2sql/generate/call_tags.h"
#include "nl2sql/llm/model_call.h"
#include "nl2sql/llm/client.h"
#include "nl2sql/llm/prompt_template.h"
#include "nl2sql/core/text.h"
#include "prompt_text.h"
#include "recap_retrievers.h"

namespace nl2sql::generate {
namespace {

using core::lower;


struct Plan {
  std::string text;              // numbered steps (or the model's text when it gave no JSON)
  std::string expected_columns;  // comma-separated, "(not stated)" when absent
  bool parsed = false;           // the answer held a {"steps": [...]} object
};

Plan read_plan(const std::string& answer) {
  Plan p;
  p.expected_columns = "(not stated)";
  auto j = parse_json_answer(answer);
  if (!j || !j->contains("steps") || !(*j)["steps"].is_array()) {
    p.text = answer;
    return p;
  }
  p.parsed = true;
  int k = 0;
  for (const auto& s : (*j)["steps"]) p.text += std::to_string(++k) + ". " + (s.is_string() ? s.get<std::string>() : s.dump()) + "\n";
  if (j->contains("expected_columns") && (*j)["expected_columns"].is_array() && !(*j)["expected_columns"].empty()) {
    p.expected_columns.clear();
    for (const auto& c : (*j)["expected_columns"])
      p.expected_columns += (p.expected_columns.empty() ? "" : ", ") + (c.is_string() ? c.get<std::string>() : c.dump());
  }
  return p;
}

struct Critique {
  bool approved = true;  // a malformed answer approves: there is nothing to act on
  std::string issues;
  bool parsed = false;   // the answer held a JSON object
};

Critique read_critique(const std::string& answer) {
  Critique c;
  auto j = parse_json_answer(answer);
  if (!j) return c;
  c.parsed = true;
  if (j->contains("approved") && (*j)["approved"].is_boolean()) c.approved = (*j)["approved"].get<bool>();
  if (j->contains("issues") && (*j)["issues"].is_array())
    for (const auto& i : (*j)["issues"]) c.issues += "- " + (i.is_string() ? i.get<std::string>() : i.dump()) + "\n";
  if (!c.approved && c.issues.empty()) c.issues = "- (the critic gave no details)\n";
  return c;
}

// Columns documented in one prompt at most.
constexpr size_t kKnowledgeColumns = 12;

bool schema_error(const std::string& cls) {
  return cls == "no_such_column" || cls == "no_such_table" || cls == "ambiguous_column";
}

class RecapGenerator : public Generator {
 public:
  struct Prompts {
    llm::PromptTemplate plan, plan_critique, act, sql_critique, refine, validate;
  };
  RecapGenerator(AgenticSpec spec, RecapOptions options, llm::Client* client, const db::Executor* executor,
                 Prompts prompts, std::optional<SyntaxReference> syntax)
      : spec_(std::move(spec)), o_(std::move(options)), client_(client), executor_(executor), p_(std::move(prompts)),
        syntax_(std::move(syntax)) {}

  std::string name() const override { return spec_.label; }

  Result<std::vector<Candidate>> generate(const GenerationInput& in) const override {
    if (in.question == nullptr || in.schema == nullptr)
      return invalid_input("generator " + spec_.label + ": GenerationInput needs a question and a schema");
    const std::string where = "generator " + spec_.label + ", question " + in.question->question_id;
    context::RenderOptions render;
    render.descriptions = spec_.descriptions;
    render.examples = static_cast<size_t>(spec_.examples);
    std::string note;
    std::vector<LlmCallTrace> schema_calls;
    const std::string schema = render_schema_within(
        in, render,
        {schema_budget_for(*client_, spec_.role, o_.max_schema_tokens), client_, o_.embeddings_profile,
         "recap.schema_embed"},
        &note, &schema_calls);
    std::vector<Candidate> out;
    for (int64_t s = 0; s < spec_.samples; ++s) {
      auto c = run_sample(in, s, schema);
      if (!c) return c.status().with_context(where);
      if (!note.empty()) c->reasoning = step_line(0, "schema", note) + c->reasoning;
      // The schema cut is shared by the samples: its embeddings call is traced once.
      if (s == 0) c->calls.insert(c->calls.begin(), schema_calls.begin(), schema_calls.end());
      out.push_back(std::move(*c));
    }
    return out;
  }

 private:
  // The external-knowledge retriever's text for the planner (the question) or for the writer
  // and refiner (the plan).
  std::string knowledge(const GenerationInput& in, const std::string& text, bool question) const {
    if (!o_.knowledge) return "(not retrieved: recap.knowledge is off)";
    std::string k = column_knowledge(*in.schema, text, question ? in.retrieval : nullptr, kKnowledgeColumns);
    if (!k.empty()) return k;
    return question ? "(no documented column matches the question)" : "(no documented column is named in the plan)";
  }
  // The syntax retriever's entries for the functions `text` names.
  std::string syntax(const std::string& text) const {
    if (!syntax_) return "(not retrieved: recap.syntax is off)";
    std::string s = syntax_->render_for(text);
    return s.empty() ? "(no SQLite function the reference covers is named)" : s;
  }
  static std::string titles(const SyntaxReference& ref, const std::string& text) {
    std::string out;
    for (const SyntaxEntry* e : ref.named_in(text)) out += (out.empty() ? "" : ", ") + e->title;
    return out.empty() ? "none" : out;
  }

  // One sample's loop state.
  struct Loop {
    Candidate c;
    std::string log;
    int64_t steps = 0;
    std::string attempts;  // every query the refiner was shown, with what was wrong with it
    std::string schema;    // the schema as the sample's prompts show it
    std::map<std::string, std::string> base;  // the values every prompt of the loop starts from
    // `base` with `extra` on top.
    std::map<std::string, std::string> with(std::map<std::string, std::string> extra) const {
      auto v = base;
      for (auto& [k, x] : extra) v[k] = std::move(x);
      return v;
    }
  };
  // What one step of the execute–validate loop leads to.
  enum class Next { kContinue, kStop, kValidated };

  // The refiner answered with the query it was asked to repair: asking again would only repeat
  // the request, so the loop ends there (ReCAPAgent-SQL's refiner has the memory of its attempts
  // and stops on an unchanged answer).
  static bool unchanged(const AttemptOutcome& next, const AttemptOutcome& cur) {
    return !next.sql.empty() && core::squash_spaces(core::trim(next.sql)) == core::squash_spaces(core::trim(cur.sql));
  }

  // An answer of a successful call that none of the readers could use is a parse failure.
  void count_unread(const llm::ModelAnswer& a, bool read, const GenerationInput& in) const {
    if (a.text && !read) client_->accounting().record_parse_failure(a.trace.stage, in.question->question_id);
  }

  Result<llm::ModelAnswer> call(Loop& l, const GenerationInput& in, const llm::PromptTemplate& t, const std::string& stage,
                           int64_t sample, std::map<std::string, std::string> values, llm::CallTag tag) const {
    llm::ModelCall mc;
    mc.prompt = &t;
    mc.stage = stage;
    mc.role = spec_.role;
    mc.profile = spec_.profile_for(sample);
    mc.temperature = spec_.temperature;
    mc.sample_index = sample;
    mc.question_id = in.question->question_id;
    mc.values = std::move(values);
    mc.tag = std::move(tag);
    auto a = llm::call_model(*client_, mc);
    if (!a) return a.status();
    ++l.steps;
    l.c.calls.push_back(a->trace);
    if (l.c.profile.empty()) l.c.profile = a->trace.profile;
    return a;
  }

  llm::CallTag tag(const GenerationInput& in, llm::CallTask task, int64_t sample, int64_t step) const {
    llm::CallTag s = generation_tag(*in.question, "recap", sample * 64 + step);
    s.task = task;
    return s;
  }

  // The complete tables the SQL touches plus the tables holding the names closest to the
  // unknown one (schema linking after a schema error); the full schema when nothing links.
  std::string linked_schema(const GenerationInput& in, const std::string& sql, const std::string& cls,
                            const std::string& error, const std::string& full) const {
    std::set<std::string> tables;
    std::vector<std::string> table_names, column_owners, column_names;
    for (const auto& t : in.schema->tables) {
      table_names.push_back(t.name);
      if (core::mentions_identifier(sql, t.name)) tables.insert(t.name);
      for (const auto& c : t.columns) {
        column_names.push_back(c.name);
        column_owners.push_back(t.name);
      }
    }
    size_t colon = error.rfind(": ");
    std::string name = colon == std::string::npos ? "" : error.substr(colon + 2);
    name = name.substr(0, name.find('\n'));
    if (name.find('.') != std::string::npos) name = name.substr(name.find('.') + 1);
    if (!name.empty() && cls == "no_such_table") {
      for (const auto& t : feedback::closest_names(name, table_names, 1)) tables.insert(t);
    } else if (!name.empty()) {
      // The closest column name (every table holding it): an ambiguous name links all its owners.
      for (const auto& c : feedback::closest_names(name, column_names, 1))
        for (size_t i = 0; i < column_names.size(); ++i)
          if (lower(column_names[i]) == lower(c)) tables.insert(column_owners[i]);
    }
    if (tables.empty()) return full;
    context::RenderOptions r;
    r.descriptions = spec_.descriptions;
    r.examples = static_cast<size_t>(spec_.examples);
    for (const auto& t : in.schema->tables)
      if (tables.count(t.name))
        for (const auto& c : t.columns) r.columns.insert(t.name + "." + c.name);
    return context::render_schema(in.schema_sources(), r);
  }

  Result<Candidate> run_sample(const GenerationInput& in, int64_t s, const std::string& schema) const {
    const data::Task& q = *in.question;
    Loop l;
    l.c.id = spec_.label + "#" + std::to_string(s);
    l.c.generator = spec_.kind;
    l.c.sample_index = s;
    l.schema = schema;
    l.base = {{"schema", schema}, {"question", q.question}, {"evidence", evidence_text(q)}};
    auto plan = make_plan(l, in, s);
    if (!plan) return plan.status();
    auto cur = act(l, in, s, *plan);
    if (!cur) return cur.status();
    NL2SQL_RETURN_IF_ERROR(critique_sql(l, in, s, *plan, *cur));

    // 5–6. Execute, refine on errors, validate.
    AttemptOutcome last_good;  // the last attempt that executed with rows
    bool validated = false;
    while (l.steps < o_.max_steps) {
      if (cur->sql.empty()) {
        // Nothing to run: ask the refiner to write the query from the plan.
        auto r = refine(l, in, s, *plan, *cur, "no_sql", "No SQL could be extracted from the previous answer.",
                        "Answer with the query in a ```sql fenced block.", schema);
        if (!r) return r.status();
        *cur = std::move(*r);
        continue;
      }
      const ExecutionSummary es = feedback::summarize_execution(cur->result, o_.limits.preview_rows);
      std::string cls = cur->result.status == db::ExecStatus::kRejected ? "other" : feedback::classify_failure(es);
      if (cur->result.status == db::ExecStatus::kRejected) cls = "rejected";
      if (cls.empty()) last_good = *cur;
      auto next = cls.empty() ? validate(l, in, s, *plan, *cur) : refine_failure(l, in, s, *plan, *cur, cls, es);
      if (!next) return next.status();
      if (*next == Next::kValidated) validated = true;
      if (*next != Next::kContinue) break;
    }
    if (!validated)
      l.log += step_line(l.steps, "step limit",
                         std::to_string(o_.max_steps) + " model calls spent; best-effort answer");
    const AttemptOutcome& pick = validated || last_good.sql.empty() ? *cur : last_good;
    l.c.reasoning = l.log;
    if (pick.sql.empty()) {
      l.c.extraction_ok = false;
      l.c.extraction_error = pick.extraction_error.empty() ? "no SQL" : pick.extraction_error;
    } else {
      l.c.sql = pick.sql;
      l.c.original_sql = pick.sql;
    }
    return std::move(l.c);
  }

  // 0–2. External knowledge for the planner; plan, critique, revise.
  Result<Plan> make_plan(Loop& l, const GenerationInput& in, int64_t s) const {
    const data::Task& q = *in.question;
    const std::string question_knowledge = knowledge(in, q.question + "\n" + q.evidence, true);
    auto a = call(l, in, p_.plan, "recap.plan", s,
                  l.with({{"feedback", "(none: first plan)"}, {"knowledge", question_knowledge}}),
                  tag(in, llm::CallTask::kPlan, s, l.steps));
    if (!a) return a.status();
    Plan plan = read_plan(a->text ? *a->text : "");
    count_unread(*a, plan.parsed, in);
    l.log += step_line(l.steps, "plan", a->text ? plan.text : "model call failed: " + a->trace.error);
    for (int64_t rev = 0; rev < o_.plan_revisions + 1 && a->text && l.steps < o_.max_steps - 1; ++rev) {
      auto sc = tag(in, llm::CallTask::kPlanCritique, s, l.steps);
      sc.current_plan = plan.text;
      auto cr = call(l, in, p_.plan_critique, "recap.plan_critique", s, l.with({{"plan", plan.text}}), sc);
      if (!cr) return cr.status();
      Critique verdict = cr->text ? read_critique(*cr->text) : Critique{};
      count_unread(*cr, verdict.parsed, in);
      l.log += step_line(l.steps, "plan critique", verdict.approved ? "approved" : verdict.issues);
      if (verdict.approved || rev == o_.plan_revisions) break;
      auto rp = call(l, in, p_.plan, "recap.plan", s,
                     l.with({{"feedback", "A reviewer found these issues in your previous plan:\n" + plan.text +
                                              "\nIssues:\n" + verdict.issues},
                             {"knowledge", question_knowledge}}),
                     tag(in, llm::CallTask::kPlan, s, l.steps));
      if (!rp) return rp.status();
      if (rp->text) plan = read_plan(*rp->text);
      count_unread(*rp, plan.parsed, in);
      l.log += step_line(l.steps, "plan revision " + std::to_string(rev + 1), plan.text);
    }
    return plan;
  }

  // 3. Action, with what the retrievers find for the plan.
  Result<AttemptOutcome> act(Loop& l, const GenerationInput& in, int64_t s, const Plan& plan) const {
    if (syntax_) l.log += step_line(l.steps, "syntax retriever", titles(*syntax_, plan.text));
    auto a = call(l, in, p_.act, "recap.act", s,
                  l.with({{"plan", plan.text}, {"knowledge", knowledge(in, plan.text, false)},
                          {"syntax", syntax(plan.text)}}),
                  tag(in, llm::CallTask::kGenerate, s, l.steps));
    if (!a) return a.status();
    std::string answer = a->text ? *a->text : "";
    AttemptOutcome cur = run_attempt(answer, in.question->question, executor_, in.db_path, o_.limits);
    count_unread(*a, !cur.sql.empty(), in);
    l.log += step_line(l.steps, "act", cur.sql.empty() ? "no SQL" : cur.sql);
    return cur;
  }

  // 4. SQL critic: a query it does not approve is refined once, before it runs.
  Status critique_sql(Loop& l, const GenerationInput& in, int64_t s, const Plan& plan, AttemptOutcome& cur) const {
    if (!o_.sql_critique || cur.sql.empty() || l.steps >= o_.max_steps) return Status::ok();
    auto sc = tag(in, llm::CallTask::kSqlCritique, s, l.steps);
    sc.current_sql = cur.sql;
    sc.current_result_empty = cur.result.ok() && cur.result.result.rows.empty();
    auto cr = call(l, in, p_.sql_critique, "recap.sql_critique", s, l.with({{"plan", plan.text}, {"sql", cur.sql}}), sc);
    if (!cr) return cr.status();
    Critique verdict = cr->text ? read_critique(*cr->text) : Critique{};
    count_unread(*cr, verdict.parsed, in);
    l.log += step_line(l.steps, "sql critique", verdict.approved ? "approved" : verdict.issues);
    if (!verdict.approved && l.steps < o_.max_steps) {
      auto r = refine(l, in, s, plan, cur, "critique", "A reviewer found these issues:\n" + verdict.issues,
                      "Address every issue the reviewer names; keep what the reviewer did not question.", l.schema);
      if (!r) return r.status();
      if (!r->sql.empty()) cur = std::move(*r);
    }
    return Status::ok();
  }

  // 5. A query that failed (error class `cls`): refined with the targeted hint, on the linked
  // schema after a schema error; an unchanged answer stops the loop.
  Result<Next> refine_failure(Loop& l, const GenerationInput& in, int64_t s, const Plan& plan, AttemptOutcome& cur,
                              const std::string& cls, const ExecutionSummary& es) const {
    std::string hint = feedback::failure_hint(cls, es, cur.sql, {in.schema, in.index, 3});
    std::string refine_schema = l.schema;
    if (schema_error(cls)) {
      refine_schema = linked_schema(in, cur.sql, cls, cur.result.error, l.schema);
      l.log += step_line(l.steps, "schema linking", "after " + cls);
    }
    l.log += step_line(l.steps, "execution", cls + (cur.result.ok() ? "" : ": " + cur.result.error));
    auto r = refine(l, in, s, plan, cur, cls, cur.result.ok() ? render_summary(cur.summary) : cur.summary.error,
                    hint, refine_schema);
    if (!r) return r.status();
    if (unchanged(*r, cur)) {
      l.log += step_line(l.steps, "stop", "the refiner returned the same query");
      return Next::kStop;
    }
    cur = std::move(*r);
    return Next::kContinue;
  }

  // 6. A query that ran: the validator's verdict; a rejected result is refined with what the
  // validator said.
  Result<Next> validate(Loop& l, const GenerationInput& in, int64_t s, const Plan& plan, AttemptOutcome& cur) const {
    const data::Task& q = *in.question;
    auto sc = tag(in, llm::CallTask::kValidate, s, l.steps);
    sc.current_sql = cur.sql;
    sc.current_result_empty = cur.result.result.rows.empty();
    auto va = call(l, in, p_.validate, "recap.validate", s,
                   {{"question", q.question},
                    {"evidence", evidence_text(q)},
                    {"expected_columns", plan.expected_columns},
                    {"sql", cur.sql},
                    {"result", render_summary(cur.summary)}},
                   sc);
    if (!va) return va.status();
    Validation v = va->text ? parse_validation(*va->text) : Validation{};
    count_unread(*va, v.parsed, in);
    l.log += step_line(l.steps, "validate", v.valid_result ? "valid" : "invalid: " + v.suggest_fix);
    if (v.valid_result) return Next::kValidated;
    if (l.steps >= o_.max_steps) return Next::kStop;
    std::string feedback = "The validator rejected the result.\n";
    if (!v.columns_not_needed.empty()) {
      feedback += "Columns not needed:";
      for (const auto& col : v.columns_not_needed) feedback += " " + col;
      feedback += "\n";
    }
    if (v.result_empty) feedback += "The result is empty.\n";
    feedback += "Result summary:\n" + render_summary(cur.summary);
    auto r = refine(l, in, s, plan, cur, "validation", feedback,
                    v.suggest_fix.empty() ? "(the validator gave no suggestion)" : v.suggest_fix, l.schema);
    if (!r) return r.status();
    if (unchanged(*r, cur)) {
      l.log += step_line(l.steps, "stop", "the refiner returned the same query");
      return Next::kStop;
    }
    if (!r->sql.empty()) cur = std::move(*r);
    return Next::kContinue;
  }

  // One refiner call: the failing SQL, its error class, the feedback and the targeted hint.
  Result<AttemptOutcome> refine(Loop& l, const GenerationInput& in, int64_t s, const Plan& plan,
                                const AttemptOutcome& cur, const std::string& cls, const std::string& feedback,
                                const std::string& hint, const std::string& schema) const {
    auto sc = tag(in, cur.sql.empty() ? llm::CallTask::kGenerate : llm::CallTask::kFix, s, l.steps);
    sc.failing_sql = cur.sql;
    sc.failure = cls;
    auto a = call(l, in, p_.refine, "recap.refine", s,
                  {{"schema", schema},
                   {"question", in.question->question},
                   {"evidence", evidence_text(*in.question)},
                   {"plan", plan.text},
                   {"knowledge", knowledge(in, plan.text, false)},
                   {"syntax", syntax(plan.text + "\n" + cur.sql)},
                   {"sql", cur.sql.empty() ? "(none)" : cur.sql},
                   {"error_class", cls},
                   {"feedback", feedback},
                   {"hint", hint},
                   {"attempts", l.attempts.empty() ? "(none before this one)" : l.attempts}},
                  sc);
    if (!a) return a.status();
    l.attempts += "- " + (cur.sql.empty() ? std::string("(no SQL)") : cur.sql) + "\n  problem: " + cls + "\n";
    AttemptOutcome next = run_attempt(a->text ? *a->text : "", in.question->question, executor_, in.db_path, o_.limits);
    count_unread(*a, !next.sql.empty(), in);
    l.log += step_line(l.steps, "refine (" + cls + ")", next.sql.empty() ? "no SQL" : next.sql);
    return next;
  }

  AgenticSpec spec_;
  RecapOptions o_;
  llm::Client* client_;
  const db::Executor* executor_;
  Prompts p_;
  std::optional<SyntaxReference> syntax_;  // loaded when recap.syntax is on
};

}  // namespace

Validation parse_validation(const std::string& answer) {
  Validation v;
  auto j = parse_json_answer(answer);
  if (!j) return v;
  v.parsed = true;
  if (j->contains("valid_result") && (*j)["valid_result"].is_boolean()) v.valid_result = (*j)["valid_result"].get<bool>();
  if (j->contains("result_empty") && (*j)["result_empty"].is_boolean()) v.result_empty = (*j)["result_empty"].get<bool>();
  if (j->contains("suggest_fix") && (*j)["suggest_fix"].is_string()) v.suggest_fix = (*j)["suggest_fix"].get<std::string>();
  if (j->contains("columns_not_needed") && (*j)["columns_not_needed"].is_array())
    for (const auto& c : (*j)["columns_not_needed"])
      if (c.is_string()) v.columns_not_needed.push_back(c.get<std::string>());
  return v;
}

Result<RecapOptions> load_recap_options(const core::Config& config) {
  RecapOptions o;
  auto need = [](bool ok, const std::string& key, const std::string& what) -> Status {
    return ok ? Status::ok() : invalid_input("config key \"" + key + "\" " + what);
  };
  auto ms = config.get_int("recap.max_steps");
  if (!ms) return ms.status();
  auto pr = config.get_int("recap.plan_revisions");
  if (!pr) return pr.status();
  auto sc = config.get_bool("recap.sql_critique");
  if (!sc) return sc.status();
  auto st = config.get_int("recap.max_schema_tokens");
  if (!st) return st.status();
  auto ep = config.get_string("recap.embeddings_profile");
  if (!ep) return ep.status();
  auto to = config.get_number("recap.timeout_s");
  if (!to) return to.status();
  auto rc = config.get_int("recap.row_cap");
  if (!rc) return rc.status();
  auto pv = config.get_int("recap.preview_rows");
  if (!pv) return pv.status();
  auto kn = config.get_bool("recap.knowledge");
  if (!kn) return kn.status();
  auto sy = config.get_bool("recap.syntax");
  if (!sy) return sy.status();
  NL2SQL_RETURN_IF_ERROR(need(*ms >= 3, "recap.max_steps", "must be >= 3 (plan, act, validate)"));
  NL2SQL_RETURN_IF_ERROR(need(*pr >= 0 && *pr <= 3, "recap.plan_revisions", "must be in [0, 3]"));
  NL2SQL_RETURN_IF_ERROR(need(*to > 0, "recap.timeout_s", "must be > 0"));
  NL2SQL_RETURN_IF_ERROR(need(*rc >= 1, "recap.row_cap", "must be >= 1"));
  NL2SQL_RETURN_IF_ERROR(need(*pv >= 0, "recap.preview_rows", "must be >= 0"));
  o.max_steps = *ms;
  o.plan_revisions = *pr;
  o.sql_critique = *sc;
  o.max_schema_tokens = *st;
  o.embeddings_profile = *ep;
  o.knowledge = *kn;
  o.syntax = *sy;
  o.limits.timeout_s = *to;
  o.limits.row_cap = static_cast<size_t>(*rc);
  o.limits.preview_rows = static_cast<size_t>(*pv);
  return o;
}

Result<std::unique_ptr<Generator>> make_recap_generator(AgenticSpec spec, RecapOptions options, llm::Client* client,
                                                        const db::Executor* executor,
                                                        const llm::PromptLibrary& prompts) {
  if (client == nullptr) return invalid_input("generator " + spec.label + ": no LLM client");
  std::vector<llm::PromptTemplate> t;
  for (const char* name : {"recap_plan", "recap_plan_critique", "recap_act", "recap_sql_critique", "recap_refine",
                           "recap_validate"}) {
    auto p = prompts.load(name);
    if (!p) return p.status().with_context("generate: prompt " + std::string(name));
    t.push_back(std::move(*p));
  }
  RecapGenerator::Prompts loaded{std::move(t[0]), std::move(t[1]), std::move(t[2]),
                                 std::move(t[3]), std::move(t[4]), std::move(t[5])};
  std::optional<SyntaxReference> syntax;
  if (options.syntax) {
    auto path = prompts.resource("sqlite_syntax.md");
    if (!path) return path.status().with_context("generator " + spec.label + " (recap.syntax)");
    auto ref = SyntaxReference::load(*path);
    if (!ref) return ref.status().with_context("generator " + spec.label + " (recap.syntax)");
    syntax = std::move(*ref);
  }
  return std::unique_ptr<Generator>(std::make_unique<RecapGenerator>(std::move(spec), std::move(options), client,
                                                                     executor, std::move(loaded), std::move(syntax)));
}

}  // namespace nl2sql::generate
