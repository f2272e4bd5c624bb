// ReCAP's external-knowledge and syntax retrievers (see recap_retrievers.h).
#include "recap_retrievers.h"

#include <cctype>
#include <set>

#include "nl2sql/core/files.h"
#include "nl2sql/core/text.h"

namespace nl2sql::generate {
namespace {

bool ident_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

// `name` as a whole identifier of `lowered` followed (after blanks) by "(".
bool mentions_call(const std::string& lowered, const std::string& name) {
  for (size_t pos = lowered.find(name); pos != std::string::npos; pos = lowered.find(name, pos + 1)) {
    if (pos > 0 && ident_char(lowered[pos - 1])) continue;
    size_t end = pos + name.size();
    while (end < lowered.size() && (lowered[end] == ' ' || lowered[end] == '\t')) ++end;
    if (end < lowered.size() && lowered[end] == '(') return true;
  }
  return false;
}

// A display name of several words named as a phrase ("opening date").
bool mentions_phrase(const std::string& lowered, const std::string& phrase) {
  const std::string p = core::squash_spaces(core::lower(phrase));
  if (p.find(' ') == std::string::npos) return false;  // one word: the identifier check decides
  for (size_t pos = lowered.find(p); pos != std::string::npos; pos = lowered.find(p, pos + 1)) {
    const size_t end = pos + p.size();
    if ((pos == 0 || !ident_char(lowered[pos - 1])) && (end == lowered.size() || !ident_char(lowered[end])))
      return true;
  }
  return false;
}

std::string one_line(const std::string& s) {
  std::string out;
  for (char c : s) out += (c == '\n' || c == '\r') ? ' ' : c;
  return core::squash_spaces(core::trim(out));
}

}  // namespace

std::string column_knowledge(const data::Schema& schema, const std::string& text, const context::Retrieval* retrieval,
                             size_t max_columns) {
  const std::string lowered = core::squash_spaces(core::lower(text));
  std::map<std::string, int> owners;  // column name (lower case) → tables holding it
  for (const auto& t : schema.tables)
    for (const auto& c : t.columns) ++owners[core::lower(c.name)];
  std::set<std::string> matched;  // "table.column" (lower case) from value retrieval
  if (retrieval)
    for (const auto& m : retrieval->columns) matched.insert(core::lower(m.table + "." + m.column));
  std::string out;
  size_t n = 0;
  for (const auto& t : schema.tables) {
    const bool table_named = core::mentions_identifier(text, t.name) || core::mentions_identifier(text, t.name + "s") ||
                             (!t.display_name.empty() && mentions_phrase(lowered, t.display_name));
    for (const auto& c : t.columns) {
      if (n >= max_columns) return out;
      if (c.description.empty() && c.value_description.empty()) continue;
      const bool named = core::mentions_identifier(text, c.name) ||
                         (!c.display_name.empty() && mentions_phrase(lowered, c.display_name));
      // A name several tables hold ("name", "id") counts only with its table named.
      const bool relevant = (named && (table_named || owners[core::lower(c.name)] == 1)) ||
                            matched.count(core::lower(t.name + "." + c.name));
      if (!relevant) continue;
      out += "- " + t.name + "." + c.name;
      if (!c.data_format.empty()) out += " (" + one_line(c.data_format) + ")";
      out += ":";
      if (!c.description.empty()) out += " " + one_line(c.description) + ".";
      if (!c.value_description.empty()) out += " Values: " + one_line(c.value_description);
      out += "\n";
      ++n;
    }
  }
  return out;
}

Result<SyntaxReference> SyntaxReference::parse(const std::string& text, const std::string& where) {
  SyntaxReference ref;
  size_t lineno = 0, start = 0;
  while (start <= text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(start, end - start);
    if (!line.empty() && line.back() == '\r') line.pop_back();
    ++lineno;
    start = end + 1;
    if (line.rfind("## ", 0) == 0) {
      const size_t bar = line.find('|');
      if (bar == std::string::npos)
        return invalid_input(where + ":" + std::to_string(lineno) + ": an entry heading needs \"## title | triggers\"");
      SyntaxEntry e;
      e.title = core::trim(line.substr(3, bar - 3));
      std::string list = line.substr(bar + 1);
      size_t p = 0;
      while (p <= list.size()) {
        size_t comma = list.find(',', p);
        if (comma == std::string::npos) comma = list.size();
        std::string trig = core::lower(core::trim(list.substr(p, comma - p)));
        if (!trig.empty()) e.triggers.push_back(trig);
        p = comma + 1;
      }
      if (e.title.empty() || e.triggers.empty())
        return invalid_input(where + ":" + std::to_string(lineno) + ": an entry needs a title and triggers");
      ref.entries_.push_back(std::move(e));
    } else if (!ref.entries_.empty()) {
      ref.entries_.back().body += line + "\n";
    } else if (!core::trim(line).empty() && line[0] != '#') {
      return invalid_input(where + ":" + std::to_string(lineno) + ": text before the first \"## \" entry");
    }
    if (end == text.size()) break;
  }
  for (auto& e : ref.entries_) e.body = core::trim(e.body);
  if (ref.entries_.empty()) return invalid_input(where + ": no \"## \" entry");
  return ref;
}

Result<SyntaxReference> SyntaxReference::load(const std::filesystem::path& file) {
  auto text = core::read_file(file);
  if (!text) return text.status().with_context("SQLite syntax reference");
  return parse(*text, file.string());
}

std::vector<const SyntaxEntry*> SyntaxReference::named_in(const std::string& text) const {
  const std::string lowered = core::lower(text);
  std::vector<const SyntaxEntry*> out;
  for (const auto& e : entries_)
    for (const auto& t : e.triggers) {
      const bool hit = t.back() == '(' ? mentions_call(lowered, t.substr(0, t.size() - 1))
                                       : core::mentions_identifier(text, t);
      if (hit) {
        out.push_back(&e);
        break;
      }
    }
  return out;
}

std::string SyntaxReference::render_for(const std::string& text) const {
  std::string out;
  for (const SyntaxEntry* e : named_in(text)) out += "### " + e->title + "\n" + e->body + "\n\n";
  return out;
}

}  // namespace nl2sql::generate
