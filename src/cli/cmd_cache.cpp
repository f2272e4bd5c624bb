// nl2sql cache stats|export|import|prune: inspect and ship the LLM response cache.
#include <ctime>
#include <filesystem>
#include <iostream>
#include <memory>

#include <fmt/format.h>

#include "cli/command.h"
#include "cli/config_options.h"
#include "nl2sql/core/config.h"
#include "nl2sql/llm/profile.h"
#include "nl2sql/llm/response_cache.h"

namespace nl2sql::cli {
namespace {

struct CacheArgs {
  ConfigOptions config;
  std::string cache_path;
  bool json = false;
  std::string file;  // export target / import source
  double older_than_days = 0;
  std::string model;
  std::string profile;
  bool all = false;
};

void add_common(CLI::App* app, CacheArgs& a) {
  a.config.add_to(*app, /*required=*/false);
  app->add_option("--cache", a.cache_path, "Cache file (overrides llm.cache.path)");
}

Result<std::string> resolve_path(const CacheArgs& a) {
  if (!a.cache_path.empty()) return a.cache_path;
  auto config = a.config.load();  // logs each problem, naming its key
  if (!config) return invalid_input("the config does not load (problems above)");
  return config->get_string("llm.cache.path");
}

std::string format_time(int64_t t) {
  if (t == 0) return "-";
  std::time_t tt = static_cast<std::time_t>(t);
  std::tm tm{};
  gmtime_r(&tt, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%d %H:%M:%SZ", &tm);
  return buf;
}

int fail(const Status& st) {
  std::cerr << "nl2sql cache: " << st.message() << "\n";
  return st.code() == ErrorCode::kIo || st.code() == ErrorCode::kInternal ? kExitFailure
                                                                          : kExitBadInput;
}

int run(const std::string& action, const CacheArgs& a) {
  auto path = resolve_path(a);
  if (!path) return fail(path.status());
  const bool read_only = action == "stats" || action == "export";
  std::error_code ec;
  if (read_only && !std::filesystem::exists(*path, ec))
    return fail(invalid_input("response cache " + *path + " does not exist"));
  auto opened = llm::ResponseCache::open(*path, read_only);
  if (!opened) return fail(opened.status());
  auto& cache = **opened;
  if (action == "stats") {
    auto s = cache.stats();
    if (!s) return fail(s.status());
    if (a.json) {
      nlohmann::json j = {{"path", *path},           {"entries", s->entries},
                          {"file_bytes", s->file_bytes}, {"oldest", s->oldest},
                          {"newest", s->newest},       {"by_model", s->entries_by_model},
                          {"prompt_tokens", s->prompt_tokens},
                          {"completion_tokens", s->completion_tokens}};
      std::cout << j.dump(2) << "\n";
      return kExitOk;
    }
    std::cout << fmt::format("cache        {}\nentries      {}\nsize         {:.1f} KiB\n"
                             "oldest       {}\nnewest       {}\ntokens saved {} in, {} out\n",
                             *path, s->entries, static_cast<double>(s->file_bytes) / 1024.0,
                             format_time(s->oldest), format_time(s->newest), s->prompt_tokens,
                             s->completion_tokens);
    for (const auto& [model, n] : s->entries_by_model)
      std::cout << fmt::format("  model {:<30} {}\n", model, n);
    return kExitOk;
  }
  if (action == "export") {
    auto n = cache.export_jsonl(a.file);
    if (!n) return fail(n.status());
    std::cout << fmt::format("exported {} entries to {}\n", *n, a.file);
    return kExitOk;
  }
  if (action == "import") {
    auto n = cache.import_jsonl(a.file);
    if (!n) return fail(n.status());
    std::cout << fmt::format("imported {} new entries into {}\n", *n, *path);
    return kExitOk;
  }
  // prune
  if (!a.all && a.older_than_days <= 0 && a.model.empty() && a.profile.empty())
    return fail(invalid_input("prune needs --older-than-days, --model, --profile or --all"));
  int64_t cutoff = 0;
  if (a.older_than_days > 0)
    cutoff = static_cast<int64_t>(std::time(nullptr)) -
             static_cast<int64_t>(a.older_than_days * 86400.0);
  auto n = cache.prune(cutoff, a.model, a.profile);
  if (!n) return fail(n.status());
  std::cout << fmt::format("pruned {} entries from {}\n", *n, *path);
  return kExitOk;
}

RunFn setup_cache(CLI::App& parent) {
  auto args = std::make_shared<CacheArgs>();
  auto* cmd = parent.add_subcommand("cache", "Inspect, ship and prune the LLM response cache");
  cmd->require_subcommand(1);
  auto* stats = cmd->add_subcommand("stats", "Entries, size, age and recorded tokens");
  add_common(stats, *args);
  stats->add_flag("--json", args->json, "Print as JSON");
  auto* exp = cmd->add_subcommand("export", "Write every entry as JSON lines");
  add_common(exp, *args);
  exp->add_option("file", args->file, "Output .jsonl file")->required();
  auto* imp = cmd->add_subcommand("import", "Add entries from an export (existing keys kept)");
  add_common(imp, *args);
  imp->add_option("file", args->file, "Input .jsonl file")->required()->check(CLI::ExistingFile);
  auto* prune = cmd->add_subcommand("prune", "Delete entries by age, model or profile");
  add_common(prune, *args);
  prune->add_option("--older-than-days", args->older_than_days, "Only entries older than this");
  prune->add_option("--model", args->model, "Only entries of this model");
  prune->add_option("--profile", args->profile, "Only entries of this profile");
  prune->add_flag("--all", args->all, "Delete every entry");
  return [=]() -> int {
    for (auto* sub : {stats, exp, imp, prune})
      if (sub->parsed()) return run(sub->get_name(), *args);
    return kExitBadInput;
  };
}

}  // namespace

NL2SQL_REGISTER_COMMAND("cache", setup_cache);

}  // namespace nl2sql::cli
