// The fake OpenAI-compatible server of the tests and the benchmarks (scripts/bench/ builds it
// into fake_llm_server_tool and bench_llm_client_bench): cpp-httplib on 127.0.0.1 at an
// ephemeral port (or a given one), answering POST /v1/chat/completions and /v1/embeddings with
// scripted replies. A script function decides each reply from the request and its sequence
// number; the server counts requests, tracks requests in flight (current and peak) and keeps
// the Authorization headers it saw. Thread-safe; stops and joins in its destructor.
//
// Fault mode (set_faults): a FaultPlan turns some replies into the failures real endpoints
// produce — 429 with and without Retry-After, 500, 503, a connection closed mid-response, a slow
// body, truncated JSON, a non-JSON body, empty `choices`, finish_reason "length", 401. Faults
// come from a seeded draw per request sequence number (rates per kind) and from a table of
// chosen sequence numbers, so a test knows exactly which calls fail. The script still decides
// the content of every good answer (and of the truncated/length ones). faults() counts what was
// injected, by kind.
#pragma once

#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

namespace nl2sql::llm::testing {

struct FakeReply {
  FakeReply(int status_in = 200, std::string body_in = "",
            std::map<std::string, std::string> headers_in = {},
            std::chrono::milliseconds delay_in = std::chrono::milliseconds(0))
      : status(status_in), body(std::move(body_in)), headers(std::move(headers_in)), delay(delay_in) {}
  int status;
  std::string body;
  std::map<std::string, std::string> headers;
  std::chrono::milliseconds delay;
  // Send the body with chunked transfer encoding in 16 KiB pieces: no Content-Length, so a
  // client learns the size only while reading (a runaway stream).
  bool chunked = false;
};

// A Chat Completions body with one choice.
inline std::string completion_body(const std::string& content, const std::string& finish = "stop",
                                   int prompt_tokens = 10, int completion_tokens = 5) {
  nlohmann::json j = {
      {"id", "chatcmpl-fake"},
      {"object", "chat.completion"},
      {"choices", {{{"index", 0},
                    {"message", {{"role", "assistant"}, {"content", content}}},
                    {"finish_reason", finish}}}},
      {"usage", {{"prompt_tokens", prompt_tokens}, {"completion_tokens", completion_tokens},
                 {"total_tokens", prompt_tokens + completion_tokens}}}};
  return j.dump();
}

enum class Fault {
  kNone,
  k429,            // 429 without Retry-After
  k429RetryAfter,  // 429 with "Retry-After: 0"
  k500,
  k503,
  kReset,          // headers promise a body, the connection closes before it
  kSlowBody,       // the good answer, its second half after FaultPlan::slow_body_delay
  kTruncatedJson,  // 200 with the first half of the good answer's body
  kNotJson,        // 200 with an HTML error page
  kEmptyChoices,   // 200 with "choices": []
  kLength,         // 200, the good answer's content with finish_reason "length"
  k401,            // 401 invalid API key
};

inline const char* fault_name(Fault f) {
  switch (f) {
    case Fault::kNone: return "none";
    case Fault::k429: return "429";
    case Fault::k429RetryAfter: return "429_retry_after";
    case Fault::k500: return "500";
    case Fault::k503: return "503";
    case Fault::kReset: return "reset";
    case Fault::kSlowBody: return "slow_body";
    case Fault::kTruncatedJson: return "truncated_json";
    case Fault::kNotJson: return "not_json";
    case Fault::kEmptyChoices: return "empty_choices";
    case Fault::kLength: return "length";
    case Fault::k401: return "401";
  }
  return "?";
}

// The kind named as fault_name spells it; nullopt for an unknown name.
inline std::optional<Fault> fault_from_name(const std::string& name) {
  for (Fault f : {Fault::k429, Fault::k429RetryAfter, Fault::k500, Fault::k503, Fault::kReset,
                  Fault::kSlowBody, Fault::kTruncatedJson, Fault::kNotJson, Fault::kEmptyChoices,
                  Fault::kLength, Fault::k401})
    if (name == fault_name(f)) return f;
  return std::nullopt;
}

inline std::vector<Fault> all_random_faults() {
  return {Fault::k429,           Fault::k429RetryAfter, Fault::k500,          Fault::k503,
          Fault::kReset,         Fault::kSlowBody,      Fault::kTruncatedJson, Fault::kNotJson,
          Fault::kEmptyChoices,  Fault::kLength};
}

struct FaultPlan {
  uint64_t seed = 0;
  std::map<Fault, double> rates;           // probability per request of each kind (sum <= 1)
  std::map<int64_t, Fault> at_call;        // sequence number (0-based) → fault, wins over rates
  std::optional<int64_t> fail_401_from;    // every request from this sequence number on gets 401
  std::chrono::milliseconds slow_body_delay{150};

