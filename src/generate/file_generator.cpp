// The "file" generator (file_generator.h).
#include "file_generator.h"

namespace nl2sql::generate {
namespace {

class FileGenerator : public Generator {
 public:
  FileGenerator(std::string label, std::string path, CandidatePoolFile pool)
      : label_(std::move(label)), path_(std::move(path)), pool_(std::move(pool)) {}
  std::string name() const override { return label_; }
  const CandidatePoolFile* pool_file() const override { return &pool_; }

  // The file's candidates for the question, in file order; none when the file lacks it (the
  // run's coverage lists such questions).
  Result<std::vector<Candidate>> generate(const GenerationInput& input) const override {
    if (input.question == nullptr) return invalid_input("file generator: GenerationInput needs a question");
    std::vector<Candidate> out;
    const auto& list = pool_.candidates_for(*input.question);
    for (size_t i = 0; i < list.size(); ++i) {
      const PooledSql& p = list[i];
      Candidate c;
      c.id = label_ + "#" + std::to_string(i);
      c.generator = label_;
      c.profile = p.generator;  // the system that wrote it, as the file names it
      c.sample_index = static_cast<int64_t>(i);
      c.reasoning = p.reasoning;
      c.sql = p.sql;
      c.original_sql = p.sql;
      if (p.sql.empty()) {
        c.extraction_ok = false;
        c.extraction_error = "the file gives an empty SQL";
      }
      c.source = CandidateSource{path_, p.position, p.generator};
      out.push_back(std::move(c));
    }
    return out;
  }

 private:
  std::string label_;
  std::string path_;
  CandidatePoolFile pool_;
};

}  // namespace

Result<std::unique_ptr<Generator>> make_file_generator(const std::string& label, const std::string& path) {
  auto pool = CandidatePoolFile::read(path);
  if (!pool) return pool.status();
  return std::unique_ptr<Generator>(std::make_unique<FileGenerator>(label, path, std::move(*pool)));
}

}  // namespace nl2sql::generate
