#include "nl2sql/context/question_context.h"

#include <future>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "llm_calls.h"
#include "nl2sql/llm/client.h"
#include "nl2sql/context/text_match.h"
#include "nl2sql/core/text.h"

namespace nl2sql::context {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// Reads `key` into `field`; an unset key takes the schema's default (configs/schema/context.json).
#define NL2SQL_CTX_READ(getter, key, field, cast)                   \
  {                                                                 \
    auto r_ = config.getter(key);                                   \
    if (!r_) return r_.status();                                    \
    field = static_cast<cast>(*r_);                                 \
  }

Status non_negative(double v, const char* key) {
  if (v < 0) return invalid_input(std::string("config key \"") + key + "\" must be >= 0");
  return Status::ok();
}

}  // namespace

Result<ContextSettings> load_context_settings(const core::Config& config) {
  ContextSettings s;
  auto& ip = s.index.params;
  std::string index_dir;
  NL2SQL_CTX_READ(get_string, "context.index_dir", index_dir, std::string);
  s.index.index_dir = index_dir;
  NL2SQL_CTX_READ(get_int, "context.index.ngram", ip.ngram, int);
  NL2SQL_CTX_READ(get_int, "context.index.num_perm", ip.num_perm, int);
  NL2SQL_CTX_READ(get_int, "context.index.bands", ip.bands, int);
  NL2SQL_CTX_READ(get_int, "context.index.rows", ip.rows, int);
  NL2SQL_CTX_READ(get_int, "context.index.short_length", ip.short_length, int);
  NL2SQL_CTX_READ(get_number, "context.index.scan_timeout_s", ip.scan_timeout_s, double);
  int64_t threads = static_cast<int64_t>(s.index.threads);
  NL2SQL_CTX_READ(get_int, "context.index.threads", threads, int64_t);
  if (threads < 0) return invalid_input("config key \"context.index.threads\" must be >= 0");
  s.index.threads = static_cast<size_t>(threads);
  auto& sk = ip.skip;
  NL2SQL_CTX_READ(get_bool, "context.index.skip.id_columns", sk.skip_id_columns, bool);
  NL2SQL_CTX_READ(get_number, "context.index.skip.min_text_share", sk.min_text_share, double);
  NL2SQL_CTX_READ(get_number, "context.index.skip.max_url_share", sk.max_url_share, double);
  NL2SQL_CTX_READ(get_number, "context.index.skip.max_avg_length", sk.max_avg_length, double);
  int64_t v = 0;
  for (auto [key, field] : {std::pair<const char*, size_t*>{"context.index.skip.max_distinct", &sk.max_distinct},
                            {"context.index.skip.sample_rows", &sk.sample_rows},
                            {"context.index.skip.max_value_length", &sk.max_value_length},
                            {"context.retrieval.per_column", &s.retrieval.per_column},
                            {"context.retrieval.max_values", &s.retrieval.max_values},
                            {"context.retrieval.max_columns", &s.retrieval.max_columns},
                            {"context.embeddings.pool", &s.embeddings.pool},
                            {"context.column_filter.examples", &s.filter.examples},
                            {"context.metadata.top_values", &s.meta.top_values},
                            {"context.metadata.min_distinct", &s.meta.min_distinct}}) {
    v = static_cast<int64_t>(*field);
    NL2SQL_CTX_READ(get_int, key, v, int64_t);
    if (v < 0) return invalid_input(std::string("config key \"") + key + "\" must be >= 0");
    *field = static_cast<size_t>(v);
  }
  NL2SQL_RETURN_IF_ERROR(ip.validate().with_context("config context.index"));

  auto& ro = s.retrieval;
  NL2SQL_CTX_READ(get_number, "context.retrieval.min_similarity", ro.min_similarity, double);
  NL2SQL_CTX_READ(get_number, "context.retrieval.min_column_score", ro.min_column_score, double);
  NL2SQL_CTX_READ(get_bool, "context.retrieval.match_columns", ro.match_columns, bool);
  NL2SQL_RETURN_IF_ERROR(non_negative(ro.min_similarity, "context.retrieval.min_similarity"));

  NL2SQL_CTX_READ(get_bool, "context.keywords.llm", s.llm_keywords, bool);

  auto& e = s.embeddings;
  NL2SQL_CTX_READ(get_string, "context.embeddings.profile", e.profile, std::string);
  NL2SQL_CTX_READ(get_number, "context.embeddings.edit_weight", e.edit_weight, double);
  NL2SQL_CTX_READ(get_number, "context.embeddings.pool_min_similarity", e.pool_min_similarity, double);
  NL2SQL_CTX_READ(get_number, "context.embeddings.min_score", e.min_score, double);
  if (e.edit_weight < 0 || e.edit_weight > 1)
    return invalid_input("config key \"context.embeddings.edit_weight\" must be in 0..1");

  NL2SQL_CTX_READ(get_bool, "context.column_filter.enabled", s.column_filter, bool);
  NL2SQL_CTX_READ(get_string, "context.column_filter.mode", s.filter.mode, std::string);
  if (s.filter.mode != "auto" && s.filter.mode != "table" && s.filter.mode != "column")
    return invalid_input("config key \"context.column_filter.mode\" must be auto, table or column");

  NL2SQL_CTX_READ(get_bool, "context.metadata.enabled", s.metadata, bool);
  NL2SQL_CTX_READ(get_string, "context.metadata.infer_fks", s.meta.infer_fks, std::string);
  NL2SQL_CTX_READ(get_number, "context.metadata.min_coverage", s.meta.min_coverage, double);
  NL2SQL_CTX_READ(get_number, "context.metadata.min_name_score", s.meta.min_name_score, double);
  NL2SQL_CTX_READ(get_number, "context.metadata.query_timeout_s", s.meta.query_timeout_s, double);
  NL2SQL_CTX_READ(get_bool, "context.metadata.describe", s.describe, bool);
  NL2SQL_RETURN_IF_ERROR(s.meta.validate());
  if (s.describe && !s.metadata)
    return invalid_input("config key \"context.metadata.describe\" needs context.metadata.enabled");
  return s;
}

