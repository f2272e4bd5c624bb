// libFuzzer target for the SQL parser and printer. Not part of the CMake build: built by
// tests/fuzz/run_sql_fuzz.sh with clang++ -fsanitize=fuzzer,address,undefined.
// Properties checked on every input: parsing never crashes; for a query, the printed SQL
// re-parses and prints to the same text (fixpoint), and normalization and feature analysis run.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "nl2sql/sql/features.h"
#include "nl2sql/sql/normalize.h"
#include "nl2sql/sql/parser.h"
#include "nl2sql/sql/printer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string sql(reinterpret_cast<const char*>(data), size);
  auto r = nl2sql::sql::parse(sql);
  if (!r.is_ok() || !r->is_query()) return 0;
  std::string printed = nl2sql::sql::to_sql(*r);
  auto again = nl2sql::sql::parse(printed);
  if (!again.is_ok()) {
    std::fprintf(stderr, "printed SQL does not parse:\n%s\n%s\n", printed.c_str(),
                 again.status().message().c_str());
    std::abort();
  }
  if (nl2sql::sql::to_sql(*again) != printed) {
    std::fprintf(stderr, "not a fixpoint:\n%s\n%s\n", printed.c_str(),
                 nl2sql::sql::to_sql(*again).c_str());
    std::abort();
  }
  auto normalized = nl2sql::sql::normalized_sql(*r->select);
  if (!nl2sql::sql::parse(normalized).is_ok()) {
    std::fprintf(stderr, "normalized SQL does not parse:\n%s\n", normalized.c_str());
    std::abort();
  }
  (void)nl2sql::sql::spider_hardness(*r->select);
  (void)nl2sql::sql::compute_features(*r->select);
  return 0;
}
