// A fake OpenAI Batch API beside the fake chat endpoint (fake_openai_server.h), answering as
// OpenAI's documentation describes, and no kinder:
//   POST /v1/files                 multipart/form-data with `purpose` "batch" and `file` (JSONL);
//                                  a file over BatchKnobs::max_file_bytes is refused (400)
//   POST /v1/batches               {input_file_id, endpoint "/v1/chat/completions", completion_window "24h"}
//   GET  /v1/batches/{id}          the batch object: validating → in_progress → finalizing →
//                                  completed over BatchKnobs::latency, request_counts as it goes
//   GET  /v1/files/{id}/content    the input, output or error file
// Each line is answered by the same script as a synchronous request (so a batch run and a
// synchronous run get the same answers); output and error lines come in shuffled order; a
// reply with a status other than 200 becomes an error-file line with that status and body.
// Knobs: an expired job (the first half of its lines answered, the rest in the error file as
// batch_expired, no matter that a synchronous retry would succeed), every n-th line failing
// with a 500 in the error file, a job failing validation (status "failed", errors.data, no
// files). Counters tell what the client did (uploads, jobs created, polls) and the uploaded
// files can be read back. Thread-safe; the synchronous endpoint stays FakeOpenAiServer's.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "support/fake_openai_server.h"

namespace nl2sql::llm::testing {

struct BatchKnobs {
  std::chrono::milliseconds latency{40};  // submission → completed
  bool expire = false;                     // ends "expired" with half its lines answered
  int64_t error_every = 0;                 // every n-th input line (1-based) fails with a 500
  bool fail_validation = false;            // ends "failed" at validation
  size_t max_file_bytes = 200000000;       // OpenAI's 200 MB
  uint64_t shuffle_seed = 7;
};

class FakeBatchServer {
 public:
  explicit FakeBatchServer(FakeOpenAiServer::Script script, BatchKnobs knobs = {}, int threads = 16, int port = 0)
      : script_(script), knobs_(knobs),
        server_(std::move(script), threads, port, [this](httplib::Server& s) { add_routes(s); }) {}

  std::string base_url() const { return server_.base_url(); }
  // The synchronous chat endpoint (the fallback's requests).
  FakeOpenAiServer& chat() { return server_; }
  void set_knobs(BatchKnobs knobs) {
    std::lock_guard lock(mu_);
    knobs_ = knobs;
  }
  int64_t files_uploaded() { return count(&Counts::uploads); }
  int64_t batches_created() { return count(&Counts::created); }
  int64_t polls() { return count(&Counts::polls); }
  int64_t lines_answered() { return count(&Counts::lines); }
  // Every uploaded file's content, in upload order.
  std::vector<std::string> uploads() {
    std::lock_guard lock(mu_);
    std::vector<std::string> out;
    for (const auto& id : upload_order_) out.push_back(files_.at(id));
    return out;
  }
  // Authorization headers of the batch routes' requests.
  std::vector<std::string> authorizations() {
    std::lock_guard lock(mu_);
    return auth_;
  }
  // The statuses GET /v1/batches/{id} showed for a job, in order.
  std::vector<std::string> statuses_shown(const std::string& id) {
    std::lock_guard lock(mu_);
    auto it = batches_.find(id);
    return it == batches_.end() ? std::vector<std::string>{} : it->second.shown;
  }
  // Every batch object as GET /v1/batches/{id} last showed it.
  std::vector<nlohmann::json> batches() {
    std::lock_guard lock(mu_);
    std::vector<nlohmann::json> out;
    for (auto& [id, b] : batches_) out.push_back(object_of(b));
    return out;
  }

 private:
  using json = nlohmann::json;
  using Clock = std::chrono::steady_clock;
  struct Counts {
    int64_t uploads = 0, created = 0, polls = 0, lines = 0;
  };
  struct Batch {
    std::string id, input_file_id, endpoint, window;
    Clock::time_point created;
    BatchKnobs knobs;
    std::vector<json> lines;       // the input lines
    std::vector<std::string> errors;  // validation errors
    bool answered = false;         // output and error files made
    std::string output_file_id, error_file_id;
    int64_t completed = 0, failed = 0;
    std::string status = "validating";
    std::vector<std::string> shown;  // every status a GET showed, in order
  };

  int64_t count(int64_t Counts::*field) {
    std::lock_guard lock(mu_);
    return counts_.*field;
  }

  static json error_body(const std::string& message, const std::string& type) {
    return json{{"error", {{"message", message}, {"type", type}, {"param", nullptr}, {"code", nullptr}}}};
  }

