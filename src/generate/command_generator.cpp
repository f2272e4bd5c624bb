// The "command" generator (command_generator.h).
#include "command_generator.h"

#include "nl2sql/context/schema_render.h"
#include "nl2sql/core/log.h"
#include "nl2sql/generate/call_tags.h"

namespace nl2sql::generate {
namespace {

using json = nlohmann::json;

class CommandGenerator : public Generator {
 public:
  CommandGenerator(CommandOptions o, OutsideProgramSpec spec, llm::Client* client)
      : o_(std::move(o)), program_(std::move(spec), client) {}
  std::string name() const override { return o_.label; }

  // The program's candidates in its order; its model calls are traced on the first (as the os
  // generator's shared calls are). A fault fails the question's stage (a rerun asks again).
  Result<std::vector<Candidate>> generate(const GenerationInput& input) const override {
    if (input.question == nullptr || input.schema == nullptr)
      return invalid_input("command generator: GenerationInput needs a question and a schema");
    const std::string& qid = input.question->question_id;
    auto ex = program_.ask(generation_request(input, o_), qid, generation_tag(*input.question, o_.label, 0));
    if (!ex) return ex.status();
    const json& list = ex->answer.contains("candidates") ? ex->answer["candidates"] : json();
    auto bad = [&](const std::string& what) {
      return Status(ErrorCode::kUnavailable,
                    "outside program " + o_.label + " (question " + qid + "): " + what);
    };
    if (!list.is_array()) return bad("its answer needs \"candidates\": an array of {\"sql\", \"reasoning\"?}");
    std::vector<Candidate> out;
    for (size_t i = 0; i < list.size(); ++i) {
      const json& item = list[i];
      const std::string where = "candidates[" + std::to_string(i) + "]";
      if (!item.is_object() || !item.contains("sql") || !item["sql"].is_string())
        return bad(where + ".sql must be a string");
      if (item.contains("reasoning") && !item["reasoning"].is_string() && !item["reasoning"].is_null())
        return bad(where + ".reasoning must be a string");
      Candidate c;
      c.id = o_.label + "#" + std::to_string(i);
      c.generator = o_.label;
      c.profile = ex->profile;
      c.sample_index = static_cast<int64_t>(i);
      c.reasoning = item.value("reasoning", json()).is_string() ? item["reasoning"].get<std::string>() : "";
      c.sql = item["sql"].get<std::string>();
      c.original_sql = c.sql;
      if (c.sql.empty()) {
        c.extraction_ok = false;
        c.extraction_error = "the program gave an empty SQL";
      }
      out.push_back(std::move(c));
    }
    if (!out.empty()) out.front().calls = std::move(ex->calls);
    return out;
  }

 private:
  CommandOptions o_;
  mutable OutsideProgram program_;
};

}  // namespace

json generation_request(const GenerationInput& input, const CommandOptions& o) {
  context::RenderOptions r;
  r.descriptions = o.descriptions;
  r.examples = static_cast<size_t>(o.examples);
  json values = json::array();
  if (input.retrieval)
    for (const auto& v : input.retrieval->values)
      values.push_back({{"table", v.table}, {"column", v.column}, {"value", v.value}, {"score", v.score}});
  json columns = json::array();
  for (const auto& c : input.selected_columns) columns.push_back(c);
  const std::string db = input.db_path.string();
  return {{"kind", "generate"},
          {"question", input.question->question},
          {"evidence", input.question->evidence},
          {"db_id", input.question->db_id},
          {"db_path", db},
          {"db_uri", "file:" + db + "?mode=ro"},
          {"schema", context::render_schema(input.schema_sources(), r)},
          {"retrieved_values", values},
          {"filtered_columns", columns},
          {"samples", o.samples},
          {"temperature", o.temperature ? json(*o.temperature) : json()},
          {"seed", input.seed}};
}

std::unique_ptr<Generator> make_command_generator(CommandOptions options, OutsideProgramSpec spec,
                                                  llm::Client* client) {
  return std::make_unique<CommandGenerator>(std::move(options), std::move(spec), client);
}

}  // namespace nl2sql::generate
