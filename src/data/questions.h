// Question file readers (private to the data layer): BIRD/Spider JSON arrays, plain gold files
// ("SQL<TAB>db_id" per line) and JSONL; each error names the file and the line or question.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "nl2sql/core/status.h"
#include "nl2sql/data/dataset.h"

namespace nl2sql::data::detail {

Result<std::vector<Question>> read_json_questions(const std::filesystem::path& path, Benchmark b,
                                                 std::vector<std::string>& warnings);
Result<std::vector<Question>> read_gold_file(const std::filesystem::path& path);
Result<std::vector<Question>> read_jsonl_questions(const std::filesystem::path& path);
// Why `db_id` cannot name a folder under the database root (nullopt when it can): it must be one
// path component, so "../x", "/etc", "a/b", "a\\b", "." and a NUL never reach files outside it.
std::optional<std::string> invalid_db_id(const std::string& db_id);

}  // namespace nl2sql::data::detail
