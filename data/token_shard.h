#pragma once
// Token shards: files of token ids in llm.c's layout, written once by `folio tokenize`
// and read by training a window at a time (data/token_sequence.h says why not mapped).
//
// The layout: a header of 256 little-endian int32 (1024 bytes) —
//   [0] magic 20240520, [1] version: 1 for uint16 tokens, 7 for uint32 tokens,
//   [2] the number of tokens, the rest 0 —
// then the tokens, little-endian. Version 1 is llm.c's own. Version 7 under magic
// 20240520 is folio's extension for vocabularies over 65,536 ids (llm.c's uint32 files
// carry magic 20240801 and version 7; folio reads those too). nanoGPT's train.bin is
// the same tokens as raw uint16 with no header (header_bytes 0).
//
// What it holds:
//   ShardWriter   appends ids to one shard file and completes its header
//   ShardFile     one shard, its header checked, held open for reading
//   token_checksum the checksum a manifest records for a shard's tokens
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "data/hash.h"

namespace folio {

constexpr int32_t kShardMagic = 20240520, kShardMagicUint32 = 20240801;
constexpr int32_t kShardVersionUint16 = 1, kShardVersionUint32 = 7;
constexpr int64_t kShardHeaderBytes = 1024;  // 256 int32

// Bytes per token for a vocabulary: 2 while every id fits in uint16, else 4.
int token_width(int64_t vocab_size);

// FNV-1a 64 over the bytes taken as little-endian 64-bit words (a short tail is
// zero-padded): fast enough to check a shard at every start. Chained: pass the
// previous value as `h` to continue over more bytes (in whole words until the last).
constexpr uint64_t kChecksumStart = kFnvOffset;
uint64_t token_checksum(const void* bytes, size_t n, uint64_t h = kChecksumStart);
std::string checksum_hex(uint64_t checksum);  // 16 lowercase hex digits

// Writes one shard: ids go through a buffer into `path`; finish() writes the header
// with the count, fsyncs and closes. A writer destroyed unfinished removes its file.
// Errors (a full disk...) throw "[tokenize] <path>: ...".
class ShardWriter {
 public:
  ShardWriter(std::string path, int width);
  ~ShardWriter();
  ShardWriter(const ShardWriter&) = delete;
  ShardWriter& operator=(const ShardWriter&) = delete;
  void append(std::span<const int32_t> ids);  // every id must fit in the width
  int64_t tokens() const { return tokens_; }
  // Completes the file; returns the checksum of its tokens.
  uint64_t finish();

 private:
  void flush();
  std::string path_;
  int width_;
  int fd_ = -1;
  int64_t tokens_ = 0;
  uint64_t checksum_ = kChecksumStart;
  std::vector<unsigned char> buffer_;  // (bytes) tokens not yet written, a multiple of 8 when flushed mid-file
};

// One shard file, its header checked, held open. Errors name the file:
// "[data] <path>: magic 123, expected 20240520 (a token shard: ...)", "...: 2048
// bytes, but its header says 1000 tokens of 2 bytes: expected 3024 bytes".
class ShardFile {
 public:
  // has_header false reads a raw file of `raw_width`-byte tokens (nanoGPT's train.bin);
  // otherwise the header says the width.
  static ShardFile open(const std::string& path, bool has_header = true, int raw_width = 2);
  ShardFile() = default;
  ShardFile(ShardFile&&) noexcept;
  ShardFile& operator=(ShardFile&&) noexcept;
  ~ShardFile();

  const std::string& path() const { return path_; }
  int fd() const { return fd_; }
  int64_t header_bytes() const { return header_bytes_; }  // where the tokens start
  int width() const { return width_; }                    // 2 or 4
  int64_t tokens() const { return tokens_; }
  // Reads every token once through a small buffer: their checksum, and the largest id.
  struct Scan {
    uint64_t checksum = kChecksumStart;
    int64_t max_id = -1;
  };
  Scan scan() const;

 private:
  std::string path_;
  int fd_ = -1;
  int width_ = 2;
  int64_t tokens_ = 0, header_bytes_ = 0;
};

}  // namespace folio
