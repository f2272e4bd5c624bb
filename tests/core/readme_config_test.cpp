// docs/ holds two references generated from the built binary by scripts/update_docs.sh; these
// tests fail when either falls behind the code:
//   docs/config-reference.md   its table (between <!-- config-keys --> markers) must list every
//                              key documented in configs/schema/, and every shipped config must
//                              validate against that schema;
//   docs/cli-reference.md      (between <!-- cli-reference --> markers) must have a section for
//                              every command registered in src/cli/ and for every command,
//                              subcommand and flag the binary's --help lists.
#include <gtest/gtest.h>

#include <cctype>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "nl2sql/core/config.h"
#include "nl2sql/core/config_schema.h"
#include "support/test_env.h"

namespace nl2sql::core {
namespace {

namespace fs = std::filesystem;

fs::path source_root() { return testing::fixtures_dir().parent_path().parent_path(); }

std::string read_text(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The text between <!-- name --> and <!-- /name -->, or "" when either marker is missing.
std::string generated_part(const std::string& text, const std::string& name) {
  const std::string open = "<!-- " + name + " -->";
  const std::string close = "<!-- /" + name + " -->";
  auto begin = text.find(open);
  auto end = text.find(close);
  if (begin == std::string::npos || end == std::string::npos || end < begin) return "";
  return text.substr(begin + open.size(), end - begin - open.size());
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// The section under the heading line `heading` (e.g. "## nl2sql run") up to the next heading;
// *found tells whether the heading is there at all.
std::string section_of(const std::string& doc, const std::string& heading, bool* found) {
  const std::string text = "\n" + doc;
  auto at = text.find("\n" + heading + "\n");
  *found = at != std::string::npos;
  if (!*found) return "";
  auto start = at + heading.size() + 2;
  auto next = text.find("\n#", start);
  return text.substr(start, next == std::string::npos ? std::string::npos : next - start);
}

std::string cli_reference() {
  return generated_part(read_text(source_root() / "docs" / "cli-reference.md"), "cli-reference");
}

// The names CLI11 lists under "Subcommands:" in a help text.
std::vector<std::string> listed_subcommands(const std::string& help) {
  std::vector<std::string> names;
  bool inside = false;
  for (const auto& line : lines_of(help)) {
    if (line.rfind("Subcommands:", 0) == 0) {
      inside = true;
    } else if (inside && line.find_first_not_of(' ') == std::string::npos) {
      inside = false;
    } else if (inside && line.size() > 2 && line.rfind("  ", 0) == 0 && line[2] != ' ') {
      names.push_back(line.substr(2, line.find(' ', 2) - 2));
    }
  }
  return names;
}

// Every --flag on the option lines ("  -h,--help  …", "  --config TEXT  …") of a help text.
std::set<std::string> listed_flags(const std::string& help) {
  std::set<std::string> flags;
  for (const auto& line : lines_of(help)) {
    if (line.rfind("  -", 0) != 0) continue;
    for (size_t at = line.find("--"); at != std::string::npos; at = line.find("--", at + 2)) {
      size_t end = at + 2;
      while (end < line.size() && (std::isalnum(static_cast<unsigned char>(line[end])) || line[end] == '-')) ++end;
      if (end > at + 2) flags.insert(line.substr(at, end - at));
    }
  }
  return flags;
}

TEST(DocsReference, EveryDocumentedKeyIsInTheConfigReference) {
  auto schema = ConfigSchema::load_dir(source_root() / "configs" / "schema");
  ASSERT_TRUE(schema.is_ok()) << schema.status().message();
  const std::string table = generated_part(read_text(source_root() / "docs" / "config-reference.md"), "config-keys");
  ASSERT_FALSE(table.empty()) << "docs/config-reference.md lacks the <!-- config-keys --> table";
  ASSERT_GT(schema->keys().size(), 50u);
  for (const auto& key : schema->keys())
    EXPECT_NE(table.find("`" + key.pattern + "`"), std::string::npos)
        << key.pattern << " is not in docs/config-reference.md: run scripts/update_docs.sh";
}

TEST(DocsReference, EveryShippedConfigValidates) {
  auto schema = ConfigSchema::load_dir(source_root() / "configs" / "schema");
  ASSERT_TRUE(schema.is_ok()) << schema.status().message();
  size_t checked = 0;
  for (const auto& entry : fs::recursive_directory_iterator(source_root() / "configs")) {
    if (entry.path().extension() != ".json" || entry.path().parent_path().filename() == "schema") continue;
    auto config = Config::load(entry.path());
    ASSERT_TRUE(config.is_ok()) << entry.path().filename() << ": " << config.status().message();
    auto errors = schema->validate(config->json());
    std::string all;
    for (const auto& e : errors) all += e + "\n";
    EXPECT_TRUE(errors.empty()) << entry.path().filename() << ":\n" << all;
    ++checked;
  }
  EXPECT_GE(checked, 12u);
}

// Reads the sources, not the binary: every NL2SQL_REGISTER_COMMAND("name", …) under src/cli/
// (one per cmd_<name>.cpp, the file name with '_' for '-') has a "## nl2sql name" section.
TEST(DocsReference, EveryRegisteredCommandHasACliReferenceSection) {
  const std::string doc = cli_reference();
  ASSERT_FALSE(doc.empty()) << "docs/cli-reference.md lacks the <!-- cli-reference --> part";
  const std::string macro = "NL2SQL_REGISTER_COMMAND(\"";
  std::set<std::string> names;
  for (const auto& entry : fs::recursive_directory_iterator(source_root() / "src" / "cli")) {
    if (entry.path().extension() != ".cpp") continue;
    const std::string text = read_text(entry.path());
    for (size_t at = text.find(macro); at != std::string::npos; at = text.find(macro, at + 1)) {
      const size_t begin = at + macro.size();
      names.insert(text.substr(begin, text.find('"', begin) - begin));
    }
  }
  ASSERT_GE(names.size(), 15u) << "no NL2SQL_REGISTER_COMMAND(\"…\") found under src/cli: update this test";
  for (const auto& name : names) {
    bool found = false;
    section_of(doc, "## nl2sql " + name, &found);
    EXPECT_TRUE(found) << "docs/cli-reference.md has no \"## nl2sql " << name
                       << "\" section: run scripts/update_docs.sh";
  }
}

// Runs the binary: every command and subcommand `--help` lists has its section, and every flag
// its help shows appears in that section.
TEST(DocsReference, EveryCommandAndFlagTheBinaryListsIsInTheCliReference) {
  const std::string doc = cli_reference();
  ASSERT_FALSE(doc.empty()) << "docs/cli-reference.md lacks the <!-- cli-reference --> part";
  auto top = testing::run_nl2sql("--help");
  ASSERT_EQ(top.exit_code, 0) << top.err;
  const auto commands = listed_subcommands(top.out);
  ASSERT_GE(commands.size(), 15u) << top.out;
  std::vector<std::pair<std::string, std::string>> checked;  // (words after "nl2sql", heading)
  checked.emplace_back("", "## nl2sql");
  for (const auto& command : commands) {
    checked.emplace_back(command, "## nl2sql " + command);
    auto help = testing::run_nl2sql(command + " --help");
    ASSERT_EQ(help.exit_code, 0) << command << ": " << help.err;
    for (const auto& sub : listed_subcommands(help.out))
      checked.emplace_back(command + " " + sub, "### nl2sql " + command + " " + sub);
  }
  for (const auto& [words, heading] : checked) {
    bool found = false;
    const std::string section = section_of(doc, heading, &found);
    EXPECT_TRUE(found) << "docs/cli-reference.md has no \"" << heading << "\" section: run scripts/update_docs.sh";
    if (!found) continue;
    auto help = testing::run_nl2sql(words + (words.empty() ? "" : " ") + "--help");
    ASSERT_EQ(help.exit_code, 0) << words << ": " << help.err;
    for (const auto& flag : listed_flags(help.out))
      EXPECT_NE(section.find(flag), std::string::npos)
          << "nl2sql " << words << " " << flag << " is not in docs/cli-reference.md: run scripts/update_docs.sh";
  }
}

}  // namespace
}  // namespace nl2sql::core
