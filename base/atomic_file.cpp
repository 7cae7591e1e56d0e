#include "base/atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "base/error.h"

namespace folio {

void write_file_atomic(const std::string& path, std::string_view bytes) {
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  auto failed = [&](const char* what, int err, int fd) {
    if (fd >= 0) ::close(fd);
    ::unlink(tmp.c_str());
    fail("write", path, ": ", what, ": ", std::strerror(err));
  };
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (fd < 0) failed("cannot create a temp file beside it", errno, -1);
  for (size_t done = 0; done < bytes.size();) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) failed("cannot write", n < 0 ? errno : ENOSPC, fd);
    done += size_t(n);
  }
  if (::fsync(fd) != 0) failed("cannot fsync", errno, fd);
  if (::close(fd) != 0) failed("cannot close", errno, -1);
  if (::rename(tmp.c_str(), path.c_str()) != 0) failed("cannot rename the temp file over it", errno, -1);
  const std::string parent = std::filesystem::path(path).parent_path().string();
  const std::string dir = parent.empty() ? std::string(".") : parent;
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) ::fsync(dfd), ::close(dfd);  // best effort: the file itself is whole either way
}

}  // namespace folio
