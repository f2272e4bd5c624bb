// Demonstrations chosen per question by similarity (see demo_pool.h).
#include "demo_pool.h"

#include <algorithm>
#include <cctype>
#include <cstdio>

#include "nl2sql/core/text.h"
#include "nl2sql/db/schema_info.h"
#include "schema_linking.h"

namespace nl2sql::generate {
namespace {

bool alnum(char c) { return std::isalnum(static_cast<unsigned char>(c)) || static_cast<unsigned char>(c) >= 0x80; }

struct Token {
  std::string text;       // as written
  bool quoted = false;    // a quoted literal
  bool sentence_start = false;
};

// Words and quoted literals of a question. A quote opens a literal only after a non-word
// character (so "singer's" stays a word) and closes at the same quote followed by a non-word
// character.
std::vector<Token> tokens_of(const std::string& s) {
  std::vector<Token> out;
  bool start = true;
  size_t i = 0;
  while (i < s.size()) {
    const char c = s[i];
    if ((c == '\'' || c == '"') && (i == 0 || !alnum(s[i - 1]))) {
      size_t j = i + 1;
      while (j < s.size() && !(s[j] == c && (j + 1 == s.size() || !alnum(s[j + 1])))) ++j;
      if (j < s.size()) {
        out.push_back({s.substr(i + 1, j - i - 1), true, start});
        start = false;
        i = j + 1;
        continue;
      }
    }
    if (alnum(c)) {
      size_t j = i;
      while (j < s.size() && alnum(s[j])) ++j;
      out.push_back({s.substr(i, j - i), false, start});
      start = false;
      i = j;
      continue;
    }
    if (c == '.' || c == '?' || c == '!') start = true;
    ++i;
  }
  return out;
}

// The schema word a lower-case token names, if any ("singers" → "singer", "classes" → "class").
const std::string* schema_match(const std::string& w, const std::set<std::string>& words) {
  if (auto it = words.find(w); it != words.end()) return &*it;
  if (w.size() > 3 && w.back() == 's') {
    if (auto it = words.find(w.substr(0, w.size() - 1)); it != words.end()) return &*it;
    if (w.size() > 4 && w.compare(w.size() - 2, 2, "es") == 0)
      if (auto it = words.find(w.substr(0, w.size() - 2)); it != words.end()) return &*it;
  }
  return nullptr;
}

bool has_digit(const std::string& w) {
  return std::any_of(w.begin(), w.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); });
}

// A capitalised word inside a sentence names a value ("France", "Lyon"); "I" does not.
bool value_like(const Token& t) {
  return !t.sentence_start && t.text.size() > 1 && std::isupper(static_cast<unsigned char>(t.text[0]));
}

double jaccard(const std::vector<std::string>& a, const std::vector<std::string>& b) {
  if (a.empty() && b.empty()) return 0;
  std::vector<std::string> common;
  std::set_intersection(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(common));
  const double inter = static_cast<double>(common.size());
  return inter / (static_cast<double>(a.size() + b.size()) - inter);
}

std::string normalized(const std::string& q) { return core::squash_spaces(core::trim(core::lower(q))); }

// The words of every table and column name (data::Schema and db::SchemaInfo alike).
template <class AnySchema>
std::set<std::string> table_and_column_words(const AnySchema& schema) {
  std::set<std::string> out;
  for (const auto& t : schema.tables) {
    for (auto& w : name_words(t.name)) out.insert(w);
    for (const auto& c : t.columns)
      for (auto& w : name_words(c.name)) out.insert(w);
  }
  return out;
}

std::set<std::string> schema_words_of(const db::SchemaInfo& schema) { return table_and_column_words(schema); }

}  // namespace

std::set<std::string> name_words(const std::string& name) {
  std::set<std::string> out;
  std::string cur;
  for (size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    const bool boundary = i > 0 && std::isupper(static_cast<unsigned char>(c)) &&
                          std::islower(static_cast<unsigned char>(name[i - 1]));
    if (!alnum(c) || boundary) {
      if (!cur.empty()) out.insert(core::lower(cur));
      cur.clear();
      if (!alnum(c)) continue;
    }
    cur += c;
  }
  if (!cur.empty()) out.insert(core::lower(cur));
  return out;
}

std::set<std::string> schema_words_of(const data::Schema& schema) { return table_and_column_words(schema); }

std::vector<std::string> masked_question(const std::string& question, const std::set<std::string>& schema_words) {
  std::set<std::string> out;
  for (const auto& t : tokens_of(question)) {
    if (t.quoted) {
      out.insert("<val>");
      continue;
    }
    const std::string w = core::lower(t.text);
    if (has_digit(w)) out.insert("<num>");
    else if (schema_match(w, schema_words)) out.insert("<sch>");
    else if (value_like(t)) out.insert("<val>");
    else out.insert(w);
  }
  return {out.begin(), out.end()};
}

std::set<std::string> mentioned_schema_words(const std::string& question, const std::set<std::string>& schema_words) {
  std::set<std::string> out;
  for (const auto& t : tokens_of(question)) {
    if (t.quoted) continue;
    const std::string w = core::lower(t.text);
    if (has_digit(w)) continue;
    if (const std::string* m = schema_match(w, schema_words)) out.insert(*m);
  }
  return out;
}

