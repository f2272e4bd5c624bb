// nl2sql: one executable, CLI11 subcommands registered by src/cli/cmd_*.cpp.
#include <malloc.h>

#include <algorithm>
#include <cstdlib>
#include <iostream>
#include <map>
#include <thread>

#include "cli/command.h"
#include "nl2sql/core/build_info.h"
#include "nl2sql/core/log.h"

namespace nl2sql::cli {
std::vector<CommandRegistration>& command_registry() {
  static std::vector<CommandRegistration> r;
  return r;
}
}  // namespace nl2sql::cli

int main(int argc, char** argv) {
  using namespace nl2sql;
  // glibc gives threads up to 8 malloc arenas per core, and memory freed in one arena is not
  // reused by another: a run's 32 question threads then hold about a third more memory than
  // they use (peak RSS of a 30-question run on superhero x300: 180-200 MiB with the default,
  // 125-140 MiB with 2-4 arenas, at the same CPU time). Two arenas per core; MALLOC_ARENA_MAX
  // in the environment still decides when set.
  if (!std::getenv("MALLOC_ARENA_MAX"))
    mallopt(M_ARENA_MAX, static_cast<int>(2 * std::max(1u, std::thread::hardware_concurrency())));
  CLI::App app{"nl2sql: text-to-SQL benchmark pipeline and evaluator (BIRD, Spider, JSONL)"};
  app.set_version_flag("--version", "nl2sql " + core::build_info().line());
  app.require_subcommand(1);
  core::LogOptions log;
  app.add_option("--log-level", log.level, "trace|debug|info|warn|error|off")
      ->capture_default_str();
  app.add_flag("--log-json", log.json, "Log as JSON lines on stderr");
  app.add_option("--log-file", log.file, "Also write the log to this file");

  auto regs = cli::command_registry();
  std::sort(regs.begin(), regs.end(), [](auto& a, auto& b) { return a.name < b.name; });
  std::map<CLI::App*, cli::RunFn> runners;
  for (auto& r : regs) {
    size_t before = app.get_subcommands({}).size();
    cli::RunFn fn = r.setup(app);
    auto subs = app.get_subcommands({});
    if (subs.size() > before) runners[subs.back()] = std::move(fn);
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int code = app.exit(e);
    return code == 0 ? cli::kExitOk : cli::kExitBadInput;
  }
  core::init_logging(log);
  for (auto* sub : app.get_subcommands()) {
    auto it = runners.find(sub);
    if (it == runners.end()) continue;
    try {
      return it->second();
    } catch (const std::exception& e) {
      spdlog::error("{}: internal error: {}", sub->get_name(), e.what());
      return cli::kExitFailure;
    }
  }
  return cli::kExitBadInput;
}
