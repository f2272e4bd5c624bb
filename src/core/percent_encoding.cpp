#include "nl2sql/core/percent_encoding.h"

namespace nl2sql::core {
namespace {

bool unreserved(unsigned char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.' ||
         c == '_' || c == '~';
}

}  // namespace

std::string percent_encode(std::string_view component) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(component.size());
  for (const char ch : component) {
    const auto c = static_cast<unsigned char>(ch);
    if (unreserved(c)) {
      out.push_back(ch);
    } else {
      out.push_back('%');
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 0x0F]);
    }
  }
  return out;
}

}  // namespace nl2sql::core
