#include "data/token_sequence.h"

#include <algorithm>
#include <cstring>

#include "autograd/error.h"

namespace folio {

void TokenSequence::append(const void* data, int width, int64_t count, Release release) {
  if (width != 2 && width != 4) fail("data", "a token is 2 or 4 bytes, not ", width);
  if (count == 0) return;
  pieces_.push_back({size_, static_cast<const unsigned char*>(data), width, count, std::move(release)});
  size_ += count;
}

void TokenSequence::read(int64_t pos, int64_t n, int32_t* out) const {
  if (pos < 0 || n < 0 || pos + n > size_) fail("data", "tokens [", pos, ", ", pos + n, ") outside [0, ", size_, ")");
  // The piece holding `pos`: the last one that begins at or before it.
  auto it = std::upper_bound(pieces_.begin(), pieces_.end(), pos, [](int64_t p, const Piece& piece) { return p < piece.begin; });
  for (--it; n > 0; ++it) {
    const int64_t from = pos - it->begin, take = std::min(n, it->count - from);
    const unsigned char* p = it->data + from * it->width;
    if (it->width == 4) {
      std::memcpy(out, p, size_t(take) * 4);  // little-endian, ids below 2^31
    } else {
      for (int64_t i = 0; i < take; ++i) out[i] = int32_t(p[2 * i] | p[2 * i + 1] << 8);
    }
    if (it->release) it->release(from * it->width, (from + take) * it->width);
    out += take, pos += take, n -= take;
  }
}

}  // namespace folio
