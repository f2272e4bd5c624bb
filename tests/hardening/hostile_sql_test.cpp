// Hostile SQL never writes. Every statement of tests/fixtures/hostile_sql.txt (writes, DDL,
// VACUUM INTO, ATTACH, PRAGMA writes, load_extension, transactions, multi-statement strings,
// statements hidden after comments or inside CTEs, RETURNING …) goes through every path that
// executes SQL: db::Executor (run and EXPLAIN QUERY PLAN), the separating-instance copy D′ and
// its lineage step, the evaluator (ItemJudge, evaluate()), `nl2sql eval`, the generators and
// the fixer (a fake model answering with the statement), the selectors (hostile candidates in
// the pool), `nl2sql sql lineage --run` and `nl2sql explain`. Each must be refused with a
// message; afterwards the SHA-256 of every file of the dataset and of a watched scratch
// directory (the target of every ATTACH / VACUUM INTO in the corpus, and the working directory
// for relative names) is unchanged and no file has appeared. Per-path figures are printed.
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <map>
#include <mutex>
#include <sstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "support/fake_client.h"
#include "support/fake_openai_server.h"
#include "nl2sql/core/config.h"
#include "nl2sql/core/files.h"
#include "nl2sql/core/hash.h"
#include "nl2sql/data/dataset.h"
#include "nl2sql/eval/evaluator.h"
#include "nl2sql/fix/fixer.h"
#include "nl2sql/generate/generator.h"
#include "nl2sql/llm/client.h"
#include "nl2sql/select/selector.h"
#include "nl2sql/sim/simulator.h"
#include "nl2sql/select/separating_instance.h"
#include "support/test_env.h"

namespace nl2sql {
namespace {
namespace fs = std::filesystem;
using llm::testing::completion_body;
using llm::testing::FakeOpenAiServer;
using llm::testing::FakeReply;
using nlohmann::json;

struct HostileStatement {
  std::string name;
  std::string sql;
};

// Records start with a line "-- @@ <name>"; the text up to the next record is the statement.
std::vector<HostileStatement> load_corpus(const fs::path& scratch) {
  auto text = core::read_file(testing::fixtures_dir() / "hostile_sql.txt");
  EXPECT_TRUE(text.is_ok()) << text.status().message();
  std::vector<HostileStatement> out;
  if (!text) return out;
  std::istringstream in(*text);
  std::string line;
  const std::string marker = "-- @@ ";
  while (std::getline(in, line)) {
    if (line.rfind(marker, 0) == 0) {
      out.push_back({line.substr(marker.size()), ""});
    } else if (!out.empty()) {
      out.back().sql += (out.back().sql.empty() ? "" : "\n") + line;
    }
  }
  for (auto& s : out) {
    for (size_t p; (p = s.sql.find("@DIR@")) != std::string::npos;) s.sql.replace(p, 5, scratch.string());
  }
  return out;
}

// path (relative to a root) → SHA-256 of its bytes; directories listed with "dir".
std::map<std::string, std::string> snapshot(const std::vector<fs::path>& roots) {
  std::map<std::string, std::string> out;
  for (const auto& root : roots) {
    for (const auto& e : fs::recursive_directory_iterator(root)) {
      std::string key = root.filename().string() + "/" + fs::relative(e.path(), root).string();
      if (e.is_regular_file()) {
        auto h = core::sha256_file(e.path());
        out[key] = h ? *h : "unreadable";
      } else {
        out[key] = "dir";
      }
    }
  }
  return out;
}

struct Tally {
  size_t tried = 0, refused = 0, neutralised = 0;
};
std::map<std::string, Tally>& tallies() {
  static std::map<std::string, Tally> t;
  return t;
}

std::string shell_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

class HostileSql : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new testing::TempDir();
    root_ = testing::build_mini_bird(dir_->path() / "mini");
    scratch_ = dir_->path() / "scratch";
    work_ = dir_->path() / "work";
    fs::create_directories(scratch_);
    fs::create_directories(work_);
    data::DatasetSpec spec;
    spec.data_dir = root_;
    auto ds = data::load_dataset(spec);
    ASSERT_TRUE(ds.is_ok()) << ds.status().message();
    ds_ = new data::Dataset(std::move(*ds));
    corpus_ = new std::vector<HostileStatement>(load_corpus(scratch_));
    // Relative file names (ATTACH 'x.db', VACUUM INTO 'y.db') resolve against the working
    // directory: make it the watched scratch directory for the in-process paths too.
    old_cwd_ = new fs::path(fs::current_path());
    fs::current_path(scratch_);
    before_ = new std::map<std::string, std::string>(snapshot({root_, scratch_}));
  }
  static void TearDownTestSuite() {
    fs::current_path(*old_cwd_);
    std::cout << "[hostile sql] path: tried / refused / neutralised (a harmless read ran instead, or nothing ran)\n";
    for (const auto& [path, t] : tallies())
      std::cout << "[hostile sql]   " << path << ": " << t.tried << " / " << t.refused << " / "
                << t.neutralised << "\n";
    delete before_;
    delete old_cwd_;
    delete corpus_;
    delete ds_;
    delete dir_;
  }
  void TearDown() override {
    // The strong check after every path: nothing written, nothing created.
    auto after = snapshot({root_, scratch_});
    for (const auto& [path, hash] : after) {
      auto it = before_->find(path);
      if (it == before_->end()) {
        ADD_FAILURE() << "a file appeared: " << path;
      } else {
        EXPECT_EQ(hash, it->second) << "changed: " << path;
      }
    }
    EXPECT_EQ(after.size(), before_->size());
  }