#undef NL2SQL_CTX_READ

// One trace format everywhere: the candidate trace's (generate/candidate.h).
json call_to_json(const llm::LlmCallTrace& c) { return llm::to_json(c); }

ContextRecord QuestionContext::record() const {
  ContextRecord r;
  r.question_id = question_id;
  r.db_id = db_id;
  r.keywords = retrieval.keywords;
  r.values = retrieval.values;
  r.columns = retrieval.columns;
  r.selected_columns = selected_columns;
  r.calls = calls;
  r.errors = errors;
  return r;
}

namespace {

// The keywords; with model keywords, where each went: new ones are tagged [llm], the rest the
// heuristic had.
std::string keywords_text(const QuestionContext& ctx, const ContextSettings& settings) {
  const auto& r = ctx.retrieval;
  std::string out = fmt::format("keywords ({}):", r.keywords.size());
  for (const auto& k : r.keywords) out += fmt::format(" \"{}\"[{}]", k.text, k.source);
  out += "\n";
  if (settings.llm_keywords) {
    std::vector<std::string> also;
    for (const auto& k : ctx.llm_keywords)
      for (const auto& h : r.keywords)
        if (h.source != "llm" && normalize_text(h.text) == normalize_text(k)) also.push_back(k);
    out += fmt::format("  model keywords: {} ({} new, {} also found by the heuristic{}{})\n", ctx.llm_keywords.size(),
                       ctx.llm_keywords.size() - also.size(), also.size(), also.empty() ? "" : ": ",
                       fmt::join(also, ", "));
  }
  return out;
}

// The selected columns (join keys marked), the dropped tables, the model calls and the errors.
std::string selection_text(const QuestionContext& ctx, const ContextSettings& settings) {
  std::string out;
  if (settings.column_filter) {
    out += fmt::format("selected columns ({}{}):", ctx.selected_columns.size(),
                       ctx.selected_columns.empty() ? ", i.e. the whole schema" : "");
    for (const auto& c : ctx.selected_columns) out += " " + c + (ctx.join_keys.count(c) ? "[join key]" : "");
    out += "\n";
    if (!ctx.dropped_tables.empty()) out += fmt::format("dropped tables: {}\n", fmt::join(ctx.dropped_tables, ", "));
  }
  if (!ctx.calls.empty()) {
    size_t simulated = 0;
    for (const auto& c : ctx.calls) simulated += c.provider == "sim";
    out += fmt::format("model calls: {}{}\n", ctx.calls.size(),
                       simulated ? fmt::format(" ({} simulated: gold-derived answers, not a model's)", simulated) : "");
  }
  for (const auto& e : ctx.errors) out += "error: " + e + "\n";
  return out;
}

}  // namespace

