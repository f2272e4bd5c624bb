// A minimal fake OpenAI-compatible HTTP/1.1 server for the benchmarks: raw sockets on
// 127.0.0.1 (ephemeral port, or a given one), one thread per keep-alive connection, a fixed
// latency per request, a Chat Completions answer from a responder (default: a canned SQL block).
// The unit tests use cpp-httplib instead; this one keeps the benchmark free of extra link
// dependencies and of a server thread-pool ceiling.
//
// Fault mode (FaultPlan): seeded random faults per request sequence number (429 with and
// without Retry-After, 500, 503, a reset connection, a slow body, truncated JSON, a non-JSON
// body, empty `choices`, finish_reason "length") plus faults at chosen sequence numbers and a
// 401 from a chosen request on — the same kinds as tests/llm/fake_openai_server.h. The responder
// still decides the content of good answers. faults() counts what was injected, by kind name.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <optional>
#include <stdexcept>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace nl2sql::bench {

// Fault kinds by name, as the tool's flags spell them.
inline const std::vector<std::string>& random_fault_kinds() {
  static const std::vector<std::string> kinds = {"429", "429_retry_after", "500", "503", "reset",
                                                 "slow_body", "truncated_json", "not_json",
                                                 "empty_choices", "length"};
  return kinds;
}

struct FaultPlan {
  uint64_t seed = 0;
  double rate = 0;                          // probability per request of some random fault
  std::map<int64_t, std::string> at_call;   // sequence number (0-based) → kind, wins over rate
  std::optional<int64_t> fail_401_from;     // every request from this sequence number on: 401
  std::chrono::milliseconds slow_body_delay{200};

  // A pure function of (plan, sequence number); "" for a good answer.
  std::string decide(int64_t seq) const {
    if (fail_401_from && seq >= *fail_401_from) return "401";
    if (auto it = at_call.find(seq); it != at_call.end()) return it->second;
    if (rate <= 0) return "";
    uint64_t z = seed + 0x9e3779b97f4a7c15ULL * static_cast<uint64_t>(seq + 1);  // splitmix64
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    z ^= z >> 31;
    double u = static_cast<double>(z >> 11) * 0x1.0p-53;
    if (u >= rate) return "";
    const auto& kinds = random_fault_kinds();
    return kinds[static_cast<size_t>(u / rate * static_cast<double>(kinds.size())) % kinds.size()];
  }
};

class LatencyServer {
 public:
  // The message content to answer a request with, from its body and its sequence number.
  using Responder = std::function<std::string(const std::string& body, int64_t seq)>;

