// Separating-instance duels: a small database D′ on which two candidates disagree, the model asked what the question's answer on D′ is.
#include <algorithm>
#include <deque>
#include <map>
#include <optional>
#include <set>

#include "nl2sql/context/schema_render.h"
#include "nl2sql/core/hash.h"
#include "prompt_parts.h"
#include "selector_parts.h"

namespace nl2sql::select::detail {
namespace {

using json = nlohmann::json;
using Scores = std::map<int, double>;

// One pair of representatives: its trace entry, its instance when one was found (none: a draw
// before any ask — no lineage, no instance) and where its asks start in the batch.
struct Duel {
  int i = 0, j = 0;
  json d;
  std::optional<SeparatingInstance> inst;
  size_t first_ask = 0;
};

// A drawn duel; `kind` says why for the report (DrawKind names): no lineage, no instance, one
// too large, a timeout, or the model's answers.
void draw(Duel& du, Scores& score, const char* kind, const std::string& why) {
  score[du.i] += 0.5;
  score[du.j] += 0.5;
  du.d["outcome"] = "draw";
  du.d["draw"] = kind;
  du.d["why"] = why;
}

bool timed_out_text(const std::string& m) {
  return m.find("timed out") != std::string::npos || m.find("timeout") != std::string::npos;
}
bool timed_out(const Status& st) { return st.code() == ErrorCode::kTimeout || timed_out_text(st.message()); }

// Approximate lineage guides the search only (D′ is verified), but the trace says where it was used.
json lineage_notes(const QueryLineage& la, const QueryLineage& lb) {
  json notes = json::object();
  for (const auto& [side, l] : {std::pair<const char*, const QueryLineage*>{"a", &la}, {"b", &lb}}) {
    if (!l->fallbacks.empty()) notes[side]["over_approximated"] = l->fallbacks;
    if (!l->sampled.empty()) notes[side]["sampled"] = l->sampled;
  }
  return notes;
}

// The schema shown with an instance: only the instance's columns. The model reads the
// instance's rows, not the database's: the database's statistics would describe other data, so
// only the metadata's keys and descriptions are shown.
std::string instance_schema(const SelectionInput& in, const InstanceTables& instance) {
  if (!in.schema) return "(schema not available)";
  std::set<std::string> columns;
  for (const auto& [t, rs] : instance.tables)
    for (const auto& c : rs.columns) columns.insert(t + "." + c);
  context::RenderOptions ro;
  ro.examples = 0;
  ro.columns = columns;
  ro.stats = false;
  return context::render_schema(context::SchemaSources{in.schema, nullptr, nullptr, in.metadata}, ro);
}

// Majority: an answer that at least half of the asks (rounded up) agree with; null when none.
const db::ResultSet* majority_answer(const std::vector<db::ResultSet>& answers, int64_t asks) {
  for (const auto& a : answers) {
    int64_t agree = 0;
    for (const auto& b : answers) agree += answers_match(a, b) ? 1 : 0;
    if (agree * 2 > asks) return &a;
  }
  return nullptr;
}

class SeparatingInstances : public Selector {
 public:
  SeparatingInstances(DuelOptions o, llm::Client* client, const db::Executor* executor,
                      llm::PromptTemplate tpl)
      : o_(o), client_(client), executor_(executor), tpl_(std::move(tpl)) {}
  std::string name() const override { return "separating_instances"; }
  SelectorTraits traits() const override { return {.calls_model = true, .model_role = "nl_eval", .uses_seed = true, .reads_database = true}; }

