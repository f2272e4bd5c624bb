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

#include <fmt/format.h>

#include "support/fake_openai_server.h"
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

// Every form a secret can take on the wire, echoed back by a careless server, must stay out of
// every file a run writes: the API key (plain, base64, percent-encoded, cut at 300 characters),
// a header value read from the environment, and Basic credentials from OPENAI_BASE_URL's
// userinfo (the password and base64("user:password"), which curl sends as Basic auth).
TEST_F(HardeningSecrets, NoSecretFormReachesAnyFileTheRunWrites) {
  const std::string key = kProfileKey;
  const std::string header_value = "hdr-CANARY-5c0e9a7b31f4";
  const std::string user = "runner", password = "pw-CANARY-8d2f6b";
  setenv("NL2SQL_SECRETS_TEST_HEADER", header_value.c_str(), 1);
  auto b64 = [](const std::string& in) {
    static const char* a = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    std::string out;
    size_t i = 0;
    for (; i + 2 < in.size(); i += 3) {
      uint32_t n = (uint8_t(in[i]) << 16) | (uint8_t(in[i + 1]) << 8) | uint8_t(in[i + 2]);
      for (int k = 3; k >= 0; --k) out.push_back(a[(n >> (6 * k)) & 63]);
    }
    if (i < in.size()) {
      uint32_t n = uint8_t(in[i]) << 16;
      if (i + 1 < in.size()) n |= uint8_t(in[i + 1]) << 8;
      out += std::string{a[(n >> 18) & 63], a[(n >> 12) & 63]} + (i + 1 < in.size() ? a[(n >> 6) & 63] : '=') + "=";
    }
    return out;
  };
  auto pct = [](const std::string& in) {
    std::string out;
    for (unsigned char c : in) {
      if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') out.push_back(static_cast<char>(c));
      else out += fmt::format("%{:02X}", c);
    }
    return out;
  };
  const std::string basic = b64(user + ":" + password);
  FakeOpenAiServer server([&](const httplib::Request& req, int64_t seq) {
    const std::string auth = req.get_header_value("Authorization");
    const std::string echo = "Authorization: " + auth + " X-Api-Key: " + req.get_header_value("X-Api-Key");
    // The bearer token alone, when there is one, to echo in other encodings.
    const std::string token = auth.rfind("Bearer ", 0) == 0 ? auth.substr(7) : auth;
    switch (seq % 9) {
      case 2: return FakeReply(500, json{{"error", {{"message", "echo " + echo}}}}.dump());
      case 4: return FakeReply(500, json{{"error", {{"message", "b64 " + b64(token) + " pct " + pct(token)}}}}.dump());
      case 6: return FakeReply(400, std::string(280, '-') + echo);  // the key across the 300-character cut
      default: break;
    }
    uint64_t h = core::xxh64(req.body);
    std::string sql = h % 2 ? "SELECT count(*) FROM school" : "SELECT nope FROM district";
    return FakeReply(200, llm::testing::completion_body("Answer: A\n```json\n[\"school\"]\n```\n```sql\n" + sql + "\n```"));
  });
  fs::path config = write_config(server.base_url());
  {
    // gen: key from its own variable plus a secret header; judge: no key, the endpoint from
    // OPENAI_BASE_URL with userinfo, so curl sends Basic auth.
    json cfg = json::parse(read_all(config));
    cfg["llm"]["models"]["gen"]["headers"] = {{"X-Api-Key", "${NL2SQL_SECRETS_TEST_HEADER}"}};
    cfg["llm"]["models"]["judge"].erase("base_url");
    cfg["llm"]["models"]["judge"]["api_key_env"] = "";
    std::ofstream(config) << cfg.dump(2);
  }
  std::string url = server.base_url();
  url.insert(url.find("://") + 3, user + ":" + password + "@");
  const char* old_base = std::getenv("OPENAI_BASE_URL");
  std::optional<std::string> saved_base = old_base ? std::optional<std::string>(old_base) : std::nullopt;
  setenv("OPENAI_BASE_URL", url.c_str(), 1);
  auto run = testing::run_nl2sql(run_args(config, dir_ / "run", dir_ / "logs" / "run.log") + " --questions 0-9");
  if (saved_base) setenv("OPENAI_BASE_URL", saved_base->c_str(), 1);
  else unsetenv("OPENAI_BASE_URL");
  unsetenv("NL2SQL_SECRETS_TEST_HEADER");

  // The forms were really on the wire.
  bool saw_bearer = false, saw_basic = false;
  for (const auto& a : server.authorizations()) {
    saw_bearer = saw_bearer || a == "Bearer " + key;
    saw_basic = saw_basic || a == "Basic " + basic;
  }
  EXPECT_TRUE(saw_bearer);
  EXPECT_TRUE(saw_basic);
  const std::vector<std::string> needles = {key,        key.substr(0, 14), key.substr(key.size() - 14),
                                            b64(key),   pct(key),          header_value,
                                            password,   basic,             user + ":" + password};
  std::vector<std::string> found;
  size_t files = 0;
  auto search = [&](const std::string& text, const std::string& where) {
    for (const auto& n : needles)
      if (text.find(n) != std::string::npos) found.push_back(where + " contains " + n);
  };
  for (const auto& entry : fs::recursive_directory_iterator(dir_.path())) {
    if (!entry.is_regular_file() || entry.path().filename() == "secrets.json") continue;
    ++files;
    search(read_all(entry.path()), fs::relative(entry.path(), dir_.path()).string());
  }
  search(run.out, "stdout");
  search(run.err, "stderr");
  EXPECT_GT(files, 10u);
  const std::string log = read_all(dir_ / "logs" / "run.log");
  // Which profile's request meets an echoing answer depends on the threads' order: either
  // header form, redacted, shows the echo reached the log.
  EXPECT_TRUE(log.find("Authorization: Bearer ***") != std::string::npos ||
              log.find("Authorization: Basic ***") != std::string::npos)
      << run.out << log.substr(0, 3000);
  EXPECT_TRUE(found.empty()) << [&] {
    std::string s;
    for (const auto& f : found) s += f + "\n";
    return s;
  }();
}

}  // namespace
}  // namespace nl2sql
