// The outside programs' OpenAI-compatible endpoint (local_endpoint.h).
#include "nl2sql/llm/local_endpoint.h"

#include <httplib.h>

#include <netinet/in.h>
#include <sys/socket.h>

#include <ctime>
#include <random>

#include <nlohmann/json.hpp>

#include "nl2sql/core/log.h"
#include "nl2sql/llm/client.h"
#include "nl2sql/llm/model_call.h"
#include "nl2sql/llm/prompt_template.h"

namespace nl2sql::llm {
namespace {

using json = nlohmann::json;

// Requests answered at once: each holds a server thread while the client waits for a model slot,
// so this bounds an outside program's calls in flight, not nl2sql's (llm.max_in_flight does).
constexpr size_t kServerThreads = 64;
constexpr size_t kMaxBodyBytes = 32u << 20;

std::string error_body(const std::string& message, const std::string& type, const std::string& code) {
  return json{{"error", {{"message", message}, {"type", type}, {"param", nullptr}, {"code", code}}}}.dump();
}

// A message's content: a string, or an array of parts of which the text ones are kept.
Result<std::string> content_text(const json& content) {
  if (content.is_string()) return content.get<std::string>();
  if (content.is_null()) return std::string();
  if (!content.is_array()) return invalid_input("message content must be a string or an array of parts");
  std::string out;
  for (const auto& part : content) {
    if (!part.is_object() || part.value("type", "") != "text" || !part.contains("text") || !part["text"].is_string())
      return invalid_input("only text parts are supported in message content");
    out += part["text"].get<std::string>();
  }
  return out;
}

// The request body as a ChatRequest (role, profile, question and tag are the session's).
Result<ChatRequest> read_request(const json& body) {
  ChatRequest req;
  if (!body.is_object()) return invalid_input("the body must be a JSON object");
  if (body.value("stream", false)) return invalid_input("stream: true is not supported by nl2sql's endpoint");
  const json* messages = body.contains("messages") ? &body["messages"] : nullptr;
  if (!messages || !messages->is_array() || messages->empty())
    return invalid_input("'messages' must be a non-empty array");
  for (const auto& m : *messages) {
    if (!m.is_object() || !m.contains("role") || !m["role"].is_string())
      return invalid_input("every message needs a string 'role'");
    std::string role = m["role"].get<std::string>();
    if (role == "developer") role = "system";
    if (role != "system" && role != "user" && role != "assistant")
      return invalid_input("unsupported message role '" + role + "'");
    auto text = content_text(m.value("content", json()));
    if (!text) return text.status();
    req.messages.push_back({role, *text});
  }
  auto number = [&](const char* key, std::optional<double>& out) -> Status {
    if (!body.contains(key) || body[key].is_null()) return Status::ok();
    if (!body[key].is_number()) return invalid_input(std::string("'") + key + "' must be a number");
    out = body[key].get<double>();
    return Status::ok();
  };
  NL2SQL_RETURN_IF_ERROR(number("temperature", req.temperature));
  NL2SQL_RETURN_IF_ERROR(number("top_p", req.top_p));
  for (const char* key : {"max_tokens", "max_completion_tokens"}) {
    if (!body.contains(key) || body[key].is_null()) continue;
    if (!body[key].is_number_integer()) return invalid_input(std::string("'") + key + "' must be an integer");
    req.max_tokens = body[key].get<int64_t>();
  }
  if (body.contains("seed") && !body["seed"].is_null()) {
    if (!body["seed"].is_number_integer()) return invalid_input("'seed' must be an integer");
    req.seed = body["seed"].get<int64_t>();
  }
  if (body.contains("stop") && !body["stop"].is_null()) {
    if (body["stop"].is_string()) req.stop.push_back(body["stop"].get<std::string>());
    else if (body["stop"].is_array())
      for (const auto& s : body["stop"]) {
        if (!s.is_string()) return invalid_input("'stop' must be a string or an array of strings");
        req.stop.push_back(s.get<std::string>());
      }
    else return invalid_input("'stop' must be a string or an array of strings");
  }
  if (body.contains("n") && !body["n"].is_null()) {
    if (!body["n"].is_number_integer() || body["n"].get<int64_t>() < 1 || body["n"].get<int64_t>() > 128)
      return invalid_input("'n' must be an integer in [1, 128]");
    req.n = static_cast<int>(body["n"].get<int64_t>());
  }
  return req;
}

// The HTTP status and error type an outside program gets for a failed call. The client has
// already retried what was worth retrying.
std::pair<int, std::string> http_error_of(const Status& st) {
  switch (call_error_kind(st)) {
    case CallErrorKind::kConfig:
    case CallErrorKind::kHttpClient: return {400, "invalid_request_error"};
    case CallErrorKind::kContextLength: return {400, "context_length_exceeded"};
    case CallErrorKind::kCancelled:
    case CallErrorKind::kReplayMiss: return {503, "service_unavailable"};
    default: return {502, "upstream_error"};
  }
}

// The conversation as one text, for the trace: the user message alone when there is one.
std::string conversation_text(const ChatRequest& req) {
  size_t others = 0;
  for (const auto& m : req.messages) others += m.role != "system";
  std::string out;
  for (const auto& m : req.messages) {
    if (m.role == "system") continue;
    if (others == 1) return m.content;
    out += (out.empty() ? "" : "\n\n") + ("[" + m.role + "]\n") + m.content;
  }
  return out;
}

json completion_json(const ChatResponse& r, int64_t id) {
  json choices = json::array();
  for (size_t i = 0; i < r.choices.size(); ++i)
    choices.push_back({{"index", i},
                       {"message", {{"role", "assistant"}, {"content", r.choices[i]}}},
                       {"finish_reason", i < r.finish_reasons.size() ? r.finish_reasons[i] : "stop"}});
  return {{"id", "chatcmpl-nl2sql-" + std::to_string(id)},
          {"object", "chat.completion"},
          {"created", static_cast<int64_t>(std::time(nullptr))},
          {"model", r.model.empty() ? r.profile : r.model},
          {"choices", choices},
          {"usage",
           {{"prompt_tokens", r.usage.prompt_tokens},
            {"completion_tokens", r.usage.completion_tokens},
            {"total_tokens", r.usage.prompt_tokens + r.usage.completion_tokens}}}};
}

// Debian's compiled cpp-httplib listens with a backlog of 5: copies that open many connections
// at once (urllib opens one per request) would lose SYNs and wait a 1 s retransmit. Listening
// again on the bound socket raises the backlog (Linux allows it on a listening socket).
void widen_backlog(int port) {
  for (int fd = 0; fd < 4096; ++fd) {
    sockaddr_in addr{};
    socklen_t len = sizeof(addr);
    if (::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0 || addr.sin_family != AF_INET) continue;
    int listening = 0;
    socklen_t optlen = sizeof(listening);
    if (ntohs(addr.sin_port) == port && ::getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &optlen) == 0 &&
        listening) {
      ::listen(fd, 512);
      return;
    }
  }
}

}  // namespace

