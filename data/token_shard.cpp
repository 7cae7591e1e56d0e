#include "data/token_shard.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "base/error.h"

namespace folio {
namespace {

constexpr size_t kBufferBytes = size_t(1) << 20;

int32_t read_i32(const unsigned char* p) {
  return int32_t(uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 | uint32_t(p[3]) << 24);
}
void write_i32(unsigned char* p, int32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<unsigned char>(uint32_t(v) >> (8 * i));
}

void write_all(int fd, const unsigned char* p, size_t n, const std::string& path) {
  while (n > 0) {
    const ssize_t w = ::write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) fail("tokenize", path, ": cannot write (", std::strerror(w < 0 ? errno : ENOSPC), ")");
    p += w, n -= size_t(w);
  }
}

}  // namespace

int token_width(int64_t vocab_size) { return vocab_size <= 65536 ? 2 : 4; }

uint64_t token_checksum(const void* bytes, size_t n, uint64_t h) {
  const auto* p = static_cast<const unsigned char*>(bytes);
  for (; n >= 8; p += 8, n -= 8) {
    uint64_t w = 0;
    std::memcpy(&w, p, 8);  // little-endian machines only (as the shard format)
    h = (h ^ w) * kFnvPrime;
  }
  if (n > 0) {
    uint64_t w = 0;
    std::memcpy(&w, p, n);
    h = (h ^ w) * kFnvPrime;
  }
  return h;
}

std::string checksum_hex(uint64_t checksum) {
  char hex[17];
  for (int i = 0; i < 16; ++i) hex[i] = "0123456789abcdef"[(checksum >> (60 - 4 * i)) & 15];
  return std::string(hex, 16);
}

// ---- writing ----

ShardWriter::ShardWriter(std::string path, int width) : path_(std::move(path)), width_(width) {
  fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) fail("tokenize", path_, ": cannot create (", std::strerror(errno), ")");
  const std::vector<unsigned char> header(kShardHeaderBytes, 0);  // completed by finish()
  write_all(fd_, header.data(), header.size(), path_);
  buffer_.reserve(kBufferBytes + 8);
}

ShardWriter::~ShardWriter() {
  if (fd_ < 0) return;
  ::close(fd_);
  ::unlink(path_.c_str());  // unfinished: no half shard stays behind
}

void ShardWriter::append(std::span<const int32_t> ids) {
  for (const int32_t id : ids) {
    const auto u = uint32_t(id);
    buffer_.push_back(static_cast<unsigned char>(u));
    buffer_.push_back(static_cast<unsigned char>(u >> 8));
    if (width_ == 4) buffer_.push_back(static_cast<unsigned char>(u >> 16)), buffer_.push_back(static_cast<unsigned char>(u >> 24));
    if (buffer_.size() >= kBufferBytes) flush();
  }
  tokens_ += int64_t(ids.size());
}

// Writes the buffer's whole 64-bit words, so the checksum chains word by word; the
// remainder waits for more tokens or for finish().
void ShardWriter::flush() {
  const size_t whole = buffer_.size() / 8 * 8;
  checksum_ = token_checksum(buffer_.data(), whole, checksum_);
  write_all(fd_, buffer_.data(), whole, path_);
  buffer_.erase(buffer_.begin(), buffer_.begin() + ptrdiff_t(whole));
}

uint64_t ShardWriter::finish() {
  if (tokens_ > INT32_MAX) fail("tokenize", path_, ": ", tokens_, " tokens, more than a shard's header can count");
  flush();
  checksum_ = token_checksum(buffer_.data(), buffer_.size(), checksum_);
  write_all(fd_, buffer_.data(), buffer_.size(), path_);
  unsigned char header[kShardHeaderBytes] = {};
  write_i32(header, kShardMagic);
  write_i32(header + 4, width_ == 2 ? kShardVersionUint16 : kShardVersionUint32);
  write_i32(header + 8, int32_t(tokens_));
  if (::pwrite(fd_, header, sizeof header, 0) != ssize_t(sizeof header))
    fail("tokenize", path_, ": cannot write the header (", std::strerror(errno), ")");
  if (::fsync(fd_) != 0) fail("tokenize", path_, ": cannot sync (", std::strerror(errno), ")");
  const int fd = std::exchange(fd_, -1);
  if (::close(fd) != 0) fail("tokenize", path_, ": cannot close (", std::strerror(errno), ")");
  return checksum_;
}

