// Outside programs on pipes: a line round trip, the environment a child sees (no API keys), and
// each way a program can fail — exit, silence past the timeout, a missing program.
#include <gtest/gtest.h>

#include <cstdlib>

#include "nl2sql/core/child_process.h"

namespace nl2sql::core {
namespace {

using namespace std::chrono_literals;

std::unique_ptr<ChildProcess> start(std::vector<std::string> argv, ChildOptions o = {}) {
  o.argv = std::move(argv);
  auto p = ChildProcess::start(o);
  EXPECT_TRUE(p.is_ok()) << p.status().message();
  return p.is_ok() ? std::move(*p) : nullptr;
}

TEST(ChildProcess, EchoesLinesBothWays) {
  auto p = start({"sh", "-c", "while read -r l; do echo \"got $l\"; done"});
  ASSERT_TRUE(p);
  ASSERT_TRUE(p->write_line("one").is_ok());
  ASSERT_TRUE(p->write_line("two").is_ok());
  auto a = p->read_line(10s);
  auto b = p->read_line(10s);
  ASSERT_TRUE(a.is_ok()) << a.status().message();
  ASSERT_TRUE(b.is_ok()) << b.status().message();
  EXPECT_EQ(*a, "got one");
  EXPECT_EQ(*b, "got two");
}

TEST(ChildProcess, TheEnvironmentHoldsNoApiKey) {
  ::setenv("NL2SQL_TEST_SECRET_API_KEY", "sk-secret", 1);
  ::setenv("NL2SQL_TEST_NAMED_KEY", "named-secret", 1);
  ::setenv("NL2SQL_TEST_PLAIN", "plain", 1);
  ChildOptions o;
  o.unset_env = {"NL2SQL_TEST_NAMED_KEY"};
  o.set_env = {{"OPENAI_API_KEY", "local-token"}};
  auto p = start({"sh", "-c", "env; echo END"}, o);
  ASSERT_TRUE(p);
  std::string all;
  for (;;) {
    auto l = p->read_line(10s);
    ASSERT_TRUE(l.is_ok()) << l.status().message();
    if (*l == "END") break;
    all += *l + "\n";
  }
  EXPECT_EQ(all.find("sk-secret"), std::string::npos);
  EXPECT_EQ(all.find("named-secret"), std::string::npos);
  EXPECT_NE(all.find("NL2SQL_TEST_PLAIN=plain"), std::string::npos);
  EXPECT_NE(all.find("OPENAI_API_KEY=local-token"), std::string::npos);
  ::unsetenv("NL2SQL_TEST_SECRET_API_KEY");
  ::unsetenv("NL2SQL_TEST_NAMED_KEY");
  ::unsetenv("NL2SQL_TEST_PLAIN");
}

TEST(ChildProcess, AnExitIsReportedWithItsStatusAndStderr) {
  auto p = start({"sh", "-c", "read -r l; echo 'Traceback: boom' >&2; exit 3"});
  ASSERT_TRUE(p);
  ASSERT_TRUE(p->write_line("x").is_ok());
  auto l = p->read_line(10s);
  ASSERT_FALSE(l.is_ok());
  EXPECT_EQ(l.status().code(), ErrorCode::kUnavailable);
  EXPECT_NE(l.status().message().find("exited with status 3"), std::string::npos) << l.status().message();
  EXPECT_NE(p->stderr_tail().find("Traceback: boom"), std::string::npos) << p->stderr_tail();
}

TEST(ChildProcess, SilencePastTheTimeoutIsATimeoutAndKillTakesTheGroup) {
  // The program's own child would keep its pipes open if only the program were killed.
  auto p = start({"sh", "-c", "sleep 300 & sleep 300"});
  ASSERT_TRUE(p);
  auto l = p->read_line(200ms);
  ASSERT_FALSE(l.is_ok());
  EXPECT_EQ(l.status().code(), ErrorCode::kTimeout);
  p->kill();  // returns: the whole group is gone, so stderr ended
  EXPECT_EQ(p->pid(), -1);
}

TEST(ChildProcess, AStopRequestEndsTheWait) {
  auto p = start({"sleep", "300"});
  ASSERT_TRUE(p);
  auto l = p->read_line(600s, [] { return true; });
  ASSERT_FALSE(l.is_ok());
  EXPECT_EQ(l.status().code(), ErrorCode::kCancelled);
}

TEST(ChildProcess, AMissingProgramIsAnError) {
  ChildOptions o;
  o.argv = {"nl2sql-no-such-program-anywhere"};
  auto p = ChildProcess::start(o);
  ASSERT_FALSE(p.is_ok());
  EXPECT_NE(p.status().message().find("not in PATH"), std::string::npos) << p.status().message();
  o.argv = {"/nonexistent/dir/prog"};
  p = ChildProcess::start(o);
  ASSERT_FALSE(p.is_ok());
  EXPECT_NE(p.status().message().find("cannot run"), std::string::npos) << p.status().message();
}

}  // namespace
}  // namespace nl2sql::core
