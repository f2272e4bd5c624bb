#include "nl2sql/context/schema_render.h"

#include <algorithm>
#include <map>
#include <random>

#include <fmt/format.h>

#include "nl2sql/context/metadata.h"
#include "nl2sql/context/text_match.h"
#include "nl2sql/core/text.h"

namespace nl2sql::context {
namespace {

using core::lower;

std::string ident(const std::string& name) {
  bool plain = !name.empty() && (std::isalpha(static_cast<unsigned char>(name[0])) || name[0] == '_');
  for (char c : name) plain = plain && (std::isalnum(static_cast<unsigned char>(c)) || c == '_');
  return plain ? name : core::quote_sql_identifier(name);
}

// One line: whitespace (newlines included) collapsed, cut at `max` code points.
std::string one_line(const std::string& s, size_t max) {
  std::string flat;
  bool space = false;
  for (char c : s) {
    if (c == '\n' || c == '\r' || c == '\t' || c == ' ') {
      space = !flat.empty();
      continue;
    }
    if (space) flat.push_back(' ');
    space = false;
    flat.push_back(c);
  }
  auto cps = decode_utf8(flat);
  if (max == 0 || cps.size() <= max) return flat;
  return encode_utf8(cps.substr(0, max)) + "…";
}

// Fisher-Yates with our own index draw: the same seed gives the same order on every platform.
template <typename T>
void shuffle(std::vector<T>& v, std::mt19937_64& rng) {
  for (size_t i = v.size(); i > 1; --i) std::swap(v[i - 1], v[rng() % i]);
}

}  // namespace

std::string stats_comment(const ColumnStats& s) {
  std::string out = fmt::format("{} rows", s.rows);
  if (s.nulls > 0) out += fmt::format(", {} NULL", s.nulls);
  out += fmt::format(", {} distinct", s.distinct);
  if (s.unique()) out += " (unique)";
  const std::string cls = s.storage_class();
  if ((cls == "integer" || cls == "real") && !s.min.empty()) out += fmt::format(", range {}..{}", s.min, s.max);
  if (cls == "text" || cls == "mixed")
    out += fmt::format(", length {}..{} (avg {:.1f})", s.min_length, s.max_length, s.avg_length);
  if (cls == "mixed") out += ", mixed types";
  if (!s.top_values.empty()) {
    std::vector<std::string> top;
    for (const auto& [v, n] : s.top_values)
      top.push_back(fmt::format("{} x{}", cls == "text" || cls == "mixed" ? core::quote_sql_string(v) : v, n));
    out += fmt::format(", most frequent: {}", fmt::join(top, ", "));
  }
  return out;
}

namespace {

// One rendering: the foreign keys shown (declared, plus inferred ones when asked, with their
// evidence), the columns kept, each column's example and retrieved values; a member per part of
// the text.
class SchemaRendering {
 public:
  SchemaRendering(const data::Schema& schema, const RenderOptions& options, const ValueIndex* index,
                  const std::vector<ValueMatch>* retrieved, const DatabaseMetadata* metadata)
      : schema_(schema), options_(options), metadata_(metadata), fks_(schema.foreign_keys), fk_notes_(fks_.size()) {
    if (metadata && options.inferred_fks)
      for (const auto& f : metadata->inferred_fks) {
        fks_.push_back({f.from_table, f.from_column, f.to_table, f.to_column});
        fk_notes_.push_back("inferred: " + f.evidence());
      }
    choose_columns();
    // Example values per column (index order = SQLite's DISTINCT order) and retrieved values.
    if (index && options.examples > 0)
      for (const auto& c : index->columns()) {
        auto& ex = examples_[lower(c.table + "." + c.column)];
        for (uint32_t id = c.first; id < c.first + c.count && ex.size() < options.examples; ++id)
          ex.push_back(core::quote_sql_string(one_line(std::string(index->value(id)), 60)));
      }
    if (retrieved)
      for (const auto& v : *retrieved) matched_[lower(v.table + "." + v.column)].push_back(core::quote_sql_string(v.value));
  }

