// The outside-program selector (external_selector.h).
#include "external_selector.h"

#include "nl2sql/context/schema_render.h"
#include "nl2sql/generate/outside_program.h"

namespace nl2sql::select {
namespace {

using json = nlohmann::json;

// Rows of a candidate's result the request shows (row_count says how many there were).
constexpr size_t kRowsShown = 20;

json cell_json(const db::Value& v) {
  switch (v.type) {
    case db::ValueType::kNull: return nullptr;
    case db::ValueType::kInteger: return v.i;
    case db::ValueType::kReal: return v.r;
    case db::ValueType::kText: return v.s;
    case db::ValueType::kBlob: return v.to_display();
  }
  return nullptr;
}

json result_json(const db::ExecutionResult* r) {
  if (r == nullptr) return {{"columns", json::array()}, {"rows", json::array()}, {"row_count", 0},
                            {"error", "not executable (no SQL, rejected, or it failed)"}};
  json rows = json::array();
  for (size_t i = 0; i < r->result.rows.size() && i < kRowsShown; ++i) {
    json row = json::array();
    for (const auto& v : r->result.rows[i]) row.push_back(cell_json(v));
    rows.push_back(std::move(row));
  }
  return {{"columns", r->result.columns},
          {"rows", rows},
          {"row_count", r->row_count()},
          {"error", r->ok() ? json() : json(r->error)}};
}

class ExternalSelector : public Selector {
 public:
  ExternalSelector(generate::OutsideProgramSpec spec, llm::Client* client)
      : label_(spec.label), program_(std::move(spec), client) {}
  std::string name() const override { return label_; }
  SelectorTraits traits() const override { return external_traits(); }

  Result<Selection> select(const SelectionInput& input) const override {
    if (input.question == nullptr) return invalid_input("selector " + label_ + ": SelectionInput needs a question");
    Selection out;
    out.selector = label_;
    if (input.candidates.empty()) {
      out.explanation = {{"program", label_}, {"note", "no candidates: the program was not asked"}};
      return out;
    }
    const std::string& qid = input.question->question_id;
    llm::CallTag tag;
    tag.task = llm::CallTask::kChoose;
    tag.question_id = qid;
    tag.question = input.question->question;
    tag.evidence = input.question->evidence;
    tag.db_id = input.question->db_id;
    for (const auto& c : input.candidates) tag.candidates.push_back(c.sql);
    auto ex = program_.ask(selection_request(input), qid, tag);
    if (!ex) return ex.status();
    out.calls = std::move(ex->calls);
    const json& chosen = ex->answer.contains("chosen") ? ex->answer["chosen"] : json();
    auto bad = [&](const std::string& what) {
      return Status(ErrorCode::kUnavailable, "outside selector " + label_ + " (question " + qid + "): " + what);
    };
    if (!chosen.is_string()) return bad("its answer needs \"chosen\": a candidate id");
    for (size_t i = 0; i < input.candidates.size(); ++i)
      if (input.candidates[i].id == chosen.get<std::string>()) out.chosen = static_cast<int>(i);
    if (out.chosen < 0) return bad("it chose " + chosen.dump() + ", which is not a candidate of the question");
    out.explanation = {{"program", label_},
                       {"chosen", chosen},
                       {"explanation", ex->answer.value("explanation", json())}};
    return out;
  }

 private:
  std::string label_;
  mutable generate::OutsideProgram program_;
};

}  // namespace

SelectorTraits external_traits() { return {.calls_model = true, .model_role = "select", .uses_seed = true}; }

const json* external_item(const core::Config& config, const std::string& label) {
  const json* ext = config.find("select.external");
  if (!ext || !ext->is_object()) return nullptr;
  auto it = ext->find(label);
  return it == ext->end() ? nullptr : &*it;
}

json selection_request(const SelectionInput& input) {
  json candidates = json::array();
  for (const auto& c : input.candidates)
    candidates.push_back({{"id", c.id}, {"generator", c.generator}, {"sql", c.sql}, {"result", result_json(c.result.get())}});
  std::string schema;
  if (input.schema) schema = context::render_schema(*input.schema, context::RenderOptions{}, nullptr, nullptr, input.metadata);
  const std::string db = input.db_path.string();
  return {{"kind", "select"},
          {"question", input.question->question},
          {"evidence", input.question->evidence},
          {"db_id", input.question->db_id},
          {"db_path", db},
          {"db_uri", "file:" + db + "?mode=ro"},
          {"schema", schema},
          {"seed", input.seed},
          {"candidates", candidates}};
}

Result<std::unique_ptr<Selector>> make_external_selector(const std::string& label, const core::Config& config,
                                                         const SelectorServices& services) {
  const std::string key = "select.external." + label;
  const json* item = external_item(config, label);
  if (!item || !item->is_object()) return invalid_input("config key \"" + key + "\" must be an object with \"argv\"");
  for (const auto& [k, v] : item->items())
    if (k != "argv" && k != "timeout_s" && k != "workers")
      return invalid_input("config key \"" + key + "." + k + "\" is not known (argv, timeout_s, workers)");
  auto spec = generate::read_outside_program(*item, key);
  if (!spec) return spec.status();
  spec->label = label;
  spec->role = "select";
  spec->stage = "select";
  return std::unique_ptr<Selector>(std::make_unique<ExternalSelector>(std::move(*spec), services.client));
}

}  // namespace nl2sql::select
