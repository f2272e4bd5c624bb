// CandidatePoolFile (pool_file.h): the four layouts and their errors.
#include "nl2sql/generate/pool_file.h"

#include <nlohmann/json.hpp>

#include <set>

#include "nl2sql/core/files.h"
#include "nl2sql/core/hash.h"
#include "nl2sql/core/text.h"

namespace nl2sql::generate {
namespace {

// Ordered: a pool keeps its questions in file order.
using ordered_json = nlohmann::ordered_json;

const std::string kBirdSeparator = "\t----- bird -----\t";

std::string type_name(const ordered_json& v) { return v.type_name(); }

// Lines of `text` without their line ends (a last line without '\n' included).
std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start < text.size()) {
    size_t nl = text.find('\n', start);
    std::string line = text.substr(start, nl == std::string::npos ? std::string::npos : nl - start);
    if (!line.empty() && line.back() == '\r') line.pop_back();
    out.push_back(std::move(line));
    if (nl == std::string::npos) break;
    start = nl + 1;
  }
  return out;
}

}  // namespace

Result<CandidatePoolFile> CandidatePoolFile::read(const std::filesystem::path& path) {
  auto text = core::read_file(path);
  if (!text) return text.status();
  CandidatePoolFile f;
  f.path_ = path;
  f.hash_ = core::xxh128_hex(*text);
  const std::string where = path.string();
  const std::string body = core::trim(*text);
  if (body.empty()) return invalid_input(where + ": the candidate pool file is empty");
  if (body.front() != '{') {
    if (body.front() == '[')
      return invalid_input(where + ": a JSON list is not a candidate pool layout (expected {question_id: [sql, …]}, "
                                   "JSON lines {\"question_id\", \"sql\"}, a BIRD predict_dev.json or Spider "
                                   "prediction text)");
    // Spider prediction text: line i is question i's SQL; text after a tab is not SQL.
    f.layout_ = "spider";
    f.by_position_ = true;
    const auto lines = lines_of(*text);
    for (size_t i = 0; i < lines.size(); ++i) {
      std::string sql = lines[i].substr(0, lines[i].find('\t'));
      if (core::trim(sql).empty()) continue;
      f.add(std::to_string(i), {core::trim(sql), "", "", static_cast<int64_t>(i + 1)});
    }
    return f;
  }
  const ordered_json whole = ordered_json::parse(*text, nullptr, /*allow_exceptions=*/false);
  const bool one_object = !whole.is_discarded() && whole.is_object();
  if (!one_object || (whole.contains("question_id") && whole.contains("sql"))) {
    f.layout_ = "jsonl";
    NL2SQL_RETURN_IF_ERROR(f.read_jsonl(*text));
    return f;
  }
  // One JSON object: lists make a pool, strings a BIRD predictions file.
  bool lists = false, strings = false;
  for (const auto& [key, v] : whole.items()) {
    lists = lists || v.is_array();
    strings = strings || v.is_string();
    if (!v.is_array() && !v.is_string())
      return invalid_input(where + ": key \"" + key + "\": expected a list of SQL strings (a candidate pool) or one SQL "
                                   "string (BIRD predictions), got " + type_name(v));
  }
  if (lists && strings)
    return invalid_input(where + ": some keys hold lists and others strings: a file is either a candidate pool "
                                 "{question_id: [sql, …]} or BIRD predictions {\"0\": \"sql\", …}");
  if (strings) {
    f.layout_ = "bird";
    f.by_position_ = true;
    int64_t entry = 0;
    for (const auto& [key, v] : whole.items()) {
      ++entry;
      size_t used = 0;
      unsigned long pos = 0;
      try {
        pos = std::stoul(key, &used);
      } catch (...) {
        used = 0;
      }
      if (used == 0 || used != key.size())
        return invalid_input(where + ": key \"" + key + "\" is not a question position (BIRD predictions are keyed \"0\", \"1\", …)");
      std::string sql = v.get<std::string>();
      sql = sql.substr(0, sql.find(kBirdSeparator));
      f.add(std::to_string(pos), {core::trim(sql), "", "", entry});
    }
    return f;
  }
  f.layout_ = "pool";
  for (const auto& [key, v] : whole.items()) {
    if (v.empty()) return invalid_input(where + ": key \"" + key + "\": an empty list (leave the question out instead)");
    for (size_t i = 0; i < v.size(); ++i)
      if (!v[i].is_string())
        return invalid_input(where + ": key \"" + key + "\", item " + std::to_string(i + 1) + ": expected a SQL string, got " +
                             type_name(v[i]));
    for (size_t i = 0; i < v.size(); ++i) f.add(key, {core::trim(v[i].get<std::string>()), "", "", static_cast<int64_t>(i + 1)});
  }
  return f;
}

