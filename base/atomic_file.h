#pragma once
// Writing a whole file so that a reader, a crash or a full disk never leaves half of
// it: the bytes go to "<path>.tmp.<pid>", are fsynced, and the temp file is renamed
// over `path` (then the directory is fsynced). On failure the temp file is removed,
// any previous `path` is untouched, and folio::Error names the file and the cause.
#include <string>
#include <string_view>

namespace folio {

void write_file_atomic(const std::string& path, std::string_view bytes);

}  // namespace folio
