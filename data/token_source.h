#pragma once
// Where a run's tokens come from, whatever --data names: the one way TrainingData
// (data/dataset.h) reads data. Two implementations:
//   TextTokens   a text file read whole, split and tokenized in memory (data/dataset.h)
//   ShardTokens  a directory of token shards, read a window at a time (data/token_dir.h)
// Each gives its tokenizer, the train and val splits as token sequences, and the size
// of the text those tokens decode to, which turns a loss per token into bits per byte.
#include <cstdint>
#include <memory>
#include <string>

#include "data/token_sequence.h"
#include "data/tokenizer.h"

namespace folio {

// The bytes and characters of the text a source's tokens decode to; 0: not known
// (token files made elsewhere carry no counts of their text).
struct TextSize {
  int64_t train_bytes = 0, val_bytes = 0, val_chars = 0;
  int64_t invalid_utf8_bytes = 0;  // a text's bytes that were not UTF-8, read as U+FFFD (tokenize counts its own)
};

class TokenSource {
 public:
  virtual ~TokenSource() = default;
  virtual std::shared_ptr<const Tokenizer> tokenizer() const = 0;
  // The splits' ids; the sequences read from this source, so they stay valid while it lives.
  virtual const TokenSequence& train() const = 0;  // (train tokens,)
  virtual const TokenSequence& val() const = 0;    // (val tokens,)
  virtual TextSize text_size() const = 0;
  virtual const std::string& path() const = 0;  // what --data named
  virtual std::string kind() const = 0;         // "text", or a token directory's layout ("folio", "llm.c", "nanoGPT")
  // What --resume compares: a token directory's (data/token_manifest.h), a text's (of
  // its bytes, data/dataset.h), conversations' (of their rows, data/conversations.h).
  virtual std::string fingerprint() const = 0;
};

}  // namespace folio
