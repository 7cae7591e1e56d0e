#include "base/read_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

#include "base/error.h"

namespace folio {
namespace {

std::string limit_text(int64_t max_bytes) {
  return max_bytes == kMaxTextFileBytes ? cat(max_bytes, " (1 GiB) for a text file") : cat(max_bytes, " bytes");
}

// Refuses what read_file must not read, from the file's stat.
void check_readable(const std::string& path, const struct stat& st, int64_t max_bytes) {
  if (!S_ISREG(st.st_mode)) {
    const mode_t m = st.st_mode;
    const char* kind = S_ISDIR(m) ? "a directory" : S_ISCHR(m) ? "a character device" : S_ISBLK(m) ? "a block device"
                       : S_ISFIFO(m) ? "a FIFO" : S_ISSOCK(m) ? "a socket" : "a special file";
    fail("data", path, ": is ", kind, ", not a regular file");
  }
  if (st.st_size > max_bytes)
    fail("data", path, ": ", st.st_size, " bytes, more than the limit of ", limit_text(max_bytes),
         max_bytes == kMaxTextFileBytes ? ": folio tokenize DIR_OR_FILE --out DATA_DIR prepares a corpus of any size "
                                          "for folio train --data DATA_DIR" : "");
}

}  // namespace

std::string read_file(const std::string& path, int64_t max_bytes) {
  // The type and size come first, from stat: only a regular file is opened at all.
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) fail("data", path, ": cannot open (", std::strerror(errno), ")");
  check_readable(path, st, max_bytes);
  // Should the path have become a FIFO since, O_NONBLOCK keeps open from waiting and
  // fstat refuses it. stdio then reads (errno survives, unlike with ifstream).
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) fail("data", path, ": cannot open (", std::strerror(errno), ")");
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> f(::fdopen(fd, "rb"), &std::fclose);
  if (!f) {
    const int err = errno;
    ::close(fd);
    fail("data", path, ": cannot open (", std::strerror(err), ")");
  }
  if (::fstat(fd, &st) != 0) fail("data", path, ": cannot stat (", std::strerror(errno), ")");
  check_readable(path, st, max_bytes);

  std::string bytes;
  bytes.reserve(size_t(st.st_size));
  // To EOF rather than st_size bytes (/proc files say 0), within the limit (a file
  // growing while read).
  char chunk[1 << 16];
  size_t got;
  while ((got = std::fread(chunk, 1, sizeof chunk, f.get())) > 0) {
    if (int64_t(bytes.size() + got) > max_bytes)
      fail("data", path, ": grew past the limit of ", limit_text(max_bytes), " while read");
    bytes.append(chunk, got);
  }
  if (std::ferror(f.get())) fail("data", path, ": read error (", std::strerror(errno), ")");
  if (bytes.empty()) fail("data", path, ": file is empty");
  return bytes;
}

}  // namespace folio
