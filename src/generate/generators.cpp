// The generators (baseline, dc, qp, os, ssev) and make_generators (see generator.h).
#include "nl2sql/generate/generator.h"

#include <algorithm>
#include <map>

#include <spdlog/spdlog.h>

#include "nl2sql/context/schema_render.h"
#include "nl2sql/core/hash.h"
#include "nl2sql/core/thread_pool.h"
#include "agent.h"
#include "agent_steps.h"
#include "nl2sql/generate/call_tags.h"
#include "nl2sql/llm/model_call.h"
#include "demo_pool.h"
#include "command_generator.h"
#include "file_generator.h"
#include "prompt_text.h"
#include "qp_demos.h"
#include "recap.h"
#include "schema_linking.h"
#include "nl2sql/llm/answer.h"
#include "nl2sql/llm/client.h"
#include "nl2sql/llm/prompt_template.h"
#include "nl2sql/sql/analysis.h"

namespace nl2sql::generate {
namespace {

using nlohmann::json;

// Options shared by every generator, read from one element of generate.generators.
struct CommonOptions {
  std::string kind;       // baseline | dc | qp | os | ssev
  std::string label;      // candidate id prefix; default: kind
  int64_t samples = 1;
  std::optional<double> temperature;
  bool shuffle = false;
  std::string role = "generate";
  std::vector<std::string> profiles;  // cycled over samples (ssev: the experts)
  bool descriptions = true;
  int64_t examples = 3;
};

// The name the sim provider's p_correct_by table knows the generator by.
std::string sim_name(const std::string& kind) {
  if (kind == "dc") return "divide_conquer";
  if (kind == "qp") return "query_plan";
  if (kind == "os") return "online_synthetic";
  return kind;
}

uint64_t derive_seed(uint64_t seed, const std::string& label, const std::string& what, int64_t index) {
  core::KeyHasher h;
  h.add("nl2sql.generate.v1").add(static_cast<int64_t>(seed)).add(label).add(what).add(index);
  return h.seed();
}

Status check_input(const GenerationInput& in, const std::string& who) {
  if (in.question == nullptr || in.schema == nullptr)
    return invalid_input(who + ": GenerationInput needs a question and a schema");
  return Status::ok();
}

// A candidate from one answer: extraction recorded, failures kept (an answer without SQL is
// counted as a parse failure of the call's stage).
Candidate make_candidate(llm::Client& client, const std::string& question_id, const std::string& label,
                         const std::string& generator, int64_t sample, const llm::ModelAnswer& answer) {
  Candidate c;
  c.id = label + "#" + std::to_string(sample);
  c.generator = generator;
  c.profile = answer.trace.profile;
  c.sample_index = sample;
  c.calls.push_back(answer.trace);
  if (!answer.text) {
    c.extraction_ok = false;
    c.extraction_error = "model call failed: " + answer.trace.error;
    return c;
  }
  c.raw_response = *answer.text;
  auto ex = llm::extract_sql(*answer.text);
  if (!ex) {
    client.accounting().record_parse_failure(answer.trace.stage, question_id);
    c.reasoning = llm::sql_reasoning(*answer.text);
    c.extraction_ok = false;
    c.extraction_error = ex.status().message();
    return c;
  }
  c.reasoning = ex->reasoning;
  c.extraction_ok = true;
  c.sql_trailing = ex->trailing;
  c.sql = ex->sql;
  c.original_sql = ex->sql;
  return c;
}

class GeneratorBase : public Generator {
 public:
  GeneratorBase(CommonOptions o, llm::Client* client) : o_(std::move(o)), client_(client) {}
  std::string name() const override { return o_.label; }

 protected:
  std::string profile_for(int64_t sample) const {
    if (o_.profiles.empty()) return "";
    return o_.profiles[static_cast<size_t>(sample) % o_.profiles.size()];
  }
  context::RenderOptions render_options(const GenerationInput& in, int64_t sample) const {
    context::RenderOptions r;
    r.descriptions = o_.descriptions;
    r.examples = static_cast<size_t>(o_.examples);
    // Sample 0 keeps the schema's own order, so one sample equals the unshuffled prompt. The
    // order depends on the database and the sample, not the question (GenerationInput::schema_seed).
    if (o_.shuffle && sample > 0) r.shuffle_seed = derive_seed(in.schema_seed, o_.label, "shuffle", sample);
    return r;
  }
  std::string schema_text(const GenerationInput& in, const context::RenderOptions& r) const {
    return context::render_schema(in.schema_sources(), r);
  }
  // The schema by rung of the prompt-budget ladder (llm::ModelCall::schema_at): lighter renderings,
  // then the columns that best match the question within the token budget.
  std::function<std::string(int, int64_t)> schema_ladder(const GenerationInput& in,
                                                         const context::RenderOptions& r) const {
    return [this, &in, r](int rung, int64_t schema_tokens) {
      context::RenderOptions o = context::options_at_rung(r, rung, in.selected_columns);
      if (rung < context::kSchemaLadderRungs) return schema_text(in, o);
      SchemaBudget budget;
      budget.max_tokens = schema_tokens;
      return render_schema_within(in, o, budget, nullptr, nullptr);
    };
  }
  llm::ModelCall base_call(const GenerationInput& in, const llm::PromptTemplate& t, const std::string& stage,
                      int64_t sample) const {
    llm::ModelCall call;
    call.prompt = &t;
    call.stage = stage;
    call.role = o_.role;
    call.profile = profile_for(sample);
    call.temperature = o_.temperature;
    call.sample_index = sample;
    call.question_id = in.question->question_id;
    call.tag = generation_tag(*in.question, sim_name(o_.kind), sample);
    return call;
  }

