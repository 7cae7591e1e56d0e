// JSON Lines files (io/json_lines.h).
#include "io/json_lines.h"

#include "base/read_file.h"
#include "data/tokenizer.h"

namespace folio {

Json parse_object_line(std::string_view text, const JsonLine& at, const char* what) {
  std::string copy(text);
  if (const int64_t bad = replace_invalid_utf8(copy))
    at.fail("not valid UTF-8 (", bad, " bad byte", bad == 1 ? "" : "s", ")");
  Json j;
  try {
    j = Json::parse(text);
  } catch (const Error& e) {
    at.fail("not one JSON value (", e.what(), ")");
  }
  if (!j.is_object()) at.fail(what, " must be a JSON object, got ", j.type_name());
  return j;
}

void for_each_line(const std::string& path, const std::function<bool(std::string_view, const JsonLine&)>& each) {
  const std::string text = read_file(path);
  // A UTF-8 byte order mark that opens the file (as Windows editors and Python's
  // utf-8-sig write it) is not part of the first line; elsewhere it is the error it was.
  const std::string_view bom = "\xEF\xBB\xBF";
  int64_t line = 0;
  for (size_t at = std::string_view(text).starts_with(bom) ? bom.size() : 0; at < text.size();) {
    size_t end = text.find('\n', at);
    if (end == std::string::npos) end = text.size();
    std::string_view one(text.data() + at, end - at);
    at = end + 1, ++line;
    if (!one.empty() && one.back() == '\r') one.remove_suffix(1);
    if (one.find_first_not_of(" \t") == std::string_view::npos) continue;
    if (!each(one, JsonLine{path, line})) return;
  }
}

}  // namespace folio
