#pragma once
// JSON Lines files (one JSON object a line), as the task-file and conversation readers
// take them: blank lines skipped, and every error named by its file and line, so that
// a file of thousands of lines can be fixed.
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "base/error.h"
#include "io/json.h"

namespace folio {

// A line's place: its file and its number (from 1). fail() throws folio::Error
// "<path>:<line>: <parts...>".
struct JsonLine {
  const std::string& path;
  int64_t line;
  template <class... Parts>
  [[noreturn]] void fail(const Parts&... parts) const {
    throw Error(cat(path, ":", line, ": ", parts...));
  }
};

// One line as a JSON object. Refused, naming the line: bytes that are not UTF-8, text
// that is not one JSON value, and a value that is not an object ("<what> must be a JSON
// object, got array").
Json parse_object_line(std::string_view text, const JsonLine& at, const char* what);

// Calls `each` with every line of the file at `path` that is not blank (a '\r' before
// its '\n' dropped, and a UTF-8 byte order mark at the file's start), in order, until
// `each` returns false.
void for_each_line(const std::string& path, const std::function<bool(std::string_view, const JsonLine&)>& each);

}  // namespace folio