  // Calls that do not depend on each other (a generator's samples) go out together, each
  // waiting for its own model slot, so a question's generation takes one model round trip per
  // dependent step instead of one per sample. The answers come back in call order.
  std::vector<Result<llm::ModelAnswer>> call_all(const std::vector<llm::ModelCall>& calls) const {
    return core::parallel_map<Result<llm::ModelAnswer>>(
        calls.size(), calls.size(), [&](size_t i) { return llm::call_model(*client_, calls[i]); });
  }

  CommonOptions o_;
  llm::Client* client_;
};

// baseline and dc: one call per sample with question, evidence and schema (dc's worked
// demonstrations live in its prompt file; its per-question demonstrations come from the pool).
class SingleCallGenerator : public GeneratorBase {
 public:
  SingleCallGenerator(CommonOptions o, llm::Client* client, llm::PromptTemplate t)
      : GeneratorBase(std::move(o), client), template_(std::move(t)) {}

  Result<std::vector<Candidate>> generate(const GenerationInput& in) const override {
    NL2SQL_RETURN_IF_ERROR(check_input(in, "generator " + o_.label));
    std::vector<Candidate> out;
    std::string note;
    // Shared by the samples: the same question gets the same demonstrations.
    const std::map<std::string, std::string> extra = question_values(in, note);
    std::vector<llm::ModelCall> calls;
    for (int64_t s = 0; s < o_.samples; ++s) {
      llm::ModelCall call = base_call(in, template_, "generate", s);
      call.schema_at = schema_ladder(in, render_options(in, s));
      call.values = {{"question", in.question->question},
                     {"evidence", evidence_text(*in.question)}};
      for (const auto& [k, v] : extra) call.values[k] = v;
      calls.push_back(std::move(call));
    }
    auto answers = call_all(calls);
    for (int64_t s = 0; s < o_.samples; ++s) {
      auto& a = answers[static_cast<size_t>(s)];
      if (!a) return a.status().with_context("generator " + o_.label + ", question " + in.question->question_id);
      out.push_back(make_candidate(*client_, in.question->question_id, o_.label, o_.kind, s, *a));
      if (!note.empty()) out.back().reasoning = "[" + note + "]\n" + out.back().reasoning;
    }
    return out;
  }

 protected:
  // Prompt values of this question beyond question/evidence/schema; `note` goes in front of
  // every candidate's reasoning.
  virtual std::map<std::string, std::string> question_values(const GenerationInput&, std::string&) const {
    return {};
  }
  llm::PromptTemplate template_;
};

// Where a dc or qp generator's demonstrations come from.
struct DemoChoice {
  std::shared_ptr<const DemoPool> pool;  // per question by similarity; null: fixed text
  std::string fixed;                     // qp: the demonstrations used for every question
  std::string fixed_note;                // why there is no pool (empty when none was wanted)
};

// dc: the prompt's worked demonstrations plus the pool's most similar (question, SQL) pairs.
class DivideConquerGenerator : public SingleCallGenerator {
 public:
  DivideConquerGenerator(CommonOptions o, llm::Client* client, llm::PromptTemplate t, DemoChoice demos)
      : SingleCallGenerator(std::move(o), client, std::move(t)), demos_(std::move(demos)) {}

 protected:
  std::map<std::string, std::string> question_values(const GenerationInput& in, std::string& note) const override {
    if (!demos_.pool) {
      note = demos_.fixed_note;
      return {{"similar", ""}};
    }
    auto chosen = demos_.pool->choose(*in.question, *in.schema);
    note = demo_note(*demos_.pool, chosen);
    return {{"similar", format_similar_demos(*demos_.pool, chosen)}};
  }
  DemoChoice demos_;
};

// qp: the same shape with query-plan demonstrations — the pool's most similar pairs that plan,
// or the fixed ones.
class QueryPlanGenerator : public SingleCallGenerator {
 public:
  QueryPlanGenerator(CommonOptions o, llm::Client* client, llm::PromptTemplate t, DemoChoice demos,
                     const db::Executor* executor)
      : SingleCallGenerator(std::move(o), client, std::move(t)), demos_(std::move(demos)), executor_(executor) {}

 protected:
  std::map<std::string, std::string> question_values(const GenerationInput& in, std::string& note) const override {
    if (!demos_.pool) {
      note = demos_.fixed_note;
      return {{"demos", demos_.fixed}};
    }
    std::vector<ScoredDemo> chosen;
    auto planned = demos_.pool->qp_demos(*in.question, *in.schema, *executor_, &chosen);
    if (planned.empty()) {
      note = "demos: hand-written (no pair of the pool could be planned for this question)";
      return {{"demos", demos_.fixed}};
    }
    note = demo_note(*demos_.pool, chosen);
    return {{"demos", format_qp_demos(planned)}};
  }
  DemoChoice demos_;
  const db::Executor* executor_;
};

using llm::SyntheticExample;

// os: two example-writing steps (general features over the full schema; the filtered columns),
// then generation with the mixed examples as demonstrations. The example prompts depend on the
// database (and the filtered columns), not on the question: a per-run memo sends each distinct
// one once and shares the answer with the other questions of that database (their traces say
// shared_from; accounting counts the one call). Thread-safe: questions run concurrently.
class OnlineSyntheticGenerator : public GeneratorBase {
 public:
  OnlineSyntheticGenerator(CommonOptions o, llm::Client* client, const db::Executor* executor,
                           llm::PromptTemplate general, llm::PromptTemplate filtered, llm::PromptTemplate final_t,
                           int64_t general_count, int64_t filtered_count, bool validate)
      : GeneratorBase(std::move(o), client), executor_(executor), general_(std::move(general)),
        filtered_(std::move(filtered)), final_(std::move(final_t)), general_count_(general_count),
        filtered_count_(filtered_count), validate_(validate) {}

