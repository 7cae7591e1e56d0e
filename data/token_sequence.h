#pragma once
// A split's tokens as one sequence, whatever holds them: a text file's ids in memory
// (int32), or the shard files of a token directory (uint16 or uint32 each). The
// sampler reads windows out of it; a window may cross from one piece into the next.
//
// Shards are read with pread, a window at a time, from the page cache: nothing of a
// split is copied or kept, so resident memory does not grow with the corpus. Measured
// on this project's 2-core VM, reading windows through a memory mapping instead cost
// ~20 us a page fault (40 us a window; 3% of a config-S step) and left every page read
// resident; pread costs ~1 us a window.
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace folio {

class TokenSequence {
 public:
  TokenSequence() = default;
  TokenSequence(std::span<const int32_t> ids) { append(ids.data(), 4, int64_t(ids.size())); }  // NOLINT: a view
  TokenSequence(const std::vector<int32_t>& ids) : TokenSequence(std::span<const int32_t>(ids)) {}  // NOLINT

  // A piece of `count` tokens of `width` bytes (2: uint16, 4: int32 or uint32, which
  // agree below 2^31), little-endian: in memory at `data`, or in the open file `fd`
  // from byte `offset` (`path` names it in errors). The sequence owns neither.
  void append(const void* data, int width, int64_t count);
  void append_file(int fd, int64_t offset, int width, int64_t count, const std::string* path);

  int64_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  // out[i] = token pos + i, for i in [0, n); pos + n <= size(). One thread at a time.
  void read(int64_t pos, int64_t n, int32_t* out) const;
  int32_t operator[](int64_t pos) const {
    int32_t v;
    read(pos, 1, &v);
    return v;
  }

 private:
  struct Piece {
    int64_t begin;  // position of its first token in the sequence
    const unsigned char* data;  // in memory, or nullptr: in the file
    int fd;
    int64_t offset;
    int width;
    int64_t count;
    const std::string* path;
  };
  std::vector<Piece> pieces_;
  int64_t size_ = 0;
  mutable std::vector<unsigned char> staging_;  // (n * 2) bytes: a window of uint16 read from a file
};

}  // namespace folio
