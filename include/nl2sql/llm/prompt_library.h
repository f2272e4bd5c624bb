// The prompt templates one command uses: the bundled folder (llm::bundled_prompts_dir()) and,
// optionally, an override folder (config key prompts.dir, flag --prompts) whose `<name>.txt`
// files replace the bundled templates of the same name file by file; every other template stays
// bundled. A stage asks for a template by its role's name (load) or, when its config has a
// `template` key, for another file standing in for that role (load_as).
//
// A stand-in must take exactly the placeholders of the bundled template it replaces: rendering
// is strict, so a mismatch would fail every question mid-run. open() therefore reads and checks
// every override whose name is bundled before any work, and load_as() checks the file it is
// given; an unknown placeholder is named with its file and line, a missing one with its file and
// the bundled template's line that uses it.
//
// The library remembers which templates were loaded (role name, file, where it came from, hash)
// so the run's manifest can name them and a resume can refuse changed ones. Overrides are read
// once, at open(); bundled templates are read when asked for. Thread-safe: the loads may come
// from several threads (the record is guarded by a mutex); movable, not copyable.
#pragma once

#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "nl2sql/core/config.h"
#include "nl2sql/core/status.h"
#include "nl2sql/llm/prompt_template.h"

namespace nl2sql::llm {

// One template as a command uses it.
struct TemplateUse {
  std::string name;    // the role's template name ("generate_baseline")
  std::string file;    // the file that stands in for it: `name` unless a `template` key chose another
  std::string source;  // "bundled", or the override file's path as the user gave the folder
  std::string hash;    // PromptTemplate::hash() (of a resource file: of its text)
};

class PromptLibrary {
 public:
  static constexpr const char* kBundled = "bundled";

  // The bundled templates alone.
  static PromptLibrary bundled();
  // `overrides` empty: the bundled templates alone. Otherwise the folder must exist, and every
  // `<name>.txt` in it must parse and, when `name` is bundled, take the bundled placeholders;
  // all problems are reported in one error, each naming its file (and line).
  static Result<PromptLibrary> open(const std::filesystem::path& overrides,
                                    const std::filesystem::path& bundled = bundled_prompts_dir());
  // open() on config key prompts.dir (unset or empty: the bundled templates alone); errors name the key.
  static Result<PromptLibrary> from_config(const core::Config& config);

  PromptLibrary(PromptLibrary&&) noexcept;
  PromptLibrary& operator=(PromptLibrary&&) noexcept;
  ~PromptLibrary();

  // The template `name`: the override when the folder has `<name>.txt`, else the bundled one.
  Result<PromptTemplate> load(const std::string& name) const;
  // The template `file` standing in for role `name` (a `template` key's value): a name, with or
  // without ".txt", looked up in the override folder, then in the bundled one; or a path (it
  // contains a '/'). Fails unless it takes exactly the placeholders of the bundled `name`.
  // `file` empty or equal to `name`: load(name).
  Result<PromptTemplate> load_as(const std::string& name, const std::string& file) const;
  // A file that is not a template (recap's sqlite_syntax.md): the override folder's, else the
  // bundled one. Recorded like a template, hashed on its text.
  Result<std::filesystem::path> resource(const std::string& file_name) const;

  // What load, load_as and resource handed out so far, sorted by name then file.
  std::vector<TemplateUse> used() const;
  // Every bundled template as this library resolves it (override or bundled), sorted by name,
  // then the override files that have no bundled namesake (usable only through `template`).
  Result<std::vector<TemplateUse>> effective() const;
  // Override files whose name is no bundled template (a misspelt name would be silently unused).
  std::vector<std::string> unmatched_overrides() const;

  const std::filesystem::path& override_dir() const { return overrides_dir_; }
  const std::filesystem::path& bundled_dir() const { return bundled_dir_; }

 private:
  struct Record;
  PromptLibrary(std::filesystem::path overrides, std::filesystem::path bundled);
  Result<PromptTemplate> bundled_template(const std::string& name) const;
  void remember(TemplateUse use) const;

  std::filesystem::path overrides_dir_;  // empty: none
  std::filesystem::path bundled_dir_;
  std::map<std::string, PromptTemplate> overrides_;  // by name, read at open()
  std::unique_ptr<Record> record_;                   // the loads so far (own mutex)
};

// Checks that `candidate` (read from `file`) takes exactly the placeholders of `reference`;
// the error names every unknown placeholder with its line and every missing one.
Status check_placeholders(const PromptTemplate& candidate, const std::string& file, const PromptTemplate& reference);

}  // namespace nl2sql::llm