  // Each duel's instance is searched in pair order; the model's asks of every duel then go out
  // together (they do not depend on each other; each waits for its own model slot), and the
  // duels are decided in pair order, as one after another would be.
  Result<Selection> select(const SelectionInput& in) const override {
    NL2SQL_RETURN_IF_ERROR(check_input(in));
    Selection s;
    s.selector = name();
    auto pc = cluster_pool(in.candidates, ResultEquality::kRelaxed, in.generator_order);
    s.chosen = consistency_choice(pc, in);
    std::vector<int> players;
    for (const auto& c : pc.clusters)
      if (static_cast<int64_t>(players.size()) < o_.max_representatives) players.push_back(c.representative);
    if (players.size() <= 1) {
      s.explanation = {{"duels", json::array()}, {"note", "one result: no duel"}};
      return s;
    }
    auto builder = InstanceBuilder::open(in.db_path, *executor_, o_.instance);
    if (!builder.is_ok()) return builder.status().with_context("question " + qid(in));
    std::map<int, Result<QueryLineage>> lineage;
    for (int p : players) {
      const auto& c = in.candidates[static_cast<size_t>(p)];
      // Representatives have run on D already: their lineage needs only the witness queries.
      const db::ResultSet* known = c.result && c.result->ok() ? &c.result->result : nullptr;
      lineage.emplace(p, builder->lineage(c.sql, known));
    }
    Scores score;
    std::deque<Duel> plan;  // stable addresses: the asks' instance callbacks point into it
    std::vector<Ask> asks;
    int64_t pair_index = 0;
    for (size_t x = 0; x < players.size(); ++x)
      for (size_t y = x + 1; y < players.size(); ++y, ++pair_index) {
        Duel& du = plan.emplace_back();
        du.i = players[x];
        du.j = players[y];
        if (search_instance(in, *builder, lineage.at(du.i), lineage.at(du.j), du, score))
          add_asks(in, *builder, pair_index, du, asks);
      }
    const std::vector<Result<std::string>> texts =
        ask_all({client_, &tpl_, "nl_eval", in.ask_memo.get()}, std::move(asks), s.calls);
    json duels = json::array();
    for (Duel& du : plan) {
      if (du.inst) {
        s.duel_instances.push_back({duels.size(), du.inst->instance, std::nullopt});
        decide(in, texts, du, score, s.duel_instances.back());
      }
      duels.push_back(std::move(du.d));
    }
    // A unique top score wins; otherwise consistency decides.
    double top = -1;
    for (int p : players) top = std::max(top, score[p]);
    std::vector<int> leaders;
    for (int p : players)
      if (score[p] == top) leaders.push_back(p);
    s.chosen = leaders.front();  // several leaders: players are in consistency order
    json scores = json::object();
    for (int p : players) scores[in.candidates[static_cast<size_t>(p)].id] = score[p];
    s.explanation = {{"scores", scores}, {"duels", duels},
                     {"decided_by", leaders.size() == 1 ? "duels" : "consistency"},
                     {"clusters", clusters_json(pc, in)}};
    return s;
  }

 private:
  // The search for one duel's D′ from the two lineages: true when one was found (du.inst), else
  // the duel is drawn and says why.
  bool search_instance(const SelectionInput& in, const InstanceBuilder& builder, const Result<QueryLineage>& la,
                       const Result<QueryLineage>& lb, Duel& du, Scores& score) const {
    const auto& ci = in.candidates[static_cast<size_t>(du.i)];
    const auto& cj = in.candidates[static_cast<size_t>(du.j)];
    du.d = {{"a", ci.id}, {"b", cj.id}};
    if (!la.is_ok() || !lb.is_ok()) {
      const Status& st = !la.is_ok() ? la.status() : lb.status();
      draw(du, score, timed_out(st) ? "timeout" : "no_lineage", "lineage: " + st.message());
      return false;
    }
    core::KeyHasher h;
    h.add(static_cast<int64_t>(in.seed)).add("separating_instance").add(ci.id).add(cj.id);
    const uint64_t seed = h.seed();
    json notes = lineage_notes(*la, *lb);
    if (!notes.empty()) du.d["lineage"] = std::move(notes);
    auto inst = builder.separate(*la, *lb, seed);
    if (!inst.is_ok()) {
      draw(du, score, timed_out(inst.status()) ? "timeout" : "no_instance", "instance: " + inst.status().message());
      return false;
    }
    du.d["instance"] = inst->to_json();
    if (!inst->found) {
      const char* kind = inst->timed_out || timed_out_text(inst->failure) ? "timeout"
                         : inst->too_large                                 ? "too_large"
                                                                           : "no_instance";
      draw(du, score, kind, inst->too_large && !inst->timed_out ? "separating instance too large" : "no separating instance");
      return false;
    }
    du.inst = std::move(*inst);
    return true;
  }

