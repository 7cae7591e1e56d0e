#include "data/token_sequence.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "base/error.h"

namespace folio {

void TokenSequence::append(const void* data, int width, int64_t count) {
  if (width != 2 && width != 4) fail("data", "a token is 2 or 4 bytes, not ", width);
  if (count == 0) return;
  pieces_.push_back({size_, static_cast<const unsigned char*>(data), -1, 0, width, count, nullptr});
  size_ += count;
}

void TokenSequence::append_file(int fd, int64_t offset, int width, int64_t count, const std::string* path) {
  if (width != 2 && width != 4) fail("data", "a token is 2 or 4 bytes, not ", width);
  if (count == 0) return;
  pieces_.push_back({size_, nullptr, fd, offset, width, count, path});
  size_ += count;
}

void TokenSequence::read(int64_t pos, int64_t n, int32_t* out) const {
  if (pos < 0 || n < 0 || pos + n > size_) fail("data", "tokens [", pos, ", ", pos + n, ") outside [0, ", size_, ")");
  // The piece holding `pos`: the last one that begins at or before it.
  auto it = std::upper_bound(pieces_.begin(), pieces_.end(), pos, [](int64_t p, const Piece& piece) { return p < piece.begin; });
  for (--it; n > 0; ++it) {
    const int64_t from = pos - it->begin, take = std::min(n, it->count - from);
    const size_t bytes = size_t(take * it->width);
    const unsigned char* p = it->data ? it->data + from * it->width : nullptr;
    if (!p) {  // from the file: int32 straight into `out`, uint16 through the staging buffer
      unsigned char* to = it->width == 4 ? reinterpret_cast<unsigned char*>(out) : (staging_.resize(bytes), staging_.data());
      for (size_t got = 0; got < bytes;) {
        const ssize_t r = ::pread(it->fd, to + got, bytes - got, it->offset + from * it->width + int64_t(got));
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0)
          fail("data", *it->path, ": cannot read tokens at byte ", it->offset + from * it->width, " (",
               r < 0 ? std::strerror(errno) : "the file is shorter than when it was opened", ")");
        got += size_t(r);
      }
      p = to;
    }
    if (it->width == 4) {
      if (p != reinterpret_cast<const unsigned char*>(out)) std::memcpy(out, p, bytes);  // little-endian, ids below 2^31
    } else {
      for (int64_t i = 0; i < take; ++i) out[i] = int32_t(p[2 * i] | p[2 * i + 1] << 8);
    }
    out += take, pos += take, n -= take;
  }
}

}  // namespace folio
