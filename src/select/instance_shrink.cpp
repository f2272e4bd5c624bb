// Shrinking a separating instance (InstanceBuilder::shrink): rows are dropped while the two
// queries still differ on what is left — delta debugging over the rows of D′ (Zeller and
// Hildebrandt's ddmin): split the rows into n chunks, keep a chunk alone or drop one when the
// queries still differ there, else split finer, down to single rows. The result is 1-minimal
// (no single row can go) unless the time budget ends the search first; every D′ tried is a
// sub-database of the found one, so of D, and is verified on both queries as the search goes.
#include <chrono>

#include "nl2sql/db/result_compare.h"
#include "nl2sql/select/separating_instance.h"

namespace nl2sql::select {

InstanceBuilder::Separation InstanceBuilder::shrink(const std::string& a, const std::string& b,
                                                    Scratch& scratch, Separation found) const {
  struct Item {
    const std::string* table;
    size_t row;
  };
  const InstanceTables source = found.instance;
  std::vector<Item> current;
  for (const auto& [name, rs] : source.tables)
    for (size_t r = 0; r < rs.rows.size(); ++r) current.push_back({&name, r});
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                            std::chrono::duration<double>(options_.shrink_budget_s));
  auto late = [&] { return std::chrono::steady_clock::now() > deadline; };
  // The queries on the rows `keep`; set into `found` when they differ.
  auto separates = [&](const std::vector<Item>& keep) {
    InstanceTables t;
    for (const Item& it : keep) {
      auto& rs = t.tables[*it.table];
      if (rs.columns.empty()) rs.columns = source.tables.at(*it.table).columns;
      rs.rows.push_back(source.tables.at(*it.table).rows[it.row]);
    }
    if (!scratch.load(t).is_ok()) return false;
    auto ra = scratch.db->run(a, options_.query_timeout_s);
    if (!ra.is_ok()) return false;
    auto rb = scratch.db->run(b, options_.query_timeout_s);
    if (!rb.is_ok() || db::relaxed_equal(*ra, *rb)) return false;
    found = Separation{std::move(t), std::move(*ra), std::move(*rb)};
    return true;
  };
  size_t n = 2;
  while (current.size() >= 2 && !late()) {
    const size_t chunk = (current.size() + n - 1) / n;
    bool reduced = false;
    // A chunk alone, then everything but a chunk (with two chunks, that is the other one alone).
    for (int complement = 0; complement < (n == 2 ? 1 : 2) && !reduced && !late(); ++complement) {
      for (size_t start = 0; start < current.size() && !late(); start += chunk) {
        const size_t end = std::min(current.size(), start + chunk);
        std::vector<Item> keep;
        if (complement == 0) {
          if (n == 2 && end - start == current.size()) continue;
          keep.assign(current.begin() + static_cast<std::ptrdiff_t>(start), current.begin() + static_cast<std::ptrdiff_t>(end));
        } else {
          keep.assign(current.begin(), current.begin() + static_cast<std::ptrdiff_t>(start));
          keep.insert(keep.end(), current.begin() + static_cast<std::ptrdiff_t>(end), current.end());
        }
        if (keep.empty() || keep.size() == current.size() || !separates(keep)) continue;
        current = std::move(keep);
        n = complement == 0 ? 2 : std::max<size_t>(n - 1, 2);
        reduced = true;
        break;
      }
    }
    if (reduced) continue;
    if (n >= current.size()) break;
    n = std::min(n * 2, current.size());
  }
  return found;
}

}  // namespace nl2sql::select
