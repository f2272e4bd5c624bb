#include "nl2sql/db/value.h"

#include <charconv>
#include <cstring>

namespace nl2sql::db {

bool Value::operator==(const Value& o) const {
  if (type != o.type) return false;
  switch (type) {
    case ValueType::kNull: return true;
    case ValueType::kInteger: return i == o.i;
    case ValueType::kReal: return std::memcmp(&r, &o.r, sizeof(r)) == 0;
    case ValueType::kText:
    case ValueType::kBlob: return s == o.s;
  }
  return false;
}

std::string Value::to_display() const {
  switch (type) {
    case ValueType::kNull: return "NULL";
    case ValueType::kInteger: return std::to_string(i);
    case ValueType::kReal: {
      char buf[64];
      auto res = std::to_chars(buf, buf + sizeof(buf), r);
      return std::string(buf, res.ptr);
    }
    case ValueType::kText: return s;
    case ValueType::kBlob: {
      static const char* kHex = "0123456789abcdef";
      std::string out = "x'";
      for (unsigned char c : s) {
        out.push_back(kHex[c >> 4]);
        out.push_back(kHex[c & 15]);
      }
      return out + "'";
    }
  }
  return "";
}

}  // namespace nl2sql::db
