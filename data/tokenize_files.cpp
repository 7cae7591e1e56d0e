#include "data/tokenize_files.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "base/error.h"

namespace folio {

PartReader::PartReader(const std::string& path, int64_t begin, int64_t end) : path_(path), at_(begin), end_(end) {
  fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd_ < 0) fail("tokenize", path, ": cannot read (", std::strerror(errno), ")");
}

PartReader::~PartReader() { ::close(fd_); }

std::string PartReader::next() {
  std::string text = std::move(carry_);
  carry_.clear();
  const int64_t want = std::min<int64_t>(kChunkBytes - int64_t(text.size()), end_ - at_);
  const size_t had = text.size();
  text.resize(had + size_t(std::max<int64_t>(want, 0)));
  for (int64_t got_all = 0; got_all < want;) {
    const ssize_t got = ::pread(fd_, text.data() + had + got_all, size_t(want - got_all), at_ + got_all);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) fail("tokenize", path_, ": ", got < 0 ? std::strerror(errno) : "shorter than it was", " while read");
    got_all += got;
  }
  at_ += std::max<int64_t>(want, 0);
  if (at_ < end_) {  // more follows: keep up to the last newline of the second half
    size_t keep = text.rfind('\n');
    if (keep != std::string::npos && keep >= text.size() / 2) {
      ++keep;
    } else {  // no line end near: keep up to the last character's first byte
      keep = text.size();
      while (keep > 0 && (static_cast<unsigned char>(text[keep - 1]) & 0xC0) == 0x80) --keep;
      keep = keep > 1 ? keep - 1 : text.size();
    }
    carry_ = text.substr(keep);
    text.resize(keep);
  }
  return text;
}

void SplitWriter::append(std::span<const int32_t> ids) {
  while (!ids.empty()) {
    if (!shard_) open_next();
    const size_t take = std::min(ids.size(), size_t(shard_tokens_ - shard_->tokens()));
    shard_->append(ids.first(take));
    ids = ids.subspan(take);
    entry_.tokens += int64_t(take);
    if (shard_->tokens() == shard_tokens_) close();
  }
}

void SplitWriter::close() {
  if (!shard_) return;
  entry_.shards.push_back({file_, shard_->tokens(), shard_->finish()});
  shard_.reset();
}

void SplitWriter::open_next() {
  char name[64];
  std::snprintf(name, sizeof name, "%s_%06zu.bin", name_, entry_.shards.size());
  file_ = name;
  shard_ = std::make_unique<ShardWriter>((std::filesystem::path(dir_) / file_).string(), width_);
}

}  // namespace folio