  // The asks of one duel: what the question's answer on its D′ is, o_.asks times.
  void add_asks(const SelectionInput& in, const InstanceBuilder& builder, int64_t pair_index, Duel& du,
                std::vector<Ask>& asks) const {
    const std::string schema = instance_schema(in, du.inst->instance);
    du.first_ask = asks.size();
    const std::string instance_text = du.inst->instance.to_prompt_text();
    for (int64_t k = 0; k < o_.asks; ++k) {
      Ask a;
      a.request = base_request(in, llm::CallTask::kNlEval, pair_index * o_.asks + k);
      a.request.tag.generator = "separating_instances";
      a.request.temperature = o_.temperature;
      if (o_.asks > 1)
        a.request.seed = static_cast<int64_t>((in.seed ^ 0x6e6c6576ULL) % 1000003ULL) * 64 + pair_index * o_.asks + k;
      const InstanceBuilder* b = &builder;
      const InstanceTables* tables_on = &du.inst->instance;
      a.request.tag.answer_on_instance = [b, tables_on](const std::string& sql) -> Result<std::string> {
        auto r = b->run_on(*tables_on, sql);
        if (!r.is_ok()) return r.status();
        return render_answer_rows(*r);
      };
      a.values = {{"question", in.question->question},
                  {"evidence", in.question->evidence.empty() ? "(none)" : in.question->evidence},
                  {"schema", schema},
                  {"instance", instance_text}};
      asks.push_back(std::move(a));
    }
  }

  // Decides a duel with an instance from the model's answers: the side whose answer on D′ the
  // majority answer matches wins; no majority, both or neither matching is a draw.
  void decide(const SelectionInput& in, const std::vector<Result<std::string>>& texts, Duel& du, Scores& score,
              Selection::DuelInstance& kept) const {
    std::vector<db::ResultSet> answers;
    json model_answers = json::array();
    for (int64_t k = 0; k < o_.asks; ++k) {
      const auto& text = texts[du.first_ask + static_cast<size_t>(k)];
      if (!text.is_ok()) {
        model_answers.push_back({{"error", text.status().message()}});
        continue;
      }
      auto parsed = parse_answer_rows(*text);
      if (!parsed.is_ok()) {
        client_->accounting().record_parse_failure("select", qid(in), "nl_eval");
        model_answers.push_back({{"error", parsed.status().message()}});
        continue;
      }
      model_answers.push_back(render_answer_rows(*parsed));
      answers.push_back(std::move(*parsed));
    }
    du.d["model_answers"] = model_answers;
    const db::ResultSet* majority = majority_answer(answers, o_.asks);
    if (!majority) {
      draw(du, score, "answers_disagree", "the model's answers disagree");
      return;
    }
    du.d["majority"] = render_answer_rows(*majority);
    kept.majority = *majority;
    const bool ma = answers_match(*majority, du.inst->answer_a);
    const bool mb = answers_match(*majority, du.inst->answer_b);
    if (ma && !mb) {
      score[du.i] += 1;
      du.d["outcome"] = "a";
    } else if (mb && !ma) {
      score[du.j] += 1;
      du.d["outcome"] = "b";
    } else {
      draw(du, score, ma ? "both_match" : "neither_matches", ma ? "both match" : "neither matches");
    }
  }

 private:
  DuelOptions o_;
  llm::Client* client_;
  const db::Executor* executor_;
  llm::PromptTemplate tpl_;
};

}  // namespace

std::unique_ptr<Selector> make_separating_instances(DuelOptions o, llm::Client* client, const db::Executor* executor,
                                                    llm::PromptTemplate tpl) {
  return std::make_unique<SeparatingInstances>(o, client, executor, std::move(tpl));
}

}  // namespace nl2sql::select::detail
