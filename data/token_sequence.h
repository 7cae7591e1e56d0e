#pragma once
// A split's tokens as one sequence, whatever holds them: a text file's ids in memory
// (int32), or the shards of a token directory, mapped (uint16 or uint32 each). The
// sampler reads windows out of it; a window may cross from one piece into the next.
// Nothing is copied: the pieces are views, owned by whoever made the sequence.
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

namespace folio {

class TokenSequence {
 public:
  TokenSequence() = default;
  TokenSequence(std::span<const int32_t> ids) { append(ids.data(), 4, int64_t(ids.size())); }  // NOLINT: a view
  TokenSequence(const std::vector<int32_t>& ids) : TokenSequence(std::span<const int32_t>(ids)) {}  // NOLINT

  // A piece of `count` tokens of `width` bytes (2: uint16, 4: int32 or uint32, which
  // agree below 2^31) at `data`, little-endian. `release(begin_byte, end_byte)`, when
  // given, is told which bytes a read has finished with (a mapping gives the pages back).
  using Release = std::function<void(int64_t begin_byte, int64_t end_byte)>;
  void append(const void* data, int width, int64_t count, Release release = nullptr);

  int64_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  // out[i] = token pos + i, for i in [0, n); pos + n <= size().
  void read(int64_t pos, int64_t n, int32_t* out) const;
  int32_t operator[](int64_t pos) const {
    int32_t v;
    read(pos, 1, &v);
    return v;
  }

 private:
  struct Piece {
    int64_t begin;  // position of its first token in the sequence
    const unsigned char* data;
    int width;
    int64_t count;
    Release release;
  };
  std::vector<Piece> pieces_;
  int64_t size_ = 0;
};

}  // namespace folio
