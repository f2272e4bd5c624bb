// File helpers: whole-file reads, atomic writes (write to a temp file, fsync, rename, so a
// reader or a crash never sees a half-written report), text decoding of the mixed encodings
// benchmark files come in, and JSON parsing with errors that name the file, line and column.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "nl2sql/core/status.h"

namespace nl2sql::core {

Result<std::string> read_file(const std::filesystem::path& path);
Status write_file_atomic(const std::filesystem::path& path, std::string_view content);

// Decodes bytes to UTF-8: strips a UTF-8 BOM; valid UTF-8 passes through; anything else is
// taken as Latin-1 (ISO-8859-1, as BIRD's description CSVs are) and re-encoded.
std::string decode_text(std::string_view bytes);
bool is_valid_utf8(std::string_view s);

// Parses JSON (comments allowed). On error the message is "<label>:<line>:<col>: <what>".
Result<nlohmann::json> parse_json(std::string_view text, const std::string& label);
Result<nlohmann::json> read_json_file(const std::filesystem::path& path);

// "L:C" (1-based line and column) for a byte offset in text.
std::string describe_position(std::string_view text, size_t byte_offset);

}  // namespace nl2sql::core
