// The Batch API's HTTP and JSONL side (batch_api.h).
#include "batch_api.h"

#include <nlohmann/json.hpp>

#include "nl2sql/core/log.h"
#include "nl2sql/core/text.h"
#include "retry_policy.h"

namespace nl2sql::llm {
namespace {

using json = nlohmann::json;

std::string string_field(const json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

int64_t int_field(const json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_number_integer() ? it->get<int64_t>() : 0;
}

// "code: message" of an error object (a line's `error`, a batch's errors.data[i]).
std::string describe_error(const json& e) {
  if (!e.is_object()) return e.is_null() ? "" : e.dump();
  std::string code = string_field(e, "code"), message = string_field(e, "message");
  std::string s = code.empty() ? message : message.empty() ? code : code + ": " + message;
  if (auto line = e.find("line"); line != e.end() && line->is_number_integer())
    s += " (line " + std::to_string(line->get<int64_t>()) + ")";
  return s.empty() ? e.dump() : s;
}

// A boundary that cannot occur in the JSONL: its lines are JSON, whose strings escape control
// characters, and the boundary line starts with "--" right after a CRLF.
constexpr const char* kBoundary = "nl2sql-batch-7f3c9a1e5b";

std::string multipart_body(const std::string& jsonl) {
  std::string b = kBoundary;
  std::string body;
  body.reserve(jsonl.size() + 512);
  body += "--" + b + "\r\nContent-Disposition: form-data; name=\"purpose\"\r\n\r\nbatch\r\n";
  body += "--" + b +
          "\r\nContent-Disposition: form-data; name=\"file\"; filename=\"nl2sql_batch.jsonl\"\r\n"
          "Content-Type: application/jsonl\r\n\r\n";
  body += jsonl;
  body += "\r\n--" + b + "--\r\n";
  return body;
}

void set_content_type(HttpRequest& http, const std::string& type) {
  for (auto& [k, v] : http.headers)
    if (core::lower(k) == "content-type") {
      v = type;
      return;
    }
  http.headers.push_back({"Content-Type", type});
}

}  // namespace

bool BatchJob::ended() const {
  return status == "completed" || status == "failed" || status == "expired" || status == "cancelled";
}

std::string batch_input_line(const std::string& custom_id, const std::string& url_path, const std::string& body) {
  // The body is spliced in as is: it is the JSON the synchronous call would send, byte for byte.
  return "{\"custom_id\":" + json(custom_id).dump() + ",\"method\":\"POST\",\"url\":" + json(url_path).dump() +
         ",\"body\":" + body + "}";
}

Result<BatchJob> parse_batch_job(const std::string& body) {
  const json j = json::parse(body, nullptr, false);
  if (j.is_discarded() || !j.is_object() || string_field(j, "id").empty() || string_field(j, "status").empty())
    return make_call_error(CallErrorKind::kNotJson,
                           "a batch object without id or status: \"" + core::redact_and_cut(body, 200) + "\"");
  BatchJob job;
  job.id = string_field(j, "id");
  job.status = string_field(j, "status");
  job.output_file_id = string_field(j, "output_file_id");
  job.error_file_id = string_field(j, "error_file_id");
  if (auto c = j.find("request_counts"); c != j.end() && c->is_object())
    job.counts = BatchCounts{int_field(*c, "total"), int_field(*c, "completed"), int_field(*c, "failed")};
  if (auto e = j.find("errors"); e != j.end() && e->is_object())
    if (auto data = e->find("data"); data != e->end() && data->is_array())
      for (const auto& item : *data) job.errors += (job.errors.empty() ? "" : "; ") + describe_error(item);
  return job;
}

std::map<std::string, BatchLine> parse_batch_lines(const std::string& text) {
  std::map<std::string, BatchLine> out;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    const std::string line = text.substr(start, end - start);
    start = end + 1;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const json j = json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.is_object() || string_field(j, "custom_id").empty()) {
      spdlog::warn("llm batch: skipped an output line that is not a batch answer: \"{}\"",
                   core::redact_and_cut(line, 120));
      continue;
    }
    BatchLine l;
    if (auto r = j.find("response"); r != j.end() && r->is_object()) {
      l.status_code = static_cast<int>(int_field(*r, "status_code"));
      if (auto b = r->find("body"); b != r->end() && !b->is_null()) l.body = b->is_string() ? b->get<std::string>() : b->dump();
    }
    if (auto e = j.find("error"); e != j.end()) l.error = describe_error(*e);
    out[string_field(j, "custom_id")] = std::move(l);
  }
  return out;
}