std::string context_to_text(const ContextView& v) {
  const QuestionContext& ctx = v.context;
  const auto& r = ctx.retrieval;
  std::string out = fmt::format("question {} ({}): {}\n", v.task.question_id, v.task.db_id, v.task.question);
  if (!v.task.evidence.empty()) out += "evidence: " + v.task.evidence + "\n";
  out += fmt::format("index: {} values, {} ({}), opened in {:.2f} ms\n", ctx.index ? ctx.index->size() : 0,
                     v.index.action, v.index.file.string(), v.index_load_ms);
  out += keywords_text(ctx, v.settings);
  out += fmt::format("matched values ({}, {} edit distances, context {:.2f} ms without the index opening{}):\n",
                     r.values.size(), r.candidates_scored, v.context_ms,
                     v.settings.embeddings.profile.empty() ? "" : ", re-ranked by embeddings");
  for (const auto& m : r.values)
    out += fmt::format("  {}.{} = {} ({:.3f}, keyword \"{}\")\n", m.table, m.column, core::quote_sql_string(m.value),
                       m.score, m.keyword);
  out += fmt::format("matched columns ({}):\n", r.columns.size());
  for (const auto& c : r.columns)
    out += fmt::format("  {}.{} ({:.3f}, {} ~ \"{}\")\n", c.table, c.column, c.score, c.via, c.keyword);
  return out + selection_text(ctx, v.settings);
}

json QuestionContext::to_json() const { return context::to_json(record()); }

ContextBuilder::ContextBuilder(ContextSettings settings, llm::Client* client, const db::Executor& executor)
    : settings_(std::move(settings)), client_(client), executor_(executor) {}

Result<std::unique_ptr<ContextBuilder>> ContextBuilder::create(const core::Config& config, llm::Client* client,
                                                               const db::Executor& executor, fs::path index_dir,
                                                               const llm::PromptLibrary* prompts) {
  auto s = load_context_settings(config);
  if (!s) return s.status();
  if (!index_dir.empty()) s->index.index_dir = index_dir;
  return create(std::move(*s), client, executor, prompts);
}

Result<std::unique_ptr<ContextBuilder>> ContextBuilder::create(ContextSettings settings, llm::Client* client,
                                                               const db::Executor& executor,
                                                               const llm::PromptLibrary* prompts) {
  std::optional<llm::PromptLibrary> bundled;
  if (prompts == nullptr) prompts = &bundled.emplace(llm::PromptLibrary::bundled());
  const char* needs_model = settings.llm_keywords              ? "context.keywords.llm"
                            : settings.column_filter           ? "context.column_filter.enabled"
                            : settings.describe                ? "context.metadata.describe"
                            : !settings.embeddings.profile.empty() ? "context.embeddings.profile"
                                                                 : nullptr;
  if (needs_model && !client)
    return invalid_input(std::string("config key \"") + needs_model + "\" needs a model, but no LLM client is configured");
  std::unique_ptr<ContextBuilder> b(new ContextBuilder(std::move(settings), client, executor));
  auto load = [&](bool on, const char* name, std::optional<llm::PromptTemplate>& slot) -> Status {
    if (!on) return Status::ok();
    auto t = prompts->load(name);
    if (!t) return t.status();
    slot = std::move(*t);
    return Status::ok();
  };
  NL2SQL_RETURN_IF_ERROR(load(b->settings_.llm_keywords, "extract_keywords", b->keywords_prompt_));
  NL2SQL_RETURN_IF_ERROR(load(b->settings_.column_filter, "filter_columns", b->filter_prompt_));
  NL2SQL_RETURN_IF_ERROR(load(b->settings_.describe, "describe_column", b->describe_prompt_));
  if (!b->settings_.embeddings.profile.empty()) {
    auto p = client->settings().resolve("", b->settings_.embeddings.profile);
    if (!p) return p.status().with_context("config key \"context.embeddings.profile\"");
    b->reranker_ = std::make_unique<EmbeddingReranker>(*client, b->settings_.embeddings);
  }
  return b;
}

std::shared_ptr<ContextBuilder::Database> ContextBuilder::database(const std::string& db_id) const {
  std::lock_guard lock(mu_);
  auto& d = databases_[db_id];
  if (!d) d = std::make_shared<Database>();
  return d;
}

Result<std::shared_ptr<const ValueIndex>> ContextBuilder::index(const std::string& db_id, const fs::path& db_path,
                                                                const data::Schema& schema,
                                                                IndexStatus* status) const {
  auto d = database(db_id);
  std::lock_guard lock(d->mu);
  if (status) status->action = "cached";
  if (d->index) return d->index;
  if (d->index_error) return *d->index_error;
  auto idx = open_index(db_id, db_path, schema, settings_.index, executor_, status);
  if (!idx) {
    d->index_error = idx.status();
    return idx.status();
  }
  d->index = std::make_shared<const ValueIndex>(std::move(*idx));
  return d->index;
}

