// The layers the build enforces (CMakeLists.txt, nl2sql_layer; the map in src/README.md): every
// #include "nl2sql/<layer>/…" in a layer's sources and headers names a layer it declared, every
// folder is a declared layer, and the include roots really refuse a reach-up at compile time.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include "support/test_env.h"

namespace nl2sql {
namespace {

namespace fs = std::filesystem;

fs::path source_root() { return testing::fixtures_dir().parent_path().parent_path(); }

// layer → the layers it may include (itself included), from the build's layers.txt.
std::map<std::string, std::set<std::string>> layer_map() {
  std::map<std::string, std::set<std::string>> out;
  std::ifstream in(NL2SQL_LAYER_MAP);
  std::string line;
  while (std::getline(in, line)) {
    auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::istringstream words(line.substr(colon + 1));
    std::string w;
    auto& visible = out[line.substr(0, colon)];
    while (words >> w) visible.insert(w);
  }
  return out;
}

TEST(Layers, EveryIncludeNamesADeclaredLowerLayer) {
  const auto map = layer_map();
  ASSERT_GE(map.size(), 15u) << "layers.txt not found or short: " << NL2SQL_LAYER_MAP;
  const std::regex include_re(R"re(#include\s+"nl2sql/([a-z_]+)/)re");
  size_t checked = 0;
  for (const auto& [layer, visible] : map) {
    for (const fs::path& dir : {source_root() / "src" / layer, source_root() / "include" / "nl2sql" / layer}) {
      if (!fs::exists(dir)) continue;
      for (const auto& entry : fs::directory_iterator(dir)) {
        const auto ext = entry.path().extension();
        if (ext != ".cpp" && ext != ".h") continue;
        std::ifstream in(entry.path());
        std::stringstream ss;
        ss << in.rdbuf();
        const std::string text = ss.str();
        for (std::sregex_iterator it(text.begin(), text.end(), include_re), end; it != end; ++it) {
          ++checked;
          EXPECT_TRUE(visible.count((*it)[1].str()))
              << entry.path().lexically_relative(source_root()).string() << " (layer " << layer
              << ") includes nl2sql/" << (*it)[1].str() << "/: a layer it does not declare in CMakeLists.txt";
        }
      }
    }
  }
  EXPECT_GT(checked, 300u);
}

TEST(Layers, EveryFolderIsADeclaredLayer) {
  const auto map = layer_map();
  for (const fs::path& root : {source_root() / "src", source_root() / "include" / "nl2sql"})
    for (const auto& entry : fs::directory_iterator(root)) {
      if (!entry.is_directory() || entry.path().filename() == "cli") continue;
      EXPECT_TRUE(map.count(entry.path().filename().string()))
          << entry.path().lexically_relative(source_root()).string() << " is not a layer of CMakeLists.txt";
    }
}

// A layer's private headers sit beside its sources (src/<layer>/*.h, included as "name.h");
// no other layer includes them — only tests do, through src/ on their include path.
TEST(Layers, PrivateHeadersStayInTheirLayer) {
  const std::regex include_re(R"re(#include\s+"([a-z_]+)/([a-z_]+\.h)")re");
  size_t private_headers = 0;
  for (const auto& entry : fs::directory_iterator(source_root() / "src")) {
    if (!entry.is_directory()) continue;
    for (const auto& file : fs::directory_iterator(entry.path())) {
      const auto ext = file.path().extension();
      if (ext == ".h") ++private_headers;
      if (ext != ".cpp" && ext != ".h") continue;
      std::ifstream in(file.path());
      std::stringstream ss;
      ss << in.rdbuf();
      const std::string text = ss.str();
      for (std::sregex_iterator it(text.begin(), text.end(), include_re), end; it != end; ++it) {
        if ((*it)[1].str() == entry.path().filename().string()) continue;  // its own layer
        const fs::path target = source_root() / "src" / (*it)[1].str() / (*it)[2].str();
        EXPECT_FALSE(fs::exists(target)) << file.path().lexically_relative(source_root()).string()
                                         << " includes " << (*it)[1].str() << "/" << (*it)[2].str()
                                         << ", a private header of another layer";
      }
    }
  }
  EXPECT_GE(private_headers, 10u);
}

// The compiler, given a layer's include root, refuses a higher layer's header and accepts a
// lower one's.
TEST(Layers, TheIncludeRootRefusesAReachUp) {
  const fs::path root = fs::path(NL2SQL_LAYER_MAP).parent_path() / "layer_include" / "context";
  ASSERT_TRUE(fs::exists(root / "nl2sql" / "llm")) << root;
  testing::TempDir dir;
  auto compiles = [&](const std::string& header) {
    const fs::path src = dir.path() / "probe.cpp";
    std::ofstream(src) << "#include \"" << header << "\"\nint main() { return 0; }\n";
    const std::string cmd = std::string(NL2SQL_CXX) + " -std=c++20 -fsyntax-only -I'" + root.string() + "' '" +
                            src.string() + "' > '" + (dir.path() / "out.txt").string() + "' 2>&1";
    return std::system(cmd.c_str()) == 0;
  };
  EXPECT_TRUE(compiles("nl2sql/data/dataset.h"));     // context declares data
  EXPECT_FALSE(compiles("nl2sql/select/selector.h"));  // select is above context
  EXPECT_FALSE(compiles("nl2sql/sim/simulator.h"));    // gold lives above every stage
}

}  // namespace
}  // namespace nl2sql