  Result<std::vector<Candidate>> generate(const GenerationInput& in) const override {
    NL2SQL_RETURN_IF_ERROR(check_input(in, "generator " + o_.label));
    const std::string where = "generator " + o_.label + ", question " + in.question->question_id;
    auto written = write_examples(in);
    if (!written) return written.status().with_context(where);
    const Examples& ex = *written;
    std::vector<Candidate> out;
    std::vector<llm::ModelCall> calls;
    for (int64_t s = 0; s < o_.samples; ++s) {
      llm::ModelCall call = base_call(in, final_, "generate", s);
      call.schema_at = schema_ladder(in, render_options(in, s));
      call.values = {{"question", in.question->question},
                     {"evidence", evidence_text(*in.question)},
                     {"examples", demonstrations(ex, s)}};
      calls.push_back(std::move(call));
    }
    auto answers = call_all(calls);
    for (int64_t s = 0; s < o_.samples; ++s) {
      auto& a = answers[static_cast<size_t>(s)];
      if (!a) return a.status().with_context(where);
      Candidate c = make_candidate(*client_, in.question->question_id, o_.label, o_.kind, s, *a);
      // How many demonstrations the candidate was written with: a run whose example calls
      // failed or were unreadable says so in every candidate's notes.
      c.reasoning = "[os examples: " + std::to_string(ex.per_step[0].size()) + " general + " +
                    std::to_string(ex.per_step[1].size()) + " filtered used; " + std::to_string(ex.read[0]) + " + " +
                    std::to_string(ex.read[1]) + " read from the answers, " + std::to_string(general_count_) + " + " +
                    std::to_string(filtered_count_) + " asked]\n" + c.reasoning;
      // The example-writing calls are shared by all samples; the first candidate carries them so
      // token and cost totals over candidates count them once.
      if (s == 0) c.calls.insert(c.calls.begin(), ex.step_calls.begin(), ex.step_calls.end());
      out.push_back(std::move(c));
    }
    return out;
  }

 private:
  // The examples of the two steps (general: over the full schema; filtered: over the selected
  // columns), those kept and how many each answer held, and the steps' calls.
  struct Examples {
    std::vector<SyntheticExample> per_step[2];
    int64_t read[2] = {0, 0};
    std::vector<LlmCallTrace> step_calls;
  };

  Result<Examples> write_examples(const GenerationInput& in) const {
    Examples ex;
    context::RenderOptions full = render_options(in, 0);
    context::RenderOptions narrow = full;
    narrow.columns = in.selected_columns;  // empty: the full schema
    struct Step {
      const llm::PromptTemplate* t;
      const context::RenderOptions* r;
      int64_t count;
      const char* stage;
    };
    const Step steps[2] = {{&general_, &full, general_count_, "os_examples_general"},
                           {&filtered_, &narrow, filtered_count_, "os_examples_filtered"}};
    // The two example-writing steps do not depend on each other: asked together.
    std::vector<llm::ModelCall> step_asks;
    std::vector<int> step_of;
    for (int k = 0; k < 2; ++k) {
      if (steps[k].count <= 0) continue;
      llm::ModelCall call = base_call(in, *steps[k].t, steps[k].stage, 0);
      call.profile = profile_for(0);
      call.tag.generator = std::string("os_examples_") + (k == 0 ? "general" : "filtered");
      call.schema_at = schema_ladder(in, *steps[k].r);
      call.values = {{"count", std::to_string(steps[k].count)}};
      call.memo = &examples_memo_;
      step_asks.push_back(std::move(call));
      step_of.push_back(k);
    }
    auto step_answers = call_all(step_asks);
    for (size_t j = 0; j < step_answers.size(); ++j) {
      const int k = step_of[j];
      auto& a = step_answers[j];
      if (!a) return a.status();
      ex.step_calls.push_back(a->trace);
      if (!a->text) continue;
      auto parsed = llm::read_examples(*a->text);
      if (!parsed) {
        client_->accounting().record_parse_failure(a->trace.stage, in.question->question_id);
        continue;
      }
      ex.read[k] = static_cast<int64_t>(parsed->size());
      for (auto& e : *parsed) {
        if (static_cast<int64_t>(ex.per_step[k].size()) >= steps[k].count) break;
        if (!example_runs(in, e)) continue;
        ex.per_step[k].push_back(std::move(e));
      }
    }
    return ex;
  }

  // Examples that do not run would teach wrong SQL: check them read-only. An example passes
  // when it runs without error in at most kExampleSeconds to at most kExampleRows rows. Through
  // the question's shared executions when the caller gives them (an example is often one of the
  // candidates to come: it then runs once), read from the whole result; else run here under
  // those limits. Unchecked (passes) when validation is off or there is nothing to run it on.
  bool example_runs(const GenerationInput& in, const SyntheticExample& e) const {
    if (!validate_ || in.db_path.empty() || (!in.execute && !executor_)) return true;
    constexpr double kExampleSeconds = 5.0;
    constexpr size_t kExampleRows = 1000;
    if (in.execute) {
      auto r = in.execute(e.sql);
      return r && r->ok() && r->row_count() <= kExampleRows && r->statement_ms <= kExampleSeconds * 1000;
    }
    db::QueryLimits lim = executor_->options().limits;
    lim.timeout_s = std::min(lim.timeout_s > 0 ? lim.timeout_s : kExampleSeconds, kExampleSeconds);
    lim.row_cap = kExampleRows;
    return executor_->run(in.db_path, e.sql, lim).ok();
  }

