// CurlTransport: libcurl easy handles, pooled so that each calling thread reuses a handle (and
// its keep-alive connection) for the next call.
#include <curl/curl.h>

#include <algorithm>
#include <cctype>
#include <mutex>

#include "nl2sql/core/log.h"
#include "nl2sql/llm/transport.h"

namespace nl2sql::llm {
namespace {

std::once_flag g_curl_init;

// The body being received and its cap; `exceeded` tells post() why curl stopped.
struct BodySink {
  std::string* body;
  size_t cap;  // 0: unlimited
  bool exceeded = false;
};

size_t on_body(char* data, size_t size, size_t nmemb, void* user) {
  auto* sink = static_cast<BodySink*>(user);
  const size_t n = size * nmemb;
  if (sink->cap > 0 && sink->body->size() + n > sink->cap) {
    sink->exceeded = true;
    return 0;  // anything but n aborts the transfer (CURLE_WRITE_ERROR)
  }
  sink->body->append(data, n);
  return n;
}

struct HeaderSink {
  std::map<std::string, std::string>* headers;
  BodySink* body;
};

size_t on_header(char* data, size_t size, size_t nmemb, void* user) {
  auto* hs = static_cast<HeaderSink*>(user);
  auto* headers = hs->headers;
  std::string line(data, size * nmemb);
  auto colon = line.find(':');
  if (colon != std::string::npos) {
    std::string name = line.substr(0, colon);
    std::transform(name.begin(), name.end(), name.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    std::string value = line.substr(colon + 1);
    auto b = value.find_first_not_of(" \t");
    auto e = value.find_last_not_of(" \t\r\n");
    (*headers)[name] = b == std::string::npos ? "" : value.substr(b, e - b + 1);
    // A declared length over the cap: stop before the first body byte.
    if (name == "content-length" && hs->body->cap > 0) {
      const std::string& declared = (*headers)[name];
      if (!declared.empty() && declared.find_first_not_of("0123456789") == std::string::npos &&
          (declared.size() > 19 || std::stoull(declared) > hs->body->cap)) {
        hs->body->exceeded = true;
        return 0;
      }
    }
  } else if (line.rfind("HTTP/", 0) == 0) {
    headers->clear();  // a new response (after 100-continue or a redirect)
  }
  return size * nmemb;
}

int on_progress(void* user, curl_off_t, curl_off_t, curl_off_t, curl_off_t) {
  return static_cast<const std::atomic<bool>*>(user)->load() ? 1 : 0;  // non-zero aborts
}

}  // namespace

CurlTransport::CurlTransport() {
  std::call_once(g_curl_init, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

CurlTransport::~CurlTransport() {
  std::lock_guard lock(mu_);
  for (void* h : idle_handles_) curl_easy_cleanup(static_cast<CURL*>(h));
}

void* CurlTransport::acquire_handle() {
  {
    std::lock_guard lock(mu_);
    if (!idle_handles_.empty()) {
      void* h = idle_handles_.back();
      idle_handles_.pop_back();
      return h;
    }
  }
  return curl_easy_init();
}

void CurlTransport::release_handle(void* handle) {
  std::lock_guard lock(mu_);
  idle_handles_.push_back(handle);
}

Result<HttpResponse> CurlTransport::post(const HttpRequest& request) { return perform(request, true); }

Result<HttpResponse> CurlTransport::get(const HttpRequest& request) { return perform(request, false); }

Result<HttpResponse> CurlTransport::perform(const HttpRequest& request, bool with_body) {
  if (cancelled_.load()) return Status(ErrorCode::kCancelled, "cancelled before sending");
  CURL* curl = static_cast<CURL*>(acquire_handle());
  if (!curl) return internal_error("curl_easy_init failed");
  curl_easy_reset(curl);  // keeps the connection cache, clears options

  HttpResponse response;
  curl_slist* headers = nullptr;
  for (const auto& [k, v] : request.headers) headers = curl_slist_append(headers, (k + ": " + v).c_str());
  headers = curl_slist_append(headers, "Expect:");  // no 100-continue round trip

  curl_easy_setopt(curl, CURLOPT_URL, request.url.c_str());
  if (with_body) {
    curl_easy_setopt(curl, CURLOPT_POST, 1L);
    curl_easy_setopt(curl, CURLOPT_POSTFIELDS, request.body.data());
    curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(request.body.size()));
  } else {
    curl_easy_setopt(curl, CURLOPT_HTTPGET, 1L);
  }
  curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, on_body);
  BodySink body_sink{&response.body, request.max_response_bytes};
  HeaderSink header_sink{&response.headers, &body_sink};
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &body_sink);
  curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, on_header);
  curl_easy_setopt(curl, CURLOPT_HEADERDATA, &header_sink);
  curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, static_cast<long>(request.timeout.count()));
  curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS,
                   static_cast<long>(std::chrono::milliseconds(kConnectTimeout).count()));
  if (request.idle_timeout.count() > 0) {
    curl_easy_setopt(curl, CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl_easy_setopt(curl, CURLOPT_LOW_SPEED_TIME,
                     std::max(1L, static_cast<long>(request.idle_timeout.count() / 1000)));
  }
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);  // required with threads
  curl_easy_setopt(curl, CURLOPT_NOPROGRESS, 0L);
  curl_easy_setopt(curl, CURLOPT_XFERINFOFUNCTION, on_progress);
  curl_easy_setopt(curl, CURLOPT_XFERINFODATA, &cancelled_);
  curl_easy_setopt(curl, CURLOPT_ACCEPT_ENCODING, "");  // whatever curl supports
  curl_easy_setopt(curl, CURLOPT_TCP_KEEPALIVE, 1L);

  CURLcode rc = curl_easy_perform(curl);
  long status = 0;
  curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
  curl_slist_free_all(headers);
  release_handle(curl);

  if (body_sink.exceeded) {
    return Status(ErrorCode::kRejected,
                  "the response body exceeds the cap of " + std::to_string(request.max_response_bytes) +
                      " bytes (llm.max_response_bytes; " + core::mask_url(request.url) + ")");
  }
  if (rc != CURLE_OK) {
    // curl's messages never contain the request headers; the URL is masked all the same.
    std::string what = std::string(curl_easy_strerror(rc)) + " (" + core::mask_url(request.url) + ")";
    if (rc == CURLE_ABORTED_BY_CALLBACK) return Status(ErrorCode::kCancelled, "cancelled: " + what);
    if (rc == CURLE_OPERATION_TIMEDOUT) return Status(ErrorCode::kTimeout, what);
    return Status(ErrorCode::kUnavailable, what);
  }
  response.status = static_cast<int>(status);
  return response;
}

std::shared_ptr<Transport> make_curl_transport() { return std::make_shared<CurlTransport>(); }

}  // namespace nl2sql::llm
