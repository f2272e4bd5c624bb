// The Batch API of OpenAI-compatible servers (OpenAI, Azure OpenAI, Groq, Together, …) as the
// batch queue uses it: a job's input is a JSONL file, one request a line
// ({"custom_id", "method": "POST", "url", "body"}), uploaded to /v1/files (multipart/form-data,
// purpose "batch"); POST /v1/batches starts the job; GET /v1/batches/{id} tells its status
// (validating → in_progress → finalizing → completed, or failed / expired / cancelling /
// cancelled) and request_counts; GET /v1/files/{id}/content reads its output and error files,
// whose lines ({"id", "custom_id", "response": {"status_code", "request_id", "body"}, "error"})
// come in any order. Private to the llm layer.
//
// BatchApi sends through the injected Transport with the profile's headers (the API key among
// them: never logged, never in a file) and retries what a transient failure (a connection error,
// a timeout, 408, 429, 5xx) ended, with backoff on the injected Clock. Thread-safe.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>

#include "nl2sql/core/status.h"
#include "nl2sql/llm/clock.h"
#include "nl2sql/llm/profile.h"
#include "nl2sql/llm/transport.h"
#include "nl2sql/llm/types.h"

namespace nl2sql::llm {

struct BatchCounts {
  int64_t total = 0;
  int64_t completed = 0;
  int64_t failed = 0;
  bool operator==(const BatchCounts&) const = default;
};

// A batch object as GET /v1/batches/{id} returns it (the fields the queue reads).
struct BatchJob {
  std::string id;
  std::string status;
  BatchCounts counts;
  std::string output_file_id;  // empty when absent or null (e.g. every request failed)
  std::string error_file_id;
  std::string errors;          // errors.data[*] as "code: message (line n)", joined
  // completed, failed, expired or cancelled: the job will not change any more.
  bool ended() const;
};

// One line of an output or error file.
struct BatchLine {
  int status_code = 0;  // response.status_code; 0 when the line carries no response
  std::string body;     // response.body as JSON text (a chat completion, or an error object)
  std::string error;    // the line's `error` ("code: message"), empty when null
  // A chat answer to read: status 2xx and no error.
  bool answered() const { return error.empty() && status_code >= 200 && status_code < 300; }
};

// One input line: `body` (a chat request's JSON) sent as POST `url_path`.
std::string batch_input_line(const std::string& custom_id, const std::string& url_path, const std::string& body);
Result<BatchJob> parse_batch_job(const std::string& body);
// custom_id → line, over the lines of an output or error file; a line that does not parse is
// skipped (its caller sees no line and retries synchronously).
std::map<std::string, BatchLine> parse_batch_lines(const std::string& text);
// The path part of a base URL ("https://api.openai.com/v1" → "/v1"): the JSONL lines name
// their endpoint by path.
std::string url_path_of(const std::string& base_url);

class BatchApi {
 public:
  // `request_for(path)`: the profile's request for base_url + path (headers, query, timeout).
  using RequestFor = std::function<HttpRequest(const std::string& path)>;
  BatchApi(std::shared_ptr<Transport> transport, RequestFor request_for, RetryPolicy retry,
           std::shared_ptr<Clock> clock, std::function<bool()> cancelled);

  Result<std::string> upload(const std::string& jsonl);  // the file's id
  Result<BatchJob> create(const std::string& input_file_id, const std::string& endpoint,
                          const std::string& window);
  Result<BatchJob> retrieve(const std::string& batch_id);
  Result<std::string> content(const std::string& file_id);

 private:
  // Sends until an answer that is not a transient failure; a non-2xx answer is an error naming
  // `what` and quoting the server.
  Result<HttpResponse> send(HttpRequest http, bool post, const std::string& what);

  std::shared_ptr<Transport> transport_;
  RequestFor request_for_;
  RetryPolicy retry_;
  std::shared_ptr<Clock> clock_;
  std::function<bool()> cancelled_;
};

}  // namespace nl2sql::llm
