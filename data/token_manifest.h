#pragma once
// manifest.json: what a token directory holds, written by `folio tokenize` last and
// atomically, so a directory without one is not complete and nothing reads it.
//
// {"format": "folio-tokens", "version": 1,
//  "tokenizer": {<the metadata a checkpoint stores>}, "tokenizer_description": "...",
//  "vocab_size": N, "end_of_text": id, "token_bytes": 2,
//  "val_fraction": 0.1, "val_rule": "...",
//  "splits": {"train": {"documents", "bytes", "chars", "tokens",
//                       "shards": [{"file", "tokens", "checksum"}]}, "val": {...}},
//  "inputs": [...], "skipped_files": n, "files_with_invalid_utf8": n, "command": "..."}
#include <cstdint>
#include <string>
#include <vector>

#include "data/tokenizer.h"

namespace folio {

constexpr const char* kManifestFile = "manifest.json";

struct ShardEntry {
  std::string file;  // relative to the directory
  int64_t tokens = 0;
  uint64_t checksum = 0;  // data/token_shard.h: token_checksum of its tokens
};

struct SplitEntry {
  int64_t documents = 0, bytes = 0, chars = 0, tokens = 0;  // bytes and chars of the text (bits per byte)
  std::vector<ShardEntry> shards;
};

struct TokenManifest {
  TokenizerMetadata tokenizer;
  std::string tokenizer_description;
  int64_t vocab_size = 0;
  int64_t end_of_text = -1;  // -1: documents are not separated
  int token_bytes = 2;
  double val_fraction = 0.1;
  std::string val_rule;
  SplitEntry train, val;
  std::vector<std::string> inputs;
  int64_t skipped_files = 0, files_with_invalid_utf8 = 0;
  std::string command;

  std::string to_json() const;
  // Errors: "[data] <where>: ..." naming the field.
  static TokenManifest parse(const std::string& text, const std::string& where);
  // 16 hex digits over the tokenizer and every shard's name, count and checksum: a run
  // records it, and --resume refuses a directory whose tokens changed.
  std::string fingerprint() const;
};

}  // namespace folio
