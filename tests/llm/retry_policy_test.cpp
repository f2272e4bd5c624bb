// The retry policy (src/llm/retry_policy.h) on its own: which answers are overload, refusals or
// transient failures and with which error kind, the llama.cpp "context size" words under load
// versus alone, transport failures, Retry-After in both forms, backoff and probe delays.
#include "llm/retry_policy.h"

#include <gtest/gtest.h>

namespace nl2sql::llm {
namespace {

FailedAttempt http(int status, const std::string& body = "{}", const std::string& type = "", int64_t limit = 8) {
  return classify_http_failure(status, body, type, limit);
}

TEST(RetryPolicy, OverloadIsWaitedOutNotRefused) {
  for (int status : {429, 503, 529}) {
    SCOPED_TRACE(status);
    EXPECT_EQ(http(status).reaction, Reaction::kWaitOverload);
    EXPECT_FALSE(http(status).endpoint_failed);
  }
  EXPECT_EQ(http(429).kind, CallErrorKind::kRateLimited);
  EXPECT_EQ(http(503).kind, CallErrorKind::kServer);
  // Ollama past OLLAMA_MAX_QUEUE.
  EXPECT_EQ(http(500, R"({"error":"server busy, please try again.  maximum pending requests exceeded"})").reaction,
            Reaction::kWaitOverload);
}

TEST(RetryPolicy, LlamaCppSharedSlotsAreOverloadUnlessTheServerTakesOneRequest) {
  const std::string body = R"({"error":{"code":500,"message":"Context size has been exceeded.","type":"server_error"}})";
  EXPECT_EQ(http(500, body, "server_error", 4).reaction, Reaction::kWaitOverload);
  // One request at a time and still too large: this request alone does not fit; retried as a 5xx.
  const FailedAttempt alone = http(500, body, "server_error", 1);
  EXPECT_EQ(alone.reaction, Reaction::kRetry);
  EXPECT_TRUE(alone.endpoint_failed);
}

TEST(RetryPolicy, RefusalsAreNotRetried) {
  EXPECT_EQ(http(400).reaction, Reaction::kRefuse);
  EXPECT_EQ(http(400).kind, CallErrorKind::kHttpClient);
  EXPECT_EQ(http(404).kind, CallErrorKind::kHttpClient);
  EXPECT_EQ(http(401).kind, CallErrorKind::kAuth);
  EXPECT_EQ(http(403).kind, CallErrorKind::kAuth);
  const FailedAttempt vllm = http(400, R"({"object":"error","message":"This model's maximum context length is 8192 tokens. However, you requested 9000 tokens.","type":"BadRequestError","code":400})");
  EXPECT_EQ(vllm.reaction, Reaction::kRefuse);
  EXPECT_EQ(vllm.kind, CallErrorKind::kContextLength);
  EXPECT_EQ(http(413, "Request Entity Too Large").kind, CallErrorKind::kContextLength);
  // llama.cpp names it by type whatever the status, older builds with a 500.
  const FailedAttempt typed = http(500, R"({"error":{"type":"exceed_context_size_error"}})", "exceed_context_size_error");
  EXPECT_EQ(typed.reaction, Reaction::kRefuse);
  EXPECT_EQ(typed.kind, CallErrorKind::kContextLength);
}

TEST(RetryPolicy, TransientFailuresAreRetried) {
  const FailedAttempt bad_gateway = http(502, "<html>Bad Gateway</html>");
  EXPECT_EQ(bad_gateway.reaction, Reaction::kRetry);
  EXPECT_EQ(bad_gateway.kind, CallErrorKind::kServer);
  EXPECT_TRUE(bad_gateway.endpoint_failed);
  const FailedAttempt request_timeout = http(408);
  EXPECT_EQ(request_timeout.reaction, Reaction::kRetry);
  EXPECT_EQ(request_timeout.kind, CallErrorKind::kTimeout);
  EXPECT_FALSE(request_timeout.endpoint_failed);  // the server answered
}

TEST(RetryPolicy, TransportFailures) {
  EXPECT_EQ(classify_transport_failure(ErrorCode::kCancelled).reaction, Reaction::kCancel);
  EXPECT_EQ(classify_transport_failure(ErrorCode::kRejected).reaction, Reaction::kRefuse);  // over the body cap
  EXPECT_EQ(classify_transport_failure(ErrorCode::kRejected).kind, CallErrorKind::kServer);
  const FailedAttempt timeout = classify_transport_failure(ErrorCode::kTimeout);
  EXPECT_EQ(timeout.reaction, Reaction::kRetry);
  EXPECT_EQ(timeout.kind, CallErrorKind::kTimeout);
  EXPECT_TRUE(timeout.endpoint_failed);
  const FailedAttempt refused = classify_transport_failure(ErrorCode::kUnavailable);
  EXPECT_EQ(refused.kind, CallErrorKind::kConnection);
  EXPECT_EQ(refused.reaction, Reaction::kRetry);
  EXPECT_EQ(classify_transport_failure(ErrorCode::kInvalidInput).reaction, Reaction::kRefuse);
}

TEST(RetryPolicy, RequestedWaits) {
  EXPECT_EQ(requested_wait_s({{"retry-after-ms", "1500"}, {"retry-after", "9"}}), 1.5);
  EXPECT_EQ(requested_wait_s({{"retry-after", "9"}}), 9.0);
  EXPECT_EQ(requested_wait_s({{"retry-after-ms", "soon"}, {"retry-after", "2"}}), 2.0);
  EXPECT_FALSE(requested_wait_s({}).has_value());
  EXPECT_FALSE(retry_after_seconds("whenever").has_value());
  // An HTTP-date in the past asks for no wait at all.
  EXPECT_EQ(retry_after_seconds("Wed, 21 Oct 2015 07:28:00 GMT"), 0.0);
}

TEST(RetryPolicy, BackoffDoublesWithJitterAndHonoursTheServerUpToTheCap) {
  RetryPolicy p;
  p.base_delay_s = 1.0;
  p.max_delay_s = 10.0;
  EXPECT_DOUBLE_EQ(backoff_s(p, 1, std::nullopt, 0.0), 0.5);
  EXPECT_DOUBLE_EQ(backoff_s(p, 1, std::nullopt, 1.0), 1.0);
  EXPECT_DOUBLE_EQ(backoff_s(p, 3, std::nullopt, 1.0), 4.0);
  EXPECT_DOUBLE_EQ(backoff_s(p, 9, std::nullopt, 1.0), 10.0);  // capped
  EXPECT_DOUBLE_EQ(backoff_s(p, 1, 3.0, 0.9), 3.0);              // the server's wait, no jitter
  EXPECT_DOUBLE_EQ(backoff_s(p, 1, 120.0, 0.0), 10.0);           // capped too
}

TEST(RetryPolicy, ProbeDelays) {
  EXPECT_DOUBLE_EQ(probe_delay_s(1, 0, 60), 0.5);
  EXPECT_DOUBLE_EQ(probe_delay_s(2, 0, 60), 1.0);
  EXPECT_DOUBLE_EQ(probe_delay_s(9, 0, 60), 4.0);
  EXPECT_DOUBLE_EQ(probe_delay_s(9, 59, 60), 1.0);    // never past the wait's end
  EXPECT_DOUBLE_EQ(probe_delay_s(9, 60, 60), 0.05);   // at least 50 ms
}

TEST(RetryPolicy, RefusalHintsAndSignatures) {
  ModelProfile p;
  p.name = "o3";
  p.model = "o3-mini";
  EXPECT_NE(refusal_hint(p, 400, "Unsupported parameter: 'max_tokens' is not supported with this model. Use "
                                 "'max_completion_tokens' instead.")
                .find("max_tokens_field"),
            std::string::npos);
  EXPECT_NE(refusal_hint(p, 400, "Unsupported value: 'temperature' does not support 0.2 with this model.")
                .find("\"temperature\" to llm.models.o3.omit"),
            std::string::npos);
  EXPECT_NE(refusal_hint(p, 404, "model \"o3-mini\" not found, try pulling it first").find("llm.models.o3.model"),
            std::string::npos);
  EXPECT_EQ(refusal_hint(p, 400, "something else"), "");
  EXPECT_EQ(refusal_signature(400, "prompt has 9001 tokens"), refusal_signature(400, "prompt has 12 tokens"));
  EXPECT_NE(refusal_signature(400, "x"), refusal_signature(404, "x"));
}

}  // namespace
}  // namespace nl2sql::llm
