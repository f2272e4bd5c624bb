// Reading a typed field out of a JSON object written by this tool (traces, records): a missing or
// null key leaves the target as it is; a key of the wrong type is an error that names the key and
// where it was read (a file edited by hand should not silently lose fields).
//
// The stage types a run stores (context, candidates, call traces, selections, the question
// record) read through these and refuse a key they do not write (known_keys_only): a key renamed
// on one side only is then an error naming the key, not a field that silently reads as empty.
#pragma once

#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>

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

// As read_key, for a field written only when it has a value: absent or null reads as nullopt.
// An integer field holding a fraction is an error (it would not be written back as it was).
template <typename T>
Status read_optional(const nlohmann::json& j, const char* key, std::optional<T>& out, const std::string& where) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return Status::ok();
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
    if (!it->is_number_integer()) return invalid_input(where + ": key \"" + key + "\" must be an integer");
  }
  T value{};
  NL2SQL_RETURN_IF_ERROR(read_key(j, key, value, where));
  out = std::move(value);
  return Status::ok();
}

// `j` must be an object whose keys are all in `known`; else an error naming the first other key.
inline Status known_keys_only(const nlohmann::json& j, std::initializer_list<std::string_view> known,
                              const std::string& where) {
  if (!j.is_object()) return invalid_input(where + ": expected an object");
  for (const auto& [key, value] : j.items()) {
    bool ok = false;
    for (std::string_view k : known) ok = ok || k == key;
    if (!ok) return invalid_input(where + ": unknown key \"" + key + "\" (not one this build writes)");
  }
  return Status::ok();
}

// Writes `value` under `key` when it has one.
template <typename T>
void write_optional(nlohmann::json& j, const char* key, const std::optional<T>& value) {
  if (value) j[key] = *value;
}

}  // namespace nl2sql::core