std::string url_path_of(const std::string& base_url) {
  const size_t scheme = base_url.find("://");
  const size_t slash = base_url.find('/', scheme == std::string::npos ? 0 : scheme + 3);
  return slash == std::string::npos ? std::string() : base_url.substr(slash);
}

BatchApi::BatchApi(std::shared_ptr<Transport> transport, RequestFor request_for, RetryPolicy retry,
                   std::shared_ptr<Clock> clock, std::function<bool()> cancelled)
    : transport_(std::move(transport)),
      request_for_(std::move(request_for)),
      retry_(retry),
      clock_(std::move(clock)),
      cancelled_(std::move(cancelled)) {}

Result<HttpResponse> BatchApi::send(HttpRequest http, bool post, const std::string& what) {
  for (int attempt = 1;; ++attempt) {
    if (cancelled_()) return make_call_error(CallErrorKind::kCancelled, what + ": shutdown requested");
    auto r = post ? transport_->post(http) : transport_->get(http);
    std::string failure;
    std::optional<double> requested;
    if (!r) {
      if (r.status().code() == ErrorCode::kCancelled)
        return make_call_error(CallErrorKind::kCancelled, what + ": " + r.status().message());
      if (r.status().code() == ErrorCode::kRejected) return Status(r.status().code(), what + ": " + r.status().message());
      failure = r.status().message();
    } else if (r->status >= 200 && r->status < 300) {
      return r;
    } else {
      failure = "HTTP " + std::to_string(r->status) + ": " + core::redact_and_cut(r->body, 300);
      if (!retryable_status(r->status) && r->status != 429)
        return make_call_error(r->status == 401 || r->status == 403 ? CallErrorKind::kAuth : CallErrorKind::kHttpClient,
                               what + " refused: " + failure);
      requested = requested_wait_s(r->headers);
    }
    if (attempt >= retry_.max_attempts)
      return make_call_error(CallErrorKind::kServer,
                             what + " failed after " + std::to_string(attempt) + " attempts: " + failure);
    const double wait = backoff_s(retry_, attempt, requested, 0.5);
    spdlog::debug("llm batch: {} failed ({}); again in {:.1f} s", what, failure, wait);
    clock_->sleep_for(std::chrono::duration_cast<Clock::Duration>(std::chrono::duration<double>(wait)));
  }
}

Result<std::string> BatchApi::upload(const std::string& jsonl) {
  HttpRequest http = request_for_("/files");
  set_content_type(http, std::string("multipart/form-data; boundary=") + kBoundary);
  http.body = multipart_body(jsonl);
  auto r = send(std::move(http), true, "uploading a batch input file");
  if (!r) return r.status();
  const json j = json::parse(r->body, nullptr, false);
  if (j.is_discarded() || !j.is_object() || string_field(j, "id").empty())
    return make_call_error(CallErrorKind::kNotJson,
                           "the file upload answered without a file id: \"" + core::redact_and_cut(r->body, 200) + "\"");
  return string_field(j, "id");
}

Result<BatchJob> BatchApi::create(const std::string& input_file_id, const std::string& endpoint,
                                  const std::string& window) {
  HttpRequest http = request_for_("/batches");
  http.body = json{{"input_file_id", input_file_id}, {"endpoint", endpoint}, {"completion_window", window}}.dump();
  auto r = send(std::move(http), true, "creating a batch job");
  if (!r) return r.status();
  return parse_batch_job(r->body);
}

Result<BatchJob> BatchApi::retrieve(const std::string& batch_id) {
  auto r = send(request_for_("/batches/" + batch_id), false, "reading batch job " + batch_id);
  if (!r) return r.status();
  return parse_batch_job(r->body);
}

Result<std::string> BatchApi::content(const std::string& file_id) {
  HttpRequest http = request_for_("/files/" + file_id + "/content");
  http.max_response_bytes = 0;  // a job's whole output: as large as its answers
  auto r = send(std::move(http), false, "reading batch file " + file_id);
  if (!r) return r.status();
  return std::move(r->body);
}

}  // namespace nl2sql::llm