std::string LocalEndpoint::new_token() {
  static std::mutex mu;
  static std::random_device device;
  std::lock_guard lock(mu);
  std::string out = "nl2sql-local-";
  static const char* kHex = "0123456789abcdef";
  for (int i = 0; i < 4; ++i) {
    uint32_t v = device();
    for (int k = 0; k < 8; ++k) out += kHex[(v >> (4 * k)) & 15];
  }
  return out;
}

LocalEndpoint::LocalEndpoint(Client* client) : client_(client), server_(std::make_unique<httplib::Server>()) {}

Result<std::unique_ptr<LocalEndpoint>> LocalEndpoint::start(Client* client) {
  if (client == nullptr) return invalid_input("the outside programs' endpoint needs an LLM client");
  std::unique_ptr<LocalEndpoint> e(new LocalEndpoint(client));
  LocalEndpoint* self = e.get();
  auto bearer = [](const httplib::Request& req) {
    std::string h = req.get_header_value("Authorization");
    return h.rfind("Bearer ", 0) == 0 ? h.substr(7) : std::string();
  };
  e->server_->new_task_queue = [] { return new httplib::ThreadPool(kServerThreads); };
  e->server_->set_payload_max_length(kMaxBodyBytes);
  e->server_->set_tcp_nodelay(true);  // else Nagle and delayed ACKs add ~40 ms to every answer
  e->server_->Post("/v1/chat/completions", [self, bearer](const httplib::Request& req, httplib::Response& res) {
    ++self->requests_;
    int status = 200;
    std::string out;
    self->handle_chat(bearer(req), req.body, status, out);
    res.status = status;
    res.set_content(out, "application/json");
  });
  e->server_->Get("/v1/models", [self, bearer](const httplib::Request& req, httplib::Response& res) {
    ++self->requests_;
    int status = 200;
    std::string out;
    if (self->session_of(bearer(req)).empty()) {
      status = 401;
      out = error_body("unknown token for nl2sql's endpoint", "invalid_request_error", "invalid_api_key");
    } else {
      self->handle_models(status, out);
    }
    res.status = status;
    res.set_content(out, "application/json");
  });
  e->port_ = e->server_->bind_to_any_port("127.0.0.1");
  if (e->port_ <= 0) return Status(ErrorCode::kIo, "the outside programs' endpoint cannot listen on 127.0.0.1");
  widen_backlog(e->port_);
  e->thread_ = std::thread([self] { self->server_->listen_after_bind(); });
  for (int i = 0; i < 2000 && !e->server_->is_running(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  return e;
}

LocalEndpoint::~LocalEndpoint() {
  server_->stop();
  if (thread_.joinable()) thread_.join();
}

std::string LocalEndpoint::base_url() const { return "http://127.0.0.1:" + std::to_string(port_) + "/v1"; }

std::string LocalEndpoint::open(EndpointSession session) {
  std::string token = new_token();
  std::lock_guard lock(mu_);
  sessions_[token].session = std::move(session);
  return token;
}

std::vector<LlmCallTrace> LocalEndpoint::close(const std::string& token) {
  std::lock_guard lock(mu_);
  std::vector<LlmCallTrace> calls;
  if (auto it = sessions_.find(token); it != sessions_.end()) {
    calls = std::move(it->second.calls);
    sessions_.erase(it);
  }
  for (auto it = aliases_.begin(); it != aliases_.end();)
    it = it->second == token ? aliases_.erase(it) : std::next(it);
  return calls;
}

void LocalEndpoint::bind(const std::string& alias, const std::string& token) {
  std::lock_guard lock(mu_);
  aliases_[alias] = token;
}

void LocalEndpoint::unbind(const std::string& alias) {
  std::lock_guard lock(mu_);
  aliases_.erase(alias);
}

std::string LocalEndpoint::session_of(const std::string& bearer) const {
  if (bearer.empty()) return "";
  std::lock_guard lock(mu_);
  if (sessions_.count(bearer)) return bearer;
  if (auto it = aliases_.find(bearer); it != aliases_.end() && sessions_.count(it->second)) return it->second;
  return "";
}

void LocalEndpoint::handle_models(int& status, std::string& out) const {
  json data = json::array();
  for (const auto& [name, p] : client_->settings().profiles)
    data.push_back({{"id", name}, {"object", "model"}, {"created", 0}, {"owned_by", "nl2sql"}});
  status = 200;
  out = json{{"object", "list"}, {"data", data}}.dump();
}

void LocalEndpoint::handle_chat(const std::string& bearer, const std::string& body, int& status, std::string& out) {
  const std::string token = session_of(bearer);
  if (token.empty()) {
    status = 401;
    out = error_body("unknown token for nl2sql's endpoint (a request line's api_key is valid only while nl2sql "
                     "waits for that question's answer)",
                     "invalid_request_error", "invalid_api_key");
    return;
  }
  auto parsed = json::parse(body, nullptr, false);
  if (parsed.is_discarded()) {
    status = 400;
    out = error_body("the body is not JSON", "invalid_request_error", "invalid_json");
    return;
  }
  auto req = read_request(parsed);
  if (!req) {
    status = 400;
    out = error_body(req.status().message(), "invalid_request_error", "invalid_request");
    return;
  }
  EndpointSession session;
  {
    std::lock_guard lock(mu_);
    Open& o = sessions_.at(token);
    session = o.session;
    req->sample_index = o.repeats[parsed.dump()]++;
  }
  req->role = session.role;
  req->stage = session.stage;
  req->question_id = session.question_id;
  req->tag = session.tag;
  req->tag.sample_index = req->sample_index;
  // `model`: a profile by name, or the model its role's profile serves.
  const std::string model = parsed.value("model", "");
  auto own = client_->settings().resolve(session.role, "");
  if (!model.empty() && client_->settings().profiles.count(model)) {
    req->profile = model;
  } else if (!model.empty() && !(own.is_ok() && (*own)->model == model)) {
    status = 404;
    out = error_body("The model `" + model + "` does not exist: name a profile of llm.models (OPENAI_MODEL holds "
                     "the one of role " + session.role + ")",
                     "invalid_request_error", "model_not_found");
    return;
  }
  auto tmpl = PromptTemplate::parse("outside:" + session.label, "outside program " + session.label);
  CallSpend spent;
  auto answer = client_->chat(*req, &spent);
  LlmCallTrace trace = tmpl ? trace_of(session.stage, *tmpl, *req, answer, spent) : LlmCallTrace{};
  trace.prompt = conversation_text(*req);
  {
    std::lock_guard lock(mu_);
    if (auto it = sessions_.find(token); it != sessions_.end()) it->second.calls.push_back(std::move(trace));
  }
  if (!answer) {
    auto [code, type] = http_error_of(answer.status());
    status = code;
    out = error_body(core::redact(answer.status().message()), type, call_error_kind_name(call_error_kind(answer.status())));
    return;
  }
  status = 200;
  out = completion_json(*answer, requests_.load()).dump();
}

}  // namespace nl2sql::llm