Result<std::shared_ptr<const DatabaseMetadata>> ContextBuilder::metadata(const std::string& db_id,
                                                                         const fs::path& db_path,
                                                                         const data::Schema& schema) const {
  auto d = database(db_id);
  std::lock_guard lock(d->mu);
  if (d->meta) return d->meta;
  if (d->meta_error) return *d->meta_error;
  auto m = open_metadata(db_id, db_path, schema, settings_.meta, settings_.index.index_dir, false, executor_);
  if (!m) {
    d->meta_error = m.status();
    return m.status();
  }
  if (settings_.describe && describe_prompt_ && client_) {
    std::vector<std::string> errors;
    size_t n = describe_columns(*m, schema, *client_, *describe_prompt_, errors);
    for (const auto& e : errors) spdlog::warn("{}: column description: {}", db_id, e);
    if (n > 0) {
      Status s = save_metadata(*m, settings_.index.index_dir);
      if (!s) spdlog::warn("{}: {}", db_id, s.message());
    }
  }
  d->meta = std::make_shared<const DatabaseMetadata>(std::move(*m));
  return d->meta;
}

Result<QuestionContext> ContextBuilder::build(const data::Task& q, const data::Schema& schema,
                                              const fs::path& db_path, uint64_t seed) const {
  QuestionContext out;
  out.question_id = q.question_id;
  out.db_id = q.db_id;
  out.seed = seed;
  // The keyword call needs no index: it goes out first, and the database's index opens (or is
  // built, the first time) while the model answers.
  struct Asked {
    Result<std::vector<std::string>> keywords = internal_error("not asked");
    llm::LlmCallTrace trace;
  };
  std::future<Asked> asked;
  if (keywords_prompt_)
    asked = std::async(std::launch::async, [&] {
      Asked a;
      a.keywords = llm_keywords(*client_, *keywords_prompt_, q.question, q.evidence, q.question_id, &a.trace);
      return a;
    });
  auto idx = index(q.db_id, db_path, schema);
  if (!idx) return idx.status().with_context("question " + q.question_id);  // `asked` waits
  out.index = *idx;

  RetrievalOptions ro = settings_.retrieval;
  if (asked.valid()) {
    Asked a = asked.get();
    auto& kws = a.keywords;
    out.calls.push_back(std::move(a.trace));
    if (kws) {
      out.llm_keywords = *kws;
      ro.extra_keywords.insert(ro.extra_keywords.end(), kws->begin(), kws->end());
      ro.extra_source = "llm";
    } else {
      if (llm::call_error_kind(kws.status()) == llm::CallErrorKind::kCancelled) return kws.status();
      out.errors.push_back("keywords: " + kws.status().message() + " (heuristic keywords only)");
    }
  }
  if (reranker_) {
    out.retrieval = retrieve(*out.index, schema, q.question, q.evidence, pool_options(ro, reranker_->options()));
    llm::LlmCallTrace trace;
    Status s = reranker_->rerank(out.retrieval, ro, q.question_id, &trace);
    if (!trace.stage.empty()) out.calls.push_back(std::move(trace));
    if (!s) out.errors.push_back(s.message() + " (edit-distance ranking kept)");
  } else {
    out.retrieval = retrieve(*out.index, schema, q.question, q.evidence, ro);
  }

  std::vector<data::ForeignKey> inferred;
  if (settings_.metadata) {
    auto m = metadata(q.db_id, db_path, schema);
    if (!m) return m.status().with_context("question " + q.question_id);
    out.metadata = *m;
    for (const auto& f : out.metadata->inferred_fks)
      inferred.push_back({f.from_table, f.from_column, f.to_table, f.to_column});
  }
  if (filter_prompt_) {
    auto f = filter_columns(*client_, *filter_prompt_, q, schema, settings_.filter, out.index.get(),
                            &out.retrieval.values, inferred, out.metadata.get());
    if (!f) return f.status().with_context("question " + q.question_id);
    out.selected_columns = std::move(f->selected);
    out.join_keys = std::move(f->join_keys);
    out.dropped_tables = std::move(f->dropped_tables);
    for (auto& e : f->errors) out.errors.push_back("column filter: " + e);
    for (auto& c : f->calls) out.calls.push_back(std::move(c));
  }
  return out;
}

}  // namespace nl2sql::context