  static const data::Question& question() { return *ds_->find_question("11"); }  // music_store
  static fs::path db() { return ds_->db_paths.at("music_store"); }
  static const std::vector<HostileStatement>& corpus() { return *corpus_; }
  static void count(const std::string& path, bool refused, bool neutralised = false) {
    auto& t = tallies()[path];
    ++t.tried;
    if (refused) ++t.refused;
    if (neutralised) ++t.neutralised;
  }
  // Runs the binary from the scratch directory with `sql` on standard input.
  static testing::CommandResult run_cli(const std::string& args, const std::string& sql) {
    auto in = work_ / "stdin.sql";
    auto out = work_ / "out.txt";
    auto err = work_ / "err.txt";
    std::ofstream(in, std::ios::binary) << sql;
    std::string cmd = "cd " + shell_quote(scratch_.string()) + " && " + shell_quote(NL2SQL_BINARY) +
                      " " + args + " <" + shell_quote(in.string()) + " >" + shell_quote(out.string()) +
                      " 2>" + shell_quote(err.string());
    int rc = std::system(cmd.c_str());
    testing::CommandResult r;
    r.exit_code = WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
    auto o = core::read_file(out);
    auto e = core::read_file(err);
    r.out = o ? *o : "";
    r.err = e ? *e : "";
    return r;
  }

  static testing::TempDir* dir_;
  static fs::path root_, scratch_, work_;
  static data::Dataset* ds_;
  static std::vector<HostileStatement>* corpus_;
  static fs::path* old_cwd_;
  static std::map<std::string, std::string>* before_;
};
testing::TempDir* HostileSql::dir_ = nullptr;
fs::path HostileSql::root_, HostileSql::scratch_, HostileSql::work_;
data::Dataset* HostileSql::ds_ = nullptr;
std::vector<HostileStatement>* HostileSql::corpus_ = nullptr;
fs::path* HostileSql::old_cwd_ = nullptr;
std::map<std::string, std::string>* HostileSql::before_ = nullptr;

TEST_F(HostileSql, CorpusHasOverAHundredDistinctRecords) {
  ASSERT_GE(corpus().size(), 100u);
  std::set<std::string> names;
  for (const auto& s : corpus()) {
    EXPECT_TRUE(names.insert(s.name).second) << "duplicate record name " << s.name;
    EXPECT_FALSE(s.sql.empty()) << s.name;
  }
}

TEST_F(HostileSql, ExecutorRefusesEveryStatement) {
  db::Executor ex;
  for (const auto& s : corpus()) {
    SCOPED_TRACE(s.name);
    auto r = ex.run(db(), s.sql);
    EXPECT_FALSE(r.ok()) << s.sql;
    EXPECT_FALSE(r.error.empty());
    count("executor.run", !r.ok());
    auto p = ex.explain_query_plan(db(), s.sql);
    EXPECT_FALSE(p.ok()) << s.sql;
    count("executor.explain_query_plan", !p.ok());
  }
  // The worker connection is still good afterwards.
  auto ok = ex.run(db(), "SELECT COUNT(*) FROM album");
  ASSERT_TRUE(ok.ok()) << ok.error;
  EXPECT_GT(ok.result.rows[0][0].i, 0);
}

