// What this process has used so far, for the closing lines of long commands (index, testsuite).
#pragma once

#include <sys/resource.h>

namespace nl2sql::cli {

// Peak resident set size of this process, in MB (Linux reports ru_maxrss in kilobytes).
inline double peak_rss_mb() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_maxrss) / 1024.0;
}

}  // namespace nl2sql::cli