  std::string render() const {
    std::vector<const data::Table*> tables;
    for (const auto& t : schema_.tables)
      if (options_.columns.empty() || kept_tables_.count(lower(t.name))) tables.push_back(&t);
    std::mt19937_64 rng(options_.shuffle_seed.value_or(0));
    if (options_.shuffle_seed) shuffle(tables, rng);
    std::string out;
    for (const auto* t : tables) out += create_table(*t, rng);
    // The question's own values come after every table, in the schema's declared order (not the
    // shuffled one): the tables above are the same for every question of the database, so a
    // provider's prefix cache can serve them.
    std::string values;
    for (const auto& t : schema_.tables) {
      if (!options_.columns.empty() && !kept_tables_.count(lower(t.name))) continue;
      for (const auto& c : t.columns) {
        if (!kept(t.name, c.name)) continue;
        if (auto it = matched_.find(lower(t.name + "." + c.name)); it != matched_.end())
          values += fmt::format("--   {}.{} matches question: {}\n", ident(t.name), ident(c.name), fmt::join(it->second, ", "));
      }
    }
    if (!values.empty()) out += "-- Stored values resembling words of the question:\n" + values;
    return out;
  }

 private:
  // Columns kept: the subset, plus keys joining kept tables.
  void choose_columns() {
    for (const auto& c : options_.columns) keep_.insert(lower(c));
    if (keep_.empty()) return;
    for (const auto& t : schema_.tables)
      for (const auto& c : t.columns)
        if (keep_.count(lower(t.name + "." + c.name))) kept_tables_.insert(lower(t.name));
    for (const auto& t : schema_.tables) {
      if (!kept_tables_.count(lower(t.name))) continue;
      for (const auto& pk : t.primary_key) keep_.insert(lower(t.name + "." + pk));
    }
    for (const auto& fk : fks_)
      if (kept_tables_.count(lower(fk.from_table)) && kept_tables_.count(lower(fk.to_table))) {
        keep_.insert(lower(fk.from_table + "." + fk.from_column));
        keep_.insert(lower(fk.to_table + "." + fk.to_column));
      }
  }

  bool kept(const std::string& t, const std::string& c) const {
    return options_.columns.empty() || keep_.count(lower(t + "." + c)) > 0;
  }

  // The kept columns of a table; with a shuffle seed, keys first (a reader expects them), the
  // rest shuffled.
  std::vector<const data::Column*> columns_of(const data::Table& t, std::mt19937_64& rng) const {
    std::vector<const data::Column*> cols;
    for (const auto& c : t.columns)
      if (kept(t.name, c.name)) cols.push_back(&c);
    if (options_.shuffle_seed) {
      auto is_pk = [&](const data::Column* c) {
        return std::find(t.primary_key.begin(), t.primary_key.end(), c->name) != t.primary_key.end();
      };
      std::stable_partition(cols.begin(), cols.end(), is_pk);
      auto first_other = std::find_if_not(cols.begin(), cols.end(), is_pk);
      std::vector<const data::Column*> rest(first_other, cols.end());
      shuffle(rest, rng);
      std::copy(rest.begin(), rest.end(), first_other);
    }
    return cols;
  }

