// Small text pieces several generators put into their prompts and traces.
#pragma once

#include <string>

#include "nl2sql/data/dataset.h"

namespace nl2sql::generate {

// The question's evidence as the prompts show it: "(none)" when the dataset gives none.
inline std::string evidence_text(const data::Task& q) { return q.evidence.empty() ? "(none)" : q.evidence; }

// `s` cut to its first `n` bytes, "…" marking a cut.
inline std::string cut(const std::string& s, size_t n) { return s.size() <= n ? s : s.substr(0, n) + "…"; }

}  // namespace nl2sql::generate