  // The same rate for every random kind (401 excluded: it ends a run).
  static FaultPlan uniform(double total_rate, uint64_t seed) {
    FaultPlan p;
    p.seed = seed;
    auto kinds = all_random_faults();
    for (Fault f : kinds) p.rates[f] = total_rate / static_cast<double>(kinds.size());
    return p;
  }

  // Pure function of (plan, sequence number): the fault to inject, if any.
  Fault decide(int64_t seq) const {
    if (fail_401_from && seq >= *fail_401_from) return Fault::k401;
    if (auto it = at_call.find(seq); it != at_call.end()) return it->second;
    if (rates.empty()) return Fault::kNone;
    // splitmix64 of (seed, seq): independent draws per request, reproducible per plan.
    uint64_t z = seed + 0x9e3779b97f4a7c15ULL * static_cast<uint64_t>(seq + 1);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    z ^= z >> 31;
    double u = static_cast<double>(z >> 11) * 0x1.0p-53;
    double acc = 0;
    for (const auto& [f, r] : rates) {
      acc += r;
      if (u < acc) return f;
    }
    return Fault::kNone;
  }
};

// The content type llama.cpp's server sends. cpp-httplib compresses only an exact
// "application/json", with brotli when the client accepts it (ours does): several milliseconds
// of server CPU per answer that would be counted against the client in the benchmarks.
inline constexpr const char* kJsonType = "application/json; charset=utf-8";

class FakeOpenAiServer {
 public:
  using Script = std::function<FakeReply(const httplib::Request&, int64_t seq)>;

