#pragma once
// A token directory opened for training: its shards opened, checked, and exposed as
// the train and val sequences (read a window at a time, data/token_sequence.h). Three layouts are read:
//   folio   manifest.json (data/token_manifest.h) and {train,val}_NNNNNN.bin shards, as
//           `folio tokenize` writes them: the tokenizer, byte counts and checksums come
//           from the manifest;
//   llm.c   *train_*.bin and *val_*.bin shards with llm.c's header and no manifest
//           (its dev/data scripts): the ids need --vocab-size (50257 for GPT-2's);
//   nanoGPT train.bin and val.bin, raw uint16 (its prepare.py), --vocab-size too.
// Files without a manifest have no tokenizer (an ids tokenizer stands in) and no byte
// counts (no bits per byte).
//
// Opening checks everything before a step runs, each error one line naming the file:
// a missing shard, a wrong magic or version, a size that disagrees with the header,
// a checksum that disagrees with the manifest, a token id at or above the vocabulary.
// It reads every token once for that, through a small buffer: resident memory stays
// flat.
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "data/token_sequence.h"
#include "data/token_shard.h"
#include "data/token_source.h"
#include "data/tokenizer.h"

namespace folio {

struct TokenDir {
  std::string path;
  std::string layout;  // "folio", "llm.c", "nanoGPT"
  std::shared_ptr<const Tokenizer> tokenizer;
  std::vector<std::unique_ptr<ShardFile>> shards;  // owns the open files the sequences read
  TokenSequence train, val;
  int64_t train_bytes = 0, val_bytes = 0, val_chars = 0;  // 0: not known
  std::string fingerprint;  // the manifest's (data/token_manifest.h), or over the shards' checksums

  // True when `path` is a directory (a token directory or not: open() says which).
  static bool is_directory(const std::string& path);
  // `vocab_size`: the ids' vocabulary for files without a manifest (0: not given, an
  // error for those; for a folio directory it must be 0 or agree).
  static TokenDir open(const std::string& path, int64_t vocab_size = 0);
};

// A token directory's shards, read a window at a time, as a TokenSource
// (data/token_source.h). Its text counts are the manifest's (none without one).
class ShardTokens final : public TokenSource {
 public:
  explicit ShardTokens(TokenDir dir) : dir_(std::move(dir)) {}

  std::shared_ptr<const Tokenizer> tokenizer() const override { return dir_.tokenizer; }
  const TokenSequence& train() const override { return dir_.train; }
  const TokenSequence& val() const override { return dir_.val; }
  TextSize text_size() const override { return {dir_.train_bytes, dir_.val_bytes, dir_.val_chars}; }
  const std::string& path() const override { return dir_.path; }
  std::string kind() const override { return dir_.layout; }
  std::string fingerprint() const override { return dir_.fingerprint; }

 private:
  TokenDir dir_;
};

}  // namespace folio
