// The LLM client benchmark's server: raw sockets on 127.0.0.1, one thread per keep-alive
// connection, a fixed latency, then one Chat Completions answer (a ```sql block) written in a
// single send. Everything else — the tests, fake_llm_server_tool, the pipeline benchmarks — uses
// the one scripted fake server, tests/support/fake_openai_server.h. This benchmark measures the
// client's own overhead against the latency lower bound, and that server's per-answer cost under
// 32 keep-alive connections (4,000 answers at 0 ms latency: 1.0-1.4 s, against 0.44 s here) would
// be counted against the client. No faults, no scripting: nothing this measurement does not need.
#pragma once

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace nl2sql::bench {

class LeanLatencyServer {
 public:
  explicit LeanLatencyServer(std::chrono::milliseconds latency) : latency_(latency) {
    listen_fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    ::setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = 0;
    if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 || ::listen(listen_fd_, 256) != 0)
      throw std::runtime_error("bench server: bind/listen failed");
    socklen_t len = sizeof(addr);
    ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    acceptor_ = std::thread([this] { accept_loop(); });
  }
  ~LeanLatencyServer() {
    stopping_ = true;
    ::shutdown(listen_fd_, SHUT_RDWR);
    ::close(listen_fd_);
    acceptor_.join();
    {
      // Only fds still open are listed (close_conn removes them under the same lock).
      std::lock_guard lock(mu_);
      for (int fd : conn_fds_) ::shutdown(fd, SHUT_RDWR);
    }
    for (auto& t : conn_threads_) t.join();  // no lock held: the threads take it to close
  }
  LeanLatencyServer(const LeanLatencyServer&) = delete;
  LeanLatencyServer& operator=(const LeanLatencyServer&) = delete;

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
        if (n <= 0) return close_conn(fd);
        buf.append(chunk, static_cast<size_t>(n));
      }
      std::string headers = buf.substr(0, header_end);
      for (auto& c : headers) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      size_t content_length = 0;
      if (auto cl = headers.find("content-length:"); cl != std::string::npos)
        content_length = std::stoul(headers.substr(cl + 15));
      while (buf.size() < header_end + 4 + content_length) {
        ssize_t n = ::recv(fd, chunk, sizeof(chunk), 0);
        if (n <= 0) return close_conn(fd);
        buf.append(chunk, static_cast<size_t>(n));
      }
      buf.erase(0, header_end + 4 + content_length);
      const int64_t seq = requests_++;
      std::this_thread::sleep_for(latency_);
      const std::string body = R"({"choices":[{"index":0,"message":{"role":"assistant","content":"```sql\nSELECT )" +
                               std::to_string(seq) +
                               R"(\n```"},"finish_reason":"stop"}],"usage":{"prompt_tokens":120,"completion_tokens":30}})";
      const std::string response = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: " +
                                   std::to_string(body.size()) + "\r\nConnection: keep-alive\r\n\r\n" + body;
      size_t sent = 0;
      while (sent < response.size()) {
        ssize_t n = ::send(fd, response.data() + sent, response.size() - sent, MSG_NOSIGNAL);
        if (n <= 0) return close_conn(fd);
        sent += static_cast<size_t>(n);
      }
    }
  }

  std::chrono::milliseconds latency_;
  int listen_fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stopping_{false};
  std::atomic<int64_t> requests_{0};
  std::thread acceptor_;
  std::mutex mu_;
  std::vector<int> conn_fds_;              // guarded by mu_
  std::vector<std::thread> conn_threads_;  // guarded by mu_
};

}  // namespace nl2sql::bench