  // `threads` bounds the connections served at once (a keep-alive connection holds a thread);
  // `port` 0 picks a free one.
  // `more_routes` registers further handlers before the server listens (the batch fake's).
  explicit FakeOpenAiServer(Script script, int threads = 16, int port = 0,
                            const std::function<void(httplib::Server&)>& more_routes = {})
      : script_(std::move(script)) {
    server_.new_task_queue = [threads] { return new httplib::ThreadPool(static_cast<size_t>(threads)); };
    server_.set_tcp_nodelay(true);  // else Nagle + delayed ACK add ~40 ms per answer
    server_.set_keep_alive_max_count(100000);
    server_.set_keep_alive_timeout(30);
    auto handler = [this](const httplib::Request& req, httplib::Response& res) { handle(req, res); };
    server_.Post("/v1/chat/completions", handler);
    server_.Post("/v1/embeddings", handler);
    if (more_routes) more_routes(server_);
    port_ = port > 0 ? (server_.bind_to_port("127.0.0.1", port) ? port : -1) : server_.bind_to_any_port("127.0.0.1");
    if (port_ < 0) throw std::runtime_error("fake OpenAI server: cannot bind 127.0.0.1:" + std::to_string(port));
    widen_backlog(port_);
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    for (int i = 0; i < 2000 && !server_.is_running(); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ~FakeOpenAiServer() {
    {
      std::lock_guard lock(mu_);
      stopping_ = true;
    }
    cv_.notify_all();
    server_.stop();
    if (thread_.joinable()) thread_.join();
  }
  FakeOpenAiServer(const FakeOpenAiServer&) = delete;
  FakeOpenAiServer& operator=(const FakeOpenAiServer&) = delete;

  std::string base_url() const { return "http://127.0.0.1:" + std::to_string(port_) + "/v1"; }
  int port() const { return port_; }
  int64_t requests() const { return seq_.load(); }
  int64_t peak_in_flight() const { return peak_.load(); }
  int64_t in_flight() const { return in_flight_.load(); }  // requests whose reply is not made yet
  std::vector<std::string> authorizations() {
    std::lock_guard lock(mu_);
    return auth_;
  }
  std::vector<std::string> bodies() {
    std::lock_guard lock(mu_);
    return bodies_;
  }
  // Switches fault mode on (or off, with an empty plan) for requests arriving from now on.
  void set_faults(FaultPlan plan) {
    std::lock_guard lock(mu_);
    plan_ = std::move(plan);
  }
  // Faults injected so far, by kind.
  std::map<Fault, int64_t> faults() {
    std::lock_guard lock(mu_);
    return injected_;
  }
  int64_t faults_injected() {
    std::lock_guard lock(mu_);
    int64_t n = 0;
    for (const auto& [f, c] : injected_) n += c;
    return n;
  }

 private:
  // Debian's cpp-httplib is a compiled library that listens with a backlog of 5: a client
  // opening 32 connections at once then loses SYNs and waits a 1 s retransmit for some of them,
  // which real endpoints do not make it do (uvicorn, under vLLM, listens with 2048). Listening
  // again on the bound socket raises the backlog (Linux allows it on a listening socket).
  static void widen_backlog(int port) {
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

  void handle(const httplib::Request& req, httplib::Response& res) {
    int64_t now = ++in_flight_;
    int64_t peak = peak_.load();
    while (now > peak && !peak_.compare_exchange_weak(peak, now)) {
    }
    int64_t seq = seq_++;
    Fault fault;
    std::chrono::milliseconds slow_delay;
    {
      std::lock_guard lock(mu_);
      auth_.push_back(req.get_header_value("Authorization"));
      bodies_.push_back(req.body);
      fault = plan_.decide(seq);
      slow_delay = plan_.slow_body_delay;
      if (fault != Fault::kNone) ++injected_[fault];
    }
    FakeReply reply = script_(req, seq);
    if (reply.delay.count() > 0) wait_for(reply.delay);
    apply_fault(fault, slow_delay, reply, res);
    --in_flight_;
  }

  void wait_for(std::chrono::milliseconds d) {
    std::unique_lock lock(mu_);
    cv_.wait_for(lock, d, [this] { return stopping_; });
  }

  void apply_fault(Fault fault, std::chrono::milliseconds slow_delay, FakeReply& reply,
                   httplib::Response& res) {
    auto json_error = [](const std::string& msg, const std::string& type) {
      return nlohmann::json{{"error", {{"message", msg}, {"type", type}}}}.dump();
    };
    switch (fault) {
      case Fault::kNone:
        break;
      case Fault::k429:
        reply = FakeReply(429, json_error("Rate limit reached for requests", "rate_limit_exceeded"));
        break;
      case Fault::k429RetryAfter:
        reply = FakeReply(429, json_error("Rate limit reached, retry later", "rate_limit_exceeded"),
                          {{"Retry-After", "0"}});
        break;
      case Fault::k500:
        reply = FakeReply(500, json_error("The server had an error while processing your request", "server_error"));
        break;
      case Fault::k503:
        reply = FakeReply(503, json_error("The engine is currently overloaded", "server_error"));
        break;
      case Fault::k401:
        // Real servers echo a masked key; this one says nothing about it.
        reply = FakeReply(401, json_error("Incorrect API key provided", "invalid_request_error"));
        break;
      case Fault::kTruncatedJson:
        reply.status = 200;
        reply.body = reply.body.substr(0, reply.body.size() / 2);
        break;
      case Fault::kNotJson:
        reply = FakeReply(200, "<html><body><h1>502 Bad Gateway</h1></body></html>");
        break;
      case Fault::kEmptyChoices:
        reply = FakeReply(200, R"({"id":"chatcmpl-fake","object":"chat.completion","choices":[],"usage":{"prompt_tokens":10,"completion_tokens":0}})");
        break;
      case Fault::kLength: {
        auto j = nlohmann::json::parse(reply.body, nullptr, false);
        if (!j.is_discarded() && j.contains("choices") && j["choices"].is_array())
          for (auto& c : j["choices"]) c["finish_reason"] = "length";
        reply.body = j.is_discarded() ? completion_body("SELECT", "length") : j.dump();
        reply.status = 200;
        break;
      }
      case Fault::kReset: {
        // Promises a body and closes the connection before sending any of it: to the client the
        // transfer breaks off like a reset connection (a transport error, not an HTTP status).
        res.status = 200;
        res.set_content_provider(
            1024, kJsonType,
            [](size_t, size_t, httplib::DataSink&) { return false; });
        return;
      }
      case Fault::kSlowBody: {
        auto body = std::make_shared<std::string>(reply.body);
        res.status = reply.status;
        for (const auto& [k, v] : reply.headers) res.set_header(k, v);
        res.set_content_provider(
            body->size(), kJsonType,
            [this, body, slow_delay](size_t offset, size_t, httplib::DataSink& sink) {
              size_t half = body->size() / 2;
              if (offset < half) return sink.write(body->data(), half);
              wait_for(slow_delay);
              return sink.write(body->data() + offset, body->size() - offset);
            });
        return;
      }
    }
    res.status = reply.status;
    for (const auto& [k, v] : reply.headers) res.set_header(k, v);
    if (reply.chunked) {
      auto body = std::make_shared<std::string>(std::move(reply.body));
      res.set_chunked_content_provider(kJsonType, [body](size_t offset, httplib::DataSink& sink) {
        if (offset >= body->size()) {
          sink.done();
          return true;
        }
        return sink.write(body->data() + offset, std::min<size_t>(16384, body->size() - offset));
      });
      return;
    }
    res.set_content(reply.body, kJsonType);
  }

  Script script_;
  httplib::Server server_;
  int port_ = -1;
  std::thread thread_;
  std::atomic<int64_t> seq_{0};
  std::atomic<int64_t> in_flight_{0};
  std::atomic<int64_t> peak_{0};
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;            // guarded by mu_
  std::vector<std::string> auth_;    // guarded by mu_
  std::vector<std::string> bodies_;  // guarded by mu_
  FaultPlan plan_;                   // guarded by mu_
  std::map<Fault, int64_t> injected_;  // guarded by mu_
};

}  // namespace nl2sql::llm::testing