  void add_routes(httplib::Server& s) {
    s.Post("/v1/files", [this](const httplib::Request& req, httplib::Response& res) { upload(req, res); });
    s.Post("/v1/batches", [this](const httplib::Request& req, httplib::Response& res) { create(req, res); });
    s.Get(R"(/v1/batches/([^/]+))", [this](const httplib::Request& req, httplib::Response& res) {
      std::lock_guard lock(mu_);
      auth_.push_back(req.get_header_value("Authorization"));
      ++counts_.polls;
      auto it = batches_.find(req.matches[1]);
      if (it == batches_.end()) return reply(res, 404, error_body("No batch found with id " + std::string(req.matches[1]), "invalid_request_error"));
      advance(it->second);
      it->second.shown.push_back(it->second.status);
      reply(res, 200, object_of(it->second));
    });
    s.Get(R"(/v1/files/([^/]+)/content)", [this](const httplib::Request& req, httplib::Response& res) {
      std::lock_guard lock(mu_);
      auth_.push_back(req.get_header_value("Authorization"));
      auto it = files_.find(req.matches[1]);
      if (it == files_.end()) return reply(res, 404, error_body("No such File object: " + std::string(req.matches[1]), "invalid_request_error"));
      res.status = 200;
      res.set_content(it->second, "application/octet-stream");
    });
  }

  static void reply(httplib::Response& res, int status, const json& body) {
    res.status = status;
    res.set_content(body.dump(), kJsonType);
  }

  void upload(const httplib::Request& req, httplib::Response& res) {
    std::lock_guard lock(mu_);
    auth_.push_back(req.get_header_value("Authorization"));
    if (!req.is_multipart_form_data() || !req.has_file("file") || !req.has_file("purpose"))
      return reply(res, 400, error_body("Expected multipart/form-data with 'file' and 'purpose'", "invalid_request_error"));
    const auto file = req.get_file_value("file");
    if (req.get_file_value("purpose").content != "batch")
      return reply(res, 400, error_body("purpose must be one of assistants, batch, fine-tune, vision, user_data, evals", "invalid_request_error"));
    if (file.content.size() > knobs_.max_file_bytes)
      return reply(res, 400, error_body("File is too large: " + std::to_string(file.content.size()) + " bytes; the limit is " +
                                            std::to_string(knobs_.max_file_bytes), "invalid_request_error"));
    const std::string id = "file-" + std::to_string(files_.size() + 1);
    files_[id] = file.content;
    upload_order_.push_back(id);
    ++counts_.uploads;
    reply(res, 200, json{{"id", id}, {"object", "file"}, {"bytes", file.content.size()}, {"created_at", 1700000000},
                         {"filename", file.filename}, {"purpose", "batch"}});
  }

  void create(const httplib::Request& req, httplib::Response& res) {
    std::lock_guard lock(mu_);
    auth_.push_back(req.get_header_value("Authorization"));
    const json j = json::parse(req.body, nullptr, false);
    if (j.is_discarded() || !j.is_object() || !j.contains("input_file_id"))
      return reply(res, 400, error_body("input_file_id is required", "invalid_request_error"));
    Batch b;
    b.input_file_id = j.value("input_file_id", "");
    b.endpoint = j.value("endpoint", "");
    b.window = j.value("completion_window", "");
    if (!files_.count(b.input_file_id))
      return reply(res, 404, error_body("No such File object: " + b.input_file_id, "invalid_request_error"));
    if (b.endpoint != "/v1/chat/completions" && b.endpoint != "/v1/embeddings" && b.endpoint != "/v1/completions")
      return reply(res, 400, error_body("Invalid endpoint: " + b.endpoint, "invalid_request_error"));
    if (b.window != "24h") return reply(res, 400, error_body("Invalid completion_window: " + b.window, "invalid_request_error"));
    b.id = "batch_" + std::to_string(batches_.size() + 1);
    b.created = Clock::now();
    b.knobs = knobs_;
    validate(b, files_.at(b.input_file_id));
    ++counts_.created;
    batches_[b.id] = b;
    reply(res, 200, object_of(b));
  }

  static void validate(Batch& b, const std::string& content) {
    std::set<std::string> ids;
    size_t start = 0;
    int64_t n = 0;
    while (start < content.size()) {
      size_t end = content.find('\n', start);
      if (end == std::string::npos) end = content.size();
      const std::string line = content.substr(start, end - start);
      start = end + 1;
      if (line.empty()) continue;
      ++n;
      const json j = json::parse(line, nullptr, false);
      auto bad = [&](const std::string& why) { b.errors.push_back(why + " (line " + std::to_string(n) + ")"); };
      if (j.is_discarded() || !j.is_object()) { bad("invalid_json_line"); continue; }
      if (!j.contains("custom_id") || !j["custom_id"].is_string()) { bad("missing_required_parameter: custom_id"); continue; }
      if (!ids.insert(j["custom_id"].get<std::string>()).second) bad("duplicate_custom_id");
      if (j.value("method", "") != "POST") bad("invalid_method");
      if (j.value("url", "") != b.endpoint) bad("mismatched_endpoint: " + j.value("url", ""));
      if (!j.contains("body") || !j["body"].is_object()) bad("missing_required_parameter: body");
      b.lines.push_back(j);
    }
    if (n == 0) b.errors.push_back("empty_file");
  }

