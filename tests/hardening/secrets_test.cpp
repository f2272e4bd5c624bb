// Secrets stay secret: `nl2sql run` with recognisable API keys in the environment (one through a
// profile's api_key_env, one through OPENAI_API_KEY), logging at debug level to stderr and to a
// log file, against a fake server that fails some calls (500, non-JSON) — echoing the
// Authorization header it received into its error bodies, as a careless proxy would — and, in
// a second run, refuses the key with 401 from a chosen call on. Every file the runs wrote (run
// folders, LLM cache, value index, log file) and everything they printed is searched: neither
// key appears, not even the distinctive middle of it.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <fstream>
#include <sstream>

#include "llm/fake_openai_server.h"
#include "nl2sql/core/hash.h"
#include "support/test_env.h"

namespace nl2sql {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using llm::testing::Fault;
using llm::testing::FakeOpenAiServer;
using llm::testing::FakeReply;
using llm::testing::FaultPlan;

const char* kProfileKey = "sk-CANARY-prof-4f8a1c9e2b7d";
const char* kOpenAiKey = "sk-CANARY-oai-93e1a7c05d2f";

std::string quote(const fs::path& p) { return "'" + p.string() + "'"; }

std::string read_all(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

class HardeningSecrets : public ::testing::Test {
 protected:
  void SetUp() override {
    if (const char* old = std::getenv("OPENAI_API_KEY")) saved_openai_ = old;
    setenv("NL2SQL_SECRETS_TEST_KEY", kProfileKey, 1);
    setenv("OPENAI_API_KEY", kOpenAiKey, 1);
    data_ = testing::build_mini_bird(dir_ / "mini");
  }
  void TearDown() override {
    unsetenv("NL2SQL_SECRETS_TEST_KEY");
    if (saved_openai_) setenv("OPENAI_API_KEY", saved_openai_->c_str(), 1);
    else unsetenv("OPENAI_API_KEY");
  }
  // Two profiles on the same server: generation with the profile's own key variable, keywords
  // and selection with the default OPENAI_API_KEY. Cache read-write, so answers (and requests) are stored.
  fs::path write_config(const std::string& base_url) {
    json cfg = json::parse(R"({
      "llm": {"models": {"gen": {"base_url": "", "model": "fake-coder", "api_key_env": "NL2SQL_SECRETS_TEST_KEY"},
                         "judge": {"base_url": "", "model": "fake-judge"}},
              "default_profile": "gen", "roles": {"keywords": "judge", "select": "judge"},
              "cache": {"mode": "read-write", "path": ""},
              "retry": {"max_attempts": 2, "base_delay_s": 0.001, "max_delay_s": 0.002}},
      "context": {"keywords": {"llm": true}},
      "generate": {"generators": [{"name": "baseline", "samples": 2}]},
      "fix": {"enabled": true, "max_rounds": 1},
      "select": {"method": "tournament"},
      "run": {"selectors": ["tournament"], "threads": 2}
    })");
    cfg["llm"]["models"]["gen"]["base_url"] = base_url;
    cfg["llm"]["models"]["judge"]["base_url"] = base_url;
    cfg["llm"]["cache"]["path"] = (dir_ / "cache" / "llm.sqlite").string();
    fs::path p = dir_ / "secrets.json";
    std::ofstream(p) << cfg.dump(2);
    return p;
  }
  std::string run_args(const fs::path& config, const fs::path& out, const fs::path& log) {
    return "--log-level debug --log-file " + quote(log) + " run --config " + quote(config) +
           " --benchmark bird --data " + quote(data_) + " --out " + quote(out) + " --index-dir " +
           quote(dir_ / "index") + " --progress plain";
  }
  // Every occurrence of either key (or its distinctive middle) in `text`, described.
  static std::vector<std::string> leaks(const std::string& text, const std::string& where) {
    std::vector<std::string> out;
    for (std::string needle : {std::string(kProfileKey), std::string(kOpenAiKey),
                               std::string("prof-4f8a1c9e2b7d"), std::string("oai-93e1a7c05d2f")})
      if (text.find(needle) != std::string::npos) out.push_back(where + " contains " + needle);
    return out;
  }
  testing::TempDir dir_;
  fs::path data_;
  std::optional<std::string> saved_openai_;
};

TEST_F(HardeningSecrets, KeysNeverReachFilesLogsOrOutputEvenOnErrorPaths) {
  // A careless server: some failures quote the Authorization header back.
  FakeOpenAiServer server([](const httplib::Request& req, int64_t seq) {
    if (seq % 7 == 3)
      return FakeReply(500, json{{"error", {{"message", "upstream rejected request with " +
                                                            req.get_header_value("Authorization")}}}}.dump());
    uint64_t h = core::xxh64(req.body);
    std::string sql = h % 2 ? "SELECT count(*) FROM school" : "SELECT nope FROM district";
    return FakeReply(200, llm::testing::completion_body("Answer: A\n```json\n[\"school\"]\n```\n```sql\n" + sql + "\n```"));
  });
  FaultPlan plan;
  plan.at_call = {{5, Fault::kNotJson}, {11, Fault::kTruncatedJson}};
  server.set_faults(plan);
  fs::path config = write_config(server.base_url());

  auto first = testing::run_nl2sql(run_args(config, dir_ / "run", dir_ / "logs" / "run.log") + " --questions 0-9");
  EXPECT_EQ(first.exit_code, 0) << first.out << first.err;

  // Second run: the key is refused from the 25th request of this run on.
  plan.fail_401_from = server.requests() + 25;
  server.set_faults(plan);
  auto second = testing::run_nl2sql(run_args(config, dir_ / "run2", dir_ / "logs" / "run2.log"));
  EXPECT_EQ(second.exit_code, 4) << second.out << second.err;
  EXPECT_NE(second.out.find("stopped early"), std::string::npos) << second.out;
  EXPECT_TRUE(second.out.find("\"gen\"") != std::string::npos ||
              second.out.find("\"judge\"") != std::string::npos)
      << "the message names the refused profile: " << second.out;
  EXPECT_NE(second.out.find("401"), std::string::npos) << second.out;

  // The keys were really in use (else the search below proves nothing)...
  bool saw_profile_key = false, saw_openai_key = false;
  for (const auto& a : server.authorizations()) {
    saw_profile_key = saw_profile_key || a == std::string("Bearer ") + kProfileKey;
    saw_openai_key = saw_openai_key || a == std::string("Bearer ") + kOpenAiKey;
  }
  EXPECT_TRUE(saw_profile_key);
  EXPECT_TRUE(saw_openai_key);
  // ...the error paths ran and debug logging was on.
  std::string log = read_all(dir_ / "logs" / "run.log");
  EXPECT_NE(log.find("llm POST"), std::string::npos) << "debug lines expected in the log file";
  EXPECT_NE(log.find("upstream rejected request with Bearer"), std::string::npos)
      << "the server's echo should be logged, redacted";
  EXPECT_NE(first.err.find("llm POST"), std::string::npos) << "debug lines expected on stderr";

  std::vector<std::string> found;
  size_t files = 0;
  for (const auto& entry : fs::recursive_directory_iterator(dir_.path())) {
    if (!entry.is_regular_file()) continue;
    if (entry.path().filename() == "secrets.json") continue;  // the test's own input
    ++files;
    auto l = leaks(read_all(entry.path()), fs::relative(entry.path(), dir_.path()).string());
    found.insert(found.end(), l.begin(), l.end());
  }
  for (const auto& [text, where] : {std::pair{first.out, "stdout of run 1"}, {first.err, "stderr of run 1"},
                                    {second.out, "stdout of run 2"}, {second.err, "stderr of run 2"}}) {
    auto l = leaks(text, where);
    found.insert(found.end(), l.begin(), l.end());
  }
  EXPECT_GT(files, 10u);
  EXPECT_TRUE(fs::exists(dir_ / "cache" / "llm.sqlite"));
  EXPECT_TRUE(found.empty()) << [&] {
    std::string s;
    for (const auto& f : found) s += f + "\n";
    return s;
  }();
}

}  // namespace
}  // namespace nl2sql
