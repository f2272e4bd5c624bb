#include "pipeline/progress.h"

#include <gtest/gtest.h>

namespace nl2sql::pipeline {
namespace {

TEST(Progress, LineCountsDoneRunningExAndErrors) {
  ProgressOptions o;
  o.mode = ProgressMode::kOff;
  o.total = 4;
  Progress p(o, nullptr);
  p.add_resumed(true);
  p.question_started();
  p.question_started();
  p.question_finished(false, true);
  std::string line = p.line();
  EXPECT_NE(line.find("[2/4]"), std::string::npos) << line;
  EXPECT_NE(line.find("running 1"), std::string::npos) << line;
  EXPECT_NE(line.find("EX 50.0%"), std::string::npos) << line;
  EXPECT_NE(line.find("errors 1"), std::string::npos) << line;
  p.question_finished(true, false);
  p.question_started();
  p.question_finished(true, false);
  line = p.line();
  EXPECT_NE(line.find("[4/4]"), std::string::npos) << line;
  EXPECT_NE(line.find("ETA 0s"), std::string::npos) << line;
  EXPECT_NE(line.find("EX 75.0%"), std::string::npos) << line;
}

}  // namespace
}  // namespace nl2sql::pipeline
