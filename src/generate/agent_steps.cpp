// Steps shared by the agentic generators (see agent_steps.h).
#include "agent_steps.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <set>

#include "nl2sql/context/embedding_rerank.h"
#include "nl2sql/core/files.h"
#include "nl2sql/llm/answer.h"
#include "nl2sql/llm/client.h"
#include "nl2sql/sql/parser.h"
#include "nl2sql/core/text.h"

namespace nl2sql::generate {
namespace {

using core::lower;

std::set<std::string> words_of(const std::string& text) {
  std::set<std::string> out;
  std::string w;
  auto flush = [&] {
    if (w.size() >= 3) out.insert(w);
    w.clear();
  };
  for (char c : text) {
    if (std::isalnum(static_cast<unsigned char>(c)) || static_cast<unsigned char>(c) >= 0x80)
      w += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    else
      flush();
  }
  flush();
  return out;
}

// Words of an identifier: "eye_colour_id" → eye, colour; "FullName" → full, name.
std::set<std::string> ident_words(const std::string& name) {
  std::string spaced;
  for (size_t i = 0; i < name.size(); ++i) {
    char c = name[i];
    if (i > 0 && std::isupper(static_cast<unsigned char>(c)) && std::islower(static_cast<unsigned char>(name[i - 1])))
      spaced += ' ';
    spaced += c == '_' ? ' ' : c;
  }
  return words_of(spaced);
}

}  // namespace

AttemptOutcome run_attempt(const std::string& answer, const std::string& question, const db::Executor* executor,
                           const std::filesystem::path& db_path, const AttemptLimits& limits) {
  AttemptOutcome o;
  auto ex = llm::extract_sql(answer);
  if (!ex) {
    o.extraction_error = ex.status().message();
    o.result.status = db::ExecStatus::kRejected;
    o.result.error = "no SQL: " + o.extraction_error;
    o.summary = summarize_result(o.result, limits.preview_rows);
    o.issues.push_back({"error", o.result.error});
    return o;
  }
  o.sql = ex->sql;
  if (auto p = sql::parse_query(o.sql); !p) o.parse_error = p.status().message();
  if (executor == nullptr || db_path.empty()) {
    o.result.status = db::ExecStatus::kRejected;
    o.result.error = "no database to execute on";
  } else {
    db::QueryLimits lim = executor->options().limits;
    if (limits.timeout_s > 0) lim.timeout_s = limits.timeout_s;
    if (limits.row_cap > 0) lim.row_cap = limits.row_cap;
    o.result = executor->run(db_path, o.sql, lim);
  }
  o.summary = summarize_result(o.result, limits.preview_rows);
  if (!o.result.ok() && !o.parse_error.empty())
    o.summary.error += "\n(parser: " + o.parse_error + ")";  // the parser's position helps a syntax fix
  o.issues = check_result(o.summary, question, limits.checks);
  return o;
}

std::string outcome_text(const AttemptOutcome& o) {
  if (o.sql.empty()) return "no SQL could be extracted (" + o.extraction_error + ")";
  if (!o.result.ok()) return issues_text(o.issues);
  const std::string rows = std::to_string(o.summary.rows) + (o.summary.rows == 1 ? " row" : " rows");
  if (o.issues.empty()) return "accepted (" + rows + ")";
  return rows + "; " + issues_text(o.issues);
}

std::optional<nlohmann::json> parse_json_answer(const std::string& text) {
  auto j = llm::read_json(text, {llm::JsonShape::kObject, ""});
  if (!j) return std::nullopt;
  return std::move(j).value();
}

int64_t schema_budget_for(const llm::Client& client, const std::string& role, int64_t configured) {
  const auto prompt = client.prompt_budget(role, "");
  if (!prompt) return configured;
  const int64_t half = std::max<int64_t>(256, *prompt / 2);
  return configured > 0 ? std::min(configured, half) : half;
}

int64_t approx_tokens(const std::string& text) { return static_cast<int64_t>((text.size() + 3) / 4); }

std::string render_schema_within(const GenerationInput& in, context::RenderOptions options,
                                 const SchemaBudget& budget, std::string* note, std::vector<LlmCallTrace>* calls) {
  const int64_t max_tokens = budget.max_tokens;
  const context::SchemaSources sources = in.schema_sources();
  std::string full = context::render_schema(sources, options);
  if (note) note->clear();
  if (max_tokens <= 0 || approx_tokens(full) <= max_tokens) return full;
  // The metadata's statistics go first (the ladder's rung 1 cut); the columns only after.
  std::string stats_note;
  std::string base = full;
  if (in.metadata != nullptr && options.stats) {
    options.stats = false;
    std::string lighter = context::render_schema(sources, options);
    stats_note = "; column statistics left out";
    base = lighter;
    if (approx_tokens(lighter) <= max_tokens) {
      if (note)
        *note = "schema over budget (~" + std::to_string(approx_tokens(full)) + " > " +
                std::to_string(max_tokens) + " tokens): column statistics left out (~" +
                std::to_string(approx_tokens(lighter)) + " tokens)";
      return lighter;
    }
  }

  // Score every column by how strongly the question points at it.
  const auto qwords = words_of(in.question->question + " " + in.question->evidence);
  std::map<std::string, double> score;  // lower-cased "table.column"
  std::vector<std::string> order;
  for (const auto& t : in.schema->tables)
    for (const auto& c : t.columns) {
      std::string key = lower(t.name + "." + c.name);
      order.push_back(t.name + "." + c.name);
      double s = 0;
      for (const auto& w : ident_words(c.name)) s += qwords.count(w) ? 1.0 : 0.0;
      for (const auto& w : ident_words(t.name)) s += qwords.count(w) ? 0.5 : 0.0;
      for (const auto& w : words_of(c.description)) s += qwords.count(w) ? 0.25 : 0.0;
      score[key] = s;
    }
  if (in.retrieval) {
    for (const auto& m : in.retrieval->columns) score[lower(m.table + "." + m.column)] += 2.0 * m.score;
    for (const auto& m : in.retrieval->values) score[lower(m.table + "." + m.column)] += 3.0 * m.score;
  }
  for (const auto& c : in.selected_columns) score[lower(c)] += 2.0;
  std::string embed_note;
  if (budget.client != nullptr && !budget.embeddings_profile.empty()) {
    llm::EmbeddingRequest req;
    req.profile = budget.embeddings_profile;
    req.stage = budget.stage;
    req.question_id = in.question->question_id;
    req.inputs.push_back(in.question->question + (in.question->evidence.empty() ? "" : " " + in.question->evidence));
    std::vector<std::string> keys;
    for (const auto& t : in.schema->tables)
      for (const auto& c : t.columns) {
        keys.push_back(lower(t.name + "." + c.name));
        req.inputs.push_back(t.name + "." + c.name + (c.description.empty() ? "" : ": " + c.description));
      }
    LlmCallTrace trace;
    trace.stage = budget.stage;
    trace.template_name = "(embeddings)";
    trace.profile = budget.embeddings_profile;
    trace.prompt = std::to_string(req.inputs.size()) + " texts: the question and every column";
    auto r = budget.client->embed(req);
    if (r && r->vectors.size() == req.inputs.size()) {
      for (size_t i = 0; i < keys.size(); ++i)
        score[keys[i]] += 4.0 * std::max(0.0, context::cosine_similarity(r->vectors[0], r->vectors[i + 1]));
      trace.prompt_tokens = r->usage.prompt_tokens;
      trace.cost_usd = r->cost_usd;
      trace.latency_s = r->latency_s;
      embed_note = "; embeddings joined the scores";
    } else {
      trace.error = r ? "embeddings: " + std::to_string(r->vectors.size()) + " vectors for " +
                            std::to_string(req.inputs.size()) + " texts"
                      : r.status().message();
      embed_note = "; embeddings failed (" + trace.error + "), other scores only";
    }
    if (calls) calls->push_back(std::move(trace));
  }
  std::stable_sort(order.begin(), order.end(), [&](const std::string& a, const std::string& b) {
    return score[lower(a)] > score[lower(b)];
  });
  size_t keep = order.size();
  std::string text = base;
  while (keep > 4 && approx_tokens(text) > max_tokens) {
    keep = std::max<size_t>(4, keep * 3 / 4);
    options.columns = std::set<std::string>(order.begin(), order.begin() + static_cast<long>(keep));
    text = context::render_schema(sources, options);
  }
  if (note)
    *note = "schema over budget (~" + std::to_string(approx_tokens(full)) + " > " + std::to_string(max_tokens) +
            " tokens): kept the " + std::to_string(keep) + " of " + std::to_string(order.size()) +
            " columns best matching the question (~" + std::to_string(approx_tokens(text)) + " tokens)" + stats_note +
            embed_note;
  return text;
}

std::string load_business_rules(const std::filesystem::path& dir, const std::string& db_id) {
  if (dir.empty() || db_id.empty()) return "(none)";
  for (const char* ext : {".md", ".txt"}) {
    auto p = dir / (db_id + ext);
    std::error_code ec;
    if (!std::filesystem::exists(p, ec)) continue;
    auto text = core::read_file(p);
    if (text && !text->empty()) return *text;
  }
  return "(none)";
}

std::string step_line(int64_t step, const std::string& what, const std::string& detail) {
  std::string d = detail;
  std::replace(d.begin(), d.end(), '\n', ' ');
  if (d.size() > 240) d = d.substr(0, 240) + "…";
  return "[step " + std::to_string(step) + "] " + what + (d.empty() ? "" : ": " + d) + "\n";
}

}  // namespace nl2sql::generate
