#include "nl2sql/llm/prompt_library.h"

#include <algorithm>
#include <mutex>
#include <optional>
#include <set>

#include "nl2sql/core/files.h"
#include "nl2sql/core/hash.h"

namespace nl2sql::llm {
namespace fs = std::filesystem;

struct PromptLibrary::Record {
  std::mutex mu;
  std::map<std::pair<std::string, std::string>, TemplateUse> used;  // guarded by mu; by (name, file)
};

namespace {

constexpr const char* kSuffix = ".txt";

std::string without_suffix(const std::string& file) {
  const std::string suffix = kSuffix;
  if (file.size() > suffix.size() && file.compare(file.size() - suffix.size(), suffix.size(), suffix) == 0)
    return file.substr(0, file.size() - suffix.size());
  return file;
}

std::string joined(const std::set<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out.empty() ? "none" : out;
}

// The `*.txt` files of a folder, sorted.
Result<std::vector<fs::path>> template_files(const fs::path& dir) {
  std::error_code ec;
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(dir, ec))
    if (entry.path().extension() == kSuffix && entry.is_regular_file()) files.push_back(entry.path());
  if (ec) return io_error("cannot list prompts folder " + dir.string() + ": " + ec.message());
  std::sort(files.begin(), files.end());
  return files;
}

}  // namespace

Status check_placeholders(const PromptTemplate& candidate, const std::string& file, const PromptTemplate& reference) {
  std::vector<std::string> problems;
  for (const auto& p : candidate.placeholders())
    if (!reference.placeholders().count(p))
      problems.push_back(file + ":" + std::to_string(candidate.line_of(p)) + ": unknown placeholder {{" + p +
                         "}} (" + reference.name() + " takes " + joined(reference.placeholders()) + ")");
  for (const auto& p : reference.placeholders())
    if (!candidate.placeholders().count(p))
      problems.push_back(file + ": missing placeholder {{" + p + "}} (the bundled " + reference.name() +
                         ".txt uses it on line " + std::to_string(reference.line_of(p)) +
                         "; every placeholder must appear)");
  if (problems.empty()) return Status::ok();
  std::string msg = problems.front();
  for (size_t i = 1; i < problems.size(); ++i) msg += "\n  " + problems[i];
  return invalid_input(msg);
}

PromptLibrary::PromptLibrary(fs::path overrides, fs::path bundled)
    : overrides_dir_(std::move(overrides)), bundled_dir_(std::move(bundled)), record_(std::make_unique<Record>()) {}
PromptLibrary::PromptLibrary(PromptLibrary&&) noexcept = default;
PromptLibrary& PromptLibrary::operator=(PromptLibrary&&) noexcept = default;
PromptLibrary::~PromptLibrary() = default;

PromptLibrary PromptLibrary::bundled() { return PromptLibrary({}, bundled_prompts_dir()); }

Result<PromptLibrary> PromptLibrary::open(const fs::path& overrides, const fs::path& bundled) {
  PromptLibrary lib({}, bundled);
  if (overrides.empty()) return lib;
  std::error_code ec;
  if (!fs::is_directory(overrides, ec))
    return not_found("prompts folder " + overrides.string() + " (prompts.dir / --prompts) is not a folder");
  lib.overrides_dir_ = overrides;
  auto files = template_files(overrides);
  if (!files) return files.status();
  std::vector<std::string> problems;
  for (const auto& path : *files) {
    auto t = PromptTemplate::load(path);
    if (!t) {
      problems.push_back(path.string() + ": " + t.status().message());
      continue;
    }
    const std::string name = t->name();
    std::error_code missing;
    if (fs::exists(bundled / (name + kSuffix), missing)) {
      auto reference = lib.bundled_template(name);
      if (!reference) return reference.status();
      if (Status st = check_placeholders(*t, path.string(), *reference); !st) problems.push_back(st.message());
    }
    lib.overrides_.emplace(name, std::move(*t));
  }
  if (!problems.empty()) {
    std::string msg = "prompt templates in " + overrides.string() + " do not fit the bundled ones:";
    for (const auto& p : problems) msg += "\n  " + p;
    return invalid_input(msg);
  }
  return lib;
}

