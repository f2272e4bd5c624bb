// libFuzzer target for the config loader: JSON with comments, "extends" chains, --set
// overrides and schema validation (every fragment under configs/schema). Built by
// tests/fuzz/run_fuzz.sh, not by CMake. The input is written to a scratch file beside a valid
// base.json so "extends" can resolve; the first line doubles as a --set assignment.
// Property: no crash, no uncaught exception; a loaded config validates without throwing.
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>

#include "nl2sql/core/config.h"
#include "nl2sql/core/config_schema.h"

namespace {
const nl2sql::core::ConfigSchema* schema() {
  static auto* s = [] {
    auto r = nl2sql::core::ConfigSchema::load_dir(nl2sql::core::default_schema_dir());
    return r ? new nl2sql::core::ConfigSchema(std::move(*r)) : nullptr;
  }();
  return s;
}
std::filesystem::path scratch() {
  static std::filesystem::path dir = [] {
    auto d = std::filesystem::temp_directory_path() / ("nl2sql_config_fuzz_" + std::to_string(getpid()));
    std::filesystem::create_directories(d);
    std::ofstream(d / "base.json") << R"({"run": {"seed": 1}, "llm": {"cache": {"mode": "off"}}})";
    return d;
  }();
  return dir;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  auto file = scratch() / "config.json";
  std::ofstream(file, std::ios::binary | std::ios::trunc) << text;
  auto config = nl2sql::core::Config::load(file);
  if (!config) return 0;
  std::string first_line = text.substr(0, text.find('\n'));
  (void)config->apply_overrides({first_line});
  if (const auto* s = schema()) (void)s->validate(config->json());
  (void)config->get_string("llm.cache.mode", std::string("off"));
  (void)config->get_int("run.seed", 0);
  (void)config->get_number("run.max_cost_usd", 0.0);
  (void)config->get_bool("fix.enabled", true);
  return 0;
}
