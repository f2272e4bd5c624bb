// Prompt templates: one text file per prompt under prompts/, with {{name}} placeholders
// (name = letters, digits, underscore). Rendering is strict: a placeholder without a value and
// a value without a placeholder both fail, naming the template and the name, so a renamed field
// never silently produces a prompt with a hole. "{{" that does not open a valid placeholder is
// a load error. The template's hash (of its text) goes into the cache key, so editing a prompt
// invalidates exactly the answers it produced. Immutable after load: thread-safe to share.
#pragma once

#include <filesystem>
#include <map>
#include <set>
#include <vector>
#include <string>

#include "nl2sql/core/status.h"

namespace nl2sql::llm {

class PromptTemplate {
 public:
  static Result<PromptTemplate> parse(std::string name, std::string text);
  static Result<PromptTemplate> load(const std::filesystem::path& path);
  // prompts_dir / (name + ".txt")
  static Result<PromptTemplate> load_named(const std::filesystem::path& prompts_dir,
                                           const std::string& name);

  Result<std::string> render(const std::map<std::string, std::string>& values) const;

  const std::string& name() const { return name_; }
  const std::string& text() const { return text_; }
  const std::string& hash() const { return hash_; }
  const std::set<std::string>& placeholders() const { return placeholders_; }
  // The 1-based line of the first {{placeholder}}; 0 when the template has none of that name.
  size_t line_of(const std::string& placeholder) const;

 private:
  struct Piece {
    bool is_placeholder;
    std::string text;  // literal text or placeholder name
  };
  std::string name_;
  std::string text_;
  std::string hash_;
  std::set<std::string> placeholders_;
  std::vector<Piece> pieces_;
};

// The bundled prompts folder: $NL2SQL_PROMPTS when set, else `prompts/` of the installed data
// files (core::share_dir(): <prefix>/share/nl2sql/prompts, or the build tree's link to the
// source prompts). When neither exists, the path where an install would have them, so the error
// of the first template that cannot be read names it.
std::filesystem::path bundled_prompts_dir();

}  // namespace nl2sql::llm