  // The demonstrations of sample `s`: general and filtered examples alternated, rotated per
  // sample for diversity.
  static std::string demonstrations(const Examples& ex, int64_t s) {
    std::vector<SyntheticExample> mixed;
    for (size_t i = 0; i < std::max(ex.per_step[0].size(), ex.per_step[1].size()); ++i)
      for (int k = 0; k < 2; ++k)
        if (i < ex.per_step[k].size()) mixed.push_back(ex.per_step[k][i]);
    if (!mixed.empty() && s > 0)
      std::rotate(mixed.begin(), mixed.begin() + static_cast<long>(static_cast<size_t>(s) % mixed.size()),
                  mixed.end());
    std::string demos;
    for (size_t i = 0; i < mixed.size(); ++i)
      demos += "Example " + std::to_string(i + 1) + "\nQuestion: " + mixed[i].question + "\nSQL: " +
               mixed[i].sql + "\n\n";
    if (demos.empty()) demos = "(no examples could be made for this database)\n";
    return demos;
  }

  const db::Executor* executor_;
  llm::PromptTemplate general_, filtered_, final_;
  int64_t general_count_, filtered_count_;
  bool validate_;
  mutable llm::CallMemo examples_memo_;  // lives as long as the generator: one run
};

// ssev: every expert (profile) writes PreSQL over the full schema; the union of what the PreSQL
// references becomes a pruned schema; the same experts write PostSQL over it.
class SsevGenerator : public GeneratorBase {
 public:
  SsevGenerator(CommonOptions o, llm::Client* client, llm::PromptTemplate t, bool keep_presql)
      : GeneratorBase(std::move(o), client), template_(std::move(t)), keep_presql_(keep_presql) {}

  Result<std::vector<Candidate>> generate(const GenerationInput& in) const override {
    NL2SQL_RETURN_IF_ERROR(check_input(in, "generator " + o_.label));
    const std::string where = "generator " + o_.label + ", question " + in.question->question_id;
    std::vector<std::string> experts = o_.profiles.empty() ? std::vector<std::string>{""} : o_.profiles;
    const int64_t per_expert = o_.samples;
    std::vector<Candidate> pre, post;
    auto run_round = [&](const std::string& kind, const std::string& schema, std::vector<Candidate>& into) -> Status {
      std::vector<llm::ModelCall> calls;
      for (size_t e = 0; e < experts.size(); ++e)
        for (int64_t s = 0; s < per_expert; ++s) {
          const int64_t index = static_cast<int64_t>(e) * per_expert + s;
          llm::ModelCall call = base_call(in, template_, kind, index);
          call.profile = experts[e];
          call.tag.generator = kind;
          call.values = {{"schema", schema},
                         {"question", in.question->question},
                         {"evidence", evidence_text(*in.question)}};
          calls.push_back(std::move(call));
        }
      auto answers = call_all(calls);  // the experts' samples of one round: independent
      for (size_t i = 0; i < answers.size(); ++i) {
        if (!answers[i]) return answers[i].status().with_context(where);
        into.push_back(make_candidate(*client_, in.question->question_id, o_.label + "." + kind, kind,
                                      calls[i].sample_index, *answers[i]));
      }
      return Status::ok();
    };
    context::RenderOptions full = render_options(in, 0);
    const std::string full_schema = schema_text(in, full);
    NL2SQL_RETURN_IF_ERROR(run_round("presql", full_schema, pre));

    std::vector<std::string> queries;
    for (const auto& c : pre)
      if (c.extraction_ok && !c.sql.empty()) queries.push_back(c.sql);
    context::RenderOptions pruned = full;
    std::string link_note;
    auto schema = in.db_path.empty() ? Result<sql::Schema>(not_found("no database path"))
                                     : db::inspect_schema(in.db_path);
    if (schema) {
      auto link = link_schema(queries, *schema);
      pruned.columns = link.columns;
      link_note = "linked schema: " + std::to_string(link.tables.size()) + " table(s), " +
                  std::to_string(link.columns.size()) + " column(s) from " + std::to_string(queries.size()) +
                  " PreSQL";
    } else {
      link_note = "schema linking skipped (" + schema.status().message() + "); PostSQL sees the full schema";
    }
    if (pruned.columns.empty() && schema) link_note += "; nothing linked, PostSQL sees the full schema";
    const std::string pruned_schema = pruned.columns.empty() ? full_schema : schema_text(in, pruned);
    if (pruned_schema == full_schema) {
      // The PostSQL prompts would be byte-identical to the PreSQL ones: each expert's PreSQL
      // answer is its PostSQL answer too, and no request is repeated.
      link_note += "; the pruned schema is the full schema, so PostSQL shares PreSQL's answers";
      post = shared_postsql(pre);
    } else {
      NL2SQL_RETURN_IF_ERROR(run_round("postsql", pruned_schema, post));
    }
    for (auto& c : post) c.reasoning = "[" + link_note + "]\n" + c.reasoning;
    std::vector<Candidate> out;
    if (keep_presql_) out = std::move(pre);
    for (auto& c : post) out.push_back(std::move(c));
    return out;
  }

