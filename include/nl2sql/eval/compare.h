// Spider test-suite text preprocessing, applied to SQL text before execution. The result-set
// equalities the evaluators apply live in db/result_compare.h. Pure functions, thread-safe.
#pragma once

#include <string>
#include <string_view>

namespace nl2sql::eval {

// Spider test-suite text preprocessing.
std::string spider_postprocess(std::string_view sql);   // "> =" → ">=" etc.
std::string remove_distinct(std::string_view sql);      // drops every DISTINCT keyword token
std::string replace_cur_year(std::string_view sql);     // YEAR(CURDATE()) → 2020
bool spider_order_matters(std::string_view gold_sql);   // "order by" in lower-cased text

}  // namespace nl2sql::eval
