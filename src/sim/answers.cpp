// The simulator's answers per call task (see answers.h).
#include "answers.h"

#include <algorithm>
#include <cctype>
#include <set>

#include <nlohmann/json.hpp>

#include "nl2sql/core/hash.h"
#include "nl2sql/core/text.h"
#include "nl2sql/sim/simulator.h"
#include "outline.h"

namespace nl2sql::sim::detail {
namespace {

using json = nlohmann::json;
using core::lower;
using llm::CallTask;
using llm::ChatResponse;
using llm::SimSettings;

uint64_t seed_from(std::initializer_list<std::string> parts, int64_t seed, int64_t index) {
  core::KeyHasher h;
  h.add("nl2sql.sim.v1").add(seed).add(index);
  for (const auto& p : parts) h.add(p);
  return h.seed();
}

std::string fenced(const std::string& lang, const std::string& body) {
  return "```" + lang + "\n" + body + "\n```";
}

std::string short_question(const std::string& q) {
  std::string s = q.size() > 160 ? q.substr(0, 160) + "…" : q;
  std::replace(s.begin(), s.end(), '\n', ' ');
  return s;
}

std::string perturb_answer(const std::string& answer, SimRng& rng) {
  // Change the last number, else drop the last row, else claim there is nothing.
  for (size_t i = answer.size(); i-- > 0;) {
    if (std::isdigit(static_cast<unsigned char>(answer[i]))) {
      std::string s = answer;
      s[i] = static_cast<char>('0' + ((s[i] - '0') + 1 + static_cast<int>(rng.below(8))) % 10);
      if (s != answer) return s;
    }
  }
  auto nl = answer.rfind('\n');
  if (nl != std::string::npos && nl > 0) return answer.substr(0, nl);
  return "(no rows)";
}

const std::set<std::string>& stopwords() {
  static const std::set<std::string> s = {
      "a", "an", "the", "of", "in", "on", "for", "to", "and", "or", "is", "are", "was", "were",
      "be", "by", "with", "what", "which", "who", "whom", "how", "many", "much", "list", "give",
      "show", "name", "find", "all", "that", "this", "these", "those", "it", "its", "their",
      "there", "as", "at", "from", "do", "does", "did", "has", "have", "had", "please", "among",
      "each", "per", "than", "between", "into", "me", "i", "refers", "refer", "if", "not",
      "among", "whose", "when", "where", "why", "state", "indicate", "provide", "tell"};
  return s;
}

std::vector<std::string> keywords_of(const std::string& text) {
  std::vector<std::string> out;
  auto add = [&](const std::string& k) {
    if (!k.empty() && std::find(out.begin(), out.end(), k) == out.end()) out.push_back(k);
  };
  // Quoted values first: they are the most useful for value retrieval.
  for (size_t i = 0; i < text.size(); ++i) {
    char q = text[i];
    if (q != '\'' && q != '"') continue;
    if (q == '\'' && i > 0 && std::isalpha(static_cast<unsigned char>(text[i - 1]))) continue;  // it's
    size_t close = text.find(q, i + 1);
    if (close == std::string::npos) break;
    add(text.substr(i + 1, close - i - 1));
    i = close;
  }
  // Words, then bigrams and trigrams of consecutive content words.
  std::vector<std::vector<std::string>> runs(1);
  std::string word;
  auto flush = [&](bool boundary) {
    if (!word.empty()) {
      if (stopwords().count(lower(word))) {
        if (!runs.back().empty()) runs.emplace_back();
      } else {
        runs.back().push_back(word);
      }
      word.clear();
    }
    if (boundary && !runs.back().empty()) runs.emplace_back();
  };
  for (char c : text) {
    if (std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '%' ||
        static_cast<unsigned char>(c) >= 0x80)
      word += c;
    else
      flush(c == ',' || c == '.' || c == '?' || c == ';' || c == ':' || c == '\'' || c == '"' ||
            c == '(' || c == ')' || c == '=');
  }
  flush(true);
  for (const auto& run : runs) {
    for (size_t n = 3; n >= 1; --n)
      for (size_t i = 0; i + n <= run.size(); ++i) {
        std::string g = run[i];
        for (size_t k = 1; k < n; ++k) g += " " + run[i + k];
        add(g);
      }
  }
  if (out.size() > 24) out.resize(24);
  return out;
}

// One answer per call task: the text of one choice, drawn with that choice's generator, or why
// the facts do not allow it (`who` names the call).
using Answer = Result<std::string>;

Answer generate_answer(const SimSettings& settings, const Facts& c, SimRng& rng, const std::string& who) {
  if (c.gold_sql.empty()) return invalid_input(who + ": no gold for this question (Simulator::add)");
  double p = settings.p_correct_for(c.generator, c.difficulty);
  std::string sql = c.gold_sql;
  if (rng.uniform() >= p) sql = mutate_sql(c.gold_sql, rng).first;
  if (c.generator.rfind("os_examples", 0) == 0) {
    // The online-synthetic example writers answer in the "Question:/SQL:" form their prompts
    // ask for: simple queries over the tables gold reads (never gold itself, which would hand
    // the generator its answer as a demonstration).
    const bool filtered = c.generator == "os_examples_filtered";
    std::string text;
    for (const auto& t : outline_of(c.gold_sql).tables)
      text += filtered ? "Question: Show five rows of the " + t + " table.\nSQL: SELECT * FROM " + t + " LIMIT 5\n\n"
                       : "Question: How many rows does the " + t + " table hold?\nSQL: SELECT COUNT(*) FROM " + t + "\n\n";
    if (text.empty()) text = "Question: What is one plus one?\nSQL: SELECT 1 + 1\n";
    return text;
  }
  return "The question asks: " + short_question(c.question) +
         "\nI identify the tables and columns it refers to, apply the conditions it states, "
         "and write one SQLite query.\n\n" + fenced("sql", sql) + "\n";
}

Answer fix_answer(const SimSettings& settings, const Facts& c, SimRng& rng, const std::string& who) {
  if (c.gold_sql.empty() || c.failing_sql.empty())
    return invalid_input(who + ": needs gold (Simulator::add) and failing_sql");
  bool fixed = rng.uniform() < settings.p_fix;
  return "The query failed (" + (c.failure.empty() ? std::string("error") : c.failure) + "). " +
         (fixed ? "I corrected it." : "I checked it again and kept it.") + "\n\n" +
         fenced("sql", fixed ? c.gold_sql : c.failing_sql) + "\n";
}

Answer select_pair_answer(const SimSettings& settings, const Facts& c, SimRng& rng, const std::string& who) {
  if (c.candidates.size() != 2 || c.candidate_matches_gold.size() != 2)
    return invalid_input(who + ": needs 2 candidates and 2 candidate_matches_gold flags");
  int pick;
  bool a = c.candidate_matches_gold[0], b = c.candidate_matches_gold[1];
  if (a != b) {
    int correct = a ? 0 : 1;
    pick = rng.uniform() < settings.p_sel ? correct : 1 - correct;
  } else {
    pick = rng.uniform() < 0.5 ? 0 : 1;
  }
  return "Comparing both queries against the question, candidate " + std::string(pick == 0 ? "A" : "B") +
         " answers it better.\n\n" + fenced("json", json{{"winner", pick == 0 ? "A" : "B"}}.dump()) + "\n";
}

Answer rank_answer(const SimSettings& settings, const Facts& c, SimRng& rng, const std::string& who) {
  const size_t k = c.candidates.size();
  if (k == 0 || c.candidate_matches_gold.size() != k)
    return invalid_input(who + ": needs candidates and one candidate_matches_gold flag each");
  std::vector<size_t> good, bad;
  for (size_t i = 0; i < k; ++i) (c.candidate_matches_gold[i] ? good : bad).push_back(i);
  std::vector<size_t> order;
  bool right = rng.uniform() < settings.p_sel;
  const auto& first_pool = (right && !good.empty()) || bad.empty() ? good : bad;
  size_t first = first_pool[rng.below(first_pool.size())];
  order.push_back(first);
  std::vector<size_t> rest;
  for (size_t i = 0; i < k; ++i)
    if (i != first) rest.push_back(i);
  for (size_t i = rest.size(); i > 1; --i) std::swap(rest[i - 1], rest[rng.below(i)]);
  order.insert(order.end(), rest.begin(), rest.end());
  return "I compared the candidates' logic with the question and ranked them.\n\n" +
         fenced("json", json{{"ranking", order}}.dump()) + "\n";
}

// Naive listwise choice: the first correct candidate w.p. p_sel, else a wrong one.
Answer choose_answer(const SimSettings& settings, const Facts& c, SimRng& rng, const std::string& who) {
  const size_t k = c.candidates.size();
  if (k == 0 || c.candidate_matches_gold.size() != k)
    return invalid_input(who + ": needs candidates and one candidate_matches_gold flag each");
  std::vector<size_t> good, bad;
  for (size_t i = 0; i < k; ++i) (c.candidate_matches_gold[i] ? good : bad).push_back(i);
  size_t pick = 0;
  if (!good.empty() && (bad.empty() || rng.uniform() < settings.p_sel)) pick = good.front();
  else if (!bad.empty()) pick = bad[rng.below(bad.size())];
  return "Checking the candidates in order against the checklist.\n\n" +
         fenced("json", json{{"principles", "The query must return exactly what the question asks."},
                             {"reasoning", "Candidate " + std::to_string(pick + 1) + " satisfies the checklist."},
                             {"sql", c.candidates[pick]}}
                            .dump(2)) +
         "\n";
}

Answer plan_critique_answer(const Facts& c, const std::string& who) {
  if (c.gold_sql.empty()) return invalid_input(who + ": no gold for this question (Simulator::add)");
  json issues = json::array();
  for (const auto& tb : outline_of(c.gold_sql).tables)
    if (!core::mentions_identifier(c.current_plan, tb)) issues.push_back("The plan never reads table " + tb + ".");
  return std::string(issues.empty() ? "The plan covers what the question asks." : "The plan has gaps.") + "\n\n" +
         fenced("json", json{{"approved", issues.empty()}, {"issues", issues}}.dump()) + "\n";
}

// A critic right w.p. p_sel: it approves a correct query and names a real defect of a wrong one;
// otherwise it errs the other way.
Answer sql_critique_answer(const SimSettings& settings, const Facts& c, SimRng& rng, const std::string& who) {
  if (c.gold_sql.empty() || c.current_sql.empty())
    return invalid_input(who + ": needs gold (Simulator::add) and current_sql");
  bool right = rng.uniform() < settings.p_sel;
  bool approve = c.current_matches_gold == right;
  json issues = json::array();
  if (!approve) {
    std::string d = c.current_matches_gold ? "" : describe_defect(c.current_sql, c.gold_sql);
    if (d.empty()) d = c.current_matches_gold ? "The query may not filter exactly what the question asks."
                                              : "The literal values or a subquery do not match the question.";
    issues.push_back(d);
  }
  return std::string(approve ? "The query answers the question." : "The query needs changes.") + "\n\n" +
         fenced("json", json{{"approved", approve}, {"issues", issues}}.dump()) + "\n";
}

Answer validate_answer(const Facts& c, const std::string& who) {
  if (c.gold_sql.empty() || c.current_sql.empty())
    return invalid_input(who + ": needs gold (Simulator::add) and current_sql");
  json extra = json::array();
  SqlOutline cur = outline_of(c.current_sql), g = outline_of(c.gold_sql);
  if (cur.select_items.size() > g.select_items.size())
    for (const auto& item : cur.select_items)
      if (!contains_key(g.select_items, item)) extra.push_back(item);
  std::string fix;
  if (!c.current_matches_gold) {
    fix = describe_defect(c.current_sql, c.gold_sql);
    if (fix.empty()) fix = "Check the literal values against the stored values and the subqueries.";
  }
  return std::string(c.current_matches_gold ? "The result answers the question." : "The result does not answer the question.") +
         "\n\n" +
         fenced("json", json{{"valid_result", c.current_matches_gold},
                             {"columns_not_needed", c.current_matches_gold ? json::array() : extra},
                             {"result_empty", c.current_result_empty},
                             {"suggest_fix", fix}}
                            .dump()) +
         "\n";
}

// The text of one choice for the call's task.
Answer answer_text(const SimSettings& settings, const Facts& c, SimRng& rng, const std::string& who) {
  switch (c.task) {
    case CallTask::kNone: return invalid_input(who + ": the request carries no task (set request.tag)");
    case CallTask::kGenerate: return generate_answer(settings, c, rng, who);
    case CallTask::kFix: return fix_answer(settings, c, rng, who);
    case CallTask::kSelectPair: return select_pair_answer(settings, c, rng, who);
    case CallTask::kRank: return rank_answer(settings, c, rng, who);
    case CallTask::kChoose: return choose_answer(settings, c, rng, who);
    case CallTask::kNlEval: {
      std::string answer = c.gold_answer.empty() ? "(no rows)" : c.gold_answer;
      if (rng.uniform() < settings.p_hallucinate) answer = perturb_answer(answer, rng);
      return "Reading the instance data, the answer is:\n\n" + fenced("text", answer) + "\n";
    }
    case CallTask::kKeywords: {
      auto kws = keywords_of(c.question + (c.evidence.empty() ? "" : " ; " + c.evidence));
      return json{{"keywords", kws}}.dump();  // bare JSON, as prompts/extract_keywords.txt asks
    }
    case CallTask::kColumnFilter: {
      if (c.column.empty()) return invalid_input(who + ": needs column");
      bool truth = core::mentions_identifier(c.gold_sql, c.column);
      bool said = rng.uniform() < settings.p_sel ? truth : !truth;
      return fenced("json", json{{"relevant", said}}.dump()) + "\n";
    }
    case CallTask::kLedger:
      if (c.gold_sql.empty()) return invalid_input(who + ": no gold for this question (Simulator::add)");
      return "I read the schema, the evidence and the rules, and compiled the fact sheet.\n\n" +
             fenced("json", ledger_of(c.gold_sql, c.evidence).dump(2)) + "\n";
    case CallTask::kPlan:
      if (c.gold_sql.empty()) return invalid_input(who + ": no gold for this question (Simulator::add)");
      return "Plan for: " + short_question(c.question) + "\n\n" + fenced("json", plan_of(c.gold_sql).dump(2)) + "\n";
    case CallTask::kPlanCritique: return plan_critique_answer(c, who);
    case CallTask::kSqlCritique: return sql_critique_answer(settings, c, rng, who);
    case CallTask::kValidate: return validate_answer(c, who);
  }
  return std::string();
}

}  // namespace

Result<ChatResponse> answer_from(const SimSettings& settings_, const Facts& c, int n_choices) {
  const std::string who = "sim provider, question " + (c.question_id.empty() ? "?" : c.question_id) +
                          ", task " + llm::call_task_name(c.task);
  const int n = std::max(1, n_choices);
  ChatResponse r;
  r.provider = "sim";
  for (int choice = 0; choice < n; ++choice) {
    const int64_t index = c.sample_index * n + choice;
    uint64_t stream = seed_from({llm::call_task_name(c.task), c.question_id, c.generator}, settings_.seed, index);
    if (c.request_seed) stream = core::KeyHasher().add(static_cast<int64_t>(stream)).add(*c.request_seed).seed();
    SimRng rng(stream);
    auto text = answer_text(settings_, c, rng, who);
    if (!text) return text.status();
    r.choices.push_back(std::move(*text));
    r.finish_reasons.push_back("stop");
  }
  return r;
}

}  // namespace nl2sql::sim::detail
