#pragma once
// The files folio tokenize reads and writes a piece at a time (data/tokenize.cpp):
//   PartReader   bytes [begin, end) of a file, in chunks of about kChunkBytes that end
//                at a line end when one is near (a subword tokenizer sees whole lines),
//                else at a character boundary
//   SplitWriter  a split's ids, appended to its shards, a new one every shard_tokens
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <utility>

#include "data/token_manifest.h"
#include "data/token_shard.h"

namespace folio {

inline constexpr int64_t kChunkBytes = int64_t(8) << 20;  // text encoded at once by one thread

class PartReader {
 public:
  PartReader(const std::string& path, int64_t begin, int64_t end);
  ~PartReader();
  PartReader(const PartReader&) = delete;
  PartReader& operator=(const PartReader&) = delete;
  bool done() const { return at_ >= end_ && carry_.empty(); }
  // The next chunk of text (at most kChunkBytes); what follows its cut is kept for the next.
  std::string next();

 private:
  std::string path_;
  int fd_ = -1;
  int64_t at_, end_;
  std::string carry_;
};

// Appends ids to a split's shards (DIR/NAME_000000.bin, ...) and records them in `entry`.
class SplitWriter {
 public:
  SplitWriter(std::string dir, const char* name, int width, int64_t shard_tokens, SplitEntry& entry)
      : dir_(std::move(dir)), name_(name), width_(width), shard_tokens_(shard_tokens), entry_(entry) {}
  void append(std::span<const int32_t> ids);
  void close();  // the open shard, if any, finished and recorded

 private:
  void open_next();
  std::string dir_;
  const char* name_;
  int width_;
  int64_t shard_tokens_;
  SplitEntry& entry_;
  std::unique_ptr<ShardWriter> shard_;
  std::string file_;
};

}  // namespace folio
