// Result-set equalities (see result_compare.h).
#include "nl2sql/db/result_compare.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>
#include <functional>
#include <optional>
#include <unordered_map>
#include <unordered_set>

#include <xxhash.h>

#include "nl2sql/core/files.h"

namespace nl2sql::db {

namespace {

void append_u64(std::string& out, uint64_t v) {
  out.append(reinterpret_cast<const char*>(&v), sizeof(v));
}

void append_key(std::string& out, const Value& v) {
  switch (v.type) {
    case ValueType::kNull: out.push_back('\0'); return;
    case ValueType::kInteger:
      out.push_back('\1');
      append_u64(out, static_cast<uint64_t>(v.i));
      return;
    case ValueType::kReal: {
      double r = v.r;
      // 2^63 is exactly representable; integral doubles in [-2^63, 2^63) equal an int64.
      if (std::isfinite(r) && r == std::floor(r) && r >= -9223372036854775808.0 &&
          r < 9223372036854775808.0) {
        out.push_back('\1');
        append_u64(out, static_cast<uint64_t>(static_cast<int64_t>(r)));
      } else {
        out.push_back('\2');
        uint64_t bits;
        std::memcpy(&bits, &r, sizeof(bits));
        append_u64(out, bits);
      }
      return;
    }
    case ValueType::kText:
    case ValueType::kBlob:
      out.push_back(v.type == ValueType::kText ? '\3' : '\4');
      append_u64(out, v.s.size());
      out.append(v.s);
      return;
  }
}

std::string row_key(const Row& row) {
  std::string k;
  for (const auto& v : row) append_key(k, v);
  return k;
}

std::string python_bytes_repr(const std::string& b) {
  bool has_single = b.find('\'') != std::string::npos;
  bool has_double = b.find('"') != std::string::npos;
  char quote = (has_single && !has_double) ? '"' : '\'';
  std::string out = "b";
  out.push_back(quote);
  for (unsigned char c : b) {
    if (c == static_cast<unsigned char>(quote) || c == '\\') {
      out.push_back('\\');
      out.push_back(static_cast<char>(c));
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c < 32 || c >= 127) {
      char buf[5];
      std::snprintf(buf, sizeof(buf), "\\x%02x", c);
      out += buf;
    } else {
      out.push_back(static_cast<char>(c));
    }
  }
  out.push_back(quote);
  return out;
}

// Rows after the Spider quick-reject's per-row sort, as Python-equality keys.
std::vector<std::string> unordered_row_keys(const ResultSet& r) {
  std::vector<std::string> out;
  out.reserve(r.rows.size());
  std::vector<std::pair<std::string, const Value*>> cells;
  for (const auto& row : r.rows) {
    cells.clear();
    for (const auto& v : row) cells.emplace_back(spider_sort_key(v), &v);
    std::stable_sort(cells.begin(), cells.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
    std::string k;
    for (const auto& c : cells) append_key(k, *c.second);
    out.push_back(std::move(k));
  }
  return out;
}

// Spider decodes text with errors="ignore": compare what Python would have seen.
ResultSet spider_view(const ResultSet& r) {
  ResultSet out;
  out.columns = r.columns;
  out.rows = r.rows;
  for (auto& row : out.rows)
    for (auto& v : row)
      if (v.type == ValueType::kText && !core::is_valid_utf8(v.s)) v.s = drop_invalid_utf8(v.s);
  return out;
}

bool has_invalid_utf8(const ResultSet& r) {
  for (const auto& row : r.rows)
    for (const auto& v : row)
      if (v.type == ValueType::kText && !core::is_valid_utf8(v.s)) return true;
  return false;
}

}  // namespace

void append_python_key(std::string& out, const Value& v) { append_key(out, v); }

std::string python_key(const Value& v) {
  std::string k;
  append_key(k, v);
  return k;
}

std::string python_float_repr(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof(buf), d, std::chars_format::scientific);
  std::string sci(buf, res.ptr);  // e.g. "-1.2345e+02"
  bool neg = sci[0] == '-';
  if (neg) sci.erase(0, 1);
  auto epos = sci.find('e');
  std::string digits = sci.substr(0, epos);
  digits.erase(std::remove(digits.begin(), digits.end(), '.'), digits.end());
  int exp = std::stoi(sci.substr(epos + 1));
  std::string out;
  if (exp < -4 || exp >= 16) {
    out = digits.substr(0, 1);
    if (digits.size() > 1) out += "." + digits.substr(1);
    char e[16];
    std::snprintf(e, sizeof(e), "e%c%02d", exp < 0 ? '-' : '+', std::abs(exp));
    out += e;
  } else if (exp >= 0) {
    size_t int_len = static_cast<size_t>(exp) + 1;
    if (digits.size() <= int_len) {
      out = digits + std::string(int_len - digits.size(), '0') + ".0";
    } else {
      out = digits.substr(0, int_len) + "." + digits.substr(int_len);
    }
  } else {
    out = "0." + std::string(static_cast<size_t>(-exp - 1), '0') + digits;
  }
  return neg ? "-" + out : out;
}

std::string spider_sort_key(const Value& v) {
  switch (v.type) {
    case ValueType::kNull: return "None<class 'NoneType'>";
    case ValueType::kInteger: return std::to_string(v.i) + "<class 'int'>";
    case ValueType::kReal: return python_float_repr(v.r) + "<class 'float'>";
    case ValueType::kText: return v.s + "<class 'str'>";
    case ValueType::kBlob: return python_bytes_repr(v.s) + "<class 'bytes'>";
  }
  return "";
}

bool bird_equal(const ResultSet& pred, const ResultSet& gold) {
  // Python's sqlite3 raises on text that is not UTF-8, which the BIRD script scores as 0.
  if (has_invalid_utf8(pred) || has_invalid_utf8(gold)) return false;
  // Rows are compared through a 128-bit hash of their canonical key (collision odds ~2^-128),
  // which avoids one string allocation per row on large results.
  struct H {
    size_t operator()(const XXH128_hash_t& h) const { return static_cast<size_t>(h.low64); }
  };
  struct E {
    bool operator()(const XXH128_hash_t& a, const XXH128_hash_t& b) const {
      return a.low64 == b.low64 && a.high64 == b.high64;
    }
  };
  std::string buf;
  auto hashed = [&](const ResultSet& r) {
    std::unordered_set<XXH128_hash_t, H, E> out;
    out.reserve(r.rows.size());
    for (const auto& row : r.rows) {
      buf.clear();
      for (const auto& v : row) append_key(buf, v);
      out.insert(XXH3_128bits(buf.data(), buf.size()));
    }
    return out;
  };
  auto p = hashed(pred);
  auto g = hashed(gold);
  if (p.size() != g.size()) return false;
  for (const auto& h : p)
    if (!g.count(h)) return false;
  return true;
}

bool spider_ts_equal(const ResultSet& gold_in, const ResultSet& pred_in, bool order_matters) {
  // Copy only when some text needs Python's errors="ignore" decoding.
  std::optional<ResultSet> gold_fixed, pred_fixed;
  if (has_invalid_utf8(gold_in)) gold_fixed = spider_view(gold_in);
  if (has_invalid_utf8(pred_in)) pred_fixed = spider_view(pred_in);
  const ResultSet& gold = gold_fixed ? *gold_fixed : gold_in;
  const ResultSet& pred = pred_fixed ? *pred_fixed : pred_in;
  const auto& r1 = gold.rows;
  const auto& r2 = pred.rows;
  if (r1.empty() && r2.empty()) return true;
  if (r1.size() != r2.size()) return false;
  size_t ncols = r1[0].size();
  if (r2[0].size() != ncols) return false;

  // Quick reject.
  auto s1 = unordered_row_keys(gold);
  auto s2 = unordered_row_keys(pred);
  if (order_matters) {
    if (s1 != s2) return false;
  } else {
    std::unordered_set<std::string> a(s1.begin(), s1.end()), b(s2.begin(), s2.end());
    if (a != b) return false;
  }

  // Column value sets of the gold result; candidate pred columns for each gold column.
  std::vector<std::unordered_set<std::string>> gold_cols(ncols);
  for (const auto& row : r1)
    for (size_t c = 0; c < ncols && c < row.size(); ++c) gold_cols[c].insert(python_key(row[c]));
  std::vector<std::vector<std::string>> pred_keys(r2.size());
  for (size_t r = 0; r < r2.size(); ++r)
    for (const auto& v : r2[r]) pred_keys[r].push_back(python_key(v));
  std::vector<std::vector<size_t>> candidates(ncols);
  for (size_t c1 = 0; c1 < ncols; ++c1) {
    for (size_t c2 = 0; c2 < ncols; ++c2) {
      bool ok = true;
      for (const auto& row : pred_keys) {
        if (c2 >= row.size() || !gold_cols[c1].count(row[c2])) {
          ok = false;
          break;
        }
      }
      if (ok) candidates[c1].push_back(c2);
    }
  }

  std::vector<std::string> gold_rows;
  gold_rows.reserve(r1.size());
  for (const auto& r : r1) gold_rows.push_back(row_key(r));
  std::unordered_map<std::string, long> gold_counts;
  if (!order_matters)
    for (const auto& k : gold_rows) ++gold_counts[k];

  std::vector<size_t> perm(ncols);
  std::vector<bool> used(ncols, false);
  auto check = [&]() {
    std::vector<std::string> permuted;
    permuted.reserve(r2.size());
    for (const auto& row : pred_keys) {
      std::string k;
      for (size_t i = 0; i < ncols; ++i) k += row[perm[i]];
      permuted.push_back(std::move(k));
    }
    if (order_matters) return permuted == gold_rows;
    // set equality and multiset equality (the official multiset_eq only fails on a count
    // going negative, which with equal lengths is multiset equality)
    auto counts = gold_counts;
    for (const auto& k : permuted) {
      auto it = counts.find(k);
      if (it == counts.end() || --it->second < 0) return false;
    }
    return true;
  };
  std::function<bool(size_t)> search = [&](size_t i) -> bool {
    if (i == ncols) return check();
    for (size_t c2 : candidates[i]) {
      if (used[c2]) continue;
      used[c2] = true;
      perm[i] = c2;
      bool found = search(i + 1);
      used[c2] = false;
      if (found) return true;
    }
    return false;
  };
  return search(0);
}

bool relaxed_equal(const ResultSet& pred, const ResultSet& gold) {
  auto as_set_of_sets = [](const ResultSet& r) {
    std::unordered_set<std::string> out;
    std::vector<std::string> cells;
    for (const auto& row : r.rows) {
      bool all_null = std::all_of(row.begin(), row.end(), [](const Value& v) { return v.is_null(); });
      if (all_null) continue;
      cells.clear();
      for (const auto& v : row) cells.push_back(python_key(v));
      std::sort(cells.begin(), cells.end());
      cells.erase(std::unique(cells.begin(), cells.end()), cells.end());
      std::string k;
      for (const auto& c : cells) {
        append_u64(k, c.size());
        k += c;
      }
      out.insert(std::move(k));
    }
    return out;
  };
  return as_set_of_sets(pred) == as_set_of_sets(gold);
}

double soft_f1(const ResultSet& pred_in, const ResultSet& gold_in) {
  if (pred_in.rows.empty() && gold_in.rows.empty()) return 1.0;
  auto dedupe = [](const ResultSet& r) {
    std::vector<std::vector<std::string>> rows;
    std::unordered_set<std::string> seen;
    for (const auto& row : r.rows) {
      if (!seen.insert(row_key(row)).second) continue;
      std::vector<std::string> keys;
      for (const auto& v : row) keys.push_back(python_key(v));
      rows.push_back(std::move(keys));
    }
    return rows;
  };
  auto pred = dedupe(pred_in);
  auto gold = dedupe(gold_in);
  double tp = 0, fp = 0, fn = 0;
  for (size_t i = 0; i < gold.size(); ++i) {
    if (i >= pred.size()) {
      fn += 1;
      continue;
    }
    const auto& p = pred[i];
    const auto& g = gold[i];
    double width = static_cast<double>(g.size());
    if (width == 0) continue;
    double match = 0, pred_only = 0, truth_only = 0;
    for (const auto& v : p) {
      if (std::find(g.begin(), g.end(), v) != g.end()) match += 1; else pred_only += 1;
    }
    for (const auto& v : g)
      if (std::find(p.begin(), p.end(), v) == p.end()) truth_only += 1;
    tp += match / width;
    fp += pred_only / width;
    fn += truth_only / width;
  }
  if (pred.size() > gold.size()) fp += static_cast<double>(pred.size() - gold.size());
  double precision = tp + fp > 0 ? tp / (tp + fp) : 0.0;
  double recall = tp + fn > 0 ? tp / (tp + fn) : 0.0;
  return precision + recall > 0 ? 2 * precision * recall / (precision + recall) : 0.0;
}

bool contains_gold(const ResultSet& pred, const ResultSet& gold) {
  if (gold.rows.empty() || pred.rows.empty()) return false;
  size_t gc = gold.rows[0].size(), pc = pred.rows[0].size();
  if (pc < gc) return false;
  if (bird_equal(pred, gold)) return false;
  std::vector<std::unordered_set<std::string>> pred_cols(pc);
  for (const auto& row : pred.rows)
    for (size_t c = 0; c < pc && c < row.size(); ++c) pred_cols[c].insert(python_key(row[c]));
  std::vector<std::vector<size_t>> candidates(gc);
  for (size_t g = 0; g < gc; ++g) {
    for (size_t p = 0; p < pc; ++p) {
      bool ok = true;
      for (const auto& row : gold.rows)
        if (!pred_cols[p].count(python_key(row[g]))) { ok = false; break; }
      if (ok) candidates[g].push_back(p);
    }
    if (candidates[g].empty()) return false;
  }
  std::unordered_set<std::string> gold_rows;
  for (const auto& r : gold.rows) gold_rows.insert(row_key(r));
  std::vector<size_t> map(gc);
  std::vector<bool> used(pc, false);
  size_t budget = 10000;  // mappings tried at most
  std::function<bool(size_t)> search = [&](size_t i) -> bool {
    if (budget == 0) return false;
    if (i == gc) {
      --budget;
      std::unordered_set<std::string> projected;
      for (const auto& row : pred.rows) {
        std::string k;
        for (size_t g = 0; g < gc; ++g) append_key(k, row[map[g]]);
        projected.insert(std::move(k));
      }
      for (const auto& k : gold_rows)
        if (!projected.count(k)) return false;
      return true;
    }
    for (size_t p : candidates[i]) {
      if (used[p]) continue;
      used[p] = true;
      map[i] = p;
      bool found = search(i + 1);
      used[p] = false;
      if (found) return true;
    }
    return false;
  };
  return search(0);
}

std::string drop_invalid_utf8(std::string_view s) {
  std::string out;
  size_t i = 0;
  while (i < s.size()) {
    auto c = static_cast<unsigned char>(s[i]);
    size_t len = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 0;
    if (len == 0 || i + len > s.size() || !core::is_valid_utf8(s.substr(i, len))) {
      ++i;
      continue;
    }
    out.append(s.substr(i, len));
    i += len;
  }
  return out;
}

}  // namespace nl2sql::db
