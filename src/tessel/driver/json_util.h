// The CLI's --json output and --trials-out lines are nlohmann/json (Debian
// nlohmann-json3-dev, header-only). Two choices keep the text as it was:
// ordered_json writes an object's keys in the order the code sets them (for a
// person reading it), and json_line() replaces invalid UTF-8 (a file name, an
// error message) by U+FFFD instead of throwing, so the output is always valid
// JSON. Non-finite doubles are written as null (JSON has no NaN/inf).
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace tessel {

using Json = nlohmann::ordered_json;

// Compact single-line text.
inline std::string json_line(const Json& j) { return j.dump(-1, ' ', false, Json::error_handler_t::replace); }

}  // namespace tessel
