// The estimate before a run (see estimate.h): two dry runs of the pipeline answered in-process,
// the answer-dependent parts projected, a previous run's means where there is one.
#include "nl2sql/pipeline/estimate.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <set>

#include "nl2sql/core/hash.h"
#include "nl2sql/llm/profile.h"
#include "nl2sql/llm/transport.h"
#include "nl2sql/run/run_data.h"

namespace nl2sql::pipeline {
namespace {

// A batch profile's answers are billed at its batch_discount.
double batch_factor(const llm::ModelProfile& p) { return p.batch.enabled ? p.batch_discount : 1.0; }

namespace fs = std::filesystem;
using json = nlohmann::json;

constexpr const char* kNowhere = "http://nl2sql-estimate.invalid/v1";

// Answers every request at once, in-process: chat completions with one text that every stage can
// read (a verdict line, an empty JSON list, a final ```sql block), embeddings with small vectors.
// `expected`: the SQL is one of kDefaultDistinctQueries texts with kDefaultDistinctResults
// results (two texts share a result), drawn from the request, as a model's samples repeat each
// other; else every answer is a query of its own with a result of its own (the worst case for
// the selectors: every pair of candidates a duel).
// A table of the question's schema in a prompt ("" when none), the same whatever the tables'
// order: the least name of the last run of CREATE TABLE statements (worked demonstrations with
// schemas of their own come before the question's schema). The neutral answer reads it, so a
// generator that links the tables its answers name (SSEV's PostSQL) prunes the schema as it does
// for a model's answer, and shuffled samples still write the same query.
std::string schema_table(const json& body) {
  std::string best;
  if (!body.is_object() || !body.contains("messages") || !body["messages"].is_array()) return best;
  constexpr std::string_view kCreate = "CREATE TABLE ";
  for (const auto& m : body["messages"]) {
    if (!m.is_object() || !m.contains("content") || !m["content"].is_string()) continue;
    const std::string& text = m["content"].get_ref<const std::string&>();
    std::string least;
    for (size_t at = text.rfind(kCreate); at != std::string::npos;) {
      size_t end = at + kCreate.size();
      while (end < text.size() && text[end] != '(' && !std::isspace(static_cast<unsigned char>(text[end]))) ++end;
      const std::string name = text.substr(at + kCreate.size(), end - at - kCreate.size());
      if (!name.empty() && (least.empty() || name < least)) least = name;
      // The statement before ends right before this one: the same schema.
      if (at < 3 || text.compare(at - 3, 3, ");\n") != 0) break;
      at = text.rfind(kCreate, at - 1);
    }
    if (!least.empty()) best = least;
  }
  return best;
}

class NeutralTransport : public llm::Transport {
 public:
  explicit NeutralTransport(bool expected) : expected_(expected) {}

  Result<llm::HttpResponse> post(const llm::HttpRequest& request) override {
    const json body = json::parse(request.body, nullptr, false);
    llm::HttpResponse r;
    r.status = 200;
    const uint64_t h = core::xxh64(request.body);
    if (request.url.size() >= 11 && request.url.compare(request.url.size() - 11, 11, "/embeddings") == 0) {
      size_t n = 1;
      if (body.is_object() && body.contains("input") && body["input"].is_array()) n = body["input"].size();
      json data = json::array();
      for (size_t i = 0; i < n; ++i) {
        json v = json::array();
        for (int d = 0; d < 8; ++d) v.push_back(static_cast<double>((h >> (d + i % 7)) & 7) / 7.0);
        data.push_back({{"object", "embedding"}, {"index", i}, {"embedding", v}});
      }
      r.body = json{{"object", "list"}, {"data", data}}.dump();
      return r;
    }
    int64_t n = 1;
    if (body.is_object() && body.contains("n") && body["n"].is_number_integer()) n = std::max<int64_t>(1, body["n"]);
    const std::string table = schema_table(body);
    const std::string from = table.empty() ? "" : " FROM " + table + " LIMIT 1";
    json choices = json::array();
    for (int64_t i = 0; i < n; ++i) {
      const uint64_t hi = core::xxh64(std::to_string(i), h);
      std::string sql = fmt::format("SELECT {} AS v{}{}", hi % 1000000007ULL, (hi >> 32) % 100000, from);
      if (expected_) {
        const uint64_t k = hi % static_cast<uint64_t>(kDefaultDistinctQueries);
        sql = k < static_cast<uint64_t>(kDefaultDistinctResults) ? fmt::format("SELECT {}{}", k, from)
                                                                 : "SELECT 0 AS v" + from;
      }
      const std::string text = fmt::format("Answer: A\n```json\n[]\n```\n```sql\n{}\n```", sql);
      choices.push_back({{"index", i},
                         {"message", {{"role", "assistant"}, {"content", text}}},
                         {"finish_reason", "stop"}});
    }
    r.body = json{{"id", "estimate"}, {"object", "chat.completion"}, {"choices", choices}}.dump();
    return r;
  }

