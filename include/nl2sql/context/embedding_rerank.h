// Embedding re-ranking of retrieved values, used when `context.embeddings.profile` names a model
// profile that serves /embeddings. Edit distance alone cannot tell that "automobile" means "car";
// embeddings can, but they are too slow to compare against every stored value. So the LSH +
// edit-distance pass runs first with a looser threshold (pool_min_similarity) and a larger
// budget (pool values), then every keyword and every pooled value is embedded (llm::Client::
// embed, one batch per question, texts already seen are memoized) and each value is scored
//
//     score = edit_weight * edit_similarity + (1 - edit_weight) * max_k cosine(value, keyword_k)
//
// (default weights 0.5 / 0.5; cosine below 0 counts as 0). Values at or above min_score are
// kept, at most RetrievalOptions::per_column per column and max_values overall, best first.
// A failed embeddings call leaves the edit-distance ranking (cut to the normal thresholds) and
// is reported as an error Status the caller records.
//
// Thread-safety: rerank() may be called from many threads; the memo is guarded by a mutex.
#pragma once

#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "nl2sql/context/retrieve.h"
#include "nl2sql/core/status.h"
#include "nl2sql/llm/trace.h"

namespace nl2sql::llm {
class Client;
}

namespace nl2sql::context {

struct EmbeddingRerankOptions {
  std::string profile;               // llm.models.<profile>; empty: no re-ranking
  double edit_weight = 0.5;          // weight of edit similarity; cosine gets 1 - edit_weight
  double pool_min_similarity = 0.4;  // edit similarity a value needs to be re-ranked at all
  size_t pool = 50;                  // values re-ranked per question
  double min_score = 0.6;            // combined score a value needs
};

// The retrieval options for the pooled first pass (looser threshold, larger limits).
RetrievalOptions pool_options(const RetrievalOptions& base, const EmbeddingRerankOptions& e);

double cosine_similarity(const std::vector<float>& a, const std::vector<float>& b);

class EmbeddingReranker {
 public:
  EmbeddingReranker(llm::Client& client, EmbeddingRerankOptions options);

  // Re-scores `r.values` (from retrieve() with pool_options) in place and cuts them to
  // `limits`. On error, `r.values` is cut by edit similarity alone (limits.min_similarity).
  Status rerank(Retrieval& r, const RetrievalOptions& limits, const std::string& question_id,
                llm::LlmCallTrace* trace = nullptr);

  const EmbeddingRerankOptions& options() const { return options_; }

 private:
  llm::Client& client_;
  EmbeddingRerankOptions options_;
  std::mutex mu_;
  std::unordered_map<std::string, std::vector<float>> memo_;  // guarded by mu_
};

// Keeps values at or above min_score, at most per_column per column and max_values overall,
// in the given order (callers sort first).
void cut_values(std::vector<ValueMatch>& values, double min_score, size_t per_column, size_t max_values);

}  // namespace nl2sql::context
