#include "nl2sql/llm/profile.h"

#include <cctype>
#include <cstdlib>
#include <set>

#include "nl2sql/core/log.h"
#include "nl2sql/llm/types.h"

namespace nl2sql::llm {
namespace {

const std::set<std::string> kKnownRoles = {"keywords", "column_filter", "generate", "fix",
                                           "select",   "rank",          "nl_eval",  "judge",
                                           "describe"};
const std::set<std::string> kProfileKeys = {
    "provider",       "base_url",         "model",      "api_key_env",     "temperature",
    "top_p",          "max_tokens",       "role_max_tokens", "max_tokens_field", "omit",
    "extra_body",     "headers",          "query",      "context_tokens",  "price_in_per_mtok",
    "price_out_per_mtok", "price_cached_in_per_mtok", "max_in_flight", "rpm",       "tpm",             "timeout_s",
    "idle_timeout_s", "stream",           "embedding_model", "batch", "batch_discount"};
const std::set<std::string> kBatchKeys = {"window", "max_requests", "max_bytes", "gather_ms", "poll_s", "poll_max_s"};
const std::set<std::string> kLlmKeys = {"models", "roles", "default_profile", "max_in_flight",
                                        "retry",  "cache", "sim", "role_max_tokens",
                                        "stop_after_repeated_errors", "preflight", "max_response_bytes",
                                        "endpoint_down_wait_s"};
// Fields build_chat_body writes that a profile may leave out.
const std::set<std::string> kOmittable = {"temperature", "top_p", "max_tokens", "seed", "stop", "n"};

std::string env_or(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return (v && *v) ? std::string(v) : fallback;
}

Status check_keys(const core::Config& config, const std::string& key,
                  const std::set<std::string>& allowed) {
  const auto* j = config.find(key);
  if (!j) return Status::ok();
  if (!j->is_object()) return invalid_input("config key \"" + key + "\" must be an object");
  for (const auto& [k, v] : j->items()) {
    if (!allowed.count(k)) {
      std::string list;
      for (const auto& a : allowed) list += (list.empty() ? "" : ", ") + a;
      return invalid_input("config key \"" + key + "." + k + "\" is not known (expected one of: " +
                           list + ")");
    }
  }
  return Status::ok();
}

// Reads the API key named by the profile from the environment and registers it as a secret.
void read_api_key(ModelProfile& p) {
  if (p.api_key_env.empty()) return;
  const char* v = std::getenv(p.api_key_env.c_str());
  if (v && *v) {
    p.api_key = v;
    core::register_secret(p.api_key);
  } else {
    spdlog::debug("llm profile {}: environment variable {} is not set; calling without an API key",
                  p.name, p.api_key_env);
  }
}

// A role -> budget object (llm.role_max_tokens or a profile's role_max_tokens).
Status read_role_budgets(const core::Config& config, const std::string& key,
                         std::map<std::string, int64_t>& out) {
  const auto* j = config.find(key);
  if (!j) return Status::ok();
  if (!j->is_object()) return invalid_input("config key \"" + key + "\" must be an object of role: tokens");
  for (const auto& [role, v] : j->items()) {
    if (!is_known_role(role))
      return invalid_input("config key \"" + key + "." + role + "\": unknown role");
    if (!v.is_number_integer() || v.get<int64_t>() < 1)
      return invalid_input("config key \"" + key + "." + role + "\" must be an integer >= 1");
    out[role] = v.get<int64_t>();
  }
  return Status::ok();
}

// A header or query value: "${VAR}" reads the environment (an unset variable is an error: the
// server would refuse the call anyway, and the message should say which variable).
Result<std::string> expand_env_value(const std::string& key, const std::string& value) {
  if (value.size() > 3 && value.rfind("${", 0) == 0 && value.back() == '}') {
    const std::string var = value.substr(2, value.size() - 3);
    const char* v = std::getenv(var.c_str());
    if (!v || !*v)
      return invalid_input("config key \"" + key + "\" names environment variable " + var +
                           ", which is not set");
    return std::string(v);
  }
  return value;
}

Status read_string_pairs(const core::Config& config, const std::string& key, bool secret,
                         std::vector<std::pair<std::string, std::string>>& out) {
  const auto* j = config.find(key);
  if (!j) return Status::ok();
  if (!j->is_object()) return invalid_input("config key \"" + key + "\" must be an object of name: string");
  for (const auto& [name, v] : j->items()) {
    if (!v.is_string()) return invalid_input("config key \"" + key + "." + name + "\" must be a string");
    auto value = expand_env_value(key + "." + name, v.get<std::string>());
    if (!value) return value.status();
    // A value read from the environment, or a header whose name says credential (api-key,
    // x-api-key, Authorization, *token*, *secret*, cookie), is a secret: redacted everywhere.
    std::string lname = name;
    for (auto& c : lname) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    const bool from_env = v.get<std::string>().rfind("${", 0) == 0;
    const bool credential = lname.find("key") != std::string::npos || lname.find("auth") != std::string::npos ||
                            lname.find("token") != std::string::npos || lname.find("secret") != std::string::npos ||
                            lname.find("cookie") != std::string::npos || lname.find("password") != std::string::npos;
    if (from_env || (secret && credential)) core::register_secret(*value);
    out.emplace_back(name, *value);
  }
  return Status::ok();
}

// The profile's scalar keys, its optional budget and cached price, its per-role budgets.
Status read_profile_values(const core::Config& config, const std::string& base, ModelProfile& p) {
// A profile key: an unset one takes the schema's default (llm.models.*.<key> in
// configs/schema/llm.json); NL2SQL_READ_OR is for the keys the schema gives no default.
#define NL2SQL_READ_OR(field, getter, def)                       \
  {                                                              \
    auto r = config.getter(base + "." #field, def);              \
    if (!r) return r.status();                                   \
    p.field = *r;                                                \
  }
#define NL2SQL_READ(field, getter)                               \
  {                                                              \
    auto r = config.getter(base + "." #field);                   \
    if (!r) return r.status();                                   \
    p.field = *r;                                                \
  }
  NL2SQL_READ(provider, get_string);
  NL2SQL_READ_OR(base_url, get_string, env_or("OPENAI_BASE_URL", kDefaultBaseUrl));
  NL2SQL_READ_OR(model, get_string, std::string(""));
  NL2SQL_READ(api_key_env, get_string);
  NL2SQL_READ(temperature, get_number);
  NL2SQL_READ(top_p, get_number);
  NL2SQL_READ(price_in_per_mtok, get_number);
  NL2SQL_READ(price_out_per_mtok, get_number);
  NL2SQL_READ(max_in_flight, get_int);
  NL2SQL_READ(rpm, get_number);
  NL2SQL_READ(tpm, get_number);
  NL2SQL_READ(timeout_s, get_number);
  NL2SQL_READ(idle_timeout_s, get_number);
  NL2SQL_READ(stream, get_bool);
  NL2SQL_READ(max_tokens_field, get_string);
  NL2SQL_READ(context_tokens, get_int);
  NL2SQL_READ_OR(embedding_model, get_string, std::string(""));
#undef NL2SQL_READ
#undef NL2SQL_READ_OR
  if (config.has(base + ".price_cached_in_per_mtok")) {
    auto r = config.get_number(base + ".price_cached_in_per_mtok");
    if (!r) return r.status();
    if (*r < 0) return invalid_input("config key \"" + base + ".price_cached_in_per_mtok\" must be >= 0");
    p.price_cached_in_per_mtok = *r;
  }
  if (config.has(base + ".max_tokens")) {
    auto r = config.get_int(base + ".max_tokens");
    if (!r) return r.status();
    if (*r <= 0) return invalid_input("config key \"" + base + ".max_tokens\" must be > 0");
    p.max_tokens = *r;
  }
  return read_role_budgets(config, base + ".role_max_tokens", p.role_max_tokens);
}

// `batch`: true, false or an object of BatchSettings' keys; `batch_discount` in (0, 1].
Status read_batch(const core::Config& config, const std::string& base, ModelProfile& p) {
  auto discount = config.get_number(base + ".batch_discount", 1.0);
  if (!discount) return discount.status();
  if (*discount <= 0 || *discount > 1)
    return invalid_input("config key \"" + base + ".batch_discount\" must be in (0, 1] (OpenAI's batch price: 0.5)");
  p.batch_discount = *discount;
  const auto* j = config.find(base + ".batch");
  if (!j || j->is_null()) return Status::ok();
  if (j->is_boolean()) {
    p.batch.enabled = j->get<bool>();
    return Status::ok();
  }
  NL2SQL_RETURN_IF_ERROR(check_keys(config, base + ".batch", kBatchKeys));
  const std::string key = base + ".batch";
  BatchSettings& b = p.batch;
  b.enabled = true;
  auto window = config.get_string(key + ".window", b.window);
  if (!window) return window.status();
  b.window = *window;
  struct Int {
    const char* name;
    int64_t* field;
  };
  for (Int i : {Int{"max_requests", &b.max_requests}, Int{"max_bytes", &b.max_bytes}}) {
    auto r = config.get_int(key + "." + i.name, *i.field);
    if (!r) return r.status();
    if (*r < 1) return invalid_input("config key \"" + key + "." + i.name + "\" must be >= 1");
    *i.field = *r;
  }
  struct Num {
    const char* name;
    double* field;
  };
  for (Num n : {Num{"gather_ms", &b.gather_ms}, Num{"poll_s", &b.poll_s}, Num{"poll_max_s", &b.poll_max_s}}) {
    auto r = config.get_number(key + "." + n.name, *n.field);
    if (!r) return r.status();
    if (*r < 0) return invalid_input("config key \"" + key + "." + n.name + "\" must be >= 0");
    *n.field = *r;
  }
  if (b.poll_max_s < b.poll_s) b.poll_max_s = b.poll_s;
  return Status::ok();
}

// An output budget that fills the whole window leaves no room for the prompt: every call would
// be cut or refused (and the prompt budget silently shrinks to its floor).
Status check_budgets_fit(const std::string& base, const ModelProfile& p) {
  if (p.context_tokens <= 0) return Status::ok();
  auto too_large = [&](const std::string& key, int64_t budget) -> Status {
    if (budget < p.context_tokens) return Status::ok();
    return invalid_input("config key \"" + key + "\" (" + std::to_string(budget) +
                         ") must be smaller than \"" + base + ".context_tokens\" (" +
                         std::to_string(p.context_tokens) +
                         "): the prompt and the answer share the context window");
  };
  if (p.max_tokens) NL2SQL_RETURN_IF_ERROR(too_large(base + ".max_tokens", *p.max_tokens));
  for (const auto& [role, budget] : p.role_max_tokens)
    NL2SQL_RETURN_IF_ERROR(too_large(base + ".role_max_tokens." + role, budget));
  return Status::ok();
}

// How the profile shapes its requests: max_tokens_field, omit, extra_body, headers, query.
Status read_request_shaping(const core::Config& config, const std::string& base, ModelProfile& p) {
  if (p.max_tokens_field != "max_tokens" && p.max_tokens_field != "max_completion_tokens")
    return invalid_input("config key \"" + base +
                         ".max_tokens_field\" must be \"max_tokens\" or \"max_completion_tokens\", not \"" +
                         p.max_tokens_field + "\"");
  if (const auto* omit = config.find(base + ".omit")) {
    if (!omit->is_array()) return invalid_input("config key \"" + base + ".omit\" must be an array of field names");
    for (const auto& f : *omit) {
      if (!f.is_string() || !kOmittable.count(f.get<std::string>())) {
        std::string list;
        for (const auto& a : kOmittable) list += (list.empty() ? "" : ", ") + a;
        return invalid_input("config key \"" + base + ".omit\": " + f.dump() +
                             " is not a field that can be left out (one of: " + list + ")");
      }
      p.omit.insert(f.get<std::string>());
    }
  }
  if (const auto* extra = config.find(base + ".extra_body")) {
    if (!extra->is_object())
      return invalid_input("config key \"" + base + ".extra_body\" must be an object (merged into every request)");
    for (const char* reserved : {"model", "messages", "stream"})
      if (extra->contains(reserved))
        return invalid_input("config key \"" + base + ".extra_body." + reserved +
                             "\": set by nl2sql itself and cannot be overridden");
    p.extra_body = extra->dump();
  }
  NL2SQL_RETURN_IF_ERROR(read_string_pairs(config, base + ".headers", true, p.headers));
  NL2SQL_RETURN_IF_ERROR(read_string_pairs(config, base + ".query", false, p.query));
  for (const auto& [name, v] : p.headers) {
    std::string lower_name = name;
    for (auto& c : lower_name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (lower_name == "content-type")
      return invalid_input("config key \"" + base + ".headers." + name + "\": set by nl2sql itself");
  }
  return Status::ok();
}

// The base URL normalized (its credentials registered as secrets) and the provider it implies.
Status settle_provider(const std::string& base, ModelProfile& p) {
  p.base_url = normalize_base_url(p.base_url);
  core::register_url_credentials(p.base_url);
  if (p.base_url.rfind("sim:", 0) == 0) p.provider = "sim";
  if (p.provider != "openai" && p.provider != "sim")
    return invalid_input("config key \"" + base + ".provider\" must be \"openai\" or \"sim\", not \"" +
                         p.provider + "\"");
  if (p.provider == "sim") {
    p.base_url = kSimBaseUrl;
    p.api_key_env.clear();
    if (p.model.empty()) p.model = "sim";
  }
  return Status::ok();
}

Status check_ranges(const std::string& base, const ModelProfile& p) {
  if (p.model.empty()) return invalid_input("config key \"" + base + ".model\" is required");
  if (p.temperature < 0 || p.temperature > 2)
    return invalid_input("config key \"" + base + ".temperature\" must be in [0, 2]");
  if (p.top_p <= 0 || p.top_p > 1)
    return invalid_input("config key \"" + base + ".top_p\" must be in (0, 1]");
  if (p.timeout_s <= 0) return invalid_input("config key \"" + base + ".timeout_s\" must be > 0");
  if (p.idle_timeout_s <= 0) return invalid_input("config key \"" + base + ".idle_timeout_s\" must be > 0");
  if (p.context_tokens < 0) return invalid_input("config key \"" + base + ".context_tokens\" must be >= 0");
  if (p.rpm < 0 || p.tpm < 0 || p.price_in_per_mtok < 0 || p.price_out_per_mtok < 0)
    return invalid_input("config keys \"" + base +
                         ".{rpm,tpm,price_in_per_mtok,price_out_per_mtok}\" must be >= 0");
  return Status::ok();
}

Result<ModelProfile> load_profile(const core::Config& config, const std::string& name) {
  const std::string base = "llm.models." + name;
  NL2SQL_RETURN_IF_ERROR(check_keys(config, base, kProfileKeys));
  ModelProfile p;
  p.name = name;
  NL2SQL_RETURN_IF_ERROR(read_profile_values(config, base, p));
  NL2SQL_RETURN_IF_ERROR(check_budgets_fit(base, p));
  NL2SQL_RETURN_IF_ERROR(read_request_shaping(config, base, p));
  NL2SQL_RETURN_IF_ERROR(read_batch(config, base, p));
  NL2SQL_RETURN_IF_ERROR(settle_provider(base, p));
  if (p.batch.enabled && p.stream)
    return invalid_input("config key \"" + base + ".batch\": a batch job's answers are files, not streams; "
                         "set \"" + base + ".stream\" to false");
  NL2SQL_RETURN_IF_ERROR(check_ranges(base, p));
  read_api_key(p);
  return p;
}

Result<double> read_probability(const core::Config& config, const std::string& key, double def) {
  auto r = config.get_number(key, def);
  if (!r) return r.status();
  if (*r < 0 || *r > 1) return invalid_input("config key \"" + key + "\" must be in [0, 1]");
  return *r;
}

}  // namespace

const char* cache_mode_name(CacheMode mode) {
  switch (mode) {
    case CacheMode::kReadWrite: return "read-write";
    case CacheMode::kReadOnly: return "read-only";
    case CacheMode::kOff: return "off";
    case CacheMode::kReplay: return "replay";
  }
  return "?";
}

Result<CacheMode> parse_cache_mode(const std::string& text) {
  for (auto m : {CacheMode::kReadWrite, CacheMode::kReadOnly, CacheMode::kOff, CacheMode::kReplay})
    if (text == cache_mode_name(m)) return m;
  return invalid_input("cache mode \"" + text +
                       "\" is not one of read-write, read-only, off, replay");
}

double SimSettings::p_correct_for(const std::string& generator,
                                  const std::string& difficulty) const {
  for (const auto& key : {generator + "/" + difficulty, generator, difficulty}) {
    auto it = p_correct_by.find(key);
    if (it != p_correct_by.end()) return it->second;
  }
  return p_correct;
}

bool is_known_role(const std::string& role) { return kKnownRoles.count(role) > 0; }

const std::map<std::string, int64_t>& default_role_budgets() {
  // Chain-of-thought prompts (generation, fixing, pairwise judging) write a page of reasoning
  // before the answer; the short JSON roles need little.
  static const std::map<std::string, int64_t> kBudgets = {
      {"generate", 4096}, {"fix", 4096},      {"select", 2048},        {"rank", 2048},
      {"nl_eval", 2048},  {"judge", 2048},    {"keywords", 1024},      {"column_filter", 1024},
      {"describe", 1024}};
  return kBudgets;
}

int64_t LlmSettings::output_budget(const ModelProfile& profile, const std::string& role) const {
  if (auto it = profile.role_max_tokens.find(role); it != profile.role_max_tokens.end()) return it->second;
  if (profile.max_tokens) return *profile.max_tokens;
  if (auto it = role_max_tokens.find(role); it != role_max_tokens.end()) return it->second;
  const auto& d = default_role_budgets();
  if (auto it = d.find(role); it != d.end()) return it->second;
  return kDefaultOutputBudget;
}

std::string normalize_base_url(std::string url) {
  while (!url.empty() && (url.back() == '/' || url.back() == ' ')) url.pop_back();
  for (const char* tail : {"/chat/completions", "/completions", "/embeddings"}) {
    const std::string t = tail;
    if (url.size() > t.size() && url.compare(url.size() - t.size(), t.size(), t) == 0) {
      url.resize(url.size() - t.size());
      break;
    }
  }
  while (!url.empty() && url.back() == '/') url.pop_back();
  return url;
}

Result<const ModelProfile*> LlmSettings::resolve(const std::string& role,
                                                 const std::string& profile) const {
  std::string name = profile;
  if (name.empty() && !role.empty()) {
    auto it = roles.find(role);
    name = it != roles.end() ? it->second : default_profile;
  }
  if (name.empty()) name = default_profile;
  auto it = profiles.find(name);
  if (it == profiles.end()) {
    std::string known;
    for (const auto& [k, v] : profiles) known += (known.empty() ? "" : ", ") + k;
    return make_call_error(CallErrorKind::kConfig,
                           "no model profile \"" + name + "\"" +
                               (role.empty() ? "" : " (for role \"" + role + "\")") +
                               "; llm.models has: " + known);
  }
  return &it->second;
}

namespace {

// llm.models (or the "default" profile from the environment) and llm.default_profile.
Status read_profiles(const core::Config& config, LlmSettings& s) {
  const auto* models = config.find("llm.models");
  if (models && !models->is_object())
    return invalid_input("config key \"llm.models\" must be an object");
  if (!models || models->empty()) {
    ModelProfile p;
    p.name = "default";
    p.base_url = normalize_base_url(env_or("OPENAI_BASE_URL", kDefaultBaseUrl));
    core::register_url_credentials(p.base_url);
    p.model = env_or("OPENAI_MODEL", "gpt-4o-mini");
    p.api_key_env = "OPENAI_API_KEY";
    read_api_key(p);
    s.profiles[p.name] = p;
  } else {
    for (const auto& [name, v] : models->items()) {
      auto p = load_profile(config, name);
      if (!p) return p.status();
      s.profiles[name] = std::move(p).value();
    }
  }
  auto def = config.get_string("llm.default_profile",
                               s.profiles.count("default") ? "default" : s.profiles.begin()->first);
  if (!def) return def.status();
  s.default_profile = *def;
  if (!s.profiles.count(s.default_profile))
    return invalid_input("config key \"llm.default_profile\" names \"" + s.default_profile +
                         "\", which is not in llm.models");
  return Status::ok();
}

// llm.roles: known roles, each naming a profile.
Status read_roles(const core::Config& config, LlmSettings& s) {
  if (const auto* roles = config.find("llm.roles")) {
    if (!roles->is_object()) return invalid_input("config key \"llm.roles\" must be an object");
    for (const auto& [role, v] : roles->items()) {
      const std::string key = "llm.roles." + role;
      if (!is_known_role(role)) {
        std::string list;
        for (const auto& r : kKnownRoles) list += (list.empty() ? "" : ", ") + r;
        return invalid_input("config key \"" + key + "\": unknown role (known: " + list + ")");
      }
      if (!v.is_string()) return invalid_input("config key \"" + key + "\" must be a profile name");
      auto name = v.get<std::string>();
      if (!s.profiles.count(name))
        return invalid_input("config key \"" + key + "\" names profile \"" + name +
                             "\", which is not in llm.models");
      s.roles[role] = name;
    }
  }
  return Status::ok();
}

// The run-wide limits: repeated refusals, preflight, endpoint down wait, in-flight, body cap.
Status read_limits(const core::Config& config, LlmSettings& s) {
  auto repeated = config.get_int("llm.stop_after_repeated_errors");
  if (!repeated) return repeated.status();
  if (*repeated < 0) return invalid_input("config key \"llm.stop_after_repeated_errors\" must be >= 0");
  s.stop_after_repeated_errors = *repeated;
  auto preflight = config.get_bool("llm.preflight");
  if (!preflight) return preflight.status();
  s.preflight = *preflight;
  auto down_wait = config.get_number("llm.endpoint_down_wait_s");
  if (!down_wait) return down_wait.status();
  if (*down_wait < 0) return invalid_input("config key \"llm.endpoint_down_wait_s\" must be >= 0");
  s.endpoint_down_wait_s = *down_wait;
  auto mif = config.get_int("llm.max_in_flight");
  if (!mif) return mif.status();
  s.max_in_flight = *mif;
  auto max_body = config.get_int("llm.max_response_bytes");
  if (!max_body) return max_body.status();
  if (*max_body < 1024)
    return invalid_input("config key \"llm.max_response_bytes\" must be >= 1024 (an answer needs room)");
  s.max_response_bytes = static_cast<size_t>(*max_body);
  return Status::ok();
}

Status read_retry(const core::Config& config, LlmSettings& s) {
  auto attempts = config.get_int("llm.retry.max_attempts");
  if (!attempts) return attempts.status();
  if (*attempts < 1 || *attempts > 100)
    return invalid_input("config key \"llm.retry.max_attempts\" must be in [1, 100]");
  s.retry.max_attempts = static_cast<int>(*attempts);
  auto base = config.get_number("llm.retry.base_delay_s");
  if (!base) return base.status();
  s.retry.base_delay_s = *base;
  auto maxd = config.get_number("llm.retry.max_delay_s");
  if (!maxd) return maxd.status();
  s.retry.max_delay_s = *maxd;
  return Status::ok();
}

Status read_cache(const core::Config& config, LlmSettings& s) {
  auto mode = config.get_string("llm.cache.mode");
  if (!mode) return mode.status();
  auto parsed = parse_cache_mode(*mode);
  if (!parsed) return parsed.status().with_context("config key \"llm.cache.mode\"");
  s.cache.mode = *parsed;
  auto path = config.get_string("llm.cache.path");
  if (!path) return path.status();
  s.cache.path = *path;
  return Status::ok();
}

// The offline sim provider's probabilities.
Status read_sim(const core::Config& config, LlmSettings& s) {
  auto seed = config.get_int("llm.sim.seed");
  if (!seed) return seed.status();
  s.sim.seed = *seed;
  struct P {
    const char* key;
    double* field;
  };
  for (P p : {P{"llm.sim.p_correct", &s.sim.p_correct}, P{"llm.sim.p_fix", &s.sim.p_fix},
              P{"llm.sim.p_sel", &s.sim.p_sel}, P{"llm.sim.p_hallucinate", &s.sim.p_hallucinate}}) {
    auto r = read_probability(config, p.key, *p.field);
    if (!r) return r.status();
    *p.field = *r;
  }
  if (const auto* by = config.find("llm.sim.p_correct_by")) {
    if (!by->is_object()) return invalid_input("config key \"llm.sim.p_correct_by\" must be an object");
    for (const auto& [k, v] : by->items()) {
      auto r = read_probability(config, "llm.sim.p_correct_by." + k, 0);
      if (!r) return r.status();
      s.sim.p_correct_by[k] = *r;
    }
  }
  return Status::ok();
}

}  // namespace

Result<LlmSettings> load_llm_settings(const core::Config& config) {
  NL2SQL_RETURN_IF_ERROR(check_keys(config, "llm", kLlmKeys));
  LlmSettings s;
  NL2SQL_RETURN_IF_ERROR(read_profiles(config, s));
  NL2SQL_RETURN_IF_ERROR(read_roles(config, s));
  NL2SQL_RETURN_IF_ERROR(read_role_budgets(config, "llm.role_max_tokens", s.role_max_tokens));
  NL2SQL_RETURN_IF_ERROR(read_limits(config, s));
  NL2SQL_RETURN_IF_ERROR(read_retry(config, s));
  NL2SQL_RETURN_IF_ERROR(read_cache(config, s));
  NL2SQL_RETURN_IF_ERROR(read_sim(config, s));
  return s;
}

}  // namespace nl2sql::llm
