// OutsideProgram: a generator or selector written elsewhere (Python, a shell script …) that
// nl2sql runs as a pool of `workers` copies and talks to in JSON lines on their stdin/stdout —
// one request line per question, one answer line back, which must echo the request's
// question_id. The protocol is documented (with a JSON Schema) in docs/bring-your-own-method.md
// and docs/outside-program-protocol.schema.json.
//
// Model calls: every request carries `base_url` (nl2sql's llm::LocalEndpoint on 127.0.0.1),
// `api_key` (a token valid for this question only) and `model`; each copy's environment holds
// OPENAI_BASE_URL, OPENAI_API_KEY (a token standing for whatever question that copy is working
// on) and OPENAI_MODEL — never a real key (every variable naming an API key is removed from it).
// A call through either token is sent by llm::Client attributed to the question and stage, and
// its trace comes back with the answer.
//
// Faults never lose the run: a copy that crashes, writes a line that is not a JSON object, answers
// for another question or is silent past `timeout_s` (its process group is then killed) fails
// that question's exchange with the copy's stderr tail in the message, and is started afresh for
// the next question. An answer {"error": …} fails the question too, but the copy stays.
// A copy is started on first use; the destructor (and a cancelled client, checked while waiting)
// kills them all.
//
// Thread-safe: ask() from many threads; each takes a free copy (waiting for one when all work).
#pragma once

#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "nl2sql/core/child_process.h"
#include "nl2sql/core/status.h"
#include "nl2sql/llm/call_tag.h"
#include "nl2sql/llm/trace.h"

namespace nl2sql::llm {
class Client;
class LocalEndpoint;
}  // namespace nl2sql::llm

namespace nl2sql::generate {

inline constexpr const char* kOutsideProtocol = "nl2sql.outside.v1";

struct OutsideProgramSpec {
  std::string label;               // the generator's label or select.external.<label>
  std::string config_key;          // where it is configured, for messages
  std::vector<std::string> argv;
  double timeout_s = 300;          // per question, model calls included
  int64_t workers = 1;
  std::string role = "generate";   // the model role its calls are made as (OPENAI_MODEL: its profile)
  std::string stage = "generate";  // accounting and trace tag of its calls
};

// Reads {"argv", "timeout_s", "workers"} of a config item (the generator entry or
// select.external.<label>); `key` names it in errors.
Result<OutsideProgramSpec> read_outside_program(const nlohmann::json& item, const std::string& key);

class OutsideProgram {
 public:
  OutsideProgram(OutsideProgramSpec spec, llm::Client* client);
  ~OutsideProgram();

  struct Exchange {
    nlohmann::json answer;                 // the program's answer object (no "error" in it)
    std::vector<llm::LlmCallTrace> calls;  // its model calls for the question
    std::string profile;                   // the profile of its role (the candidates' profile)
  };
  // Sends `request` (kind "generate" or "select"; the protocol fields question_id, base_url,
  // api_key and model are added here) and waits for the answer. `tag` is what the program's
  // model calls are for (the simulator reads it).
  Result<Exchange> ask(nlohmann::json request, const std::string& question_id, const llm::CallTag& tag);
  const OutsideProgramSpec& spec() const { return spec_; }

 private:
  struct Copy {
    std::unique_ptr<core::ChildProcess> process;
    std::string alias;  // its environment's OPENAI_API_KEY
    bool busy = false;
  };
  Status ensure_endpoint();
  Result<std::unique_ptr<core::ChildProcess>> start_copy(const std::string& alias);
  // The exchange on one copy; on a fault, the copy is killed (started again next time).
  Result<nlohmann::json> exchange(Copy& copy, const nlohmann::json& request, const std::string& question_id);
  Status fault(Copy& copy, const std::string& question_id, const std::string& what);

  OutsideProgramSpec spec_;
  llm::Client* client_;
  std::string profile_;  // of spec_.role ("" when it resolves to none)
  std::mutex mu_;
  std::condition_variable free_;
  std::vector<Copy> copies_;                        // guarded by mu_ (busy); a busy copy is its asker's
  std::unique_ptr<llm::LocalEndpoint> endpoint_;    // started with the first copy; guarded by mu_
};

}  // namespace nl2sql::generate