 private:
  bool expected_;
};

// What one stage of a dry run (or a previous run) spent, summed over its questions.
struct StageCount {
  double calls = 0, prompt_tokens = 0, completion_tokens = 0;
  double price_in = 0, price_out = 0, budget = 0;  // per-call sums, for the means (traced calls)
  double traced = 0;
};

struct Observed {
  size_t questions = 0;
  double candidates = 0;
  std::map<std::string, StageCount> stages;
};

// The run's stage of each role, for its output budget.
std::string role_of_stage(const std::string& stage) {
  if (stage == "context") return "keywords";
  if (stage == "fix") return "fix";
  if (stage == "select" || stage == "curves") return "select";
  return "generate";
}

void count_records(const std::vector<run::QuestionRecord>& records, const json& run_usage,
                   const llm::LlmSettings* settings, Observed& out) {
  for (const auto& r : records) {
    ++out.questions;
    out.candidates += static_cast<double>(r.candidates.size());
    for (const auto& [stage, u] : r.usage) {
      auto& s = out.stages[stage];
      s.calls += static_cast<double>(u.calls);
      s.prompt_tokens += static_cast<double>(u.prompt_tokens);
      s.completion_tokens += static_cast<double>(u.completion_tokens);
    }
    if (!settings) continue;
    for (const auto& call : run::recorded_calls(r)) {
      const llm::LlmCallTrace& t = *call.trace;
      if (!t.shared_from.empty() || t.from_cache) continue;
      auto it = settings->profiles.find(t.profile);
      if (it == settings->profiles.end()) continue;
      auto& s = out.stages[call.stage];
      s.traced += 1;
      s.price_in += it->second.price_in_per_mtok * batch_factor(it->second);
      s.price_out += it->second.price_out_per_mtok * batch_factor(it->second);
      s.budget += static_cast<double>(settings->output_budget(it->second, role_of_stage(call.stage)));
    }
  }
  if (!run_usage.is_object()) return;
  for (const auto& [stage, u] : run_usage.items()) {
    if (stage == "preflight" || !u.is_object()) continue;
    auto& s = out.stages[stage];
    s.calls += u.value("calls", 0.0);
    s.prompt_tokens += u.value("prompt_tokens", 0.0);
    s.completion_tokens += u.value("completion_tokens", 0.0);
  }
}

// The config of a dry run: every profile answered by the in-process transport (no key, no rate
// limit, no stream), no response cache, no preflight, no budget.
core::Config dry_config(const core::Config& config, const llm::LlmSettings& settings) {
  core::Config c = config;
  for (const auto& [name, p] : settings.profiles) {
    const std::string base = "llm.models." + name + ".";
    c.set(base + "provider", "openai");
    c.set(base + "base_url", kNowhere);
    c.set(base + "model", p.model.empty() ? std::string("estimate") : p.model);
    c.set(base + "api_key_env", "");
    c.set(base + "rpm", 0);
    c.set(base + "tpm", 0);
    c.set(base + "stream", false);
    c.set(base + "batch", false);  // the dry run answers itself at once; prices keep the discount
    if (p.headers.size()) c.set(base + "headers", json::object());
  }
  c.set("llm.cache.mode", "off");
  c.set("llm.preflight", false);
  c.set("run.max_cost_usd", nullptr);
  return c;
}

// A fresh scratch folder under the system's temporary folder.
fs::path scratch_dir(const std::string& what) {
  static std::atomic<int> counter{0};
  fs::path p = fs::temp_directory_path() /
               fmt::format("nl2sql-estimate-{}-{}-{}", ::getpid(), counter.fetch_add(1), what);
  fs::remove_all(p);
  fs::create_directories(p);
  return p;
}

struct LogLevelGuard {
  spdlog::level::level_enum before = spdlog::get_level();
  LogLevelGuard() { spdlog::set_level(std::max(before, spdlog::level::err)); }
  ~LogLevelGuard() { spdlog::set_level(before); }
};

Result<Observed> dry_run(const EstimateOptions& options, const llm::LlmSettings& settings, bool expected) {
  RunOptions o = options.run;
  o.config = dry_config(options.run.config, settings);
  const fs::path scratch = scratch_dir(expected ? "expected" : "worst");
  o.out_dir = scratch / "run";
  o.force_new = true;
  o.progress = ProgressMode::kOff;
  o.transport = std::make_shared<NeutralTransport>(expected);
  // Written descriptions are kept in the index folder: a dry run's would stand in for the model's.
  auto describe = options.run.config.get_bool("context.metadata.describe");
  auto metadata = options.run.config.get_bool("context.metadata.enabled");
  if (describe && metadata && *describe && *metadata) o.index_dir = scratch / "index";
  Result<RunSummary> summary = [&] {
    LogLevelGuard quiet;
    return run(o);
  }();
  Observed out;
  if (summary) {
    auto data = run::load_run(o.out_dir, std::move(summary->records));
    if (data) count_records(data->records, data->run_usage, &settings, out);
    else summary = data.status();
  }
  std::error_code ec;
  fs::remove_all(scratch, ec);
  if (!summary) return summary.status();
  return out;
}

// A previous run to learn from: the one named, else the run folder when it holds a run of the
// same config. Null when there is none.
Result<std::optional<Observed>> previous_run(const EstimateOptions& options, fs::path* used, std::string* note) {
  fs::path dir = options.previous_run;
  const bool named = !dir.empty();
  if (!named) dir = options.run.out_dir;
  if (dir.empty() || !fs::exists(dir / "run.sqlite")) {
    if (named) return invalid_input("--estimate-from: " + dir.string() + " holds no run (no run.sqlite)");
    return std::optional<Observed>();
  }
  auto data = run::load_run(dir);
  if (!data) return data.status();
  const std::string hash = core::sha256_hex(result_relevant_config(options.run.config.json()).dump());
  const bool same = data->manifest.value("config_hash", std::string()) == hash;
  if (!same && !named) return std::optional<Observed>();
  if (!same) *note = "the previous run " + dir.string() + " was made with another config: its means may not fit";
  Observed o;
  count_records(data->records, data->run_usage, nullptr, o);
  if (o.questions == 0) {
    if (named) return invalid_input("--estimate-from: " + dir.string() + " has no finished question");
    return std::optional<Observed>();
  }
  *used = dir;
  return std::optional<Observed>(std::move(o));
}

double per(double total, double n) { return n > 0 ? total / n : 0; }

struct Prices {
  double in = 0, out = 0, budget = 0;
};

// The stage's mean prices and output budget per call, from the dry run's calls, else the role's
// profile.
Prices stage_prices(const StageCount* s, const std::string& stage, const llm::LlmSettings& settings) {
  if (s && s->traced > 0) return {s->price_in / s->traced, s->price_out / s->traced, s->budget / s->traced};
  auto p = settings.resolve(role_of_stage(stage), "");
  if (!p) return {};
  return {(*p)->price_in_per_mtok * batch_factor(**p), (*p)->price_out_per_mtok * batch_factor(**p),
          static_cast<double>(settings.output_budget(**p, role_of_stage(stage)))};
}

StageEstimate project_stage(const std::string& stage, const Observed& expected, const Observed& worst,
                            const std::optional<Observed>& previous, const EstimateOptions& options,
                            const llm::LlmSettings& settings) {
  auto find = [&](const Observed& o) -> const StageCount* {
    auto it = o.stages.find(stage);
    return it == o.stages.end() ? nullptr : &it->second;
  };
  const StageCount none;
  const StageCount& e = find(expected) ? *find(expected) : none;
  const StageCount& w = find(worst) ? *find(worst) : none;
  const StageCount* prev = previous ? find(*previous) : nullptr;
  const double n = static_cast<double>(expected.questions);
  StageEstimate out;
  if (stage == "fix") {
    auto enabled = options.run.config.get_bool("fix.enabled");
    auto rounds = options.run.config.get_int("fix.max_rounds");
    const double max_rounds = enabled && *enabled && rounds ? static_cast<double>(*rounds) : 0.0;
    auto git = expected.stages.find("generate");
    const double gen_prompt = git == expected.stages.end() ? 0 : per(git->second.prompt_tokens, git->second.calls);
    double rate = kDefaultFixCallsPerCandidate, prompt_per_call = gen_prompt;
    if (previous && prev && prev->calls > 0) {
      rate = per(prev->calls, previous->candidates);
      prompt_per_call = per(prev->prompt_tokens, prev->calls);
    } else if (previous) {
      rate = 0;
    }
    rate = std::min(rate, max_rounds);
    out.calls = {0, expected.candidates * rate, expected.candidates * max_rounds};
    out.prompt_tokens = {0, out.calls.expected * prompt_per_call,
                         out.calls.high * std::max(prompt_per_call, gen_prompt) * kRenderedHigh};
  } else if (stage == "select" || stage == "curves") {
    out.calls = {0, e.calls, std::max(e.calls, w.calls)};
    out.prompt_tokens = {0, e.prompt_tokens, std::max(e.prompt_tokens, w.prompt_tokens) * kRenderedHigh};
  } else {
    out.calls = {e.calls, e.calls, std::max(e.calls, w.calls)};
    out.prompt_tokens = {e.prompt_tokens * kRenderedLow, e.prompt_tokens,
                         std::max(e.prompt_tokens, w.prompt_tokens) * kRenderedHigh};
  }
  // A previous run of the same config: its per-question means are the expected figures.
  if (previous) {
    const double scale = per(n, static_cast<double>(previous->questions));
    out.calls.expected = prev ? prev->calls * scale : 0;
    out.prompt_tokens.expected = prev ? prev->prompt_tokens * scale : 0;
  }
  const Prices price = stage_prices(find(expected), stage, settings);
  const double completion_per_call = prev && prev->calls > 0 ? per(prev->completion_tokens, prev->calls)
                                                             : static_cast<double>(default_completion_tokens(stage));
  out.completion_tokens = {out.calls.low * std::min<double>(kLowCompletionPerCall, completion_per_call),
                           out.calls.expected * completion_per_call,
                           out.calls.high * std::max(price.budget, completion_per_call)};
  for (Range* r : {&out.calls, &out.prompt_tokens, &out.completion_tokens}) {
    r->high = std::max(r->high, r->expected);
    r->low = std::min(r->low, r->expected);
  }
  auto cost = [&](double prompt, double completion) { return (prompt * price.in + completion * price.out) / 1e6; };
  out.cost_usd = {cost(out.prompt_tokens.low, out.completion_tokens.low),
                  cost(out.prompt_tokens.expected, out.completion_tokens.expected),
                  cost(out.prompt_tokens.high, out.completion_tokens.high)};
  return out;
}

json range_json(const Range& r) { return {{"low", r.low}, {"expected", r.expected}, {"high", r.high}}; }

}  // namespace

int64_t default_completion_tokens(const std::string& stage) {
  if (stage == "context") return 40;
  if (stage == "generate") return 400;
  return 300;
}

Range& Range::operator+=(const Range& o) {
  low += o.low;
  expected += o.expected;
  high += o.high;
  return *this;
}

StageEstimate& StageEstimate::operator+=(const StageEstimate& o) {
  calls += o.calls;
  prompt_tokens += o.prompt_tokens;
  completion_tokens += o.completion_tokens;
  cost_usd += o.cost_usd;
  return *this;
}

Result<Estimate> estimate_run(const EstimateOptions& options) {
  auto settings = llm::load_llm_settings(options.run.config);
  if (!settings) return settings.status();
  Estimate est;
  fs::path used;
  std::string note;
  auto previous = previous_run(options, &used, &note);
  if (!previous) return previous.status();
  if (!note.empty()) est.notes.push_back(note);
  auto expected = dry_run(options, *settings, true);
  if (!expected) return expected.status();
  auto worst = dry_run(options, *settings, false);
  if (!worst) return worst.status();
  est.questions = expected->questions;
  std::set<std::string> stages = {"fix"};
  for (const Observed* o : {&*expected, &*worst}) for (const auto& [s, c] : o->stages) stages.insert(s);
  if (*previous)
    for (const auto& [s, c] : (*previous)->stages) stages.insert(s);
  for (const auto& s : stages) {
    StageEstimate st = project_stage(s, *expected, *worst, *previous, options, *settings);
    if (st.calls.high <= 0 && st.calls.expected <= 0) continue;
    est.total += st;
    est.stages[s] = st;
  }
  if (*previous) {
    est.basis = "previous run";
    est.previous_run = used;
    est.previous_questions = (*previous)->questions;
  }
  return est;
}

json to_json(const StageEstimate& s) {
  return {{"calls", range_json(s.calls)},
          {"prompt_tokens", range_json(s.prompt_tokens)},
          {"completion_tokens", range_json(s.completion_tokens)},
          {"cost_usd", range_json(s.cost_usd)}};
}

json to_json(const Estimate& e) {
  json j = to_json(e.total);
  j["questions"] = e.questions;
  json stages = json::object();
  for (const auto& [name, s] : e.stages) stages[name] = to_json(s);
  j["stages"] = stages;
  j["basis"] = e.basis;
  j["previous_run"] = e.previous_run.empty() ? json(nullptr) : json(e.previous_run.string());
  if (!e.previous_run.empty()) j["previous_questions"] = e.previous_questions;
  j["notes"] = e.notes;
  return j;
}

std::string estimate_text(const Estimate& e, const std::string& title) {
  std::string out = fmt::format("estimate of {} for {} questions (no endpoint called; expected from {}):\n", title,
                                e.questions,
                                e.previous_run.empty() ? std::string("the stated defaults")
                                                       : fmt::format("the means of {} ({} questions)",
                                                                     e.previous_run.string(), e.previous_questions));
  out += fmt::format("  {:<22} {:>14} {:>14} {:>14}\n", "", "low", "expected", "high");
  auto rows = [&](const std::string& label, const StageEstimate& s) {
    out += fmt::format("  {:<22} {:>14.0f} {:>14.0f} {:>14.0f}\n", label + " calls", s.calls.low, s.calls.expected,
                       s.calls.high);
    out += fmt::format("  {:<22} {:>14.0f} {:>14.0f} {:>14.0f}\n", label + " prompt tok", s.prompt_tokens.low,
                       s.prompt_tokens.expected, s.prompt_tokens.high);
    out += fmt::format("  {:<22} {:>14.0f} {:>14.0f} {:>14.0f}\n", label + " completion tok",
                       s.completion_tokens.low, s.completion_tokens.expected, s.completion_tokens.high);
    out += fmt::format("  {:<22} {:>14.4f} {:>14.4f} {:>14.4f}\n", label + " USD", s.cost_usd.low,
                       s.cost_usd.expected, s.cost_usd.high);
  };
  rows("total", e.total);
  for (const auto& [name, s] : e.stages) rows(name, s);
  for (const auto& n : e.notes) out += "  note: " + n + "\n";
  out += "  dollars at the profiles' list prices (a provider's prefix cache lowers the bill)\n";
  return out;
}

}  // namespace nl2sql::pipeline
