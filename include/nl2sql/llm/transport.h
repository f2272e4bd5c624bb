// Transport: the one door to the network. The client builds an HttpRequest (URL, headers,
// JSON body, timeout) and a Transport performs the POST (or, for a batch job's state and files,
// the GET); tests inject a fake (or point the
// real one at an in-process server on 127.0.0.1). Transports report what happened on the wire
// only: an HTTP status of any value is a successful post(); connection failures, timeouts and
// cancellation are error Statuses (kUnavailable, kTimeout, kCancelled), a body over
// HttpRequest::max_response_bytes is kRejected. The client decides
// what to retry.
//
// CurlTransport is the real one (libcurl). It is thread-safe: each concurrent post() borrows
// an easy handle from a pool (so keep-alive connections are reused across calls) and blocks its
// calling thread; callers get parallelism from their own thread pools.
#pragma once

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "nl2sql/core/status.h"

namespace nl2sql::llm {

// Named constants (see STYLE.md): connecting should never take long on a healthy network.
inline constexpr std::chrono::seconds kConnectTimeout{10};
// Default cap on one response body (llm.max_response_bytes). An answer is text: even a
// 128k-token completion is ~0.5 MB, a batch of embeddings a few MB of JSON numbers; 16 MiB
// leaves room for n > 1 candidates and reasoning text while a runaway or hostile server can
// no longer exhaust memory (a 3 GiB body used to be read whole).
inline constexpr size_t kDefaultMaxResponseBytes = size_t{16} << 20;

struct HttpRequest {
  std::string url;
  std::vector<std::pair<std::string, std::string>> headers;  // may hold secrets: never log
  std::string body;
  std::chrono::milliseconds timeout{60000};
  // 0: none. Else the attempt ends when no byte arrived for this long (curl's low-speed
  // limit): meaningful for streamed answers, where a live server writes continuously.
  std::chrono::milliseconds idle_timeout{0};
  // 0: unlimited. Else a body (or a declared Content-Length) larger than this ends the
  // transfer and post() returns kRejected naming the cap and llm.max_response_bytes.
  size_t max_response_bytes = kDefaultMaxResponseBytes;
};

struct HttpResponse {
  int status = 0;
  std::map<std::string, std::string> headers;  // names lower-cased
  std::string body;
};

class Transport {
 public:
  virtual ~Transport() = default;
  virtual Result<HttpResponse> post(const HttpRequest& request) = 0;
  // The same without a body (request.body is ignored). Only batch profiles need it: a transport
  // that cannot GET fails their jobs, which fall back to synchronous calls.
  virtual Result<HttpResponse> get(const HttpRequest& request) {
    (void)request;
    return Status(ErrorCode::kUnavailable, "this transport cannot send a GET request");
  }
  // Abandons in-flight posts (they return kCancelled) and refuses new ones. Thread-safe.
  virtual void cancel() {}
};

class CurlTransport : public Transport {
 public:
  CurlTransport();
  ~CurlTransport() override;
  CurlTransport(const CurlTransport&) = delete;
  CurlTransport& operator=(const CurlTransport&) = delete;

  Result<HttpResponse> post(const HttpRequest& request) override;
  Result<HttpResponse> get(const HttpRequest& request) override;
  void cancel() override { cancelled_.store(true); }

 private:
  Result<HttpResponse> perform(const HttpRequest& request, bool with_body);
  void* acquire_handle();
  void release_handle(void* handle);

  std::atomic<bool> cancelled_{false};
  std::mutex mu_;
  std::vector<void*> idle_handles_;  // guarded by mu_; CURL* easy handles
};

std::shared_ptr<Transport> make_curl_transport();

}  // namespace nl2sql::llm
