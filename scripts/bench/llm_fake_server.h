// A minimal fake OpenAI-compatible HTTP/1.1 server for the benchmarks: raw sockets on
// 127.0.0.1 (ephemeral port, or a given one), one thread per keep-alive connection, a fixed
// latency per request, a Chat Completions answer from a responder (default: a canned SQL block). The unit tests use cpp-httplib instead; this one
// keeps the benchmark free of extra link dependencies and of a server thread-pool ceiling.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <stdexcept>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace nl2sql::bench {

class LatencyServer {
 public:
  // The message content to answer a request with, from its body and its sequence number.
  using Responder = std::function<std::string(const std::string& body, int64_t seq)>;

  explicit LatencyServer(std::chrono::milliseconds latency, Responder responder = {}, int port = 0)
      : latency_(latency), responder_(std::move(responder)) {
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
    std::lock_guard lock(mu_);
    for (int fd : conn_fds_) ::shutdown(fd, SHUT_RDWR);
    for (auto& t : conn_threads_) t.join();
  }
  std::string base_url() const { return "http://127.0.0.1:" + std::to_string(port_) + "/v1"; }
  int64_t requests() const { return requests_.load(); }

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

  void serve(int fd) {
    std::string buf;
    char chunk[16384];
    for (;;) {
      size_t header_end;
      while ((header_end = buf.find("\r\n\r\n")) == std::string::npos) {
        ssize_t n = ::recv(fd, chunk, sizeof(chunk), 0);
        if (n <= 0) { ::close(fd); return; }
        buf.append(chunk, static_cast<size_t>(n));
      }
      size_t content_length = 0;
      std::string headers = buf.substr(0, header_end);
      for (auto& c : headers) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      auto cl = headers.find("content-length:");
      if (cl != std::string::npos) content_length = std::stoul(headers.substr(cl + 15));
      while (buf.size() < header_end + 4 + content_length) {
        ssize_t n = ::recv(fd, chunk, sizeof(chunk), 0);
        if (n <= 0) { ::close(fd); return; }
        buf.append(chunk, static_cast<size_t>(n));
      }
      std::string request_body = buf.substr(header_end + 4, content_length);
      buf.erase(0, header_end + 4 + content_length);
      int64_t seq = requests_++;
      std::this_thread::sleep_for(latency_);
      std::string content = responder_ ? responder_(request_body, seq)
                                       : "```sql\nSELECT " + std::to_string(seq) + "\n```";
      std::string body = R"({"choices":[{"index":0,"message":{"role":"assistant","content":)" +
                         json_string(content) +
                         R"(},"finish_reason":"stop"}],"usage":{"prompt_tokens":120,"completion_tokens":30}})";
      std::string response = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: " +
                             std::to_string(body.size()) + "\r\nConnection: keep-alive\r\n\r\n" + body;
      size_t sent = 0;
      while (sent < response.size()) {
        ssize_t n = ::send(fd, response.data() + sent, response.size() - sent, MSG_NOSIGNAL);
        if (n <= 0) { ::close(fd); return; }
        sent += static_cast<size_t>(n);
      }
    }
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
  int listen_fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stopping_{false};
  std::atomic<int64_t> requests_{0};
  std::thread acceptor_;
  std::mutex mu_;
  std::vector<int> conn_fds_;             // guarded by mu_
  std::vector<std::thread> conn_threads_;  // guarded by mu_
};

}  // namespace nl2sql::bench
