// Execution-feedback fixer (see fixer.h).
#include "nl2sql/fix/fixer.h"

#include <algorithm>
#include <cctype>
#include <set>

#include "nl2sql/context/schema_render.h"
#include "nl2sql/context/text_match.h"
#include "nl2sql/core/hash.h"
#include "nl2sql/generate/model_call.h"
#include "nl2sql/llm/answer.h"
#include "nl2sql/llm/client.h"
#include "nl2sql/sql/parser.h"

namespace nl2sql::fix {
namespace {

using generate::Candidate;
using generate::ExecutionSummary;

std::string lower(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}


// The name after "no such column: " etc., without quotes.
std::string name_after(const std::string& error, const std::string& marker) {
  auto p = lower(error).find(marker);
  if (p == std::string::npos) return "";
  std::string rest = error.substr(p + marker.size());
  size_t e = rest.find_first_of(" \n\t");
  if (e != std::string::npos) rest = rest.substr(0, e);
  rest.erase(std::remove_if(rest.begin(), rest.end(), [](char c) { return c == '"' || c == '`' || c == '\'' || c == '[' || c == ']'; }),
             rest.end());
  return rest;
}

std::string cut(std::string s, size_t n) {
  if (s.size() <= n) return s;
  return s.substr(0, n) + "…";
}

std::string join_list(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
  return s;
}

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
                                                "profile", "temperature", "preview_rows", "hint_names"};
    for (const auto& [k, v] : f->items())
      if (!kKeys.count(k)) return invalid_input("config key \"fix." + k + "\" is not known");
  }
  auto en = config.get_bool("fix.enabled", true);
  if (!en) return en.status();
  o.enabled = *en;
  auto mr = config.get_int("fix.max_rounds", 3);
  if (!mr) return mr.status();
  if (*mr < 0 || *mr > 20) return invalid_input("config key \"fix.max_rounds\" must be in [0, 20]");
  o.max_rounds = *mr;
  auto oe = config.get_bool("fix.on_empty_result", true);
  if (!oe) return oe.status();
  o.on_empty_result = *oe;
  auto role = config.get_string("fix.role", "fix");
  if (!role) return role.status();
  o.role = *role;
  auto prof = config.get_string("fix.profile", "");
  if (!prof) return prof.status();
  o.profile = *prof;
  if (config.has("fix.temperature")) {
    auto t = config.get_number("fix.temperature");
    if (!t) return t.status();
    if (*t < 0 || *t > 2) return invalid_input("config key \"fix.temperature\" must be in [0, 2]");
    o.temperature = *t;
  }
  auto pr = config.get_int("fix.preview_rows", 5);
  if (!pr) return pr.status();
  if (*pr < 0) return invalid_input("config key \"fix.preview_rows\" must be >= 0");
  o.preview_rows = static_cast<size_t>(*pr);
  auto hn = config.get_int("fix.hint_names", 3);
  if (!hn) return hn.status();
  if (*hn < 1) return invalid_input("config key \"fix.hint_names\" must be >= 1");
  o.hint_names = static_cast<size_t>(*hn);
  return o;
}

ExecutionSummary summarize_execution(const db::ExecutionResult& r, size_t preview_rows) {
  ExecutionSummary s;
  s.executed = r.status != db::ExecStatus::kRejected;
  s.status = r.status;
  s.error = r.error;
  s.rows = r.result.rows.size();
  s.columns = r.result.columns.size();
  s.elapsed_ms = r.elapsed_ms;
  if (r.ok()) {
    std::string p = join_list(r.result.columns);
    for (size_t i = 0; i < std::min(preview_rows, r.result.rows.size()); ++i) {
      std::string line;
      for (const auto& v : r.result.rows[i]) line += (line.empty() ? "" : " | ") + cut(v.to_display(), 60);
      p += "\n" + line;
    }
    if (r.result.rows.size() > preview_rows)
      p += "\n… (" + std::to_string(r.result.rows.size()) + " rows)";
    s.preview = p;
  }
  return s;
}

void execute_candidate(Candidate& c, const db::Executor& executor, const std::filesystem::path& db_path,
                       size_t preview_rows) {
  c.execution = ExecutionSummary{};
  if (!c.extraction_ok || c.sql.empty()) return;
  if (auto kw = non_query_keyword(c.sql)) {
    c.rejected = true;
    c.rejection = "rejected: not read-only (" + *kw + " statement)";
    return;
  }
  auto r = executor.run(db_path, c.sql);
  c.execution = summarize_execution(r, preview_rows);
  if (r.status == db::ExecStatus::kRejected) {
    // The executor's guardrails refused it before running (several statements, PRAGMA …).
    c.rejected = true;
    c.rejection = "rejected: not read-only (" + r.error + ")";
  }
}