 private:
  // PostSQL candidates that take PreSQL's answers: same SQL, profile and sample, no calls of
  // their own (they sent nothing), generation_shared_with naming the PreSQL candidate.
  std::vector<Candidate> shared_postsql(const std::vector<Candidate>& pre) const {
    std::vector<Candidate> post;
    for (const auto& p : pre) {
      Candidate c = p;
      c.id = o_.label + ".postsql#" + std::to_string(p.sample_index);
      c.generator = "postsql";
      c.calls.clear();
      c.generation_shared_with = p.id;
      post.push_back(std::move(c));
    }
    return post;
  }

  llm::PromptTemplate template_;
  bool keep_presql_;
};

// ---- configuration ----

class ItemReader {
 public:
  ItemReader(const json& item, std::string key) : item_(item), key_(std::move(key)) {}
  const std::string& key() const { return key_; }
  template <typename T>
  Status get(const char* name, T& out, const char* type) const {
    auto it = item_.find(name);
    if (it == item_.end() || it->is_null()) return Status::ok();
    bool ok = false;
    if constexpr (std::is_same_v<T, bool>) ok = it->is_boolean();
    else if constexpr (std::is_same_v<T, std::string>) ok = it->is_string();
    else if constexpr (std::is_integral_v<T>) ok = it->is_number_integer();
    else ok = it->is_number();
    if (!ok) return invalid_input("config key \"" + key_ + "." + name + "\" must be " + type);
    out = it->get<T>();
    return Status::ok();
  }
  const json* find(const char* name) const {
    auto it = item_.find(name);
    return it == item_.end() ? nullptr : &*it;
  }