Result<std::shared_ptr<const DemoPool>> DemoPool::from_pairs(std::vector<DemoPair> pairs, DemoPoolOptions options) {
  std::shared_ptr<DemoPool> pool(new DemoPool());
  pool->options_ = options;
  std::map<std::filesystem::path, std::optional<db::SchemaInfo>> schemas;
  for (auto& p : pairs) {
    auto [it, fresh] = schemas.try_emplace(p.db_path);
    if (fresh) {
      auto s = db::inspect_schema(p.db_path);
      if (s) it->second = std::move(*s);
    }
    if (!it->second) {
      ++pool->dropped_;
      continue;
    }
    const db::SchemaInfo& schema = *it->second;
    const std::set<std::string> words = schema_words_of(schema);
    SchemaLink link = link_schema({p.sql}, schema);
    std::set<std::string> used;
    for (const auto& t : link.tables)
      for (auto& w : name_words(t)) used.insert(w);
    for (const auto& c : link.columns)
      for (auto& w : name_words(c.substr(c.find('.') + 1))) used.insert(w);
    pool->masked_.push_back(masked_question(p.question, words));
    pool->sql_words_.emplace_back(used.begin(), used.end());
    pool->normalized_question_.push_back(normalized(p.question));
    pool->pairs_.push_back(std::move(p));
  }
  if (pool->pairs_.empty())
    return not_found("demonstration pool: none of " + std::to_string(pairs.size()) +
                     " (question, SQL) pairs has a readable database");
  return std::shared_ptr<const DemoPool>(std::move(pool));
}

Result<std::shared_ptr<const DemoPool>> DemoPool::build(const QpDemoSource& source, DemoPoolOptions options) {
  if (source.empty()) return invalid_input("demonstration pool: no source configured");
  auto pairs = read_demo_pairs(source);
  if (!pairs) return pairs.status();
  if (pairs->empty()) return not_found("demonstration pool: " + source.describe() + " holds no usable pair");
  return from_pairs(std::move(*pairs), options);
}

std::vector<ScoredDemo> DemoPool::rank(const data::Task& question, const data::Schema& schema) const {
  const std::set<std::string> words = schema_words_of(schema);
  const std::vector<std::string> masked = masked_question(question.question, words);
  const std::set<std::string> mentioned = mentioned_schema_words(question.question, words);
  const std::vector<std::string> schema_q(mentioned.begin(), mentioned.end());
  const std::string same = normalized(question.question);
  std::vector<ScoredDemo> out;
  for (size_t i = 0; i < pairs_.size(); ++i) {
    if (normalized_question_[i] == same) continue;
    if (options_.exclude_same_db && pairs_[i].db_id == question.db_id) continue;
    ScoredDemo d;
    d.index = i;
    d.question_similarity = jaccard(masked, masked_[i]);
    d.schema_similarity = jaccard(schema_q, sql_words_[i]);
    d.score = (1 - options_.schema_weight) * d.question_similarity + options_.schema_weight * d.schema_similarity;
    out.push_back(d);
  }
  std::stable_sort(out.begin(), out.end(), [](const ScoredDemo& a, const ScoredDemo& b) { return a.score > b.score; });
  return out;
}

std::vector<ScoredDemo> DemoPool::diverse(std::vector<ScoredDemo> ranked) const {
  std::vector<ScoredDemo> out, rest;
  std::set<std::string> dbs;
  for (const auto& d : ranked) (dbs.insert(pairs_[d.index].db_id).second ? out : rest).push_back(d);
  out.insert(out.end(), rest.begin(), rest.end());
  return out;
}

std::vector<ScoredDemo> DemoPool::choose(const data::Task& question, const data::Schema& schema) const {
  auto ranked = diverse(rank(question, schema));
  if (ranked.size() > options_.count) ranked.resize(options_.count);
  return ranked;
}

std::vector<QpDemo> DemoPool::qp_demos(const data::Task& question, const data::Schema& schema,
                                       const db::Executor& executor, std::vector<ScoredDemo>* chosen) const {
  std::vector<QpDemo> out;
  for (const auto& d : diverse(rank(question, schema))) {
    if (out.size() >= options_.count) break;
    std::optional<QpDemo> planned;
    {
      std::lock_guard<std::mutex> lock(plans_mu_);
      auto it = plans_.find(d.index);
      if (it != plans_.end()) {
        if (it->second) {
          out.push_back(*it->second);
          if (chosen) chosen->push_back(d);
        }
        continue;
      }
    }
    // Planned outside the lock: two threads may plan the same pair once each, with one result.
    auto p = plan_demo(pairs_[d.index], executor);
    if (p) planned = std::move(*p);
    std::lock_guard<std::mutex> lock(plans_mu_);
    plans_.emplace(d.index, planned);
    if (planned) {
      out.push_back(std::move(*planned));
      if (chosen) chosen->push_back(d);
    }
  }
  return out;
}

std::string demo_note(const DemoPool& pool, const std::vector<ScoredDemo>& chosen) {
  std::string s = "demos: " + std::to_string(chosen.size()) + " similar pair(s) from the pool:";
  for (const auto& d : chosen) {
    const DemoPair& p = pool.pairs()[d.index];
    char score[32];
    std::snprintf(score, sizeof score, "%.3f", d.score);
    s += " " + p.db_id + "/" + p.question_id + " (" + score + ")";
  }
  return s;
}

std::string format_similar_demos(const DemoPool& pool, const std::vector<ScoredDemo>& chosen) {
  if (chosen.empty()) return "";
  std::string s =
      "=== Solved questions that resemble yours (chosen for this question from a train split) ===\n";
  for (size_t i = 0; i < chosen.size(); ++i) {
    const DemoPair& p = pool.pairs()[chosen[i].index];
    s += "Example " + std::to_string(i + 1) + " (database " + p.db_id + ")\n";
    s += "Question: " + p.question + "\n";
    s += "Hint: " + (p.evidence.empty() ? std::string("(none)") : p.evidence) + "\n";
    s += "```sql\n" + p.sql + "\n```\n\n";
  }
  return s;
}

}  // namespace nl2sql::generate
