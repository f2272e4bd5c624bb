#include "nl2sql/context/retrieve.h"

#include <algorithm>
#include <map>
#include <regex>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "nl2sql/context/text_match.h"

namespace nl2sql::context {
namespace {

const std::unordered_set<std::string>& stop_words() {
  static const std::unordered_set<std::string> words = {
      "a", "about", "above", "after", "all", "also", "among", "an", "and", "any", "are", "as", "at",
      "be", "been", "before", "being", "below", "between", "both", "but", "by", "can", "could",
      "did", "do", "does", "each", "either", "else", "every", "for", "from", "give", "had", "has",
      "have", "having", "he", "her", "his", "how", "i", "if", "in", "into", "is", "it", "its",
      "list", "many", "me", "more", "most", "much", "name", "names", "no", "not", "of", "on",
      "one", "only", "or", "other", "our", "out", "over", "per", "please", "refer", "refers",
      "referred", "same", "she", "should", "show", "so", "some", "such", "tell", "than", "that",
      "the", "their", "them", "then", "there", "these", "they", "this", "those", "to", "under",
      "up", "was", "we", "were", "what", "when", "where", "which", "while", "who", "whom",
      "whose", "why", "will", "with", "would", "you", "your", "find", "state", "provide",
      "indicate", "among", "number", "total", "least", "highest", "lowest", "average", "count",
      "sum", "max", "min", "avg", "select", "where", "divide", "calculation", "percentage",
      "times", "mean", "means"};
  return words;
}

bool is_stop(const std::string& normalized_word) { return stop_words().count(normalized_word) > 0; }

// Splits text into word tokens on whitespace and punctuation; apostrophes, hyphens, dots and
// slashes inside a word are kept ("O'Brien", "x-ray", "3.5", "2012/07").
std::vector<std::string> words_of(const std::string& text) {
  std::u32string s = decode_utf8(text);
  std::vector<std::string> out;
  std::u32string cur;
  auto edge = [](char32_t c) { return c == U'\'' || c == U'-' || c == U'.' || c == U'/' || c == 0x2019; };
  auto flush = [&] {
    while (!cur.empty() && edge(cur.back())) cur.pop_back();
    size_t b = 0;
    while (b < cur.size() && edge(cur[b])) ++b;
    if (b < cur.size()) out.push_back(encode_utf8(cur.substr(b)));
    cur.clear();
  };
  for (char32_t c : s) {
    bool word_char = c >= 0x80 || (c >= U'0' && c <= U'9') || (c >= U'a' && c <= U'z') ||
                     (c >= U'A' && c <= U'Z') || c == U'\'' || c == U'-' || c == U'.' || c == U'/' ||
                     c == U'&' || c == U'_';
    // Typographic quotes separate words; U+2019 is also the typographic apostrophe (kept inside).
    if (c == 0x2018 || c == 0x201C || c == 0x201D || c == 0x00AB || c == 0x00BB) word_char = false;
    if (word_char) cur.push_back(c);
    else flush();
  }
  flush();
  return out;
}

bool starts_upper(const std::string& w) {
  std::u32string s = decode_utf8(w);
  return !s.empty() && fold_code_point(s[0]) != s[0];
}

bool is_number(const std::string& w) {
  bool digit = false;
  for (char c : w) {
    if (c >= '0' && c <= '9') digit = true;
    else if (c != '.' && c != '-' && c != '/' && c != ',') return false;
  }
  return digit;
}

struct KeywordSet {
  std::vector<Keyword> list;
  std::unordered_set<std::string> seen;
  void add(std::string text, const char* source) {
    auto trim = [](std::string& s) {
      while (!s.empty() && (s.back() == ' ' || s.back() == '%')) s.pop_back();
      size_t b = 0;
      while (b < s.size() && (s[b] == ' ' || s[b] == '%')) ++b;
      s.erase(0, b);
    };
    trim(text);
    std::string n = normalize_text(text);
    if (n.empty() || !seen.insert(n).second) return;
    list.push_back({std::move(text), source});
  }
};

void add_quoted(const std::string& text, KeywordSet& ks, const char* source) {
  static const std::regex single(R"re((?:^|[\s(=,:])'([^']+)'(?=$|[\s),.?;:!]))re");
  static const std::regex dbl(R"re((?:^|[\s(=,:])"([^"]+)"(?=$|[\s),.?;:!]))re");
  static const std::regex back("`([^`]+)`");
  static const std::regex curly_single("\xE2\x80\x98([^\xE2]+)\xE2\x80\x99");  // ‘…’
  static const std::regex curly_double("\xE2\x80\x9C([^\xE2]+)\xE2\x80\x9D");  // “…”
  for (const auto* re : {&single, &dbl, &back, &curly_single, &curly_double})
    for (auto it = std::sregex_iterator(text.begin(), text.end(), *re); it != std::sregex_iterator(); ++it)
      ks.add((*it)[1].str(), source);
}

void add_evidence_values(const std::string& evidence, KeywordSet& ks) {
  static const std::regex cmp(R"re((?:=|\bLIKE\b|\bIN\s*\()\s*'([^']*)')re", std::regex::icase);
  static const std::regex cmp2(R"re((?:=|\bLIKE\b)\s*"([^"]*)")re", std::regex::icase);
  for (const auto* re : {&cmp, &cmp2})
    for (auto it = std::sregex_iterator(evidence.begin(), evidence.end(), *re); it != std::sregex_iterator(); ++it)
      ks.add((*it)[1].str(), "evidence");
}

void add_capitalized(const std::vector<std::string>& words, KeywordSet& ks) {
  static const std::unordered_set<std::string> connectors = {"of", "de", "la", "the", "and", "del", "von", "van", "&"};
  size_t i = 0;
  while (i < words.size()) {
    if (!starts_upper(words[i]) || (i == 0 && is_stop(normalize_text(words[i])))) {
      ++i;
      continue;
    }
    size_t j = i + 1, end = i + 1;
    while (j < words.size()) {
      if (starts_upper(words[j])) end = ++j;
      else if (connectors.count(words[j]) && j + 1 < words.size() && starts_upper(words[j + 1])) ++j;
      else break;
    }
    std::string span;
    for (size_t k = i; k < end; ++k) span += (k > i ? " " : "") + words[k];
    ks.add(span, "capitalized");
    i = end;
  }
}

void add_ngrams(const std::vector<std::string>& words, int max_n, KeywordSet& ks) {
  std::vector<std::string> norm;
  for (const auto& w : words) norm.push_back(normalize_text(w));
  for (int n = max_n; n >= 1; --n)
    for (size_t i = 0; i + static_cast<size_t>(n) <= words.size(); ++i) {
      // Spans that start or end with a stop word add nothing over the inner span.
      if (is_stop(norm[i]) || is_stop(norm[i + static_cast<size_t>(n) - 1])) continue;
      std::string span;
      for (size_t k = i; k < i + static_cast<size_t>(n); ++k) span += (k > i ? " " : "") + words[k];
      if (n == 1 && decode_utf8(span).size() < 2 && !is_number(span)) continue;
      ks.add(span, "ngram");
    }
}

std::string column_words(const std::string& name) {
  std::string s = name;
  std::replace(s.begin(), s.end(), '_', ' ');
  return normalize_text(s);
}

bool contains_word(const std::string& haystack, const std::string& needle) {
  size_t pos = 0;
  auto is_letter = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || (c & 0x80); };
  while ((pos = haystack.find(needle, pos)) != std::string::npos) {
    bool left = pos == 0 || !is_letter(haystack[pos - 1]);
    size_t e = pos + needle.size();
    bool right = e == haystack.size() || !is_letter(haystack[e]);
    if (left && right) return true;
    ++pos;
  }
  return false;
}

}  // namespace

std::vector<Keyword> extract_keywords(const std::string& question, const std::string& evidence,
                                      int max_ngram) {
  KeywordSet ks;
  add_evidence_values(evidence, ks);
  add_quoted(question, ks, "quoted");
  add_quoted(evidence, ks, "quoted");
  auto qwords = words_of(question);
  auto ewords = words_of(evidence);
  add_capitalized(qwords, ks);
  for (const auto& w : qwords)
    if (is_number(w)) ks.add(w, "number");
  add_ngrams(qwords, max_ngram, ks);
  add_ngrams(ewords, max_ngram, ks);
  return ks.list;
}

bool only_stop_words(const std::string& keyword) {
  for (const auto& w : words_of(keyword))
    if (!is_stop(normalize_text(w))) return false;
  return true;
}

Retrieval retrieve(const ValueIndex& index, const data::Schema& schema, const std::string& question,
                   const std::string& evidence, const RetrievalOptions& options) {
  Retrieval out;
  out.keywords = extract_keywords(question, evidence);
  {
    std::unordered_set<std::string> seen;
    for (const auto& k : out.keywords) seen.insert(normalize_text(k.text));
    for (const auto& e : options.extra_keywords)
      if (seen.insert(normalize_text(e)).second) out.keywords.push_back({e, options.extra_source});
  }
  std::vector<std::u32string> kn;
  for (const auto& k : out.keywords) kn.push_back(normalize_code_points(k.text));

  // Best score per value id and the keyword that gave it.
  std::unordered_map<uint32_t, std::pair<double, size_t>> best;
  std::vector<uint32_t> all;
  if (options.exhaustive) {
    all.resize(index.size());
    for (uint32_t i = 0; i < all.size(); ++i) all[i] = i;
  }
  for (size_t k = 0; k < kn.size(); ++k) {
    if (kn[k].empty()) continue;
    const EditMatcher matcher(kn[k]);
    std::vector<uint32_t> cands = options.exhaustive     ? std::vector<uint32_t>{}
                                  : options.short_values ? index.candidates(kn[k])
                                                         : index.lsh_candidates(kn[k]);
    const auto& ids = options.exhaustive ? all : cands;
    for (uint32_t id : ids) {
      ++out.candidates_scored;
      double s = matcher.similarity_at_least(index.normalized(id), options.min_similarity);
      if (s < options.min_similarity) continue;
      auto [it, inserted] = best.try_emplace(id, s, k);
      if (!inserted && s > it->second.first) it->second = {s, k};
    }
  }
  std::vector<std::pair<uint32_t, std::pair<double, size_t>>> ranked(best.begin(), best.end());
  std::sort(ranked.begin(), ranked.end(), [&](const auto& a, const auto& b) {
    if (a.second.first != b.second.first) return a.second.first > b.second.first;
    // Equal scores: the longer (more specific) keyword first, so "Songs of Prague" beats the
    // city "Prague" matched by the unigram.
    size_t ka = kn[a.second.second].size(), kb = kn[b.second.second].size();
    if (ka != kb) return ka > kb;
    size_t la = index.normalized(a.first).size(), lb = index.normalized(b.first).size();
    if (la != lb) return la < lb;
    return a.first < b.first;
  });
  std::map<const IndexedColumn*, size_t> per_column;
  for (const auto& [id, sk] : ranked) {
    if (out.values.size() >= options.max_values) break;
    const IndexedColumn& col = index.column_of(id);
    if (per_column[&col]++ >= options.per_column) continue;
    out.values.push_back({col.table, col.column, std::string(index.value(id)), sk.first,
                          out.keywords[sk.second].text, id});
  }

  // Columns by name, display name and description.
  if (!options.match_columns) return out;
  std::vector<std::u32string> kc;  // keywords as column words ("full_name" -> "full name")
  for (const auto& k : out.keywords) kc.push_back(decode_utf8(column_words(k.text)));
  for (const auto& t : schema.tables)
    for (const auto& c : t.columns) {
      ColumnMatch m{t.name, c.name, 0, "", ""};
      std::u32string name = decode_utf8(column_words(c.name));
      std::u32string display = decode_utf8(column_words(c.display_name));
      std::string desc = normalize_text(c.description);
      for (size_t k = 0; k < kn.size(); ++k) {
        if (kn[k].size() < 3 || out.keywords[k].source == "number") continue;
        double s = std::max(edit_similarity(kc[k], name), display.empty() ? 0.0 : edit_similarity(kc[k], display));
        if (s > m.score) m = {t.name, c.name, s, out.keywords[k].text, "name"};
        if (kn[k].size() >= 4 && !desc.empty() && options.min_column_score > m.score &&
            !is_stop(encode_utf8(kn[k])) && contains_word(desc, encode_utf8(kn[k])))
          m = {t.name, c.name, options.min_column_score, out.keywords[k].text, "description"};
      }
      if (m.score >= options.min_column_score) out.columns.push_back(std::move(m));
    }
  std::stable_sort(out.columns.begin(), out.columns.end(),
                   [](const ColumnMatch& a, const ColumnMatch& b) { return a.score > b.score; });
  if (out.columns.size() > options.max_columns) out.columns.resize(options.max_columns);
  return out;
}

}  // namespace nl2sql::context
