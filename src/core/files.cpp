#include "nl2sql/core/files.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <random>

namespace nl2sql::core {

Result<std::string> read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    std::error_code ec;
    if (!std::filesystem::exists(path, ec)) return not_found("file not found: " + path.string());
    return io_error("cannot open " + path.string() + ": " + std::strerror(errno));
  }
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return io_error("read failed: " + path.string());
  return ss.str();
}

Status write_file_atomic(const std::filesystem::path& path, std::string_view content) {
  std::error_code ec;
  if (path.has_parent_path()) std::filesystem::create_directories(path.parent_path(), ec);
  std::random_device rd;
  std::filesystem::path tmp = path;
  tmp += ".tmp" + std::to_string(rd());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return io_error("cannot write " + path.string() + ": " + std::strerror(errno));
  const char* p = content.data();
  size_t left = content.size();
  while (left > 0) {
    ssize_t n = ::write(fd, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      std::string err = std::strerror(errno);
      ::close(fd);
      ::unlink(tmp.c_str());
      return io_error("write failed for " + path.string() + ": " + err);
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
  ::fsync(fd);
  ::close(fd);
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    std::string err = std::strerror(errno);
    ::unlink(tmp.c_str());
    return io_error("cannot rename into " + path.string() + ": " + err);
  }
  return Status::ok();
}

bool is_valid_utf8(std::string_view s) {
  size_t i = 0;
  const auto* b = reinterpret_cast<const unsigned char*>(s.data());
  while (i < s.size()) {
    unsigned char c = b[i];
    size_t len;
    uint32_t cp;
    if (c < 0x80) { ++i; continue; }
    if ((c & 0xE0) == 0xC0) { len = 2; cp = c & 0x1F; }
    else if ((c & 0xF0) == 0xE0) { len = 3; cp = c & 0x0F; }
    else if ((c & 0xF8) == 0xF0) { len = 4; cp = c & 0x07; }
    else return false;
    if (i + len > s.size()) return false;
    for (size_t k = 1; k < len; ++k) {
      if ((b[i + k] & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (b[i + k] & 0x3F);
    }
    if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) ||
        cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
      return false;
    i += len;
  }
  return true;
}

std::string decode_text(std::string_view bytes) {
  if (bytes.size() >= 3 && static_cast<unsigned char>(bytes[0]) == 0xEF &&
      static_cast<unsigned char>(bytes[1]) == 0xBB && static_cast<unsigned char>(bytes[2]) == 0xBF)
    bytes.remove_prefix(3);
  if (is_valid_utf8(bytes)) return std::string(bytes);
  std::string out;
  out.reserve(bytes.size() + bytes.size() / 8);
  for (char ch : bytes) {
    auto c = static_cast<unsigned char>(ch);
    if (c < 0x80) {
      out.push_back(ch);
    } else {
      out.push_back(static_cast<char>(0xC0 | (c >> 6)));
      out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
    }
  }
  return out;
}

std::string describe_position(std::string_view text, size_t byte_offset) {
  size_t line = 1, col = 1;
  for (size_t i = 0; i < text.size() && i < byte_offset; ++i) {
    if (text[i] == '\n') { ++line; col = 1; } else { ++col; }
  }
  return std::to_string(line) + ":" + std::to_string(col);
}

namespace {

// Copying, comparing or dumping a parsed document recurses once per level, so a hostile file of
// "[[[[…" (tens of thousands deep) overflows the stack far from the parser. Documents are
// refused past this depth; real datasets and configs stay well under a hundred.
constexpr size_t kMaxJsonDepth = 512;

// Offset where the nesting first exceeds kMaxJsonDepth (npos: never), skipping strings and
// comments the way the parser does.
size_t too_deep_at(std::string_view text) {
  size_t depth = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (c == '"') {
      for (++i; i < text.size() && text[i] != '"'; ++i)
        if (text[i] == '\\') ++i;
    } else if (c == '/' && i + 1 < text.size() && text[i + 1] == '/') {
      while (i < text.size() && text[i] != '\n') ++i;
    } else if (c == '/' && i + 1 < text.size() && text[i + 1] == '*') {
      size_t end = text.find("*/", i + 2);
      i = end == std::string_view::npos ? text.size() : end + 1;
    } else if (c == '[' || c == '{') {
      if (++depth > kMaxJsonDepth) return i;
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return std::string_view::npos;
}

}  // namespace

Result<nlohmann::json> parse_json(std::string_view text, const std::string& label) {
  if (size_t at = too_deep_at(text); at != std::string_view::npos)
    return invalid_input(label + ":" + describe_position(text, at) + ": JSON nested deeper than " +
                         std::to_string(kMaxJsonDepth) + " levels");
  try {
    return nlohmann::json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/true,
                                 /*ignore_comments=*/true);
  } catch (const nlohmann::json::parse_error& e) {
    // nlohmann reports the byte index one past the offending character.
    size_t at = e.byte > 0 ? e.byte - 1 : 0;
    std::string what = e.what();
    auto pos = what.find("parse error");
    if (pos != std::string::npos) what = what.substr(pos);
    return invalid_input(label + ":" + describe_position(text, at) + ": malformed JSON (" + what +
                         ")");
  } catch (const nlohmann::json::exception& e) {
    // A number too large for a double (error 406) carries no position; the message quotes the
    // offending text, which locates it.
    std::string what = e.what();
    size_t at = 0;
    auto q1 = what.find('\'');
    auto q2 = q1 == std::string::npos ? q1 : what.find('\'', q1 + 1);
    if (q2 != std::string::npos) {
      auto found = text.find(what.substr(q1 + 1, q2 - q1 - 1));
      if (found != std::string_view::npos) at = found;
    }
    auto pos = what.find(']');
    if (pos != std::string::npos) what = what.substr(pos + 2 <= what.size() ? pos + 2 : pos);
    return invalid_input(label + ":" + describe_position(text, at) + ": malformed JSON (" + what + ")");
  }
}

Result<nlohmann::json> read_json_file(const std::filesystem::path& path) {
  auto text = read_file(path);
  if (!text) return text.status();
  return parse_json(*text, path.string());
}

}  // namespace nl2sql::core