TEST_F(HostileSql, SeparatingInstanceCopyAndLineageRefuseEveryStatement) {
  db::Executor ex;
  auto builder = select::InstanceBuilder::open(db(), ex);
  ASSERT_TRUE(builder.is_ok()) << builder.status().message();
  auto rows = builder->fetch({{"artist", {1, 2}}, {"album", {1, 2, 3}}, {"purchase", {1}}});
  ASSERT_TRUE(rows.is_ok()) << rows.status().message();
  auto mem = select::MemoryDatabase::create(builder->schema(), *rows);
  ASSERT_TRUE(mem.is_ok()) << mem.status().message();
  for (const auto& s : corpus()) {
    SCOPED_TRACE(s.name);
    auto r = (*mem)->run(s.sql);
    EXPECT_FALSE(r.is_ok()) << s.sql;
    EXPECT_FALSE(r.is_ok() || r.status().message().empty());
    count("separating_instance.memory_copy", !r.is_ok());
    auto l = builder->lineage(s.sql);
    EXPECT_FALSE(l.is_ok()) << s.sql;
    count("separating_instance.lineage", !l.is_ok());
  }
  // D′ still holds exactly the rows put in.
  auto n = (*mem)->run("SELECT (SELECT COUNT(*) FROM artist), (SELECT COUNT(*) FROM album)");
  ASSERT_TRUE(n.is_ok()) << n.status().message();
  EXPECT_EQ(n->rows[0][0].i, 2);
  EXPECT_EQ(n->rows[0][1].i, 3);
}

TEST_F(HostileSql, EvaluatorRefusesEveryPrediction) {
  eval::ItemJudge judge(data::Benchmark::kBird, eval::EvalOptions{});
  auto fp = db::database_fingerprint(db());
  ASSERT_TRUE(fp.is_ok());
  for (const auto& s : corpus()) {
    SCOPED_TRACE(s.name);
    const eval::Prediction pred{s.sql, true, ""};
    auto item = judge.judge({.question = question(), .db_path = db(), .fingerprint = *fp, .prediction = pred}).item;
    bool refused = item.pred_status == "rejected" || item.pred_status == "error";
    EXPECT_TRUE(refused) << item.pred_status;
    EXPECT_FALSE(item.error.empty());
    EXPECT_EQ(item.outcome, "RES1");
    count("eval.judge", refused);
  }
  // evaluate() over the whole set: each hostile statement stands in for every question.
  for (size_t base = 0; base < corpus().size(); base += ds_->questions.size()) {
    std::vector<eval::Prediction> preds;
    for (size_t i = 0; i < ds_->questions.size(); ++i)
      preds.push_back({corpus()[(base + i) % corpus().size()].sql, true, ""});
    eval::EvalOptions o;
    o.threads = 1;
    auto rep = eval::evaluate(*ds_, preds, o);
    ASSERT_TRUE(rep.is_ok()) << rep.status().message();
    for (const auto& it : rep->items) {
      bool refused = it.pred_status == "rejected" || it.pred_status == "error";
      EXPECT_TRUE(refused) << it.question_id << ": " << it.pred_status;
      count("eval.evaluate", refused);
    }
  }
}

