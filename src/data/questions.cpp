// Question file readers (see questions.h).
#include "questions.h"

#include <set>

#include <nlohmann/json.hpp>

#include "nl2sql/core/files.h"
#include "nl2sql/core/text.h"

namespace nl2sql::data::detail {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

using core::trim;

// A field of a question object as a string; numbers are printed; missing/null → "".
Result<std::string> string_field(const json& obj, const char* key, bool required,
                                 const std::string& where) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) {
    if (required) return invalid_input(where + ": missing field \"" + key + "\"");
    return std::string();
  }
  if (it->is_string()) return it->get<std::string>();
  if (it->is_number_integer()) return std::to_string(it->get<int64_t>());
  return invalid_input(where + ": field \"" + key + "\" must be a string, not " +
                       std::string(it->type_name()));
}

// Splits text into lines, dropping a trailing CR.
std::vector<std::string_view> split_lines(std::string_view text) {
  std::vector<std::string_view> lines;
  size_t start = 0;
  while (start <= text.size()) {
    size_t nl = text.find('\n', start);
    size_t end = nl == std::string_view::npos ? text.size() : nl;
    std::string_view line = text.substr(start, end - start);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    lines.push_back(line);
    if (nl == std::string_view::npos) break;
    start = nl + 1;
  }
  if (!lines.empty() && lines.back().empty()) lines.pop_back();
  return lines;
}

}  // namespace

Result<std::vector<Question>> read_json_questions(const fs::path& path, Benchmark b,
                                                 std::vector<std::string>& warnings) {
  auto doc = core::read_json_file(path);
  if (!doc) return doc.status();
  if (!doc->is_array()) return invalid_input(path.string() + ": expected a JSON array of questions");
  std::vector<Question> out;
  out.reserve(doc->size());
  std::map<std::string, size_t> seen;  // question id -> position, for the duplicate check
  for (size_t i = 0; i < doc->size(); ++i) {
    const json& o = (*doc)[i];
    std::string where = path.string() + ": question #" + std::to_string(i);
    if (!o.is_object()) return invalid_input(where + ": expected an object");
    Question q;
    q.index = i;
    auto db = string_field(o, "db_id", true, where);
    if (!db) return db.status();
    q.db_id = *db;
    auto text = string_field(o, "question", false, where);
    if (!text) return text.status();
    q.question = *text;
    if (b == Benchmark::kBird) {
      auto id = string_field(o, "question_id", false, where);
      if (!id) return id.status();
      q.question_id = id->empty() ? std::to_string(i) : *id;
      // A run and its store are keyed by the id, so two questions with one id would silently
      // become one. The official BIRD mini-dev file repeats two ids (137 and 138, each twice, as
      // the same question) and its evaluator pairs predictions by position: keep both, the later
      // one under "<id>@<position>", and say so.
      if (auto [it, fresh] = seen.emplace(q.question_id, i); !fresh) {
        const std::string original = q.question_id;
        q.question_id = original + "@" + std::to_string(i);
        warnings.push_back(where + ": repeats question_id \"" + original + "\" of question #" +
                           std::to_string(it->second) + "; kept as \"" + q.question_id +
                           "\" (BIRD pairs predictions by position)");
        seen.emplace(q.question_id, i);
      }
      auto ev = string_field(o, "evidence", false, where);
      if (!ev) return ev.status();
      q.evidence = *ev;
      auto sql = string_field(o, o.contains("sql") && !o.contains("SQL") ? "sql" : "SQL", true, where);
      if (!sql) return sql.status();
      q.gold_sql = *sql;
      auto diff = string_field(o, "difficulty", false, where);
      if (!diff) return diff.status();
      q.difficulty = *diff;
    } else {
      q.question_id = std::to_string(i);
      auto sql = string_field(o, "query", true, where);
      if (!sql) return sql.status();
      q.gold_sql = *sql;
      if (auto it = o.find("sql"); it != o.end() && it->is_object()) q.spider_sql = *it;
    }
    out.push_back(std::move(q));
  }
  return out;
}

// Plain gold files: "SQL<TAB>db_id" per line.
Result<std::vector<Question>> read_gold_file(const fs::path& path) {
  auto text = core::read_file(path);
  if (!text) return text.status();
  std::vector<Question> out;
  auto lines = split_lines(*text);
  for (size_t i = 0; i < lines.size(); ++i) {
    auto tab = lines[i].rfind('\t');
    if (tab == std::string_view::npos)
      return invalid_input(path.string() + ":" + std::to_string(i + 1) +
                           ": expected \"SQL<TAB>db_id\"");
    Question q;
    q.index = i;
    q.question_id = std::to_string(i);
    q.gold_sql = trim(lines[i].substr(0, tab));
    q.db_id = trim(lines[i].substr(tab + 1));
    out.push_back(std::move(q));
  }
  return out;
}

Result<std::vector<Question>> read_jsonl_questions(const fs::path& path) {
  auto text = core::read_file(path);
  if (!text) return text.status();
  std::vector<Question> out;
  auto lines = split_lines(*text);
  std::set<std::string> seen;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (trim(lines[i]).empty()) continue;
    std::string label = path.string() + ":" + std::to_string(i + 1);
    auto o = core::parse_json(lines[i], label);
    if (!o) return o.status();
    if (!o->is_object()) return invalid_input(label + ": expected a JSON object");
    Question q;
    q.index = out.size();
    auto id = string_field(*o, "question_id", true, label);
    if (!id) return id.status();
    q.question_id = *id;
    if (!seen.insert(q.question_id).second)
      return invalid_input(label + ": duplicate question_id \"" + q.question_id + "\"");
    auto db = string_field(*o, "db_id", true, label);
    if (!db) return db.status();
    q.db_id = *db;
    auto sql = string_field(*o, "sql", true, label);
    if (!sql) return sql.status();
    q.gold_sql = *sql;
    for (auto [field, dst] : {std::pair{"question", &q.question}, {"evidence", &q.evidence},
                              {"difficulty", &q.difficulty}}) {
      auto v = string_field(*o, field, false, label);
      if (!v) return v.status();
      *dst = *v;
    }
    out.push_back(std::move(q));
  }
  return out;
}

std::optional<std::string> invalid_db_id(const std::string& db_id) {
  if (db_id.empty()) return "is empty";
  if (db_id == "." || db_id == "..") return "is not a database name";
  if (db_id.find('/') != std::string::npos || db_id.find('\\') != std::string::npos)
    return "holds a path separator (a db_id is one folder name under the database root)";
  if (db_id.find('\0') != std::string::npos) return "holds a NUL byte";
  return std::nullopt;
}

}  // namespace nl2sql::data::detail