 private:
  const json& item_;
  std::string key_;
};

const std::set<std::string> kItemKeys = {"name", "label", "samples", "temperature", "shuffle", "role", "profiles",
                                         "descriptions", "examples", "demos", "general_examples",
                                         "filtered_examples", "validate_examples", "keep_presql", "template", "path",
                                         "argv", "timeout_s", "workers"};

Result<CommonOptions> read_common(const ItemReader& r, const json& item) {
  for (const auto& [k, v] : item.items())
    if (!kItemKeys.count(k)) return invalid_input("config key \"" + r.key() + "." + k + "\" is not known");
  CommonOptions o;
  NL2SQL_RETURN_IF_ERROR(r.get("name", o.kind, "a string"));
  static const std::set<std::string> kKinds = {"baseline", "dc", "qp", "os", "ssev", "agent", "recap", "file", "command"};
  if (!kKinds.count(o.kind))
    return invalid_input("config key \"" + r.key() + ".name\" must be one of baseline, dc, qp, os, ssev, agent, recap, file, command (got \"" +
                         o.kind + "\")");
  if (r.find("path") && o.kind != "file")
    return invalid_input("config key \"" + r.key() + ".path\": only a generator of name \"file\" reads a file");
  for (const char* k : {"argv", "timeout_s", "workers"})
    if (r.find(k) && o.kind != "command")
      return invalid_input("config key \"" + r.key() + "." + k + "\": only a generator of name \"command\" runs a program");
  o.label = o.kind;
  NL2SQL_RETURN_IF_ERROR(r.get("label", o.label, "a string"));
  NL2SQL_RETURN_IF_ERROR(r.get("samples", o.samples, "an integer"));
  if (o.samples < 1) return invalid_input("config key \"" + r.key() + ".samples\" must be >= 1");
  double t = -1;
  NL2SQL_RETURN_IF_ERROR(r.get("temperature", t, "a number"));
  if (r.find("temperature") && !r.find("temperature")->is_null()) {
    if (t < 0 || t > 2) return invalid_input("config key \"" + r.key() + ".temperature\" must be in [0, 2]");
    o.temperature = t;
  }
  NL2SQL_RETURN_IF_ERROR(r.get("shuffle", o.shuffle, "a boolean"));
  NL2SQL_RETURN_IF_ERROR(r.get("role", o.role, "a string"));
  NL2SQL_RETURN_IF_ERROR(r.get("descriptions", o.descriptions, "a boolean"));
  NL2SQL_RETURN_IF_ERROR(r.get("examples", o.examples, "an integer"));
  if (o.examples < 0) return invalid_input("config key \"" + r.key() + ".examples\" must be >= 0");
  if (const json* p = r.find("profiles")) {
    if (!p->is_array()) return invalid_input("config key \"" + r.key() + ".profiles\" must be an array of strings");
    for (const auto& v : *p) {
      if (!v.is_string()) return invalid_input("config key \"" + r.key() + ".profiles\" must be an array of strings");
      o.profiles.push_back(v.get<std::string>());
    }
  }
  return o;
}

// generate.generators[i].demos of a dc or qp generator.
struct DemoConfig {
  bool enabled = true;
  bool similar = true;  // choose = "similar"; false: "fixed"
  QpDemoSource source;  // empty: the run's train split
  DemoPoolOptions pool;
};

Result<DemoConfig> read_demo_config(const ItemReader& r) {
  DemoConfig out;
  const json* d = r.find("demos");
  if (!d || d->is_null()) return out;
  const std::string key = r.key() + ".demos";
  if (!d->is_object()) return invalid_input("config key \"" + key + "\" must be an object");
  ItemReader dr(*d, key);
  static const std::set<std::string> kKeys = {"enabled", "choose", "benchmark", "data", "split",
                                              "questions", "db_root", "jsonl", "count", "scan_limit",
                                              "schema_weight", "exclude_same_db"};
  for (const auto& [k, v] : d->items())
    if (!kKeys.count(k)) return invalid_input("config key \"" + key + "." + k + "\" is not known");
  std::string jsonl, benchmark, data_dir, split = "train", questions, db_root, choose = "similar";
  int64_t count = 3, scan = 10000;
  double weight = 0.3;
  NL2SQL_RETURN_IF_ERROR(dr.get("enabled", out.enabled, "a boolean"));
  NL2SQL_RETURN_IF_ERROR(dr.get("choose", choose, "a string"));
  NL2SQL_RETURN_IF_ERROR(dr.get("jsonl", jsonl, "a string"));
  NL2SQL_RETURN_IF_ERROR(dr.get("benchmark", benchmark, "a string"));
  NL2SQL_RETURN_IF_ERROR(dr.get("data", data_dir, "a string"));
  NL2SQL_RETURN_IF_ERROR(dr.get("split", split, "a string"));
  NL2SQL_RETURN_IF_ERROR(dr.get("questions", questions, "a string"));
  NL2SQL_RETURN_IF_ERROR(dr.get("db_root", db_root, "a string"));
  NL2SQL_RETURN_IF_ERROR(dr.get("count", count, "an integer"));
  NL2SQL_RETURN_IF_ERROR(dr.get("scan_limit", scan, "an integer"));
  NL2SQL_RETURN_IF_ERROR(dr.get("schema_weight", weight, "a number"));
  NL2SQL_RETURN_IF_ERROR(dr.get("exclude_same_db", out.pool.exclude_same_db, "a boolean"));
  if (choose != "similar" && choose != "fixed")
    return invalid_input("config key \"" + key + ".choose\" must be \"similar\" or \"fixed\" (got \"" + choose + "\")");
  if (count < 1) return invalid_input("config key \"" + key + ".count\" must be >= 1");
  if (scan < 1) return invalid_input("config key \"" + key + ".scan_limit\" must be >= 1");
  if (weight < 0 || weight > 1) return invalid_input("config key \"" + key + ".schema_weight\" must be in [0, 1]");
  out.similar = choose == "similar";
  out.pool.count = static_cast<size_t>(count);
  out.pool.schema_weight = weight;
  out.source.count = static_cast<size_t>(count);
  out.source.scan_limit = static_cast<size_t>(scan);
  if (!jsonl.empty()) {
    out.source.jsonl = jsonl;
  } else if (!benchmark.empty()) {
    auto b = data::parse_benchmark(benchmark);
    if (!b) return b.status().with_context("config key \"" + key + ".benchmark\"");
    data::DatasetSpec spec;
    spec.benchmark = *b;
    spec.data_dir = data_dir;
    spec.split = split;
    spec.questions = questions;
    spec.db_root = db_root;
    spec.load_descriptions = false;
    out.source.dataset = spec;
  } else if (!data_dir.empty() || !questions.empty() || !db_root.empty()) {
    return invalid_input("config key \"" + key + "\": \"data\", \"questions\" and \"db_root\" need \"benchmark\"");
  }
  return out;
}

// The run's train split, where one exists: Spider's train_spider.json beside the dev files.
// BIRD's train split is not among the splits this tool loads, nor is a JSONL set's.
Result<data::DatasetSpec> train_split_of(const data::DatasetSpec& run) {
  if (run.benchmark != data::Benchmark::kSpider)
    return not_found(std::string("the ") + data::benchmark_name(run.benchmark) +
                     " benchmark has no train split to take demonstrations from");
  data::DatasetSpec spec;
  spec.benchmark = run.benchmark;
  spec.data_dir = run.data_dir;
  spec.split = "train";
  spec.load_descriptions = false;
  return spec;
}

// The demonstrations of one dc or qp generator. A pool that cannot be built (no train split, no
// readable pair) falls back to the fixed demonstrations with a warning and a note on every
// candidate; a configured source that fails to load is an error naming the key.
Result<DemoChoice> make_demo_choice(const DemoConfig& config, const std::string& key, const std::string& label,
                                    const data::DatasetSpec* run_dataset, const db::Executor* executor,
                                    std::map<std::string, std::shared_ptr<const DemoPool>>& pools) {
  DemoChoice out;
  if (!config.enabled) return out;
  QpDemoSource source = config.source;
  const bool explicit_source = !source.empty();
  if (!explicit_source) {
    if (run_dataset == nullptr) return out;  // the caller has no dataset (a single question, tests)
    auto train = train_split_of(*run_dataset);
    if (!train) {
      out.fixed_note = "demos: hand-written (" + train.status().message() + ")";
      spdlog::warn("generator {}: {}; using the hand-written demonstrations", label, train.status().message());
      return out;
    }
    source.dataset = *train;
  }
  if (!config.similar) {
    if (executor == nullptr) return invalid_input(key + ": demonstrations need an executor");
    auto built = build_qp_demos(source, *executor);
    if (!built) {
      if (explicit_source) return built.status().with_context(key);
      out.fixed_note = "demos: hand-written (" + built.status().message() + ")";
      spdlog::warn("generator {}: {}; using the hand-written demonstrations", label, built.status().message());
      return out;
    }
    out.fixed = format_qp_demos(*built);
    spdlog::info("generator {}: {} fixed query-plan demonstrations from {}", label, built->size(), source.describe());
    return out;
  }
  const std::string pool_key = source.describe() + "|" + std::to_string(source.scan_limit) + "|" +
                               std::to_string(config.pool.count) + "|" + std::to_string(config.pool.schema_weight) +
                               "|" + (config.pool.exclude_same_db ? "x" : "-");
  auto it = pools.find(pool_key);
  if (it == pools.end()) {
    auto pool = DemoPool::build(source, config.pool);
    if (!pool) {
      if (explicit_source) return pool.status().with_context(key);
      out.fixed_note = "demos: hand-written (" + pool.status().message() + ")";
      spdlog::warn("generator {}: {}; using the hand-written demonstrations", label, pool.status().message());
      return out;
    }
    spdlog::info("generator {}: demonstration pool of {} (question, SQL) pairs from {}, {} per question by "
                 "similarity",
                 label, (*pool)->pairs().size(), source.describe(), config.pool.count);
    it = pools.emplace(pool_key, std::move(*pool)).first;
  }
  out.pool = it->second;
  return out;
}

Result<llm::PromptTemplate> load_prompt(const llm::PromptLibrary& prompts, const std::string& name) {
  auto t = prompts.load(name);
  if (!t) return t.status().with_context("generate: prompt " + name);
  return t;
}

// The generator's main template: its role's, or the file its `template` key names instead.
Result<llm::PromptTemplate> load_main_prompt(const llm::PromptLibrary& prompts, const ItemReader& r,
                                             const std::string& kind) {
  std::string file;
  NL2SQL_RETURN_IF_ERROR(r.get("template", file, "a string"));
  auto role = generator_template_role(kind);
  if (!role) return file.empty() ? role.status() : role.status().with_context("config key \"" + r.key() + ".template\"");
  if (file.empty()) return load_prompt(prompts, *role);
  auto t = prompts.load_as(*role, file);
  if (!t) return t.status().with_context("config key \"" + r.key() + ".template\"");
  return t;
}

// generate.generators[i] of name "file": its `path` read (a `template` key is refused).
Result<std::unique_ptr<Generator>> file_generator(const ItemReader& r, const std::string& label) {
  std::string path;
  NL2SQL_RETURN_IF_ERROR(r.get("path", path, "a string"));
  if (path.empty()) return invalid_input("config key \"" + r.key() + ".path\" is required for a file generator");
  if (r.find("template"))
    return invalid_input("config key \"" + r.key() + ".template\": a file generator sends no prompt");
  auto g = make_file_generator(label, path);
  if (!g) return g.status().with_context("config key " + r.key() + ".path");
  return g;
}

// generate.generators[i] of name "command": the outside program its `argv` starts (a
// `template` key is refused: the program writes its own prompts).
Result<std::unique_ptr<Generator>> command_generator(const ItemReader& r, const json& item, const CommonOptions& o,
                                                     llm::Client* client) {
  if (r.find("template"))
    return invalid_input("config key \"" + r.key() + ".template\": a command generator writes its own prompts");
  auto spec = read_outside_program(item, r.key());
  if (!spec) return spec.status();
  spec->label = o.label;
  spec->role = o.role;
  spec->stage = "generate";
  CommandOptions c{o.label, o.samples, o.temperature, o.descriptions, o.examples};
  return make_command_generator(std::move(c), std::move(*spec), client);
}

// What a generator's builder reads: its config item (`r` over `item`, at config key `key`) and
// the run's services. Demonstration pools are shared by the run's dc and qp generators.
struct GeneratorItem {
  const ItemReader& r;
  const json& item;
  const std::string& key;
  const core::Config& config;
  llm::Client* client;
  const db::Executor* executor;
  const llm::PromptLibrary& prompts;
  const data::DatasetSpec* run_dataset;
  std::map<std::string, std::shared_ptr<const DemoPool>>& pools;
};
using GeneratorOrError = Result<std::unique_ptr<Generator>>;

GeneratorOrError build_command(const GeneratorItem& g, CommonOptions o) {
  return command_generator(g.r, g.item, o, g.client);
}

GeneratorOrError build_file(const GeneratorItem& g, CommonOptions o) { return file_generator(g.r, o.label); }

GeneratorOrError build_baseline(const GeneratorItem& g, CommonOptions o) {
  auto t = load_main_prompt(g.prompts, g.r, o.kind);
  if (!t) return t.status();
  return std::unique_ptr<Generator>(std::make_unique<SingleCallGenerator>(std::move(o), g.client, std::move(*t)));
}

// dc and qp: demonstrations chosen by similarity (both) or fixed (qp only; its prompt's own
// hand-written ones when none could be built).
GeneratorOrError build_dc_or_qp(const GeneratorItem& g, CommonOptions o) {
  const bool qp = o.kind == "qp";
  auto t = load_main_prompt(g.prompts, g.r, o.kind);
  if (!t) return t.status();
  auto dc = read_demo_config(g.r);
  if (!dc) return dc.status();
  if (qp && dc->similar && g.executor == nullptr && dc->enabled)
    return invalid_input(g.key + ": query-plan demonstrations need an executor");
  if (!qp && !dc->similar)
    return invalid_input("config key \"" + g.key + ".demos.choose\": dc takes \"similar\" only (its fixed "
                         "demonstrations are the worked ones of its prompt)");
  auto choice = make_demo_choice(*dc, g.key, o.label, g.run_dataset, g.executor, g.pools);
  if (!choice) return choice.status();
  if (qp && choice->fixed.empty()) {
    auto fallback = load_prompt(g.prompts, "generate_query_plan_demos");
    if (!fallback) return fallback.status();
    choice->fixed = fallback->text();
  }
  if (qp)
    return std::unique_ptr<Generator>(std::make_unique<QueryPlanGenerator>(std::move(o), g.client, std::move(*t),
                                                                           std::move(*choice), g.executor));
  return std::unique_ptr<Generator>(
      std::make_unique<DivideConquerGenerator>(std::move(o), g.client, std::move(*t), std::move(*choice)));
}

GeneratorOrError build_os(const GeneratorItem& g, CommonOptions o) {
  int64_t general = 4, filtered = 4;
  bool validate = true;
  NL2SQL_RETURN_IF_ERROR(g.r.get("general_examples", general, "an integer"));
  NL2SQL_RETURN_IF_ERROR(g.r.get("filtered_examples", filtered, "an integer"));
  NL2SQL_RETURN_IF_ERROR(g.r.get("validate_examples", validate, "a boolean"));
  if (general < 0 || filtered < 0)
    return invalid_input("config key \"" + g.key + ".general_examples/filtered_examples\" must be >= 0");
  auto ge = load_prompt(g.prompts, "generate_os_examples_general");
  auto fi = load_prompt(g.prompts, "generate_os_examples_filtered");
  auto t = load_main_prompt(g.prompts, g.r, o.kind);
  if (!ge) return ge.status();
  if (!fi) return fi.status();
  if (!t) return t.status();
  return std::unique_ptr<Generator>(std::make_unique<OnlineSyntheticGenerator>(
      std::move(o), g.client, g.executor, std::move(*ge), std::move(*fi), std::move(*t), general, filtered, validate));
}

AgenticSpec agentic_spec(const CommonOptions& o) {
  return {o.kind, o.label, o.samples, o.temperature, o.role, o.profiles, o.descriptions, o.examples};
}

GeneratorOrError build_agent(const GeneratorItem& g, CommonOptions o) {  // agent.h; options under agent.*
  if (g.r.find("template")) return load_main_prompt(g.prompts, g.r, o.kind).status();
  auto options = load_agent_options(g.config);
  if (!options) return options.status();
  return make_agent_generator(agentic_spec(o), std::move(*options), g.client, g.executor, g.prompts);
}

GeneratorOrError build_recap(const GeneratorItem& g, CommonOptions o) {  // recap.h; options under recap.*
  if (g.r.find("template")) return load_main_prompt(g.prompts, g.r, o.kind).status();
  auto options = load_recap_options(g.config);
  if (!options) return options.status();
  return make_recap_generator(agentic_spec(o), std::move(*options), g.client, g.executor, g.prompts);
}

GeneratorOrError build_ssev(const GeneratorItem& g, CommonOptions o) {
  bool keep = true;
  NL2SQL_RETURN_IF_ERROR(g.r.get("keep_presql", keep, "a boolean"));
  auto t = load_main_prompt(g.prompts, g.r, o.kind);
  if (!t) return t.status();
  return std::unique_ptr<Generator>(std::make_unique<SsevGenerator>(std::move(o), g.client, std::move(*t), keep));
}

// Every generator name (read_common checks the name is one of these) and its builder.
const std::map<std::string, GeneratorOrError (*)(const GeneratorItem&, CommonOptions)>& generator_builders() {
  static const std::map<std::string, GeneratorOrError (*)(const GeneratorItem&, CommonOptions)> kBuilders = {
      {"command", build_command}, {"file", build_file}, {"baseline", build_baseline}, {"dc", build_dc_or_qp},
      {"qp", build_dc_or_qp},     {"os", build_os},     {"agent", build_agent},       {"recap", build_recap},
      {"ssev", build_ssev}};
  return kBuilders;
}

}  // namespace

Result<std::string> generator_template_role(const std::string& kind) {
  static const std::map<std::string, std::string> kRoles = {
      {"baseline", "generate_baseline"}, {"dc", "generate_divide_conquer"}, {"qp", "generate_query_plan"},
      {"os", "generate_online_synthetic"}, {"ssev", "generate_presql"}};
  if (auto it = kRoles.find(kind); it != kRoles.end()) return it->second;
  return invalid_input("generator " + kind + " has several templates and no `template` key: override them by name "
                       "in a prompts folder (prompts.dir, --prompts)");
}

Result<std::vector<std::unique_ptr<Generator>>> make_generators(const core::Config& config, llm::Client* client,
                                                                const db::Executor* executor,
                                                                const llm::PromptLibrary& prompts,
                                                                const data::DatasetSpec* run_dataset) {
  if (client == nullptr) return invalid_input("make_generators: no LLM client");
  std::map<std::string, std::shared_ptr<const DemoPool>> pools;  // shared by dc and qp
  json items = json::array({json{{"name", "baseline"}}});
  if (const json* g = config.find("generate.generators")) {
    if (!g->is_array() || g->empty())
      return invalid_input("config key \"generate.generators\" must be a non-empty array");
    items = *g;
  }
  std::vector<std::unique_ptr<Generator>> out;
  std::set<std::string> labels;
  for (size_t i = 0; i < items.size(); ++i) {
    const std::string key = "generate.generators[" + std::to_string(i) + "]";
    if (!items[i].is_object()) return invalid_input("config key \"" + key + "\" must be an object");
    ItemReader r(items[i], key);
    if (!r.find("name")) return invalid_input("config key \"" + key + ".name\" is required");
    auto o = read_common(r, items[i]);
    if (!o) return o.status();
    if (!labels.insert(o->label).second)
      return invalid_input("config key \"" + key + ".label\": two generators are labelled \"" + o->label +
                           "\" (set distinct labels)");
    const GeneratorItem g{r, items[i], key, config, client, executor, prompts, run_dataset, pools};
    auto built = generator_builders().at(o->kind)(g, std::move(*o));
    if (!built) return built.status();
    out.push_back(std::move(*built));
  }
  return out;
}

}  // namespace nl2sql::generate
