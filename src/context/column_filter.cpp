#include "nl2sql/context/column_filter.h"

#include <algorithm>
#include <deque>
#include <map>
#include <optional>

#include "llm_calls.h"
#include "nl2sql/context/schema_render.h"
#include "nl2sql/llm/answer.h"
#include "nl2sql/llm/client.h"
#include "nl2sql/core/text.h"
#include "nl2sql/core/thread_pool.h"
#include "nl2sql/llm/model_call.h"

namespace nl2sql::context {
using nlohmann::json;

namespace {

using core::lower;

// Requests of one question's filter sent at once (a bound on threads, not on the model: the
// client's own limits decide how many are in flight).
constexpr size_t kMaxRequestsAtOnce = 64;

}  // namespace

Result<std::set<std::string>> parse_column_filter_answer(const std::string& answer,
                                                         const std::vector<std::string>& columns,
                                                         const std::string& where) {
  auto j = llm::read_json(answer, {llm::JsonShape::kObject, "relevant"});
  if (!j) j = llm::read_json(answer, {llm::JsonShape::kObject, "columns"});
  if (!j) j = llm::read_json(answer);
  if (!j) return invalid_input(where + ": column filter answer is not JSON: " + j.status().message());
  const json* rel = nullptr;
  if (j->is_object() && j->contains("relevant")) rel = &(*j)["relevant"];
  else if (j->is_object() && j->contains("columns")) rel = &(*j)["columns"];
  else if (j->is_array()) rel = &*j;
  if (!rel) return invalid_input(where + ": column filter answer has no \"relevant\" field");
  std::set<std::string> out;
  if (rel->is_boolean()) {
    if (columns.size() != 1)
      return invalid_input(where + ": a yes/no column filter answer for " + std::to_string(columns.size()) + " columns");
    if (rel->get<bool>()) out.insert(columns[0]);
    return out;
  }
  if (!rel->is_array()) return invalid_input(where + ": \"relevant\" is neither a list nor true/false");
  std::map<std::string, std::string> by_lower;
  for (const auto& c : columns) by_lower[lower(c)] = c;
  for (const auto& x : *rel) {
    if (!x.is_string()) continue;
    std::string name = lower(x.get<std::string>());
    // "table.column" answers are accepted too.
    if (!by_lower.count(name) && name.find('.') != std::string::npos) name = name.substr(name.rfind('.') + 1);
    if (auto it = by_lower.find(name); it != by_lower.end()) out.insert(it->second);
  }
  return out;
}

std::set<std::string> close_over_join_keys(const data::Schema& schema,
                                           const std::vector<data::ForeignKey>& foreign_keys,
                                           const std::set<std::string>& relevant,
                                           std::set<std::string>* added,
                                           std::vector<std::string>* dropped_tables) {
  std::set<std::string> out = relevant;
  // Tables by lower-case name, and which are kept.
  std::map<std::string, const data::Table*> tables;
  for (const auto& t : schema.tables) tables[lower(t.name)] = &t;
  std::set<std::string> kept;
  for (const auto& r : relevant) kept.insert(lower(r.substr(0, r.find('.'))));
  if (kept.empty()) return out;
  auto add = [&](const std::string& table, const std::string& column) {
    auto it = tables.find(lower(table));
    std::string key = (it != tables.end() ? it->second->name : table) + "." + column;
    // Use the schema's spelling of the column.
    if (it != tables.end())
      for (const auto& c : it->second->columns)
        if (lower(c.name) == lower(column)) key = it->second->name + "." + c.name;
    if (out.insert(key).second && added) added->insert(key);
  };
  // Connect the kept tables: BFS over the FK graph from the first component to the nearest table
  // of another component; add the path; repeat until one component (or unreachable).
  std::map<std::string, std::vector<const data::ForeignKey*>> adj;
  for (const auto& f : foreign_keys) {
    adj[lower(f.from_table)].push_back(&f);
    adj[lower(f.to_table)].push_back(&f);
  }
  auto other_end = [](const data::ForeignKey* f, const std::string& t) {
    return lower(f->from_table) == t ? lower(f->to_table) : lower(f->from_table);
  };
  std::set<std::string> connected = {*kept.begin()};
  std::set<std::string> unreachable;
  for (;;) {
    // Grow `connected` through kept tables directly linked.
    bool grew = true;
    while (grew) {
      grew = false;
      for (const auto& t : std::set<std::string>(connected))
        for (const auto* f : adj[t]) {
          std::string o = other_end(f, t);
          if (kept.count(o) && connected.insert(o).second) grew = true;
        }
    }
    std::string target;
    for (const auto& k : kept)
      if (!connected.count(k) && !unreachable.count(k)) target = k;
    if (target.empty()) break;
    // Shortest path from the connected set to any kept, unconnected table.
    std::map<std::string, const data::ForeignKey*> via;
    std::deque<std::string> queue(connected.begin(), connected.end());
    std::set<std::string> seen(connected.begin(), connected.end());
    std::string found;
    while (!queue.empty() && found.empty()) {
      std::string t = queue.front();
      queue.pop_front();
      for (const auto* f : adj[t]) {
        std::string o = other_end(f, t);
        if (!seen.insert(o).second) continue;
        via[o] = f;
        if (kept.count(o) && !connected.count(o)) {
          found = o;
          break;
        }
        queue.push_back(o);
      }
    }
    if (found.empty()) {
      for (const auto& k : kept)
        if (!connected.count(k)) unreachable.insert(k);
      continue;
    }
    for (std::string t = found; !connected.count(t);) {
      const auto* f = via.at(t);
      std::string prev = other_end(f, t);
      connected.insert(t);
      kept.insert(t);  // bridge tables become kept (their key columns only)
      t = prev;
    }
  }
  for (const auto& t : kept) {
    auto it = tables.find(t);
    if (it == tables.end()) continue;
    for (const auto& pk : it->second->primary_key) add(it->second->name, pk);
  }
  for (const auto& f : foreign_keys)
    if (kept.count(lower(f.from_table)) && kept.count(lower(f.to_table))) {
      add(f.from_table, f.from_column);
      add(f.to_table, f.to_column);
    }
  if (dropped_tables)
    for (const auto& t : schema.tables)
      if (!kept.count(lower(t.name))) dropped_tables->push_back(t.name);
  return out;
}

Result<ColumnFilterResult> filter_columns(llm::Client& client, const llm::PromptTemplate& prompt,
                                          const data::Task& question, const data::Schema& schema,
                                          const ColumnFilterOptions& options, const ValueIndex* index,
                                          const std::vector<ValueMatch>* retrieved,
                                          const std::vector<data::ForeignKey>& extra_fks,
                                          const DatabaseMetadata* metadata) {
  if (options.mode != "auto" && options.mode != "table" && options.mode != "column")
    return invalid_input("context.column_filter.mode must be auto, table or column (got \"" + options.mode + "\")");
  ColumnFilterResult out;
  out.mode = options.mode;
  if (out.mode == "auto") {
    auto profile = client.settings().resolve("column_filter", "");
    if (!profile) return profile.status();
    out.mode = (*profile)->provider == "sim" ? "column" : "table";
  }
  // Every request is built first, then all go out together: no answer feeds another request,
  // so the question waits for the slowest call, not for their sum (the client bounds how many
  // are in flight). Answers are read back in schema order, so the result, its trace order and
  // its errors are those of one call after another.
  struct Ask {
    const data::Table* table = nullptr;
    std::vector<std::string> columns;
    llm::ChatRequest request;
  };
  std::vector<Ask> asks;
  for (const auto& t : schema.tables) {
    RenderOptions ro;
    ro.examples = options.examples;
    for (const auto& c : t.columns) ro.columns.insert(t.name + "." + c.name);
    std::string ddl = render_schema(SchemaSources{&schema, index, retrieved, metadata}, ro);
    std::vector<std::vector<std::string>> units;
    if (out.mode == "table") {
      units.emplace_back();
      for (const auto& c : t.columns) units.back().push_back(c.name);
    } else {
      for (const auto& c : t.columns) units.push_back({c.name});
    }
    for (auto& cols : units) {
      std::string list;
      for (const auto& c : cols) list += (list.empty() ? "" : ", ") + c;
      auto text = prompt.render({{"question", question.question}, {"evidence", question.evidence},
                                 {"table", ddl}, {"columns", list}});
      if (!text) return text.status();
      Ask ask;
      ask.table = &t;
      llm::ChatRequest& req = ask.request;
      req.role = "column_filter";
      req.stage = "column_filter";
      req.question_id = question.question_id;
      req.template_hash = prompt.hash();
      req.messages = {{"user", *text}};
      req.tag.task = llm::CallTask::kColumnFilter;
      req.tag.question_id = question.question_id;
      req.tag.question = question.question;
      req.tag.evidence = question.evidence;
      req.tag.db_id = question.db_id;
      req.tag.column = cols.size() == 1 ? cols[0] : "";
      // Distinct per judged unit, so the sim's draws for two columns are independent.
      req.tag.generator = t.name + (cols.size() == 1 ? "." + cols[0] : "");
      ask.columns = std::move(cols);
      asks.push_back(std::move(ask));
    }
  }
  std::vector<llm::CallSpend> spent(asks.size());
  auto answers = core::parallel_map<Result<llm::ChatResponse>>(
      asks.size(), std::min(asks.size(), kMaxRequestsAtOnce),
      [&](size_t i) { return client.chat(asks[i].request, &spent[i]); });
  std::optional<Status> cancelled;
  for (size_t i = 0; i < asks.size(); ++i) {
    const Ask& ask = asks[i];
    const data::Table& t = *ask.table;
    const auto& cols = ask.columns;
    const auto& req = ask.request;
    const auto& resp = answers[i];
    auto trace = llm::trace_of("column_filter", prompt, req, resp, spent[i]);
    Result<std::set<std::string>> rel = resp ? parse_column_filter_answer(resp->text(), cols,
                                                                          "question " + question.question_id + ", table " + t.name)
                                             : Result<std::set<std::string>>(resp.status());
    if (!rel) {
      trace.error = rel.status().message();
      if (resp) client.accounting().record_parse_failure(req.stage, question.question_id);
      out.errors.push_back(rel.status().message());
      if (llm::call_error_kind(rel.status()) == llm::CallErrorKind::kCancelled) {
        cancelled = rel.status();
        break;
      }
      // Not judged: keep it.
      for (const auto& c : cols) out.relevant.insert(t.name + "." + c);
    } else {
      for (const auto& c : *rel) out.relevant.insert(t.name + "." + c);
    }
    out.calls.push_back(std::move(trace));
  }
  if (cancelled) return *cancelled;
  std::vector<data::ForeignKey> fks = schema.foreign_keys;
  fks.insert(fks.end(), extra_fks.begin(), extra_fks.end());
  if (!out.relevant.empty())
    out.selected = close_over_join_keys(schema, fks, out.relevant, &out.join_keys, &out.dropped_tables);
  return out;
}

}  // namespace nl2sql::context