TEST_F(HostileSql, EvalCliRefusesEveryPrediction) {
  // JSONL predictions, one statement per question of the set, as many files as needed.
  const size_t n = ds_->questions.size();
  for (size_t base = 0; base < corpus().size(); base += n) {
    auto pred = work_ / ("pred_" + std::to_string(base) + ".jsonl");
    std::ofstream f(pred);
    std::map<std::string, std::string> by_id;
    for (size_t i = 0; i < n && base + i < corpus().size(); ++i) {
      const auto& q = ds_->questions[i];
      f << json{{"question_id", q.question_id}, {"sql", corpus()[base + i].sql}}.dump() << "\n";
      by_id[q.question_id] = corpus()[base + i].name;
    }
    f.close();
    auto out = work_ / ("out_" + std::to_string(base));
    auto r = run_cli("eval --benchmark bird --data " + shell_quote(root_.string()) + " --cache-dir " +
                         shell_quote((work_ / "cache").string()) + " --pred-format jsonl --pred " +
                         shell_quote(pred.string()) + " --out " + shell_quote(out.string()),
                     "");
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
    auto report = core::read_json_file(out / "eval.json");
    ASSERT_TRUE(report.is_ok()) << report.status().message();
    for (const auto& it : (*report)["items"]) {
      auto id = it["question_id"].get<std::string>();
      if (!by_id.count(id)) continue;
      std::string st = it["pred_status"].get<std::string>();
      bool refused = st == "rejected" || st == "error";
      EXPECT_TRUE(refused) << by_id[id] << ": " << st;
      count("cli.eval", refused);
    }
  }
}

TEST_F(HostileSql, SqlAndExplainCommandsRefuseEveryStatement) {
  for (const auto& s : corpus()) {
    SCOPED_TRACE(s.name);
    // `sql lineage --run` executes only the witness queries it derives (through the executor);
    // a statement that reads no table (SELECT load_extension(…)) yields none: nothing runs.
    auto r = run_cli("sql lineage --run --db " + shell_quote(db().string()) + " -", s.sql);
    bool refused = r.exit_code != 0 && !r.err.empty();
    bool nothing_ran = r.exit_code == 0 && r.out.find("witness:") == std::string::npos &&
                       r.out.find("rows of") == std::string::npos;
    EXPECT_TRUE(refused || nothing_ran) << r.exit_code << r.out << r.err;
    EXPECT_LT(r.exit_code, 128) << "killed by a signal";
    count("cli.sql_lineage_run", refused, nothing_ran);
    auto e = run_cli("explain --db " + shell_quote(db().string()) + " -", s.sql);
    refused = e.exit_code != 0 && !e.err.empty();
    EXPECT_TRUE(refused) << e.exit_code << e.out << e.err;
    EXPECT_LT(e.exit_code, 128) << "killed by a signal";
    count("cli.explain", refused);
  }
}

std::unique_ptr<llm::Client> client_for(const std::string& base_url) {
  return llm::testing::client_from(llm::testing::one_profile_settings(base_url, "fake-model", 10));
}

