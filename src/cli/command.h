// Subcommand registry. Each src/cli/cmd_*.cpp registers itself with NL2SQL_REGISTER_COMMAND,
// so adding a command never touches main.cpp. A command's setup function adds a CLI11
// subcommand and returns the function that runs it (returning the process exit code).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace nl2sql::cli {

// Process exit codes, documented in docs/exit-codes.md.
inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;     // internal error, or run: results could not be recorded
inline constexpr int kExitBadInput = 2;    // bad flags, files, config
inline constexpr int kExitFailUnder = 3;   // --fail-under not met
inline constexpr int kExitEndpointStopped = 4; // run: a failed preflight, a 401/403 or a repeated
                                               // refusal stopped it early (resumable)
inline constexpr int kExitQuestionsFailed = 5; // run: finished, but some questions failed
inline constexpr int kExitInterrupted = 130;

using RunFn = std::function<int()>;
using SetupFn = std::function<RunFn(CLI::App& parent)>;

struct CommandRegistration {
  std::string name;
  SetupFn setup;
};

std::vector<CommandRegistration>& command_registry();

struct CommandRegistrar {
  CommandRegistrar(std::string name, SetupFn setup) {
    command_registry().push_back({std::move(name), std::move(setup)});
  }
};

}  // namespace nl2sql::cli

#define NL2SQL_CMD_CONCAT_(a, b) a##b
#define NL2SQL_CMD_CONCAT(a, b) NL2SQL_CMD_CONCAT_(a, b)
#define NL2SQL_REGISTER_COMMAND(name, setup) \
  static ::nl2sql::cli::CommandRegistrar NL2SQL_CMD_CONCAT(nl2sql_cmd_, __COUNTER__)(name, setup)
