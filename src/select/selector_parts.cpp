#include "selector_parts.h"

#include "nl2sql/core/hash.h"
#include "nl2sql/core/thread_pool.h"
#include "nl2sql/db/result_digest.h"
#include "nl2sql/llm/model_call.h"
#include "prompt_parts.h"

namespace nl2sql::select::detail {

using json = nlohmann::json;

std::string qid(const SelectionInput& in) { return in.question ? in.question->question_id : "?"; }

Status check_input(const SelectionInput& in) {
  if (!in.question) return invalid_input("selection input without a question");
  return Status::ok();
}

// Best candidate by the shared tie-break order among those with SQL (used when no candidate
// executed): -1 when the pool has no SQL at all.
int first_ranked(const SelectionInput& in) {
  int best = -1;
  for (int i = 0; i < static_cast<int>(in.candidates.size()); ++i) {
    if (in.candidates[static_cast<size_t>(i)].sql.empty()) continue;
    if (best < 0 || candidate_rank(in.candidates, i, in.generator_order) <
                        candidate_rank(in.candidates, best, in.generator_order))
      best = i;
  }
  return best;
}

json clusters_json(const PoolClusters& pc, const SelectionInput& in) {
  json out = json::array();
  for (const auto& c : pc.clusters) {
    json ids = json::array();
    for (int m : c.members) ids.push_back(in.candidates[static_cast<size_t>(m)].id);
    out.push_back({{"members", ids}, {"representative", in.candidates[static_cast<size_t>(c.representative)].id}});
  }
  return out;
}

// The consistency choice: representative of the largest cluster; nothing executable → the
// best-ranked candidate with SQL.
int consistency_choice(const PoolClusters& pc, const SelectionInput& in) {
  return pc.clusters.empty() ? first_ranked(in) : pc.clusters.front().representative;
}

Result<ResultEquality> read_equality(const core::Config& config, const std::string& key) {
  auto s = config.get_string(key);
  if (!s.is_ok()) return s.status();
  if (*s == "relaxed") return ResultEquality::kRelaxed;
  if (*s == "exact") return ResultEquality::kExact;
  return invalid_input("config key \"" + key + "\": expected relaxed or exact, got \"" + *s + "\"");
}


ResultGroups result_groups(const SelectionInput& in, ResultEquality equality,
                           const std::function<bool(const db::ExecutionResult&)>& keep) {
  ResultGroups out;
  std::map<std::string, size_t> by_key;
  for (size_t i = 0; i < in.candidates.size(); ++i) {
    const auto& c = in.candidates[i];
    if (!executable(c) || !keep(*c.result)) continue;
    ++out.total;
    auto [it, fresh] = by_key.emplace(result_key(*c.result, equality), out.groups.size());
    if (fresh) out.groups.emplace_back();
    out.groups[it->second].push_back(static_cast<int>(i));
  }
  return out;
}

bool has_non_null_row(const db::ExecutionResult& execution) {
  for (const auto& row : execution.result.rows)
    for (const auto& v : row)
      if (!v.is_null()) return true;
  if (!execution.digest) return false;
  static const db::Hash128 kNull = [] {
    db::ResultSet one;
    one.rows.push_back({db::Value::null()});
    return db::digest_of(one).cell(0, 0);
  }();
  const db::ResultDigest& d = *execution.digest;
  for (size_t r = 0; r < d.rows(); ++r)
    for (size_t c = 0; c < d.columns(); ++c)
      if (!(d.cell(r, c) == kNull)) return true;
  return false;
}

ResultGroups first_nonempty_groups(const SelectionInput& in, ResultEquality equality,
                                   const std::function<bool(const db::ExecutionResult&)>& strict, bool& fallback_used) {
  auto g = result_groups(in, equality, strict);
  fallback_used = g.groups.empty();
  if (fallback_used) g = result_groups(in, equality, [](const db::ExecutionResult&) { return true; });
  return g;
}

int64_t ask_seed(const SelectionInput& in, const std::string& purpose, int64_t index) {
  core::KeyHasher h;
  h.add(static_cast<int64_t>(in.seed)).add(purpose).add(index);
  // Positive and below 2^31, which every OpenAI-compatible server accepts.
  return static_cast<int64_t>(h.seed() % 2147483647ULL);
}

Result<std::string> ask_model(const ModelAsk& ask, const std::map<std::string, std::string>& values,
                              llm::ChatRequest request, std::vector<llm::LlmCallTrace>& calls) {
  auto prompt = ask.tpl->render(values);
  if (!prompt.is_ok()) return prompt.status();
  request.role = ask.role;
  request.stage = "select";
  request.template_hash = ask.tpl->hash();
  request.messages = {{"system", detail::kSystemPrompt}, {"user", *prompt}};
  std::string key;
  if (ask.memo) {
    core::KeyHasher h;
    h.add(request.role).add(request.profile).add(request.template_hash).add(*prompt);
    h.add(request.temperature ? std::to_string(*request.temperature) : "-");
    h.add(request.seed ? *request.seed : int64_t{-1}).add(request.sample_index);
    key = h.hex();
    if (auto known = ask.memo->find(key)) return *known;
  }
  llm::CallSpend spent;
  auto r = ask.client->chat(request, &spent);
  calls.push_back(llm::trace_of("select", *ask.tpl, request, r, spent));
  if (!r.is_ok()) return r.status();
  if (ask.memo) ask.memo->put(key, r->text());
  return r->text();
}

std::vector<Result<std::string>> ask_all(const ModelAsk& ask, std::vector<Ask> asks,
                                         std::vector<llm::LlmCallTrace>& calls) {
  std::vector<std::vector<llm::LlmCallTrace>> traces(asks.size());
  auto out = core::parallel_map<Result<std::string>>(asks.size(), asks.size(), [&](size_t n) {
    return ask_model(ask, asks[n].values, std::move(asks[n].request), traces[n]);
  });
  for (const auto& t : traces) calls.insert(calls.end(), t.begin(), t.end());
  return out;
}

llm::ChatRequest base_request(const SelectionInput& in, llm::CallTask task, int64_t sample_index) {
  llm::ChatRequest req;
  req.question_id = qid(in);
  req.sample_index = sample_index;
  req.tag.task = task;
  req.tag.question_id = qid(in);
  req.tag.question = in.question->question;
  req.tag.evidence = in.question->evidence;
  req.tag.db_id = in.question->db_id;
  req.tag.sample_index = sample_index;
  return req;
}

std::shared_ptr<const sql::Schema> SchemaCache::get(const std::filesystem::path& db) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = cache_.find(db.string());
  if (it != cache_.end()) return it->second;
  auto s = db::inspect_schema(db);
  std::shared_ptr<const sql::Schema> p = s.is_ok() ? std::make_shared<const sql::Schema>(std::move(*s)) : nullptr;
  cache_[db.string()] = p;
  return p;
}

std::string schema_for(const SelectionInput& in, const SchemaCache& cache,
                       const std::vector<std::string>& sqls) {
  if (!in.schema) return "(schema not available)";
  auto s = cache.get(in.db_path);
  return detail::union_schema_text(*in.schema, s.get(), in.metadata, sqls);
}

}  // namespace nl2sql::select::detail
