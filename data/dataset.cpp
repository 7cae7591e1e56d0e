#include "data/dataset.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>

#include "autograd/error.h"

namespace folio {
namespace {

// Refuses what read_file must not read, from the file's stat.
void check_readable(const std::string& path, const struct stat& st) {
  if (!S_ISREG(st.st_mode)) {
    const mode_t m = st.st_mode;
    const char* kind = S_ISDIR(m) ? "a directory" : S_ISCHR(m) ? "a character device" : S_ISBLK(m) ? "a block device"
                       : S_ISFIFO(m) ? "a FIFO" : S_ISSOCK(m) ? "a socket" : "a special file";
    fail("data", path, ": is ", kind, ", not a regular file");
  }
  if (st.st_size > kMaxTextFileBytes)
    fail("data", path, ": ", st.st_size, " bytes, more than the limit of ", kMaxTextFileBytes,
         " (1 GiB) for a text file");
}

}  // namespace

std::string read_file(const std::string& path) {
  // The type and size come first, from stat: only a regular file is opened at all.
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) fail("data", path, ": cannot open (", std::strerror(errno), ")");
  check_readable(path, st);
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
  check_readable(path, st);

  std::string bytes;
  bytes.reserve(size_t(st.st_size));
  // To EOF rather than st_size bytes (/proc files say 0), within the limit (a file
  // growing while read).
  char chunk[1 << 16];
  size_t got;
  while ((got = std::fread(chunk, 1, sizeof chunk, f.get())) > 0) {
    if (int64_t(bytes.size() + got) > kMaxTextFileBytes)
      fail("data", path, ": grew past the limit of ", kMaxTextFileBytes, " bytes (1 GiB) for a text file while read");
    bytes.append(chunk, got);
  }
  if (std::ferror(f.get())) fail("data", path, ": read error (", std::strerror(errno), ")");
  if (bytes.empty()) fail("data", path, ": file is empty");
  return bytes;
}

Split split_tokens(std::span<const int32_t> tokens, double train_fraction) {
  // Written as !(inside) so that NaN is rejected too.
  if (!(train_fraction > 0.0 && train_fraction <= 1.0))
    fail("data", "train fraction must be in (0, 1], got ", train_fraction);
  const size_t n_train = size_t(std::floor(double(tokens.size()) * train_fraction));
  Split s;
  s.train.assign(tokens.begin(), tokens.begin() + n_train);
  s.val.assign(tokens.begin() + n_train, tokens.end());
  return s;
}

void sample_batch(std::span<const int32_t> tokens, int64_t B, int64_t T, Rng& rng, Batch& batch,
                  std::string_view split_name) {
  if (B < 1 || T < 1) fail("data", "batch size and block size must be positive, got B = ", B, ", T = ", T);
  const int64_t n = int64_t(tokens.size());
  if (n < T + 1)
    fail("data", split_name, " split has ", n, " tokens, needs at least block_size + 1 = ", T + 1);
  batch.B = B;
  batch.T = T;
  batch.inputs.resize(size_t(B * T));  // resize keeps capacity: no allocation after the first call
  batch.targets.resize(size_t(B * T));
  for (int64_t b = 0; b < B; ++b) {
    const int32_t* window = tokens.data() + rng.below(uint64_t(n - T));  // T + 1 tokens from here
    std::copy(window, window + T, batch.inputs.begin() + b * T);
    std::copy(window + 1, window + T + 1, batch.targets.begin() + b * T);
  }
}

Corpus Corpus::load(const std::string& path, double train_fraction) {
  const std::string bytes = read_file(path);
  const std::vector<char32_t> text = decode_utf8(bytes, path);
  Vocab vocab = Vocab::from_text(text);
  const std::vector<int32_t> tokens = vocab.encode(text);
  return Corpus{std::move(vocab), split_tokens(tokens, train_fraction), path};
}

std::string default_corpus_path() {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (ec) return "";
  const fs::path installed = exe.parent_path() / FOLIO_DATA_FROM_BIN / "tinyshakespeare.txt";
  if (fs::is_regular_file(installed, ec)) return installed.lexically_normal().string();
  // A binary of the build tree (folio, the tests) reads the source tree's copy.
  const fs::path build = fs::path(FOLIO_BUILD_DIR).lexically_normal();
  const auto [end, _] = std::mismatch(build.begin(), build.end(), exe.begin(), exe.end());
  return end == build.end() ? FOLIO_SOURCE_DIR "/data/tinyshakespeare.txt" : "";
}

}  // namespace folio