  explicit LatencyServer(std::chrono::milliseconds latency, Responder responder = {}, int port = 0,
                         FaultPlan faults = {})
      : latency_(latency), responder_(std::move(responder)), faults_(std::move(faults)) {
    listen_fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    ::setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(static_cast<uint16_t>(port));
    if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
        ::listen(listen_fd_, 256) != 0)
      throw std::runtime_error("bench server: bind/listen failed");
    socklen_t len = sizeof(addr);
    ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    acceptor_ = std::thread([this] { accept_loop(); });
  }
  ~LatencyServer() {
    stopping_ = true;
    ::shutdown(listen_fd_, SHUT_RDWR);
    ::close(listen_fd_);
    acceptor_.join();
    {
      // Only fds still open are listed (close_conn removes them under the same lock), so no
      // number reused by another open() is shut down here.
      std::lock_guard lock(mu_);
      for (int fd : conn_fds_) ::shutdown(fd, SHUT_RDWR);
    }
    for (auto& t : conn_threads_) t.join();  // no lock held: the threads take it to close
  }
  std::string base_url() const { return "http://127.0.0.1:" + std::to_string(port_) + "/v1"; }
  int64_t requests() const { return requests_.load(); }
  std::map<std::string, int64_t> faults() {
    std::lock_guard lock(mu_);
    return injected_;
  }

 private:
  void accept_loop() {
    while (!stopping_) {
      int fd = ::accept(listen_fd_, nullptr, nullptr);
      if (fd < 0) return;
      int one = 1;
      ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
      std::lock_guard lock(mu_);
      conn_fds_.push_back(fd);
      conn_threads_.emplace_back([this, fd] { serve(fd); });
    }
  }

  void close_conn(int fd) {
    std::lock_guard lock(mu_);
    conn_fds_.erase(std::remove(conn_fds_.begin(), conn_fds_.end(), fd), conn_fds_.end());
    ::close(fd);
  }

  void serve(int fd) {
    std::string buf;
    char chunk[16384];
    for (;;) {
      size_t header_end;
      while ((header_end = buf.find("\r\n\r\n")) == std::string::npos) {
        ssize_t n = ::recv(fd, chunk, sizeof(chunk), 0);
        if (n <= 0) { close_conn(fd); return; }
        buf.append(chunk, static_cast<size_t>(n));
      }
      size_t content_length = 0;
      std::string headers = buf.substr(0, header_end);
      for (auto& c : headers) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      auto cl = headers.find("content-length:");
      if (cl != std::string::npos) content_length = std::stoul(headers.substr(cl + 15));
      while (buf.size() < header_end + 4 + content_length) {
        ssize_t n = ::recv(fd, chunk, sizeof(chunk), 0);
        if (n <= 0) { close_conn(fd); return; }
        buf.append(chunk, static_cast<size_t>(n));
      }
      std::string request_body = buf.substr(header_end + 4, content_length);
      buf.erase(0, header_end + 4 + content_length);
      int64_t seq = requests_++;
      std::this_thread::sleep_for(latency_);
      std::string content = responder_ ? responder_(request_body, seq)
                                       : "```sql\nSELECT " + std::to_string(seq) + "\n```";
      const std::string fault = faults_.decide(seq);
      if (!fault.empty()) {
        std::lock_guard lock(mu_);
        ++injected_[fault];
      }
      if (fault == "reset") {
        // SO_LINGER 0: close() sends RST instead of FIN — a reset connection, no response.
        linger lg{1, 0};
        ::setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
        close_conn(fd);
        return;
      }
      int status = 200;
      std::string extra_headers;
      std::string body = completion(content, fault == "length" ? "length" : "stop");
      auto error_body = [](const std::string& msg) {
        return R"({"error":{"message":)" + json_string(msg) + "}}";
      };
      if (fault == "429" || fault == "429_retry_after") {
        status = 429;
        body = error_body("Rate limit reached for requests");
        if (fault == "429_retry_after") extra_headers = "Retry-After: 0\r\n";
      } else if (fault == "500") {
        status = 500;
        body = error_body("The server had an error while processing your request");
      } else if (fault == "503") {
        status = 503;
        body = error_body("The engine is currently overloaded");
      } else if (fault == "401") {
        status = 401;
        body = error_body("Incorrect API key provided");
      } else if (fault == "truncated_json") {
        body = body.substr(0, body.size() / 2);
      } else if (fault == "not_json") {
        body = "<html><body><h1>502 Bad Gateway</h1></body></html>";
      } else if (fault == "empty_choices") {
        body = R"({"choices":[],"usage":{"prompt_tokens":120,"completion_tokens":0}})";
      }
      std::string response = "HTTP/1.1 " + std::to_string(status) + " " + reason(status) +
                             "\r\nContent-Type: application/json\r\nContent-Length: " +
                             std::to_string(body.size()) + "\r\n" + extra_headers +
                             "Connection: keep-alive\r\n\r\n" + body;
      size_t split = fault == "slow_body" ? response.size() - body.size() / 2 : response.size();
      if (!send_all(fd, response.substr(0, split))) { close_conn(fd); return; }
      if (split < response.size()) {
        std::this_thread::sleep_for(faults_.slow_body_delay);
        if (!send_all(fd, response.substr(split))) { close_conn(fd); return; }
      }
    }
  }

  static bool send_all(int fd, const std::string& data) {
    size_t sent = 0;
    while (sent < data.size()) {
      ssize_t n = ::send(fd, data.data() + sent, data.size() - sent, MSG_NOSIGNAL);
      if (n <= 0) return false;
      sent += static_cast<size_t>(n);
    }
    return true;
  }

  static const char* reason(int status) {
    switch (status) {
      case 200: return "OK";
      case 401: return "Unauthorized";
      case 429: return "Too Many Requests";
      case 500: return "Internal Server Error";
      case 503: return "Service Unavailable";
      default: return "Status";
    }
  }

  static std::string completion(const std::string& content, const std::string& finish) {
    return R"({"choices":[{"index":0,"message":{"role":"assistant","content":)" + json_string(content) +
           R"(},"finish_reason":")" + finish +
           R"("}],"usage":{"prompt_tokens":120,"completion_tokens":30}})";
  }

  static std::string json_string(const std::string& s) {
    std::string out = "\"";
    for (char c : s) {
      switch (c) {
        case '"': out += "\\\""; break;
        case '\\': out += "\\\\"; break;
        case '\n': out += "\\n"; break;
        case '\t': out += "\\t"; break;
        case '\r': out += "\\r"; break;
        default:
          if (static_cast<unsigned char>(c) < 0x20) {
            char b[8];
            std::snprintf(b, sizeof b, "\\u%04x", c);
            out += b;
          } else {
            out += c;
          }
      }
    }
    return out + "\"";
  }

  std::chrono::milliseconds latency_;
  Responder responder_;
  FaultPlan faults_;
  int listen_fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stopping_{false};
  std::atomic<int64_t> requests_{0};
  std::thread acceptor_;
  std::mutex mu_;
  std::vector<int> conn_fds_;             // guarded by mu_
  std::vector<std::thread> conn_threads_;  // guarded by mu_
  std::map<std::string, int64_t> injected_;  // guarded by mu_
};

}  // namespace nl2sql::bench