Result<PromptLibrary> PromptLibrary::from_config(const core::Config& config) {
  auto dir = config.get_string("prompts.dir");
  if (!dir) return dir.status();
  auto lib = open(*dir);
  if (!lib) return lib.status().with_context("config key \"prompts.dir\"");
  return lib;
}

Result<PromptTemplate> PromptLibrary::bundled_template(const std::string& name) const {
  return PromptTemplate::load_named(bundled_dir_, name);
}

void PromptLibrary::remember(TemplateUse use) const {
  std::lock_guard lock(record_->mu);
  auto key = std::make_pair(use.name, use.file);
  record_->used[std::move(key)] = std::move(use);
}

Result<PromptTemplate> PromptLibrary::load(const std::string& name) const {
  if (auto it = overrides_.find(name); it != overrides_.end()) {
    remember({name, name, (overrides_dir_ / (name + kSuffix)).string(), it->second.hash()});
    return it->second;
  }
  auto t = bundled_template(name);
  if (!t) return t.status();
  remember({name, name, kBundled, t->hash()});
  return t;
}

Result<PromptTemplate> PromptLibrary::load_as(const std::string& name, const std::string& file) const {
  if (file.empty() || without_suffix(file) == name) return load(name);
  std::optional<PromptTemplate> chosen;
  std::string source;
  if (file.find('/') != std::string::npos) {
    auto t = PromptTemplate::load(file);
    if (!t) return t.status().with_context("template " + file);
    chosen = std::move(*t);
    source = file;
  } else if (auto it = overrides_.find(without_suffix(file)); it != overrides_.end()) {
    chosen = it->second;
    source = (overrides_dir_ / (it->first + kSuffix)).string();
  } else {
    auto t = bundled_template(without_suffix(file));
    if (!t)
      return t.status().with_context("template " + file + " (looked up in " +
                                     (overrides_dir_.empty() ? std::string() : overrides_dir_.string() + ", then in ") +
                                     bundled_dir_.string() + ")");
    chosen = std::move(*t);
    source = kBundled;
  }
  auto reference = bundled_template(name);
  if (!reference) return reference.status();
  const std::string shown = source == kBundled ? (bundled_dir_ / (chosen->name() + kSuffix)).string() : source;
  NL2SQL_RETURN_IF_ERROR(check_placeholders(*chosen, shown, *reference));
  remember({name, without_suffix(file), source, chosen->hash()});
  return std::move(*chosen);
}

Result<fs::path> PromptLibrary::resource(const std::string& file_name) const {
  std::error_code ec;
  fs::path path = bundled_dir_ / file_name;
  std::string source = kBundled;
  if (!overrides_dir_.empty() && fs::exists(overrides_dir_ / file_name, ec)) {
    path = overrides_dir_ / file_name;
    source = path.string();
  }
  auto text = core::read_file(path);
  if (!text) return text.status();
  remember({file_name, file_name, source, core::xxh128_hex(*text)});
  return path;
}

std::vector<TemplateUse> PromptLibrary::used() const {
  std::lock_guard lock(record_->mu);
  std::vector<TemplateUse> out;
  for (const auto& [key, use] : record_->used) out.push_back(use);
  return out;
}

Result<std::vector<TemplateUse>> PromptLibrary::effective() const {
  auto files = template_files(bundled_dir_);
  if (!files) return files.status();
  std::vector<TemplateUse> out;
  for (const auto& path : *files) {
    const std::string name = path.stem().string();
    if (auto it = overrides_.find(name); it != overrides_.end()) {
      out.push_back({name, name, (overrides_dir_ / (name + kSuffix)).string(), it->second.hash()});
      continue;
    }
    auto t = PromptTemplate::load(path);
    if (!t) return t.status().with_context(path.string());
    out.push_back({name, name, kBundled, t->hash()});
  }
  for (const auto& name : unmatched_overrides())
    out.push_back({name, name, (overrides_dir_ / (name + kSuffix)).string(), overrides_.at(name).hash()});
  return out;
}

std::vector<std::string> PromptLibrary::unmatched_overrides() const {
  std::vector<std::string> out;
  for (const auto& [name, t] : overrides_) {
    std::error_code ec;
    if (!fs::exists(bundled_dir_ / (name + kSuffix), ec)) out.push_back(name);
  }
  return out;
}

}  // namespace nl2sql::llm
