#include "nl2sql/context/embedding_rerank.h"

#include <algorithm>
#include <cmath>
#include <map>

#include <fmt/format.h>

#include "nl2sql/context/text_match.h"
#include "nl2sql/llm/client.h"

namespace nl2sql::context {

RetrievalOptions pool_options(const RetrievalOptions& base, const EmbeddingRerankOptions& e) {
  RetrievalOptions o = base;
  o.min_similarity = std::min(base.min_similarity, e.pool_min_similarity);
  o.max_values = std::max(base.max_values, e.pool);
  o.per_column = std::max(base.per_column, e.pool);
  return o;
}

double cosine_similarity(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.empty() || a.size() != b.size()) return 0.0;
  double dot = 0, na = 0, nb = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    dot += static_cast<double>(a[i]) * b[i];
    na += static_cast<double>(a[i]) * a[i];
    nb += static_cast<double>(b[i]) * b[i];
  }
  if (na == 0 || nb == 0) return 0.0;
  return dot / std::sqrt(na * nb);
}

void cut_values(std::vector<ValueMatch>& values, double min_score, size_t per_column, size_t max_values) {
  std::vector<ValueMatch> kept;
  std::map<std::pair<std::string, std::string>, size_t> count;
  for (auto& v : values) {
    if (kept.size() >= max_values) break;
    if (v.score < min_score) continue;
    if (count[{v.table, v.column}]++ >= per_column) continue;
    kept.push_back(std::move(v));
  }
  values = std::move(kept);
}

EmbeddingReranker::EmbeddingReranker(llm::Client& client, EmbeddingRerankOptions options)
    : client_(client), options_(std::move(options)) {}

Status EmbeddingReranker::rerank(Retrieval& r, const RetrievalOptions& limits,
                                 const std::string& question_id, llm::LlmCallTrace* trace) {
  if (r.values.empty()) return Status::ok();
  // Texts to embed: every keyword and every pooled value not yet memoized.
  std::vector<std::string> texts;
  for (const auto& k : r.keywords) texts.push_back(k.text);
  for (const auto& v : r.values) texts.push_back(v.value);
  std::vector<std::string> missing;
  {
    std::lock_guard lock(mu_);
    for (const auto& t : texts)
      if (!memo_.count(t) && std::find(missing.begin(), missing.end(), t) == missing.end()) missing.push_back(t);
  }
  if (!missing.empty()) {
    llm::EmbeddingRequest req;
    req.profile = options_.profile;
    req.inputs = missing;
    req.stage = "embeddings";
    req.question_id = question_id;
    auto resp = client_.embed(req);
    if (trace) {
      trace->stage = "embeddings";
      trace->profile = options_.profile;
      trace->prompt = fmt::format("{} texts to embed", missing.size());
      if (resp) {
        trace->prompt_tokens = resp->usage.prompt_tokens;
        trace->cost_usd = resp->cost_usd;
        trace->latency_s = resp->latency_s;
        trace->response = fmt::format("{} vectors of {} dimensions", resp->vectors.size(),
                                      resp->vectors.empty() ? 0 : resp->vectors[0].size());
      } else {
        trace->error = resp.status().message();
      }
    }
    if (!resp) {
      cut_values(r.values, limits.min_similarity, limits.per_column, limits.max_values);
      return resp.status().with_context("embedding re-ranking, question " + question_id);
    }
    std::lock_guard lock(mu_);
    for (size_t i = 0; i < missing.size(); ++i) memo_[missing[i]] = std::move(resp->vectors[i]);
  }
  std::vector<const std::vector<float>*> kv;
  std::vector<std::pair<double, size_t>> scored;  // (combined, index into r.values)
  {
    std::lock_guard lock(mu_);
    for (const auto& k : r.keywords) kv.push_back(&memo_.at(k.text));
    for (size_t i = 0; i < r.values.size(); ++i) {
      const auto& vv = memo_.at(r.values[i].value);
      double best = 0;
      for (const auto* k : kv) best = std::max(best, cosine_similarity(vv, *k));
      const double w = options_.edit_weight;
      scored.push_back({w * r.values[i].score + (1 - w) * best, i});
    }
  }
  std::stable_sort(scored.begin(), scored.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  std::vector<ValueMatch> ranked;
  for (const auto& [s, i] : scored) {
    ranked.push_back(r.values[i]);
    ranked.back().score = s;
  }
  cut_values(ranked, options_.min_score, limits.per_column, limits.max_values);
  r.values = std::move(ranked);
  return Status::ok();
}

}  // namespace nl2sql::context