std::string classify_failure(const ExecutionSummary& e) {
  if (!e.executed) return "";
  switch (e.status) {
    case db::ExecStatus::kOk: return e.rows == 0 ? "empty_result" : "";
    case db::ExecStatus::kTimeout: return "timeout";
    case db::ExecStatus::kRowCap: return "other";
    case db::ExecStatus::kRejected: return "";
    case db::ExecStatus::kError: break;
  }
  const std::string m = lower(e.error);
  if (m.find("no such column") != std::string::npos) return "no_such_column";
  if (m.find("no such table") != std::string::npos) return "no_such_table";
  if (m.find("ambiguous column") != std::string::npos) return "ambiguous_column";
  if (m.find("datatype mismatch") != std::string::npos || m.find("type mismatch") != std::string::npos)
    return "type_mismatch";
  if (m.find("syntax error") != std::string::npos || m.find("incomplete input") != std::string::npos ||
      m.find("unrecognized token") != std::string::npos || m.find("unterminated") != std::string::npos)
    return "syntax_error";
  return "other";
}

std::vector<std::string> closest_names(const std::string& name, const std::vector<std::string>& names, size_t k) {
  const std::u32string target = context::decode_utf8(lower(name));
  std::vector<std::pair<size_t, std::string>> scored;
  std::set<std::string> seen;
  for (const auto& n : names) {
    if (!seen.insert(n).second) continue;
    scored.emplace_back(context::edit_distance(target, context::decode_utf8(lower(n))), n);
  }
  std::stable_sort(scored.begin(), scored.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<std::string> out;
  for (size_t i = 0; i < std::min(k, scored.size()); ++i) out.push_back(scored[i].second);
  return out;
}

std::string failure_hint(const std::string& cls, const ExecutionSummary& e, const std::string& sql_text,
                         const FixInput& in, const FixOptions& o) {
  const data::Schema* schema = in.schema;
  if (cls == "no_such_column" && schema) {
    std::string name = name_after(e.error, "no such column: ");
    std::string bare = name.substr(name.find('.') == std::string::npos ? 0 : name.find('.') + 1);
    std::vector<std::string> qualified, plain;
    for (const auto& t : schema->tables)
      for (const auto& c : t.columns) {
        qualified.push_back(t.name + "." + c.name);
        plain.push_back(c.name);
      }
    // Rank bare column names, then show each with its table(s).
    std::vector<std::string> best = closest_names(bare, plain, o.hint_names);
    std::vector<std::string> shown;
    for (const auto& b : best)
      for (const auto& q : qualified)
        if (q.size() > b.size() && q.compare(q.size() - b.size(), b.size(), b) == 0 && q[q.size() - b.size() - 1] == '.')
          shown.push_back(q);
    return "Column \"" + name + "\" does not exist. Closest columns in the schema: " + join_list(shown) +
           ". Check also that the table alias in front of the column names the table that has it.";
  }
  if (cls == "no_such_table" && schema) {
    std::string name = name_after(e.error, "no such table: ");
    std::vector<std::string> tables;
    for (const auto& t : schema->tables) tables.push_back(t.name);
    return "Table \"" + name + "\" does not exist. Closest tables in the schema: " +
           join_list(closest_names(name, tables, o.hint_names)) + ".";
  }
  if (cls == "ambiguous_column" && schema) {
    std::string name = name_after(e.error, "ambiguous column name: ");
    std::string bare = name.substr(name.find('.') == std::string::npos ? 0 : name.find('.') + 1);
    std::vector<std::string> owners;
    for (const auto& t : schema->tables)
      for (const auto& c : t.columns)
        if (lower(c.name) == lower(bare)) owners.push_back(t.name);
    return "Column \"" + name + "\" exists in several joined tables (" + join_list(owners) +
           "). Qualify it with the alias of the table you mean (e.g. T1." + bare + ").";
  }
  if (cls == "type_mismatch")
    return "A value is compared or combined with one of another type. Compare numbers with numbers and text with "
           "text; CAST(column AS REAL) or CAST(column AS INTEGER) when numbers are stored as text; dates are text "
           "in the format the schema comments show.";
  if (cls == "syntax_error") {
    std::string h = "SQLite could not parse the query.";
    auto parsed = sql::parse(sql_text);
    if (!parsed) h += " Our parser reports: " + parsed.status().message();
    return h + "\nCheck keywords, commas between columns, balanced parentheses and quotes; use SQLite syntax "
               "(LIMIT instead of TOP, || for concatenation, no ILIKE).";
  }
  if (cls == "timeout")
    return "The query ran too long. Join tables on their key columns instead of producing a cross product, filter "
           "before joining, and avoid correlated subqueries over large tables.";
  if (cls == "empty_result") {
    std::string h = "The query ran but returned no rows. Check that literal values are spelled exactly as stored, "
                    "that conditions are not too strict, and that joins use the right keys.";
    std::vector<std::string> lines;
    if (in.index && schema) {
      std::set<std::string> literals;
      for (const auto& t : sql::tokenize(sql_text))
        if (t.kind == sql::TokenKind::kString && !t.value.empty()) literals.insert(t.value);
      context::RetrievalOptions ro;
      ro.match_columns = false;
      ro.max_values = 5;
      ro.per_column = 3;
      ro.min_similarity = 0.5;
      for (const auto& lit : literals) {
        auto r = context::retrieve(*in.index, *schema, lit, "", ro);
        std::vector<std::string> vals;
        for (const auto& v : r.values) {
          std::string item = v.table + "." + v.column + " = '" + v.value + "'";
          if (std::find(vals.begin(), vals.end(), item) == vals.end()) vals.push_back(item);
        }
        lines.push_back("'" + lit + "': " + (vals.empty() ? std::string("no similar stored value") : join_list(vals)));
      }
    }
    if (!lines.empty()) {
      h += "\nStored values resembling the query's literals:";
      for (const auto& l : lines) h += "\n- " + l;
    }
    return h;
  }
  if (e.status == db::ExecStatus::kRowCap)
    return "The query returned more rows than allowed; it probably misses a join condition or a filter.";
  return "Read the error message and correct the part of the query it names.";
}

Result<Fixer> Fixer::create(const core::Config& config, llm::Client* client, const std::filesystem::path& prompts_dir) {
  auto o = load_fix_options(config);
  if (!o) return o.status();
  auto t = llm::PromptTemplate::load_named(prompts_dir, "fix_sql");
  if (!t) return t.status().with_context("fix: prompt fix_sql");
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

Status Fixer::fix(Candidate& c, const FixInput& in) const {
  if (in.executor == nullptr || in.question == nullptr || in.schema == nullptr)
    return invalid_input("fixer: FixInput needs an executor, a question and a schema");
  execute_candidate(c, *in.executor, in.db_path, options_.preview_rows);
  c.still_failing = false;
  if (c.rejected || !c.execution.executed) return Status::ok();
  if (!options_.enabled || options_.max_rounds == 0 || client_ == nullptr) {
    c.still_failing = needs_fix(c.execution);
    return Status::ok();
  }
  if (c.original_sql.empty()) c.original_sql = c.sql;
  context::RenderOptions ro;
  const std::string schema_text =
      context::render_schema(*in.schema, ro, in.index, in.retrieval ? &in.retrieval->values : nullptr);
  std::set<std::string> filtered;  // the fixer has no column filter: rung 3 is rung 2
  auto schema_at = [&](int rung, int64_t schema_tokens) {
    if (rung == 0) return schema_text;
    context::RenderOptions o = context::options_at_rung(ro, rung, filtered);
    if (rung >= context::kSchemaLadderRungs) {
      // Cut to the budget: no descriptions, then fewer tables (the query's own come first in
      // what the model sees through the error text).
      o.descriptions = false;
    }
    std::string text = context::render_schema(*in.schema, o, in.index, in.retrieval ? &in.retrieval->values : nullptr);
    if (rung >= context::kSchemaLadderRungs && schema_tokens > 0 &&
        static_cast<int64_t>(text.size() / 4) > schema_tokens)
      text = text.substr(0, static_cast<size_t>(schema_tokens) * 4) + "\n-- (schema cut to fit the model's context)";
    return text;
  };
  const int first = static_cast<int>(c.fix_rounds.size()) + 1;
  for (int k = 0; k < options_.max_rounds && needs_fix(c.execution); ++k) {
    generate::FixRound round;
    round.round = first + k;
    round.failure_class = classify_failure(c.execution);
    const std::string what = round.failure_class == "empty_result"
                                 ? std::string("The query executed successfully but returned no rows.")
                                 : (c.execution.status == db::ExecStatus::kTimeout ? "Timed out: " : "Error: ") +
                                       c.execution.error;
    const std::string hint = failure_hint(round.failure_class, c.execution, c.sql, in, options_);
    round.feedback = what + "\n" + hint;
    round.sql_before = c.sql;

    generate::ModelCall call;
    call.prompt = &prompt_;
    call.stage = "fix";
    call.role = options_.role;
    call.profile = options_.profile;
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
    call.sim = generate::sim_generate_context(*in.question, c.generator, call.sample_index);
    call.sim.task = llm::SimTask::kFix;
    call.sim.failing_sql = c.sql;
    call.sim.failure = round.failure_class;
    auto a = generate::call_model(*client_, call);
    if (!a) return a.status().with_context("fixer, question " + in.question->question_id + ", candidate " + c.id);
    round.call = a->trace;
    std::string next = c.sql;
    if (a->ok) {
      auto ex = llm::extract_sql(a->text);
      if (ex.ok && !non_query_keyword(ex.sql)) next = ex.sql;
      if (!ex.ok) client_->accounting().record_parse_failure(call.stage, in.question->question_id);
    }
    round.sql_after = next;
    if (next != c.sql) {
      auto r = in.executor->run(in.db_path, next);
      round.execution_after = summarize_execution(r, options_.preview_rows);
      if (r.status == db::ExecStatus::kRejected) {
        // A "fix" the guardrails refuse is not adopted; the round stays in the trace.
        round.sql_after = c.sql;
      } else {
        c.sql = next;
        c.execution = round.execution_after;
      }
    } else {
      // Same query again: its execution is known; do not run it twice.
      round.execution_after = c.execution;
    }
    c.fix_rounds.push_back(std::move(round));
  }
  c.still_failing = needs_fix(c.execution);
  return Status::ok();
}

}  // namespace nl2sql::fix