// JSON lines, one candidate each; errors name the line.
Status CandidatePoolFile::read_jsonl(const std::string& text) {
  const std::string where = path_.string();
  const auto lines = lines_of(text);
  for (size_t i = 0; i < lines.size(); ++i) {
    if (core::trim(lines[i]).empty()) continue;
    const std::string label = where + ":" + std::to_string(i + 1);
    auto line = core::parse_json(lines[i], label);  // names line and column of a syntax error
    if (!line) return line.status();
    if (!line->is_object()) return invalid_input(label + ": expected an object {\"question_id\", \"sql\"}");
    if (!line->contains("question_id")) return invalid_input(label + ": key \"question_id\" is missing");
    const auto& id = (*line)["question_id"];
    if (!id.is_string() && !id.is_number_integer())
      return invalid_input(label + ": key \"question_id\" must be a string or an integer (got " + id.type_name() + ")");
    if (!line->contains("sql")) return invalid_input(label + ": key \"sql\" is missing");
    if (!(*line)["sql"].is_string())
      return invalid_input(label + ": key \"sql\" must be a string (got " + std::string((*line)["sql"].type_name()) + ")");
    PooledSql p;
    p.sql = core::trim((*line)["sql"].get<std::string>());
    p.position = static_cast<int64_t>(i + 1);
    for (const char* k : {"generator", "reasoning"}) {
      if (!line->contains(k) || (*line)[k].is_null()) continue;
      if (!(*line)[k].is_string())
        return invalid_input(label + ": key \"" + k + "\" must be a string (got " + (*line)[k].type_name() + ")");
      (std::string(k) == "generator" ? p.generator : p.reasoning) = (*line)[k].get<std::string>();
    }
    add(id.is_string() ? id.get<std::string>() : id.dump(), std::move(p));
  }
  return Status::ok();
}

void CandidatePoolFile::add(const std::string& key, PooledSql p) {
  auto [it, fresh] = by_id_.try_emplace(key);
  if (fresh) keys_.push_back(key);
  it->second.push_back(std::move(p));
}

const std::vector<PooledSql>& CandidatePoolFile::candidates_for(const data::Task& question) const {
  static const std::vector<PooledSql> kNone;
  auto it = by_id_.find(by_position_ ? std::to_string(question.index) : question.question_id);
  return it == by_id_.end() ? kNone : it->second;
}

PoolCoverage CandidatePoolFile::coverage(const std::vector<data::Task>& questions) const {
  PoolCoverage c;
  std::set<std::string> known;
  for (const auto& q : questions) {
    const std::string key = by_position_ ? std::to_string(q.index) : q.question_id;
    known.insert(key);
    const auto& list = candidates_for(q);
    if (list.empty()) {
      c.missing_ids.push_back(q.question_id);
      continue;
    }
    ++c.questions;
    c.candidates += list.size();
  }
  for (const auto& key : keys_)
    if (!known.count(key)) c.unknown_ids.push_back(by_position_ ? "position " + key : key);
  return c;
}

}  // namespace nl2sql::generate
