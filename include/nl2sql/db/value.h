// Typed SQL values and result sets, exactly as SQLite returns them: NULL, 64-bit integer,
// IEEE double, UTF-8 text and blob are kept apart (the evaluators' verdicts depend on it).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace nl2sql::db {

enum class ValueType : uint8_t { kNull = 0, kInteger = 1, kReal = 2, kText = 3, kBlob = 4 };

struct Value {
  ValueType type = ValueType::kNull;
  int64_t i = 0;     // kInteger
  double r = 0.0;    // kReal
  std::string s;     // kText (UTF-8 bytes as stored) / kBlob (raw bytes)

  static Value null() { return {}; }
  static Value integer(int64_t v) { Value x; x.type = ValueType::kInteger; x.i = v; return x; }
  static Value real(double v) { Value x; x.type = ValueType::kReal; x.r = v; return x; }
  static Value text(std::string v) { Value x; x.type = ValueType::kText; x.s = std::move(v); return x; }
  static Value blob(std::string v) { Value x; x.type = ValueType::kBlob; x.s = std::move(v); return x; }

  bool is_null() const { return type == ValueType::kNull; }
  bool is_number() const { return type == ValueType::kInteger || type == ValueType::kReal; }
  // Exact identity (type and bits); see eval/compare.h for the evaluators' equalities.
  bool operator==(const Value& o) const;
  // Human-readable text: NULL, 3, 3.5, 'text' unquoted, blobs as x'..'.
  std::string to_display() const;
};

using Row = std::vector<Value>;

struct ResultSet {
  std::vector<std::string> columns;
  std::vector<Row> rows;
};

}  // namespace nl2sql::db
