// The "file" generator: a candidate pool made elsewhere (pool_file.h), served question by
// question. Private to the generate layer (make_generators builds it).
#pragma once

#include <memory>
#include <string>

#include "nl2sql/generate/generator.h"
#include "nl2sql/generate/pool_file.h"

namespace nl2sql::generate {

// `path` as the config gives it; `label` prefixes the candidate ids (label#0, label#1 …).
Result<std::unique_ptr<Generator>> make_file_generator(const std::string& label, const std::string& path);

}  // namespace nl2sql::generate
