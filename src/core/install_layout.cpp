#include "nl2sql/core/install_layout.h"

namespace nl2sql::core {
namespace fs = std::filesystem;

fs::path executable_path() {
  std::error_code ec;
  fs::path p = fs::read_symlink("/proc/self/exe", ec);
  return ec ? fs::path() : p;
}

std::optional<fs::path> share_dir() {
  const fs::path exe = executable_path();
  if (exe.empty()) return std::nullopt;
  std::error_code ec;
  fs::path dir = exe.parent_path();
  for (int up = 0; up < 3 && !dir.empty(); ++up, dir = dir.parent_path()) {
    fs::path candidate = dir / "share" / "nl2sql";
    if (fs::is_directory(candidate / "prompts", ec)) return candidate;
    if (dir == dir.root_path()) break;
  }
  return std::nullopt;
}

fs::path expected_share_dir() {
  return executable_path().parent_path().parent_path() / "share" / "nl2sql";
}

}  // namespace nl2sql::core
