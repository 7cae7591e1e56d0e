#pragma once
// Writing a whole file so that a reader, a crash or a full disk never leaves half of
// it: the bytes go to "<path>.tmp.<pid>", are fsynced, and the temp file is renamed
// over `path` (then the directory is fsynced). On failure the temp file is removed,
// any previous `path` is untouched, and folio::Error names the file and the cause.
// A writer killed mid-write (SIGKILL, a power cut) cannot remove its temp file: the
// next write to the same path removes it (remove_dead_temp_files).
#include <functional>
#include <string>
#include <string_view>

namespace folio {

void write_file_atomic(const std::string& path, std::string_view bytes);

// Removes the files "<name>.tmp.<pid>" in `dir`, for each `name` that `ours` accepts,
// whose process is gone (kill(pid, 0) says ESRCH): temp files of writers killed before
// their rename. A live process's are left alone, whoever it is, and so is anything
// else. Best effort: a file it cannot remove stays.
void remove_dead_temp_files(const std::string& dir, const std::function<bool(std::string_view name)>& ours);

}  // namespace folio