TEST_F(HostileSql, GeneratorsAndFixerNeverExecuteAHostileAnswer) {
  static const std::string kEvilDemo = "Question: What is evil?\nSQL: ";
  std::atomic<size_t> current{0};
  std::mutex mu;
  std::map<size_t, bool> demo_verbatim;  // guarded by mu: statement → shown verbatim as a demo
  std::atomic<int> calls{0};
  FakeOpenAiServer server([&](const httplib::Request& req, int64_t) {
    ++calls;
    const auto& s = corpus()[current.load()];
    std::string prompt = json::parse(req.body)["messages"].back()["content"].get<std::string>();
    // os example-writing steps get examples; every other call gets the statement in a fence.
    if (size_t at = prompt.find(kEvilDemo); at != std::string::npos) {
      // The os generator's final call: a hostile example got through validation.
      std::lock_guard lock(mu);
      demo_verbatim[current.load()] = prompt.compare(at + kEvilDemo.size(), s.sql.size(), s.sql) == 0;
    }
    if (prompt.find("You write practice examples") != std::string::npos)
      return FakeReply(200, completion_body("Question: What is evil?\nSQL: " + s.sql + "\n"));
    return FakeReply(200, completion_body("Here it is.\n```sql\n" + s.sql + "\n```"));
  });
  auto client = client_for(server.base_url());
  db::Executor ex;
  core::Config config(json{{"generate",
                            {{"generators", json::parse(R"([{"name": "baseline"},
                                {"name": "os", "general_examples": 1, "filtered_examples": 1}])")}}}});
  auto gens = generate::make_generators(config, client.get(), &ex, llm::PromptLibrary::bundled());
  ASSERT_TRUE(gens.is_ok()) << gens.status().message();
  auto fixer = fix::Fixer::create(core::Config(json::object()), client.get(), llm::PromptLibrary::bundled());
  ASSERT_TRUE(fixer.is_ok()) << fixer.status().message();
  const auto& q = question();
  generate::GenerationInput in;
  in.question = &q;
  in.schema = &ds_->schemas.at(q.db_id);
  in.db_path = db();
  in.seed = 7;
  fix::FixInput fin;
  fin.question = &q;
  fin.schema = in.schema;
  fin.db_path = db();
  fin.executor = &ex;
  for (size_t i = 0; i < corpus().size(); ++i) {
    current = i;
    const auto& s = corpus()[i];
    SCOPED_TRACE(s.name);
    for (const auto& g : *gens) {
      auto cands = g->generate(in);
      ASSERT_TRUE(cands.is_ok()) << cands.status().message();
      for (auto& c : *cands) {
        ASSERT_TRUE(fixer->fix(c, fin).is_ok());
        // A candidate that ran must have run something other than the record: the extraction
        // kept only a harmless read (e.g. the SELECT before a semicolon).
        bool n = c.execution.ok() && c.sql != s.sql && ex.run(db(), c.sql).ok();
        bool refused = !c.execution.ok();
        EXPECT_TRUE(refused || n) << g->name() << " ran: " << c.sql;
        // No fix round may have run the statement successfully either.
        for (const auto& round : c.fix_rounds)
          EXPECT_FALSE(round.execution_after.ok() && round.sql_after == s.sql) << round.sql_after;
        count("generate+fix." + g->name(), refused, n);
      }
    }
  }
  // os validates its model-written examples by running them: none may pass verbatim.
  for (size_t i = 0; i < corpus().size(); ++i) {
    bool shown = demo_verbatim.count(i) > 0;
    bool verbatim = shown && demo_verbatim[i];
    EXPECT_FALSE(verbatim) << corpus()[i].name << " passed the os example check";
    count("generate.os_example_check", !shown, shown && !verbatim);
  }
  EXPECT_GT(calls.load(), static_cast<int>(corpus().size()));
}

TEST_F(HostileSql, SelectorsNeverChooseAHostileCandidate) {
  db::Executor ex;
  core::Config config(json::parse(R"({"llm":{
      "models":{"offline":{"provider":"sim"}}, "default_profile":"offline",
      "roles":{"nl_eval":"offline"}, "cache":{"mode":"off"},
      "sim":{"seed":3,"p_hallucinate":0.0}}})"));
  const auto& q = question();
  const std::string good = q.gold_sql;
  llm::ClientOptions co;
  auto simulator = sim::attach(co, llm::load_llm_settings(config)->sim);
  simulator->add(q, db());
  simulator->set_judge([good](const std::string&, const std::string& sql) { return sql == good; });
  auto client = llm::Client::from_config(config, co);
  ASSERT_TRUE(client.is_ok()) << client.status().message();
  const std::string other = "SELECT COUNT(*) FROM album";
  for (const char* method : {"self_consistency", "tournament", "separating_instances"}) {
    auto sel = select::make_selector_named(method, config, {client->get(), &ex, nullptr, nullptr});
    ASSERT_TRUE(sel.is_ok()) << method << ": " << sel.status().message();
    for (const auto& s : corpus()) {
      SCOPED_TRACE(std::string(method) + " " + s.name);
      select::SelectionInput in;
      in.question = &q;
      in.schema = &ds_->schemas.at(q.db_id);
      in.db_path = db();
      in.generator_order = {"dc", "qp"};
      in.seed = 5;
      // Two copies of the hostile statement (the largest "cluster" if its result were taken at
      // face value), then two readable candidates that disagree.
      std::vector<std::string> sqls = {s.sql, s.sql, good, other};
      for (size_t i = 0; i < sqls.size(); ++i) {
        select::PoolCandidate c;
        c.id = "c" + std::to_string(i);
        c.generator = i % 2 ? "qp" : "dc";
        c.sql = sqls[i];
        c.result = std::make_shared<const db::ExecutionResult>(ex.run(db(), sqls[i]));
        in.candidates.push_back(std::move(c));
      }
      auto r = (*sel)->select(in);
      ASSERT_TRUE(r.is_ok()) << r.status().message();
      bool refused = r->chosen != 0 && r->chosen != 1;
      EXPECT_TRUE(refused) << "chose " << r->chosen;
      count(std::string("select.") + method, refused);
    }
  }
}

}  // namespace
}  // namespace nl2sql
