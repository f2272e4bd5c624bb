#include "nl2sql/llm/prompt_template.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>

#include "nl2sql/core/files.h"
#include "nl2sql/core/hash.h"
#include "nl2sql/core/install_layout.h"

namespace nl2sql::llm {
namespace {

bool is_name_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
}

}  // namespace

Result<PromptTemplate> PromptTemplate::parse(std::string name, std::string text) {
  PromptTemplate t;
  t.name_ = std::move(name);
  t.text_ = std::move(text);
  t.hash_ = core::xxh128_hex(t.text_);
  size_t pos = 0;
  std::string literal;
  while (pos < t.text_.size()) {
    size_t open = t.text_.find("{{", pos);
    if (open == std::string::npos) {
      literal += t.text_.substr(pos);
      break;
    }
    literal += t.text_.substr(pos, open - pos);
    size_t close = t.text_.find("}}", open + 2);
    std::string inner = close == std::string::npos ? "" : t.text_.substr(open + 2, close - open - 2);
    bool valid = !inner.empty() && inner.size() <= 64;
    for (char c : inner) valid = valid && is_name_char(c);
    if (!valid) {
      size_t line = 1 + static_cast<size_t>(std::count(t.text_.begin(), t.text_.begin() + static_cast<long>(open), '\n'));
      size_t line_start = t.text_.rfind('\n', open == 0 ? 0 : open - 1);
      size_t col = open + 1 - (line_start == std::string::npos || line == 1 ? 0 : line_start + 1);
      return invalid_input("prompt template \"" + t.name_ + "\", line " + std::to_string(line) +
                           ", column " + std::to_string(col) +
                           ": \"{{\" must open a placeholder {{name}} (letters, digits, _)");
    }
    if (!literal.empty()) t.pieces_.push_back({false, std::move(literal)});
    literal.clear();
    t.pieces_.push_back({true, inner});
    t.placeholders_.insert(inner);
    pos = close + 2;
  }
  if (!literal.empty()) t.pieces_.push_back({false, std::move(literal)});
  return t;
}

Result<PromptTemplate> PromptTemplate::load(const std::filesystem::path& path) {
  auto text = core::read_file(path);
  if (!text) return text.status();
  return parse(path.stem().string(), std::move(text).value());
}

Result<PromptTemplate> PromptTemplate::load_named(const std::filesystem::path& prompts_dir,
                                                  const std::string& name) {
  auto path = prompts_dir / (name + ".txt");
  std::error_code ec;
  if (!std::filesystem::exists(path, ec))
    return not_found("prompt template \"" + name + "\" not found: " + path.string() +
                     " (NL2SQL_PROMPTS names another prompt folder)");
  return load(path);
}

size_t PromptTemplate::line_of(const std::string& placeholder) const {
  size_t at = text_.find("{{" + placeholder + "}}");
  if (at == std::string::npos) return 0;
  return 1 + static_cast<size_t>(std::count(text_.begin(), text_.begin() + static_cast<long>(at), '\n'));
}

Result<std::string> PromptTemplate::render(const std::map<std::string, std::string>& values) const {
  std::string missing, unknown;
  for (const auto& p : placeholders_)
    if (!values.count(p)) missing += (missing.empty() ? "" : ", ") + p;
  for (const auto& [k, v] : values)
    if (!placeholders_.count(k)) unknown += (unknown.empty() ? "" : ", ") + k;
  if (!missing.empty() || !unknown.empty()) {
    std::string msg = "prompt template \"" + name_ + "\":";
    if (!missing.empty()) msg += " no value for placeholder(s) " + missing + ";";
    if (!unknown.empty()) msg += " value(s) given for unknown placeholder(s) " + unknown + ";";
    msg.pop_back();
    return invalid_input(msg);
  }
  size_t size = 0;
  for (const auto& piece : pieces_)
    size += piece.is_placeholder ? values.at(piece.text).size() : piece.text.size();
  std::string out;
  out.reserve(size);
  // Values are inserted verbatim and never re-scanned, so a value containing "{{x}}" is safe.
  for (const auto& piece : pieces_) out += piece.is_placeholder ? values.at(piece.text) : piece.text;
  return out;
}

std::filesystem::path bundled_prompts_dir() {
  if (const char* env = std::getenv("NL2SQL_PROMPTS"); env && *env) return env;
  return core::share_dir().value_or(core::expected_share_dir()) / "prompts";
}

}  // namespace nl2sql::llm
