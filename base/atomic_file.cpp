#include "base/atomic_file.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstring>
#include <filesystem>

#include "base/error.h"

namespace folio {

void remove_dead_temp_files(const std::string& dir, const std::function<bool(std::string_view name)>& ours) {
  namespace fs = std::filesystem;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir.empty() ? "." : dir, ec)) {
    const std::string file = e.path().filename().string();
    const size_t at = file.rfind(".tmp.");
    if (at == std::string::npos || !ours(std::string_view(file).substr(0, at))) continue;
    const std::string pid = file.substr(at + 5);
    if (pid.empty() || pid.size() > 10 || pid.find_first_not_of("0123456789") != std::string::npos) continue;
    const long long id = std::stoll(pid);
    // ESRCH alone: EPERM is a live process of another user's.
    if (id > 0 && id <= INT_MAX && ::kill(pid_t(id), 0) != 0 && errno == ESRCH) ::unlink(e.path().c_str());
  }
}

void write_file_atomic(const std::string& path, std::string_view bytes) {
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  const std::string dir = parent.empty() ? std::string(".") : parent.string();
  // A writer of this path killed before its rename left its temp file (an export of a
  // large model is a long write): gone with this write, not piling up beside the file.
  const std::string name = std::filesystem::path(path).filename().string();
  remove_dead_temp_files(dir, [&](std::string_view base) { return base == name; });
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
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) ::fsync(dfd), ::close(dfd);  // best effort: the file itself is whole either way
}

}  // namespace folio