// ---- reading ----

ShardFile ShardFile::open(const std::string& path, bool has_header, int raw_width) {
  ShardFile s;
  s.path_ = path;
  s.fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (s.fd_ < 0) fail("data", path, ": cannot open (", std::strerror(errno), ")");
  struct stat st {};
  if (::fstat(s.fd_, &st) != 0 || !S_ISREG(st.st_mode)) fail("data", path, ": not a regular file");
  const int64_t size = st.st_size;
  if (has_header) {
    unsigned char header[kShardHeaderBytes];
    if (size < kShardHeaderBytes || ::pread(s.fd_, header, sizeof header, 0) != ssize_t(sizeof header))
      fail("data", path, ": ", size, " bytes, shorter than a token shard's 1024-byte header");
    const int32_t magic = read_i32(header), version = read_i32(header + 4), count = read_i32(header + 8);
    if (magic != kShardMagic && magic != kShardMagicUint32)
      fail("data", path, ": magic ", magic, ", expected ", kShardMagic, " (a token shard: 256 int32 of header, then tokens)");
    if (version == kShardVersionUint16) s.width_ = 2;
    else if (version == kShardVersionUint32) s.width_ = 4;
    else fail("data", path, ": version ", version, ", expected 1 (uint16 tokens) or 7 (uint32 tokens)");
    if (count < 0) fail("data", path, ": the header counts ", count, " tokens");
    s.tokens_ = count;
    s.header_bytes_ = kShardHeaderBytes;
    const int64_t expected = kShardHeaderBytes + int64_t(count) * s.width_;
    if (size != expected)
      fail("data", path, ": ", size, " bytes, but its header says ", count, " tokens of ", s.width_,
           " bytes: expected ", expected, " bytes");
  } else {
    s.width_ = raw_width;
    if (size % raw_width != 0)
      fail("data", path, ": ", size, " bytes is not a whole number of ", raw_width, "-byte tokens");
    s.tokens_ = size / raw_width;
  }
  if (s.tokens_ == 0) fail("data", path, ": holds no tokens");
  ::posix_fadvise(s.fd_, 0, 0, POSIX_FADV_RANDOM);  // windows, not a sequential read: no read-ahead
  return s;
}

ShardFile::ShardFile(ShardFile&& o) noexcept { *this = std::move(o); }
ShardFile& ShardFile::operator=(ShardFile&& o) noexcept {
  if (this == &o) return *this;
  if (fd_ >= 0) ::close(fd_);
  path_ = std::move(o.path_);
  fd_ = std::exchange(o.fd_, -1);
  width_ = o.width_, tokens_ = o.tokens_, header_bytes_ = o.header_bytes_;
  return *this;
}
ShardFile::~ShardFile() {
  if (fd_ >= 0) ::close(fd_);
}

ShardFile::Scan ShardFile::scan() const {
  Scan result;
  std::vector<unsigned char> buffer(kBufferBytes);  // a multiple of 8 and of the width
  const int64_t total = tokens_ * width_;
  for (int64_t at = 0; at < total;) {
    const ssize_t got = ::pread(fd_, buffer.data(), size_t(std::min<int64_t>(total - at, int64_t(buffer.size()))),
                                header_bytes_ + at);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0)
      fail("data", path_, ": read error at byte ", header_bytes_ + at, " (", got < 0 ? std::strerror(errno) : "end of file", ")");
    const size_t n = size_t(got) / size_t(width_) * size_t(width_);
    result.checksum = token_checksum(buffer.data(), n, result.checksum);
    int64_t top = result.max_id;
    if (width_ == 2)
      for (size_t i = 0; i < n; i += 2) top = std::max<int64_t>(top, buffer[i] | buffer[i + 1] << 8);
    else
      for (size_t i = 0; i < n; i += 4) top = std::max<int64_t>(top, uint32_t(read_i32(&buffer[i])));
    result.max_id = top;
    at += int64_t(n);
  }
  return result;
}

}  // namespace folio