  // A column's comment: descriptions, statistics and example values, as the options ask.
  std::string column_comment(const data::Table& t, const data::Column& c) const {
    std::vector<std::string> parts;
    if (options_.descriptions) {
      std::string d = one_line(c.description, options_.max_comment_chars);
      if (d.empty() && metadata_)
        if (auto it = metadata_->descriptions.find(t.name + "." + c.name); it != metadata_->descriptions.end())
          d = "(generated) " + one_line(it->second.text, options_.max_comment_chars);
      if (!d.empty() && normalize_text(d) != normalize_text(c.name)) parts.push_back(d);
      std::string vd = one_line(c.value_description, options_.max_comment_chars);
      if (!vd.empty()) parts.push_back("values: " + vd);
    }
    const std::string key = lower(t.name + "." + c.name);
    if (metadata_ && options_.stats)
      if (const auto* st = metadata_->find(t.name, c.name)) parts.push_back(stats_comment(*st));
    if (auto it = examples_.find(key); it != examples_.end() && !it->second.empty())
      parts.push_back("examples: " + fmt::format("{}", fmt::join(it->second, ", ")));
    return parts.empty() ? "" : fmt::format("{}", fmt::join(parts, "; "));
  }

  std::string create_table(const data::Table& t, std::mt19937_64& rng) const {
    std::vector<std::string> lines;
    std::vector<std::string> comments;
    for (const auto* c : columns_of(t, rng)) {
      std::string line = "  " + ident(c->name);
      if (!c->type.empty()) line += " " + core::upper(c->type);
      lines.push_back(line);
      comments.push_back(column_comment(t, *c));
    }
    std::vector<std::string> pk;
    for (const auto& k : t.primary_key)
      if (kept(t.name, k)) pk.push_back(ident(k));
    if (!pk.empty()) {
      lines.push_back(fmt::format("  PRIMARY KEY ({})", fmt::join(pk, ", ")));
      comments.emplace_back();
    }
    for (size_t i = 0; i < fks_.size(); ++i) {
      const auto& fk = fks_[i];
      if (lower(fk.from_table) != lower(t.name) || !kept(fk.from_table, fk.from_column) ||
          !kept(fk.to_table, fk.to_column))
        continue;
      if (!options_.columns.empty() && !kept_tables_.count(lower(fk.to_table))) continue;
      lines.push_back(fmt::format("  FOREIGN KEY ({}) REFERENCES {}({})", ident(fk.from_column),
                                  ident(fk.to_table), ident(fk.to_column)));
      comments.push_back(fk_notes_[i]);
    }
    std::string out = "CREATE TABLE " + ident(t.name) + " (\n";
    for (size_t i = 0; i < lines.size(); ++i) {
      out += lines[i];
      if (i + 1 < lines.size()) out += ",";
      if (!comments[i].empty()) out += " -- " + comments[i];
      out += "\n";
    }
    return out + ");\n";
  }

  const data::Schema& schema_;
  const RenderOptions& options_;
  const DatabaseMetadata* metadata_;
  std::vector<data::ForeignKey> fks_;
  std::vector<std::string> fk_notes_;
  std::set<std::string> keep_, kept_tables_;
  std::map<std::string, std::vector<std::string>> examples_, matched_;
};

}  // namespace

std::string render_schema(const data::Schema& schema, const RenderOptions& options,
                          const ValueIndex* index, const std::vector<ValueMatch>* retrieved,
                          const DatabaseMetadata* metadata) {
  return SchemaRendering(schema, options, index, retrieved, metadata).render();
}

std::string render_schema(const SchemaSources& sources, const RenderOptions& options) {
  if (sources.schema == nullptr) return "";
  return render_schema(*sources.schema, options, sources.index, sources.values, sources.metadata);
}

const char* schema_rung_name(int rung) {
  switch (rung) {
    case 0: return "full";
    case 1: return "no_examples";
    case 2: return "short_descriptions";
    case 3: return "filtered_columns";
    default: return "within_budget";
  }
}

RenderOptions options_at_rung(RenderOptions options, int rung,
                              const std::set<std::string>& filtered_columns) {
  if (rung >= 1) {
    options.examples = 0;
    options.stats = false;
  }
  if (rung >= 2 && (options.max_comment_chars == 0 || options.max_comment_chars > 120))
    options.max_comment_chars = 120;
  if (rung >= 3 && !filtered_columns.empty() && options.columns.empty()) options.columns = filtered_columns;
  return options;
}

}  // namespace nl2sql::context