  // Moves the job along its states by the time since it was created; answers it once.
  void advance(Batch& b) {
    if (b.status == "completed" || b.status == "failed" || b.status == "expired") return;
    const double f = std::chrono::duration<double>(Clock::now() - b.created).count() /
                     std::max(1e-3, std::chrono::duration<double>(b.knobs.latency).count());
    if (f < 0.25) return;
    if (!b.errors.empty() || b.knobs.fail_validation) {
      if (b.errors.empty()) b.errors.push_back("invalid_request: the input file failed validation");
      b.status = "failed";
      return;
    }
    if (!b.answered) answer(b);
    if (f < 0.75) {
      b.status = "in_progress";
      return;
    }
    b.status = f < 1 ? "finalizing" : b.knobs.expire ? "expired" : "completed";
  }

  void answer(Batch& b) {
    b.answered = true;
    std::vector<std::string> out, err;
    const size_t n = b.lines.size();
    for (size_t i = 0; i < n; ++i) {
      const json& line = b.lines[i];
      const std::string custom_id = line["custom_id"];
      json o = {{"id", "batch_req_" + std::to_string(++counts_.lines)}, {"custom_id", custom_id}};
      if (b.knobs.expire && i >= n / 2) {
        o["response"] = nullptr;
        o["error"] = {{"code", "batch_expired"},
                      {"message", "This request could not be executed before the completion window expired."}};
        err.push_back(o.dump());
        continue;
      }
      int status = 500;
      json body = error_body("The server had an error while processing your request", "server_error");
      if (!(b.knobs.error_every > 0 && (static_cast<int64_t>(i) + 1) % b.knobs.error_every == 0)) {
        httplib::Request r;
        r.method = "POST";
        r.path = b.endpoint;
        r.body = line["body"].dump();
        const FakeReply reply = script_(r, seq_++);
        status = reply.status;
        body = json::parse(reply.body, nullptr, false);
        if (body.is_discarded()) body = reply.body;
      }
      o["response"] = {{"status_code", status}, {"request_id", "req_" + std::to_string(counts_.lines)}, {"body", body}};
      o["error"] = nullptr;
      (status == 200 ? out : err).push_back(o.dump());
    }
    std::mt19937_64 rng(b.knobs.shuffle_seed + batches_.size());
    std::shuffle(out.begin(), out.end(), rng);
    std::shuffle(err.begin(), err.end(), rng);
    auto file_of = [this](const std::vector<std::string>& lines) {
      std::string text;
      for (const auto& l : lines) text += l + "\n";
      const std::string id = "file-" + std::to_string(files_.size() + 1);
      files_[id] = text;
      return id;
    };
    b.completed = static_cast<int64_t>(out.size());
    b.failed = static_cast<int64_t>(err.size());
    if (!out.empty()) b.output_file_id = file_of(out);
    if (!err.empty()) b.error_file_id = file_of(err);
  }

  json object_of(const Batch& b) const {
    const bool ended = b.status == "completed" || b.status == "expired";
    const int64_t total = b.status == "validating" || b.status == "failed" ? 0 : static_cast<int64_t>(b.lines.size());
    const int64_t completed = b.status == "in_progress" ? b.completed / 2 : b.status == "validating" ? 0 : b.completed;
    const int64_t failed = b.status == "in_progress" ? b.failed / 2 : b.status == "validating" ? 0 : b.failed;
    json errors = nullptr;
    if (b.status == "failed") {
      errors = {{"object", "list"}, {"data", json::array()}};
      for (const auto& e : b.errors) errors["data"].push_back({{"code", "invalid_request"}, {"message", e}, {"line", nullptr}});
    }
    return json{{"id", b.id},
                {"object", "batch"},
                {"endpoint", b.endpoint},
                {"errors", errors},
                {"input_file_id", b.input_file_id},
                {"completion_window", b.window},
                {"status", b.status},
                {"output_file_id", ended && !b.output_file_id.empty() ? json(b.output_file_id) : json(nullptr)},
                {"error_file_id", ended && !b.error_file_id.empty() ? json(b.error_file_id) : json(nullptr)},
                {"created_at", 1700000000},
                {"request_counts", {{"total", total}, {"completed", completed}, {"failed", failed}}},
                {"metadata", nullptr}};
  }

  FakeOpenAiServer::Script script_;
  std::mutex mu_;
  BatchKnobs knobs_;                          // guarded by mu_
  Counts counts_;                             // guarded by mu_
  int64_t seq_ = 0;                           // guarded by mu_: the script's sequence numbers
  std::map<std::string, std::string> files_;  // guarded by mu_
  std::vector<std::string> upload_order_;     // guarded by mu_
  std::map<std::string, Batch> batches_;      // guarded by mu_
  std::vector<std::string> auth_;             // guarded by mu_
  FakeOpenAiServer server_;                   // last: it serves the routes above while it lives
};

}  // namespace nl2sql::llm::testing
