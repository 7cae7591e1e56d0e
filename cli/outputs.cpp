// The rule for every output path a user names (cli/outputs.h): what may be replaced,
// where a file can be made, and the write that replaces it whole or not at all.
#include "cli/outputs.h"

#include <fcntl.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <system_error>

#include "base/atomic_file.h"
#include "cli/common.h"

namespace folio::cli {

namespace {

// Refuses (as a UsageError starting with `named`) a directory `dir` in which no file
// can be made. An existing output directory is asked through its permissions and
// mount (a probe file would touch what a refusal must leave as it was); the directory
// a new output goes into, through a probe file (removed at once), which asks the file
// system itself, as permission bits cannot (root passes them, /proc refuses root).
void check_takes_files(const std::string& named, const std::filesystem::path& dir, bool probe) {
  int err = 0;
  if (!probe) {
    struct statvfs vfs {};
    if (::access(dir.c_str(), W_OK | X_OK) != 0) err = errno;
    else if (::statvfs(dir.c_str(), &vfs) == 0 && (vfs.f_flag & ST_RDONLY)) err = EROFS;
  } else {
    const std::filesystem::path file = dir / cat(".folio-probe.", ::getpid());
    const int fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) err = errno;
    else ::close(fd), ::unlink(file.c_str());
  }
  if (err)
    throw UsageError(cat(named, ": cannot write in ", dir.string(), " (",
                         std::error_code(err, std::generic_category()).message(), ")"));
}

// What an output may replace: nothing, or a regular file. The new file is written beside
// it and renamed over it, so a symbolic link would itself be replaced by a file (its
// target left as it was), and so would a device, a FIFO or a socket (/dev/null, and
// /dev/stdout, a link to one): refused, --overwrite or not. `named` is the option or
// argument; a path inside an output directory is named too.
void check_replaceable(const std::string& named, const std::filesystem::path& path, bool name_path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::file_status s = fs::symlink_status(path, ec);
  if (!fs::exists(s) || fs::is_regular_file(s)) return;
  const char* kind = fs::is_symlink(s)           ? "a symbolic link"
                     : fs::is_directory(s)       ? "a directory"
                     : fs::is_character_file(s)  ? "a character device"
                     : fs::is_block_file(s)      ? "a block device"
                     : fs::is_fifo(s)            ? "a FIFO"
                     : fs::is_socket(s)          ? "a socket"
                                                 : "of another kind";
  throw UsageError(cat(named, ": ", name_path ? path.string() + " " : "", "is ", kind,
                       ", not a regular file: the output is written beside it and renamed over it, which would "
                       "replace it; give a regular file's path"));
}

}  // namespace

void add_overwrite(po::options_description& options) {
  options.add_options()("overwrite", po::bool_switch(),
                        "replace what is already at the output path (without it, an existing output is refused)");
}

void check_output(const po::variables_map& vm, const std::string& named, const std::string& path,
                  const std::vector<std::string>& files_inside) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const bool overwrite = vm.count("overwrite") && vm["overwrite"].as<bool>();
  // Other tools' "-" for standard output would be a file named "-" here, awkward to be rid of.
  if (path == "-")
    throw UsageError(cat(named, ": '-' is no path here (a file named '-' would be made): give a file's path, or "
                         "leave the option out where the command prints to standard output by default"));
  if (files_inside.empty()) {  // one file, written next to itself and renamed (write_file_atomic)
    if (fs::is_directory(path, ec)) throw UsageError(cat(named, ": is a directory, not a file"));
    const fs::path parent = fs::absolute(path, ec).parent_path();
    if (!fs::is_directory(parent, ec))
      throw UsageError(cat(named, ": ", parent.string(), " is not an existing directory"));
    check_replaceable(named, path, false);
    if (!overwrite && fs::exists(fs::symlink_status(path, ec)))
      throw UsageError(cat(named, ": already exists; --overwrite replaces it, or give another path"));
    check_takes_files(named, parent, true);
    return;
  }
  // A directory, made if missing: its nearest existing ancestor must take new entries.
  const fs::path wanted = fs::absolute(path, ec);
  fs::path p = wanted;
  while (p.has_parent_path() && p != p.parent_path() && !fs::exists(p, ec)) p = p.parent_path();
  if (!fs::is_directory(p, ec))
    throw UsageError(p == wanted ? cat(named, ": exists and is not a directory")
                                 : cat(named, ": ", p.string(), " is not a directory"));
  std::string there;
  for (const std::string& f : files_inside) {
    check_replaceable(named, fs::path(path) / f, true);
    if (fs::exists(fs::symlink_status(fs::path(path) / f, ec))) there += cat(there.empty() ? "" : ", ", f);
  }
  if (!overwrite && !there.empty())
    throw UsageError(cat(named, ": already holds ", there, "; --overwrite replaces ",
                         there.find(',') == std::string::npos ? "it" : "them", ", or give another directory"));
  check_takes_files(named, p, p != wanted);
}

void check_not_input(const std::string& named, const std::string& output, const std::string& input) {
  std::error_code ec;  // either missing: not the same file
  if (std::filesystem::equivalent(output, input, ec))
    throw UsageError(cat(named, ": would replace ", input, ", which this command reads (--overwrite replaces "
                         "an earlier output, never the input): give another path"));
}

void write_output(const std::string& path, const std::string& text, const std::string& what) {
  if (path.empty()) {
    std::fwrite(text.data(), 1, text.size(), stdout);
    return;
  }
  write_file_atomic(path, text);
  std::printf("wrote %s (%s)\n", path.c_str(), what.c_str());
}

}  // namespace folio::cli
