// nl2sql models check: one real request per model profile a config uses (or every profile with
// --all), printed per profile — endpoint, model, the fields the body carries, latency, and the
// answer or the server's own error — so a misconfigured endpoint is found in seconds, before a
// run. The same check runs at the start of `nl2sql run` (llm.preflight).
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <iostream>

#include "cli/command.h"
#include "cli/config_options.h"
#include "nl2sql/llm/client.h"
#include "nl2sql/pipeline/model_use.h"

namespace nl2sql::cli {
namespace {

struct ModelsArgs {
  ConfigOptions config;
  bool all = false;
  bool json = false;
};

int run_check(const ModelsArgs& a) {
  auto config = a.config.load();
  if (!config) return kExitBadInput;
  llm::ClientOptions options;
  auto settings = llm::load_llm_settings(*config);
  if (!settings) {
    spdlog::error("{}", settings.status().message());
    return kExitBadInput;
  }
  settings->cache.mode = llm::CacheMode::kOff;  // a check always asks the server
  auto client = llm::Client::create(*settings, options);
  if (!client) {
    spdlog::error("{}", client.status().message());
    return kExitBadInput;
  }
  std::vector<std::string> profiles;
  if (a.all) {
    for (const auto& [name, p] : settings->profiles) profiles.push_back(name);
  } else {
    auto use = pipeline::model_use(*config, pipeline::configured_selectors(*config));
    if (!use) {
      spdlog::error("{}", use.status().message());
      return kExitBadInput;
    }
    profiles = (*client)->profiles_for(use->roles, use->profiles);
  }
  auto results = (*client)->preflight(profiles);
  bool all_ok = true;
  nlohmann::json out = nlohmann::json::array();
  for (const auto& r : results) {
    all_ok = all_ok && r.status.is_ok();
    if (a.json) {
      out.push_back({{"profile", r.profile}, {"endpoint", r.endpoint}, {"model", r.model},
                     {"fields", r.fields}, {"ok", r.status.is_ok()}, {"simulated", r.simulated},
                     {"latency_s", r.latency_s}, {"answer", r.answer}, {"note", r.note},
                     {"error", r.status.message()}});
      continue;
    }
    std::string fields;
    for (const auto& f : r.fields) fields += (fields.empty() ? "" : ", ") + f;
    std::cout << fmt::format("{} {}\n", r.status ? "ok    " : "FAILED", r.profile);
    if (r.simulated) {
      std::cout << "       simulated (sim provider): not a model, nothing to check\n";
      continue;
    }
    std::cout << fmt::format("       endpoint {}\n       model    {}\n       fields   {}\n       latency  {:.2f} s\n",
                             r.endpoint, r.model, fields, r.latency_s);
    if (r.status) {
      std::string answer = r.answer;
      for (auto& c : answer)
        if (c == '\n') c = ' ';
      std::cout << fmt::format("       answer   \"{}\"\n", answer);
    } else {
      std::cout << fmt::format("       error    {}\n", r.status.message());
    }
    if (!r.note.empty()) std::cout << fmt::format("       note     {}\n", r.note);
  }
  if (a.json) std::cout << out.dump(2) << "\n";
  else if (results.empty()) std::cout << "no model profile is used by this config\n";
  return all_ok ? kExitOk : kExitEndpointStopped;
}

RunFn setup_models(CLI::App& parent) {
  auto* cmd = parent.add_subcommand("models", "Model endpoints: check that each profile answers");
  cmd->require_subcommand(1);
  auto a = std::make_shared<ModelsArgs>();
  auto* check = cmd->add_subcommand(
      "check", "Send one small real request per model profile the config uses; print what was sent and "
               "the answer or the server's error (exit 4 when any profile fails)");
  a->config.add_to(*check, /*required=*/false);
  check->add_flag("--all", a->all, "Check every profile in llm.models, not only the ones roles use");
  check->add_flag("--json", a->json, "Print the results as JSON");
  return [a]() { return run_check(*a); };
}

NL2SQL_REGISTER_COMMAND("models", setup_models);

}  // namespace
}  // namespace nl2sql::cli
