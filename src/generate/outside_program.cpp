// Outside programs on JSON lines (outside_program.h).
#include "nl2sql/generate/outside_program.h"

#include <cmath>
#include <cstdlib>
#include <set>

#include <spdlog/spdlog.h>

#include "nl2sql/core/log.h"
#include "nl2sql/llm/client.h"
#include "nl2sql/llm/local_endpoint.h"

extern char** environ;

namespace nl2sql::generate {
namespace {

using json = nlohmann::json;

// What a fault message quotes of the program's stderr.
constexpr size_t kTailInMessage = 2000;

// Variables of nl2sql's environment a copy must not see: every profile's API key variable, and
// any variable holding a secret a profile read (a key, a "${VAR}" header or query value).
std::vector<std::string> secret_variables(const llm::LlmSettings& settings) {
  std::set<std::string> secrets;
  std::vector<std::string> names;
  for (const auto& [name, p] : settings.profiles) {
    if (!p.api_key_env.empty()) names.push_back(p.api_key_env);
    if (!p.api_key.empty()) secrets.insert(p.api_key);
    for (const auto& [k, v] : p.headers)
      if (v.size() >= 8) secrets.insert(v);
    for (const auto& [k, v] : p.query)
      if (v.size() >= 8) secrets.insert(v);
  }
  for (char** e = environ; e && *e; ++e) {
    std::string entry(*e);
    size_t eq = entry.find('=');
    if (eq == std::string::npos) continue;
    std::string value = entry.substr(eq + 1);
    for (const auto& s : secrets)
      if (!value.empty() && value.find(s) != std::string::npos) names.push_back(entry.substr(0, eq));
  }
  for (const char* n : {"OPENAI_ORG_ID", "OPENAI_ORGANIZATION", "OPENAI_PROJECT_ID", "HF_TOKEN",
                        "HUGGING_FACE_HUB_TOKEN", "ANTHROPIC_AUTH_TOKEN"})
    names.emplace_back(n);
  return names;
}

}  // namespace

Result<OutsideProgramSpec> read_outside_program(const json& item, const std::string& key) {
  OutsideProgramSpec s;
  s.config_key = key;
  const json* argv = item.contains("argv") ? &item["argv"] : nullptr;
  if (!argv || !argv->is_array() || argv->empty())
    return invalid_input("config key \"" + key + ".argv\" is required: a non-empty array of strings (the program and its arguments)");
  for (const auto& a : *argv) {
    if (!a.is_string() || a.get<std::string>().empty())
      return invalid_input("config key \"" + key + ".argv\" must hold non-empty strings");
    s.argv.push_back(a.get<std::string>());
  }
  if (item.contains("timeout_s")) {
    if (!item["timeout_s"].is_number() || !(item["timeout_s"].get<double>() > 0))
      return invalid_input("config key \"" + key + ".timeout_s\" must be a number > 0");
    s.timeout_s = item["timeout_s"].get<double>();
  }
  if (item.contains("workers")) {
    if (!item["workers"].is_number_integer() || item["workers"].get<int64_t>() < 1 || item["workers"].get<int64_t>() > 256)
      return invalid_input("config key \"" + key + ".workers\" must be an integer in [1, 256]");
    s.workers = item["workers"].get<int64_t>();
  }
  return s;
}

OutsideProgram::OutsideProgram(OutsideProgramSpec spec, llm::Client* client)
    : spec_(std::move(spec)), client_(client), copies_(static_cast<size_t>(std::max<int64_t>(1, spec_.workers))) {
  if (client_)
    if (auto p = client_->settings().resolve(spec_.role, ""); p.is_ok()) profile_ = (*p)->name;
}

OutsideProgram::~OutsideProgram() {
  for (auto& c : copies_)
    if (c.process) c.process->kill();
  endpoint_.reset();
}

Status OutsideProgram::ensure_endpoint() {
  if (endpoint_ || client_ == nullptr) return Status::ok();
  auto e = llm::LocalEndpoint::start(client_);
  if (!e) return e.status();
  endpoint_ = std::move(*e);
  return Status::ok();
}

Result<std::unique_ptr<core::ChildProcess>> OutsideProgram::start_copy(const std::string& alias) {
  core::ChildOptions o;
  o.argv = spec_.argv;
  if (client_) o.unset_env = secret_variables(client_->settings());
  if (endpoint_) {
    o.set_env["OPENAI_BASE_URL"] = endpoint_->base_url();
    o.set_env["OPENAI_API_KEY"] = alias;
    o.set_env["OPENAI_MODEL"] = profile_;
  }
  o.set_env["NL2SQL_PROTOCOL"] = kOutsideProtocol;
  auto p = core::ChildProcess::start(o);
  if (!p) return p.status().with_context("config key \"" + spec_.config_key + ".argv\"");
  spdlog::debug("outside program {}: started pid {}", spec_.label, (*p)->pid());
  return p;
}

Status OutsideProgram::fault(Copy& copy, const std::string& question_id, const std::string& what) {
  std::string tail;
  if (copy.process) {
    copy.process->kill();
    tail = copy.process->stderr_tail();
    copy.process.reset();  // started afresh for the next question
  }
  if (tail.size() > kTailInMessage) tail = "…" + tail.substr(tail.size() - kTailInMessage);
  return Status(ErrorCode::kUnavailable,
                "outside program " + spec_.label + " (question " + question_id + "): " + what +
                    "; the program is restarted for the next question" +
                    (tail.empty() ? std::string("; its stderr is empty") : "; its stderr ends:\n" + core::redact(tail)));
}

Result<json> OutsideProgram::exchange(Copy& copy, const json& request, const std::string& question_id) {
  if (!copy.process) {
    auto p = start_copy(copy.alias);
    if (!p) return p.status();
    copy.process = std::move(*p);
  }
  if (Status st = copy.process->write_line(request.dump(-1, ' ', false, json::error_handler_t::replace)); !st)
    return fault(copy, question_id, st.message());
  const auto timeout = std::chrono::milliseconds(static_cast<int64_t>(std::ceil(spec_.timeout_s * 1000)));
  auto line = copy.process->read_line(timeout, [this] { return client_ && client_->cancelled(); });
  if (!line) {
    if (line.status().code() == ErrorCode::kCancelled) {
      copy.process->kill();
      copy.process.reset();
      return line.status();
    }
    if (line.status().code() == ErrorCode::kTimeout)
      return fault(copy, question_id, "no answer within timeout_s = " + fmt::format("{:g}", spec_.timeout_s) +
                                          " s (its process group was killed)");
    return fault(copy, question_id, line.status().message());
  }
  auto answer = json::parse(*line, nullptr, false);
  auto quoted = [&] { return "\"" + core::redact_and_cut(*line, 200) + "\""; };
  if (answer.is_discarded() || !answer.is_object())
    return fault(copy, question_id, "its answer line is not a JSON object: " + quoted());
  const json& qid = answer.contains("question_id") ? answer["question_id"] : json();
  if (!qid.is_string() || qid.get<std::string>() != question_id)
    return fault(copy, question_id, "its answer is not for this question (question_id " +
                                        (qid.is_null() ? std::string("missing") : qid.dump()) + "): " + quoted());
  return answer;
}

Result<OutsideProgram::Exchange> OutsideProgram::ask(json request, const std::string& question_id,
                                                     const llm::CallTag& tag) {
  Copy* copy = nullptr;
  {
    std::unique_lock lock(mu_);
    NL2SQL_RETURN_IF_ERROR(ensure_endpoint());
    free_.wait(lock, [&] {
      for (auto& c : copies_)
        if (!c.busy) return true;
      return false;
    });
    for (auto& c : copies_)
      if (!c.busy) {
        copy = &c;
        break;
      }
    copy->busy = true;
    if (copy->alias.empty()) copy->alias = llm::LocalEndpoint::new_token();
  }
  std::string token;
  if (endpoint_) {
    token = endpoint_->open({question_id, spec_.stage, spec_.role, spec_.label, tag});
    endpoint_->bind(copy->alias, token);
    request["base_url"] = endpoint_->base_url();
    request["api_key"] = token;
    request["model"] = profile_;
  }
  request["protocol"] = kOutsideProtocol;
  request["question_id"] = question_id;
  auto answer = exchange(*copy, request, question_id);
  Exchange out;
  if (endpoint_) out.calls = endpoint_->close(token);
  out.profile = profile_;
  {
    std::lock_guard lock(mu_);
    copy->busy = false;
  }
  free_.notify_one();
  if (!answer) return answer.status();
  if (answer->contains("error")) {
    const json& e = (*answer)["error"];
    return Status(ErrorCode::kUnavailable, "outside program " + spec_.label + " (question " + question_id +
                                               ") answered with an error: " +
                                               core::redact_and_cut(e.is_string() ? e.get<std::string>() : e.dump(), 2000));
  }
  out.answer = std::move(*answer);
  return out;
}

}  // namespace nl2sql::generate
