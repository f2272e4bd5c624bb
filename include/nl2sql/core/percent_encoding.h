// Percent-encoding of URL components (RFC 3986): what a query parameter's name or value must be
// before it joins a URL. Every byte outside the unreserved set (A-Z a-z 0-9 - . _ ~) becomes
// %XX with upper-case hex digits, spaces included (%20, never '+'); UTF-8 is encoded byte by
// byte. Independent of any HTTP library, so the code that builds a URL never needs the
// transport that sends it. Pure function; thread-safe.
#pragma once

#include <string>
#include <string_view>

namespace nl2sql::core {

std::string percent_encode(std::string_view component);

}  // namespace nl2sql::core
