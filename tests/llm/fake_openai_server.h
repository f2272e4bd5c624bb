// An in-process fake OpenAI-compatible server for tests and benchmarks: cpp-httplib on
// 127.0.0.1 at an ephemeral port, answering POST /v1/chat/completions and /v1/embeddings with
// scripted replies. A script function decides each reply from the request and its sequence
// number; the server counts requests, tracks requests in flight (current and peak) and keeps
// the Authorization headers it saw. Thread-safe; stops and joins in its destructor.
#pragma once

#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
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

class FakeOpenAiServer {
 public:
  using Script = std::function<FakeReply(const httplib::Request&, int64_t seq)>;

  explicit FakeOpenAiServer(Script script, int threads = 16) : script_(std::move(script)) {
    server_.new_task_queue = [threads] { return new httplib::ThreadPool(static_cast<size_t>(threads)); };
    server_.set_tcp_nodelay(true);  // else Nagle + delayed ACK add ~40 ms per answer
    server_.set_keep_alive_max_count(100000);
    server_.set_keep_alive_timeout(30);
    auto handler = [this](const httplib::Request& req, httplib::Response& res) { handle(req, res); };
    server_.Post("/v1/chat/completions", handler);
    server_.Post("/v1/embeddings", handler);
    port_ = server_.bind_to_any_port("127.0.0.1");
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
  std::vector<std::string> authorizations() {
    std::lock_guard lock(mu_);
    return auth_;
  }
  std::vector<std::string> bodies() {
    std::lock_guard lock(mu_);
    return bodies_;
  }

 private:
  void handle(const httplib::Request& req, httplib::Response& res) {
    int64_t now = ++in_flight_;
    int64_t peak = peak_.load();
    while (now > peak && !peak_.compare_exchange_weak(peak, now)) {
    }
    int64_t seq = seq_++;
    {
      std::lock_guard lock(mu_);
      auth_.push_back(req.get_header_value("Authorization"));
      bodies_.push_back(req.body);
    }
    FakeReply reply = script_(req, seq);
    if (reply.delay.count() > 0) {
      std::unique_lock lock(mu_);
      cv_.wait_for(lock, reply.delay, [this] { return stopping_; });
    }
    res.status = reply.status;
    for (const auto& [k, v] : reply.headers) res.set_header(k, v);
    res.set_content(reply.body, "application/json");
    --in_flight_;
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
};

}  // namespace nl2sql::llm::testing
