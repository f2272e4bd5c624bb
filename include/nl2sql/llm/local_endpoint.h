// LocalEndpoint: an OpenAI-compatible server on 127.0.0.1 (an ephemeral port) through which an
// outside program (generate/outside_program.h) asks its model questions, so that its calls are
// nl2sql's calls: every request is turned into an llm::ChatRequest and sent through the run's
// llm::Client — cache, record/replay, retries, rate limits, accounting and secrets as for any
// built-in stage — attributed to the question and stage of the session its token belongs to.
//
// Serves POST /v1/chat/completions (messages, temperature, top_p, max_tokens or
// max_completion_tokens, seed, stop, n; `model` names a profile of llm.models, or the model of
// the session's profile; stream is refused) and GET /v1/models (the profiles). A request must
// carry `Authorization: Bearer <token>` of an open session, or of an alias bound to one (the
// token in the program's environment stands for the question its copy is working on): anything
// else gets 401. Answers and errors have the shapes OpenAI documents (`choices`, `usage`;
// `{"error": {"message", "type", "code"}}`).
//
// Two identical requests of one session are sent as samples 0, 1, … (ChatRequest::sample_index),
// so a program asking the same prompt twice at a temperature gets two draws, and a rerun that
// asks the same things in the same order finds them in the cache.
//
// Thread-safe: sessions are opened and closed from any thread while the server's own threads
// answer requests. The destructor stops the server (requests in flight are finished first).
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "nl2sql/core/status.h"
#include "nl2sql/llm/call_tag.h"
#include "nl2sql/llm/trace.h"

namespace httplib {
class Server;
}

namespace nl2sql::llm {

class Client;

struct EndpointSession {
  std::string question_id;
  std::string stage;    // accounting and trace tag ("generate", "select")
  std::string role;     // whose profile answers when the request names none
  std::string label;    // the program's label: the traces' template name is "outside:<label>"
  CallTag tag;          // what the call is for (the simulator reads it)
};

class LocalEndpoint {
 public:
  static Result<std::unique_ptr<LocalEndpoint>> start(Client* client);
  ~LocalEndpoint();
  LocalEndpoint(const LocalEndpoint&) = delete;
  LocalEndpoint& operator=(const LocalEndpoint&) = delete;

  // "http://127.0.0.1:<port>/v1"
  std::string base_url() const;
  // A new session; its token (random, 32 hex digits) authorises requests until close().
  std::string open(EndpointSession session);
  // Ends the session (its token and aliases stop working) and returns its calls' traces, in the
  // order they were answered.
  std::vector<LlmCallTrace> close(const std::string& token);
  // Requests carrying `alias` count as the session's until unbind() (or its close()).
  void bind(const std::string& alias, const std::string& token);
  void unbind(const std::string& alias);
  // A fresh random token (for aliases).
  static std::string new_token();
  // HTTP requests received, answered or refused (tests, benchmarks).
  int64_t requests() const { return requests_.load(); }

 private:
  struct Open {
    EndpointSession session;
    std::vector<LlmCallTrace> calls;
    std::map<std::string, int64_t> repeats;  // request identity -> times sent
  };
  explicit LocalEndpoint(Client* client);
  void handle_chat(const std::string& token, const std::string& body, int& status, std::string& out);
  void handle_models(int& status, std::string& out) const;
  // The session a bearer token stands for; "" when none.
  std::string session_of(const std::string& bearer) const;

  Client* client_;
  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
  int port_ = 0;
  std::atomic<int64_t> requests_{0};
  mutable std::mutex mu_;
  std::map<std::string, Open> sessions_;        // guarded by mu_
  std::map<std::string, std::string> aliases_;  // guarded by mu_: alias -> session token
};

}  // namespace nl2sql::llm
