// Loading a benchmark: where its files are (per benchmark and split), the questions (readers in
// questions.cpp), the schemas (schemas.cpp), and the databases each question needs.
#include "nl2sql/data/dataset.h"

#include <algorithm>
#include <cstring>
#include <set>

#include "nl2sql/core/files.h"
#include "nl2sql/core/hash.h"
#include "nl2sql/core/text.h"
#include "nl2sql/db/executor.h"
#include "nl2sql/db/schema_info.h"
#include "questions.h"

namespace nl2sql::data {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

using core::lower;

struct Layout {
  fs::path questions;
  fs::path tables;
  fs::path db_root;
};

Result<Layout> resolve_layout(const DatasetSpec& spec) {
  Layout l;
  const fs::path& d = spec.data_dir;
  switch (spec.benchmark) {
    case Benchmark::kBird:
      if (spec.split == "dev") {
        l.questions = d / "dev.json";
        l.tables = d / "dev_tables.json";
      } else if (spec.split == "mini_dev" || spec.split == "minidev") {
        l.questions = d / "mini_dev" / "mini_dev_sqlite.json";
        l.tables = d / "mini_dev" / "mini_dev_sqlite_tables.json";
      } else {
        return invalid_input("--split \"" + spec.split + "\": BIRD splits are dev, mini_dev");
      }
      l.db_root = d / "dev_databases";
      break;
    case Benchmark::kSpider:
      if (spec.split == "dev") {
        l.questions = d / "dev.json";
      } else if (spec.split == "train") {
        l.questions = d / "train_spider.json";
      } else {
        return invalid_input("--split \"" + spec.split + "\": Spider splits are dev, train");
      }
      l.tables = d / "tables.json";
      l.db_root = d / "database";
      break;
    case Benchmark::kJsonl:
      if (spec.questions.empty()) return invalid_input("--benchmark jsonl needs --questions-file FILE");
      if (spec.db_root.empty()) return invalid_input("--benchmark jsonl needs --db-root DIR");
      break;
  }
  if (!spec.questions.empty()) l.questions = spec.questions;
  if (!spec.db_root.empty()) l.db_root = spec.db_root;
  if (!spec.tables.empty()) l.tables = spec.tables;
  if (spec.benchmark != Benchmark::kJsonl && spec.data_dir.empty() && spec.questions.empty())
    return invalid_input("--data DIR is required for --benchmark " +
                         std::string(benchmark_name(spec.benchmark)));
  return l;
}

// The other "*.sqlite*" files beside a database (a test suite's variants), sorted by name.
// A variant that resolves outside the folder (a symlink) is refused, as the original is.
Result<std::vector<fs::path>> folder_variants(const fs::path& original) {
  std::vector<fs::path> out;
  std::error_code ec;
  const fs::path dir = original.parent_path();
  const fs::path root = fs::weakly_canonical(dir, ec);
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (e.path().filename() == original.filename() || name.find(".sqlite") == std::string::npos) continue;
    bool side_file = false;
    for (const char* suffix : {"-wal", "-shm", "-journal"})
      side_file = side_file || (name.size() > std::strlen(suffix) && name.compare(name.size() - std::strlen(suffix), std::string::npos, suffix) == 0);
    if (side_file || !e.is_regular_file(ec)) continue;
    const fs::path real = fs::weakly_canonical(e.path(), ec);
    auto rel = real.lexically_relative(root);
    if (!ec && (rel.empty() || *rel.begin() == ".."))
      return invalid_input("test-suite database " + e.path().string() + " resolves to " + real.string() +
                           ", outside its folder");
    out.push_back(e.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

Result<Benchmark> parse_benchmark(const std::string& name) {
  if (name == "bird") return Benchmark::kBird;
  if (name == "spider") return Benchmark::kSpider;
  if (name == "jsonl") return Benchmark::kJsonl;
  return invalid_input("--benchmark \"" + name + "\": expected bird, spider or jsonl");
}

const char* benchmark_name(Benchmark b) {
  switch (b) {
    case Benchmark::kBird: return "bird";
    case Benchmark::kSpider: return "spider";
    case Benchmark::kJsonl: return "jsonl";
  }
  return "?";
}

const Question* Dataset::find_question(const std::string& question_id) const {
  for (const auto& q : questions)
    if (q.question_id == question_id) return &q;
  return nullptr;
}

Result<std::string> Dataset::fingerprint() const {
  core::KeyHasher h;
  auto qh = core::xxh128_file(questions_file);
  if (!qh) return qh.status();
  h.add(questions_file.filename().string()).add(*qh);
  for (const auto& [db_id, path] : db_paths) {
    auto dh = db::database_fingerprint(path);
    if (!dh) return dh.status();
    h.add(db_id).add(*dh);
  }
  for (const auto& [db_id, variants] : db_variants)  // only test suites add to it
    for (const auto& v : variants) {
      auto dh = db::database_fingerprint(v);
      if (!dh) return dh.status();
      h.add(v.filename().string()).add(*dh);
    }
  return h.hex();
}

Result<Dataset> load_dataset(const DatasetSpec& spec) {
  auto layout = resolve_layout(spec);
  if (!layout) return layout.status();
  Dataset ds;
  ds.benchmark = spec.benchmark;
  ds.split = spec.split;
  ds.questions_file = layout->questions;
  ds.db_root = layout->db_root;

  Result<std::vector<Question>> qs = std::vector<Question>{};
  std::string ext = lower(layout->questions.extension().string());
  if (spec.benchmark == Benchmark::kJsonl || ext == ".jsonl")
    qs = detail::read_jsonl_questions(layout->questions);
  else if (ext == ".sql" || ext == ".txt")
    qs = detail::read_gold_file(layout->questions);
  else
    qs = detail::read_json_questions(layout->questions, spec.benchmark, ds.warnings);
  if (!qs) return qs.status();
  ds.total_questions = qs->size();

  std::map<std::string, Schema> tables;
  std::error_code ec;
  if (!layout->tables.empty() && fs::exists(layout->tables, ec)) {
    auto t = load_tables_json(layout->tables);
    if (!t) return t.status();
    tables = std::move(*t);
  } else if (!spec.tables.empty()) {
    return not_found("tables file not found: " + spec.tables.string());
  }

  std::map<std::string, bool> present;
  for (auto& q : *qs) {
    if (auto why = detail::invalid_db_id(q.db_id))
      return invalid_input(layout->questions.string() + ": question " + q.question_id + ": db_id \"" +
                           q.db_id + "\" " + *why);
    auto [it, inserted] = present.try_emplace(q.db_id, false);
    if (inserted) {
      fs::path p = layout->db_root / q.db_id / (q.db_id + ".sqlite");
      it->second = fs::is_regular_file(p, ec);
      // The db_id was checked as text above, so the path stays under the root by name; a
      // symlink there is the user's layout (one copy of a large dataset linked into several
      // folders) and is followed, unless the strict check was asked for.
      if (it->second && spec.strict_db_root) {
        const fs::path root = fs::weakly_canonical(layout->db_root, ec);
        const fs::path real = fs::weakly_canonical(p, ec);
        auto rel = real.lexically_relative(root);
        if (!ec && (rel.empty() || *rel.begin() == ".."))
          return invalid_input("database of db_id \"" + q.db_id + "\" resolves to " + real.string() +
                               ", outside the database root " + root.string() +
                               " (data.strict_db_root is set: copy the file into the root, or point --db-root at where it lives)");
      }
      if (it->second) {
        ds.db_paths[q.db_id] = p;
        auto variants = folder_variants(p);
        if (!variants) return variants.status();
        if (!variants->empty()) ds.db_variants[q.db_id] = std::move(*variants);
      }
    }
    if (!it->second) {
      bool known = tables.empty() || tables.count(q.db_id);
      ds.skipped.push_back({q.question_id, q.db_id, q.index,
                            known ? "database file missing: " +
                                        (layout->db_root / q.db_id / (q.db_id + ".sqlite")).string()
                                  : "unknown db_id (not in tables file, no database file)"});
      continue;
    }
    ds.questions.push_back(std::move(q));
  }

  for (const auto& [db_id, path] : ds.db_paths) {
    Schema schema;
    if (auto t = tables.find(db_id); t != tables.end()) {
      schema = t->second;
    } else {
      auto s = read_schema_from_database(path, db_id);
      if (!s) return s.status();
      schema = std::move(*s);
    }
    if (spec.load_descriptions)
      attach_bird_descriptions(path.parent_path() / "database_description", schema, ds.warnings);
    ds.schemas[db_id] = std::move(schema);
  }
  return ds;
}

Result<std::vector<fs::path>> test_suite_databases(const fs::path& suite_dir, const std::string& db_id) {
  std::error_code ec;
  const fs::path folder = suite_dir / db_id;
  if (!fs::is_directory(folder, ec)) return std::vector<fs::path>{};
  return folder_variants(folder / (db_id + ".sqlite"));
}

Result<std::map<std::string, std::vector<fs::path>>> test_suite_variants(const Dataset& ds, const fs::path& suite_dir) {
  if (suite_dir.empty()) return ds.db_variants;
  std::error_code ec;
  if (!fs::is_directory(suite_dir, ec)) return not_found("test-suite folder not found: " + suite_dir.string());
  std::map<std::string, std::vector<fs::path>> out;
  for (const auto& [db_id, path] : ds.db_paths) {
    auto v = test_suite_databases(suite_dir, db_id);
    if (!v) return v.status();
    if (!v->empty()) out[db_id] = std::move(*v);
  }
  return out;
}

}  // namespace nl2sql::data
