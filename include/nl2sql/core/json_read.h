// Reading a typed field out of a JSON object written by this tool (traces, records): a missing or
// null key leaves the target as it is; a key of the wrong type is an error that names the key and
// where it was read (a file edited by hand should not silently lose fields).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "nl2sql/core/status.h"

namespace nl2sql::core {

template <typename T>
Status read_key(const nlohmann::json& j, const char* key, T& out, const std::string& where) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return Status::ok();
  try {
    out = it->get<T>();
  } catch (const nlohmann::json::exception& e) {
    return invalid_input(where + ": key \"" + key + "\": " + e.what());
  }
  return Status::ok();
}

}  // namespace nl2sql::core
